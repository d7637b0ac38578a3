"""tools/proton_probe.py's CPU parts: the copy of submission.py with Proton points at every
probe site, and the phase table read from a Proton chrome trace (its GPU run is the lead's)."""
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import proton_probe  # noqa: E402


def test_every_probe_site_of_the_submission_becomes_a_point():
    source = (ROOT / "submission.py").read_text()
    sites = len(proton_probe.PROBE_CALL.findall(source))
    for wait in (False, True):
        copy = proton_probe.proton_source(source, wait)
        points = copy.count("_proton_point(probe_row, ") - 1  # its definition
        assert points == sites - 2  # the two global-timer sites are dropped
        assert f"PROTON_WAIT_C = tl.constexpr({wait})" in copy
    for name in ("start", "range", "q", "loaded", "scores", "softmax", "values", "tiles done", "written", "end"):
        assert f'"{name}", PROBE)' in copy, name


def test_an_unknown_probe_site_is_an_error():
    with pytest.raises(ValueError, match="unknown probe site"):
        proton_probe.proton_source("    _probe(probe_row, SLOT_NEW_C, x, PROBE)\n", False)


def point(cta, warp, name, cycle, line=0):
    """One Proton event as its chrome trace writes it: ts = cycle / freq (MHz)."""
    return {"name": name, "ph": "X", "pid": f"_mla_split_kernel Core3 CTA{cta}", "tid": f"warp {warp} (line {line})",
            "ts": cycle / 1000.0, "dur": 0.002, "args": {"Frequency (MHz)": 1000.0}}


def test_trace_phases_take_the_latest_warp_from_the_programs_start():
    events = [point(0, 0, "start", 1000), point(0, 1, "start", 1010), point(0, 0, "range", 1400),
              point(0, 1, "range", 1600, line=1),
              point(0, 0, "loaded", 3000), point(0, 0, "loaded", 5000), point(0, 1, "loaded", 3100),
              point(0, 1, "loaded", 5200),
              point(1, 0, "start", 90000), point(1, 0, "range", 90800), point(1, 0, "loaded", 92000),
              {"name": "_mla_split_kernel", "ph": "X", "pid": "Kernel Call Path", "tid": "path 0", "ts": 0, "dur": 9}]
    table, summary = proton_probe.trace_phases(events, cycles_per_ns=2.0, phase_order=proton_probe.PHASE_ORDER)
    assert summary["programs"] == 2 and summary["points"] == 11
    assert table["start"]["median_cycles"] == pytest.approx(5.0)  # CTA0: warp 1 at +10, CTA1: 0
    assert table["range"]["median_cycles"] == pytest.approx((600 + 800) / 2)
    assert table["range"]["median_ns"] == pytest.approx(350.0)
    assert table["tile0 loaded"]["median_cycles"] == pytest.approx((2100 + 2000) / 2)
    assert table["last loaded"] == {"programs": 1, "median_cycles": pytest.approx(4200), "median_ns": 2100.0,
                                    "p90_ns": 2100.0}
    assert "tiles done" not in table
