"""tools/proton_probe.py's CPU parts: the copies of submission.py with a Proton point at every
`# phase` marker (tools/instrument.py's modes proton-plain and proton-waited), and the phase
table read from a Proton chrome trace (its GPU run is the lead's)."""
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import instrument  # noqa: E402
import proton_probe  # noqa: E402

SOURCE = (ROOT / "submission.py").read_text()


@pytest.mark.parametrize("wait", [False, True])
def test_every_marker_of_the_submission_becomes_a_point_named_after_its_phase(wait):
    markers = instrument.find_markers(SOURCE)
    copy = proton_probe.proton_source(SOURCE, wait)
    points = [line.strip() for line in copy.splitlines() if line.strip().startswith("_proton_point(probe_row, ")]
    assert len(points) == len(markers)
    named = [point.split('"')[1] for point in points]
    assert named == [name[5:] if name.startswith("tile ") else name for _, _, name, _ in markers]
    assert set(named) == set(proton_probe.POINT_NAMES)
    assert f"PROTON_WAIT_C = tl.constexpr({wait})" in copy and "_phase_probe(" not in copy
    compile(copy, "submission_proton.py", "exec")


def test_the_proton_copy_imports_with_its_points_enabled(tmp_path):
    """The copy's own code runs: Proton's language imported and turned on, the point a jit
    function of the copy."""
    module = proton_probe.load_copy(False, tmp_path)
    assert module.INSTRUMENT_MODE == "proton-plain" and not module.PROTON_WAIT_C
    assert module._proton_point.arg_names == ["probe_row", "dep", "NAME"]
    assert module.PROBED_KERNELS == (module._bf16_split_kernel, module._scaled_split_kernel)


def test_a_marker_the_transform_cannot_place_is_an_error():
    broken = SOURCE.replace("    # phase range: hi\n", "    # phase rnage: hi\n", 1)
    with pytest.raises(instrument.InstrumentError, match="unknown phase 'rnage'"):
        proton_probe.proton_source(broken, False)


def point(cta, warp, name, cycle, line=0):
    """One Proton event as its chrome trace writes it: ts = cycle / freq (MHz)."""
    return {"name": name, "ph": "X", "pid": f"_bf16_split_kernel Core3 CTA{cta}", "tid": f"warp {warp} (line {line})",
            "ts": cycle / 1000.0, "dur": 0.002, "args": {"Frequency (MHz)": 1000.0}}


def test_trace_phases_take_the_latest_warp_from_the_programs_start():
    events = [point(0, 0, "start", 1000), point(0, 1, "start", 1010), point(0, 0, "range", 1400),
              point(0, 1, "range", 1600, line=1),
              point(0, 0, "loaded", 3000), point(0, 0, "loaded", 5000), point(0, 1, "loaded", 3100),
              point(0, 1, "loaded", 5200),
              point(1, 0, "start", 90000), point(1, 0, "range", 90800), point(1, 0, "loaded", 92000),
              {"name": "_bf16_split_kernel", "ph": "X", "pid": "Kernel Call Path", "tid": "path 0", "ts": 0, "dur": 9}]
    table, summary = proton_probe.trace_phases(events, cycles_per_ns=2.0, phase_order=proton_probe.PHASE_ORDER)
    assert summary["programs"] == 2 and summary["points"] == 11
    assert table["start"]["median_cycles"] == pytest.approx(5.0)  # CTA0: warp 1 at +10, CTA1: 0
    assert table["range"]["median_cycles"] == pytest.approx((600 + 800) / 2)
    assert table["range"]["median_ns"] == pytest.approx(350.0)
    assert table["tile0 loaded"]["median_cycles"] == pytest.approx((2100 + 2000) / 2)
    assert table["last loaded"] == {"programs": 1, "median_cycles": pytest.approx(4200), "median_ns": 2100.0,
                                    "p90_ns": 2100.0}
    assert "tiles done" not in table
