"""tools/latency_model.py and `python eval.py model LOG`: every timed candidate of a first-call
tuning report beside the model's prediction, under the assumed machine parameters and the ones
the machine probes measured. On a synthetic gfx950 log (the real submission's report, tuned
with fake timings on a simulated MI355X, its probes' record given), on the recorded H200 log of
a submission from before the probes (it says so and still compares), and the refusals of
another device's or another source's figures. tools/mutations.py lists a deliberate bug for
each rule."""
import json
import sys

import pytest
import torch

import eval as harness
from conftest import ROOT
from test_first_call_tuning import FakeClock, fake_world, simulate_mi355x

sys.path.insert(0, str(ROOT / "tools"))
import compile_report  # noqa: E402
import latency_model  # noqa: E402

CPU = torch.device("cpu")
CASES = compile_report.LEADERBOARD_CASES
DEVICE = "AMD Instinct MI355X"
FIGURES = {"units": 256, "clock_mhz": 2100.0, "memory_clock_mhz": 1900.0, "memory_bus_bits": 8192, "xcds": None,
           "launch_us": 6.0, "two_launches_us": 10.5, "copy_gbs": 5000.0, "hbm_round_trip_us": 1.6,
           "l2_round_trip_us": 0.5, "atomic_round_trip_us": 0.8}
REPORT_ROWS = latency_model.load_rows(ROOT / "results" / "compile_report_triton3.6.0.json")
H200_LOG = ROOT / "results" / "h200_runner_eval_benchmark_v12_firstcall_stderr.txt"


@pytest.fixture
def sub(fresh_plans, monkeypatch):
    monkeypatch.setattr(fresh_plans.STATE, "tuned", {})
    monkeypatch.setattr(fresh_plans.STATE, "tune_log", fresh_plans.fresh_tune_log())
    return fresh_plans


def synthetic_gfx950_log(sub, monkeypatch, figures=FIGURES, device=DEVICE, source=None):
    """What the runner's stderr would hold: this submission's report of all 8 cases on a
    simulated MI355X (fake timings), with its machine probes' record, behind a prefix."""
    simulate_mi355x(sub, monkeypatch)
    monkeypatch.setattr(sub, "_device_name", lambda _: DEVICE)
    record = {"arch": "gfx950", "device": device, "figures": figures, "skipped": [], "failed": [], "wall_s": 0.42}
    monkeypatch.setattr(sub.STATE, "machine", {CPU: record})
    clock = FakeClock()
    for case in CASES:
        ranked = sub.ranked_candidates(*case, CPU)
        run_choice, timer = fake_world(sub, lambda c, ranked=ranked: 20.0 + 3 * ranked.index(c), clock)
        sub.tune_first_call(*case, CPU, run_choice, clock=clock, timer=timer, profiler=lambda run, device: [])
    text = sub.tuning_report()
    if source is not None:
        text = text.replace(f"machine probes, source {sub.SOURCE_ID}", f"machine probes, source {source}")
    return "\n".join("[12:00:01] stderr: " + line for line in text.splitlines()) + "\n"


def run_model(tmp_path, monkeypatch, capsys, log_text):
    log = tmp_path / "log.txt"
    log.write_text(log_text)
    out = tmp_path / "model.json"
    monkeypatch.setattr(sys, "argv", ["eval.py", "model", str(log), "--json", str(out)])
    monkeypatch.delenv("POPCORN_FD", raising=False)
    code = harness.main()
    captured = capsys.readouterr()
    return code, json.loads(out.read_text()) if out.exists() else None, captured.out + captured.err


def test_a_gfx950_log_puts_every_candidate_beside_its_predictions(sub, tmp_path, monkeypatch, capsys):
    """All 8 cases, every Triton and Gluon candidate of every family predicted under both the
    assumed and the measured parameters (the compile report builds the first form of each),
    aiter listed with no prediction and why, the measured times read back, and per case the
    pick's error and the worst candidate's."""
    code, record, out = run_model(tmp_path, monkeypatch, capsys, synthetic_gfx950_log(sub, monkeypatch))
    assert code == 0
    (report,) = record["reports"]
    assert report["arch"] == "gfx950" and report["device"] == DEVICE and report["source"] == sub.SOURCE_ID
    measured = latency_model.Machine(6.0, 4.5, 1.6, 0.8, 5000e9, 2100e6, 256)
    assert report["machines"]["measured"] == pytest.approx(measured._asdict()) and report["assumed_fields"] == []
    assert [(case["batch"], case["kv_len"]) for case in report["cases"]] == CASES
    families = set()
    for case, entry in zip(CASES, sub.STATE.tune_log["cases"]):
        rows = {row["candidate"]: row for row in report["cases"][CASES.index(case)]["candidates"]}
        assert list(rows) == [str(choice) for _, choice, _ in entry["tried"]]
        assert [row["measured_us"] for row in rows.values()] == [round(us, 1) for us, _, _ in entry["tried"]]
        assert rows[str(entry["pick"])]["pick"]
        for name, row in rows.items():
            if name == "aiter":
                assert "aiter's own kernels" in row["no_prediction"]
                continue
            assert set(row["predicted_us"]) == {"assumed", "measured"}, (case, name, row)
            families.add(name.split()[0])
        case_out = report["cases"][CASES.index(case)]
        errors = [row["error"]["measured"] for row in rows.values() if "error" in row]
        assert case_out["pick_error"] == rows[str(entry["pick"])]["error"]
        assert case_out["worst"]["error"]["measured"] == max(errors, key=abs)
    assert families == {"scaled", "bf16", "once"}
    assert "the model's error per case" in out and "no prediction: aiter's own kernels" in out


def retired_on_nvidia(description):
    """A candidate of the recorded H200 log (before issue 31) of a form NVIDIA no longer has:
    128-token BF16 tiles (WIDE_BLOCK_N) or 2 stages (the sm_90 measured table's)."""
    parts = description.split()
    return parts[1] == "t128" or parts[4] == "st2"


def test_the_recorded_h200_log_has_no_probes_and_is_still_compared(tmp_path, monkeypatch, capsys):
    """Every candidate predicted from the compile report's sm_90 builds, except those of forms
    retired since the log was recorded: no build, and said so."""
    code, record, out = run_model(tmp_path, monkeypatch, capsys, H200_LOG.read_text())
    assert code == 0
    (report,) = record["reports"]
    assert report["arch"] == "sm_90" and "has no MEASURED MACHINE block for sm_90" in report["machine_note"]
    assert list(report["machines"]) == ["assumed"] and len(report["cases"]) == 8
    rows = [row for case in report["cases"] for row in case["candidates"]]
    assert all(row["measured_us"] > 0 for row in rows)
    retired = [row for row in rows if retired_on_nvidia(row["candidate"])]
    assert retired and all("no sm90 build of its first form" in row["no_prediction"] for row in retired), retired
    assert all(set(row["predicted_us"]) == {"assumed"} for row in rows if row not in retired)
    assert "measured parameters: none (" in out


@pytest.mark.parametrize("change, refused", [({"device": "AMD Instinct MI350X"}, "was measured on AMD Instinct MI350X"),
                                             ({"source": "0123456789ab"}, "is of submission source 0123456789ab")])
def test_machine_figures_of_another_device_or_source_are_refused(sub, tmp_path, monkeypatch, capsys, change, refused):
    code, record, out = run_model(tmp_path, monkeypatch, capsys, synthetic_gfx950_log(sub, monkeypatch, **change))
    assert code == 0
    (report,) = record["reports"]
    assert refused in report["machine_note"] and report["machine_note"].endswith("refused")
    assert list(report["machines"]) == ["assumed"]


def test_a_log_without_a_report_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    code, record, out = run_model(tmp_path, monkeypatch, capsys, "check: pass\n")
    assert code == 2 and record is None and out.startswith("model: no first-call tuning report") and out.count("\n") == 1


# --- the model's arithmetic -------------------------------------------------------------

def candidates_with_builds(sub, monkeypatch):
    """(case, choice, build) of every gfx950 tuning candidate the compile report has a build of."""
    simulate_mi355x(sub, monkeypatch, aiter=False)
    found = []
    for case in CASES:
        for choice in sub.ranked_candidates(*case, CPU):
            fields, build = latency_model.candidate_build(REPORT_ROWS, "gfx950", *case, choice)
            if fields is not None:
                found.append((fields, choice, build))
    return found


@pytest.mark.parametrize("target", ["gfx950", "sm90"])
def test_each_candidate_is_predicted_from_the_build_of_its_own_first_form(sub, monkeypatch, target):
    """Every first-call tuning candidate of the leaderboard cases has a build in the compile
    report or its candidates' file, of its tile, warps, stages and merge (the Gluon kernel's
    rows for the ONCE family's 128-token, 4-warp form on gfx950)."""
    import compile_report
    with compile_report._dispatching_as(target):
        for case in CASES:
            for choice in sub.ranked_candidates(*case, CPU):
                if choice == sub.AITER_LAUNCH:
                    continue
                fields, build = latency_model.candidate_build(REPORT_ROWS, target, *case, choice)
                launch = choice
                assert fields is not None, (target, case, choice, build)
                assert (build["BLOCK_N"], build["num_warps"], build["num_stages"], build["MERGE"]) == \
                    (launch.block_n, launch.num_warps, launch.num_stages, launch.merge), (choice, build)


def test_each_machine_parameter_moves_the_prediction_as_the_model_says(sub, monkeypatch):
    """One us more per launch: one us more per call; per further launch: (launches - 1) us;
    per atomic: one us for a FUSED merge and nothing otherwise."""
    base = latency_model.ASSUMED["gfx950"]
    found = candidates_with_builds(sub, monkeypatch)
    assert len(found) > 40 and {fields["MERGE"] for fields, _, _ in found} == {0, 1, 2}
    for fields, choice, build in found:
        us = latency_model.predict_us(fields, build, base)
        moved = {name: latency_model.predict_us(fields, build, base._replace(**{name: getattr(base, name) + 1.0})) - us
                 for name in ("launch_us", "extra_launch_us", "atomic_us")}
        expected = {"launch_us": 1.0, "extra_launch_us": fields["launches"] - 1.0,
                    "atomic_us": 1.0 if fields["MERGE"] == sub.MERGE_FUSED else 0.0}
        assert moved == pytest.approx(expected), choice


def test_the_model_on_a_hand_made_build():
    """The docstring's arithmetic, by hand: 256 x 4 programs of 4 64-token tiles, two per CU
    (waves_per_simd 2, 4 warps) sharing its issue: 2 rounds of a chain of 2 L + 2 x issue +
    3 per-tile steps (max(1 x L, 2 x issue)) + L, beside the HBM time of the KV rows (312 B a
    token), Q and the partials; 2 launches; the combine: 2 L + 1 us or the partials read back and
    the output written, the longer. L = 1 us, issue = 0.05 clk/element x 64 x 576 / 2.4 GHz: two
    programs' issue (1.5 us) a tile past L, their chain (18.3 us) past the bytes' 15 us."""
    build = {"num_warps": 4, "waves_per_simd": 2.0, "clocks_per_element": {"issue": 0.05},
             "latency": {"round_trips_to_first_mma": 2, "round_trips_per_tile": 1.0, "bytes_in_flight_per_unit": 0}}
    case = {"batch": 256, "kv_len": 1024, "BLOCK_N": 64, "num_splits": 4, "launches": 2, "MERGE": 1}
    issue_us = 0.05 * 64 * 576 / 2.4e9 * 1e6
    chain_us = 2 * 1.0 + 2 * issue_us + 3 * max(1.0, 2 * issue_us) + 1.0
    partials = 256 * 4 * (16 * 512 * 4 + 2 * 16 * 4)
    hbm_us = (256 * 1024 * 312 + 256 * 16 * 576 * 2 + partials) / 8e12 * 1e6
    combine_us = max(2 * 1.0 + 1.0, (partials + 256 * 16 * 512 * 2) / 8e12 * 1e6)
    assert 2 * chain_us > hbm_us
    expected = 4.0 + 4.0 + 2 * chain_us + combine_us
    assert latency_model.predict_us(case, build, latency_model.ASSUMED["gfx950"]) == pytest.approx(expected)


# --- each term of the model on a hand-made case with a known answer (issue 38) ----------
# A build whose every other term is negligible: no issue, no LDS, one round trip a tile.
BARE = {"num_warps": 4, "waves_per_simd": 1.0, "clocks_per_element": {"issue": 0.0},
        "latency": {"round_trips_to_first_mma": 2, "round_trips_per_tile": 1.0, "bytes_in_flight_per_unit": 0}}
PARTIAL = 16 * 512 * 4 + 2 * 16 * 4  # one split's partial: 32896 bytes
MACHINE = latency_model.Machine(launch_us=4.0, extra_launch_us=3.0, round_trip_us=0.5, atomic_us=2.0,
                                hbm_bytes_per_s=1e12, clock_hz=2e9, units=256, lds_clocks=50.0)


def test_the_bytes_are_the_runners_layouts_q_the_output_and_the_partials():
    """312 B a KV token in the runner's padded scale rows (306 trimmed), 18,432 B of Q and 16,384 B of output a
    sequence, 32,896 B a split's partial written by the split kernel and read back by the merge; at 1 TB/s a byte
    is a picosecond: 256 sequences of 8192 tokens in 4 splits."""
    combine = {"batch": 256, "kv_len": 8192, "BLOCK_N": 64, "num_splits": 4, "launches": 2, "MERGE": 1}
    kv, q, out, partials = 256 * 8192 * 312, 256 * 18432, 256 * 16384, 256 * 4 * PARTIAL
    assert latency_model.call_bytes(combine) == {"split": kv + q + partials, "merge": partials + out}
    assert latency_model.call_bytes(combine, "trimmed")["split"] == 256 * 8192 * 306 + q + partials
    direct = {**combine, "num_splits": 1, "launches": 1, "MERGE": 0}
    assert latency_model.call_bytes(direct) == {"split": kv + q + out, "merge": 0}
    # the HBM term binds: 32 tiles a program, each a round trip of 0.5 us, 17 us < the bytes' 693 us
    terms = latency_model.call_terms(combine, BARE, MACHINE)
    assert terms["hbm_us"] == pytest.approx((kv + q + partials) / 1e6)
    assert terms["merge_us"] == pytest.approx((partials + out) / 1e6)  # the combine reads 37.9 MB: past 2 L + 1 us
    assert terms["total_us"] == pytest.approx(4.0 + 3.0 + (kv + q + partials) / 1e6 + (partials + out) / 1e6)


@pytest.mark.parametrize("fences, round_trips", [
    (None, 16),  # no fence facts (an sm_90 build): a round trip a split
    ({"merge_loops": 4, "merge_splits_per_pass": 1}, 64),  # 4 head groups, a split a pass (before issue 38)
    ({"merge_loops": 1, "merge_splits_per_pass": 2}, 8),  # 16 heads, 2 splits a pass (4 warps now)
    ({"merge_loops": 4, "merge_splits_per_pass": 16}, 4),  # 4 head groups, 16 splits a pass (8 warps now)
    ({"merge_loops": 1, "merge_splits_per_pass": 4}, 4),  # the Gluon merge
])
def test_the_fused_merge_costs_the_round_trips_its_isa_issues(fences, round_trips):
    """16 splits: the counter's atomic and merge_loops x ceil(16 / merge_splits_per_pass) round trips, as the form's
    ISA issues them (tools/fence_order.py), on a case whose partials' bytes take less (4 sequences: 2.2 MB)."""
    build = {**BARE, "fused_fences": fences}
    case = {"batch": 4, "kv_len": 1024, "BLOCK_N": 64, "num_splits": 16, "launches": 1, "MERGE": 2}
    assert latency_model.call_terms(case, build, MACHINE)["merge_us"] == pytest.approx(2.0 + round_trips * 0.5)


def test_the_lds_term_is_the_cus_bank_clocks_per_tile_in_the_chosen_model():
    """A 4-warp build whose loop takes 500 LDS clocks a wave a tile in the measured 64-bank phases (1000 on 32
    banks): 4 waves on one CU's LDS pipe, 2000 clocks = 1 us a tile at 2 GHz, more than its round trip (0.5 us);
    the chain of 8 tiles: 2 L + 1 + 7 x 1 + L."""
    build = {**BARE, "waves_per_simd": 2.0, "lds_banks": {"models": {
        "64 banks, measured": {"cycles_per_tile": 500.0}, "32 banks": {"cycles_per_tile": 1000.0}}}}
    case = {"batch": 256, "kv_len": 512, "BLOCK_N": 64, "num_splits": 1, "launches": 1, "MERGE": 0}
    terms = latency_model.call_terms(case, build, MACHINE)
    assert terms["lds_us"] == pytest.approx(1.0) and terms["per_tile_us"] == pytest.approx(1.0)
    assert terms["chain_us"] == pytest.approx(2 * 0.5 + 1.0 + 7 * 1.0 + 0.5)
    assert latency_model.call_terms(case, build, MACHINE, lds_model="32 banks")["chain_us"] == \
        pytest.approx(2 * 0.5 + 2.0 + 7 * 2.0 + 0.5)


def test_one_wave_per_simd_issues_its_tile_in_order_with_its_lds_waits():
    """One wave per SIMD: 100 VALU x 4 + 300 MFMA clocks + 20 SALU + 10 nop clocks + 6 LDS waits x 50 clocks = 1030
    clocks = 0.515 us a tile at 2 GHz, past its round trip; two waves per SIMD hide the waits (no in-order term)."""
    issue = {"valu": 100, "mfma_clocks": 300, "salu": 20, "nop_clocks": 10, "lds": 12, "vmem": 4, "lgkm_waits": 6,
             "vm_waits": 1, "barriers": 1}
    build = {**BARE, "loop_issue": issue}
    case = {"batch": 256, "kv_len": 512, "BLOCK_N": 64, "num_splits": 1, "launches": 1, "MERGE": 0}
    terms = latency_model.call_terms(case, build, MACHINE)
    assert terms["inorder_us"] == pytest.approx(1030 / 2e9 * 1e6) and terms["per_tile_us"] == pytest.approx(0.515)
    assert latency_model.call_terms(case, {**build, "waves_per_simd": 2.0}, MACHINE)["inorder_us"] == 0.0


def test_the_probes_figures_make_a_machine_and_missing_ones_stay_assumed():
    assumed = latency_model.ASSUMED["gfx950"]
    machine, missing = latency_model.machine_from_figures(FIGURES, assumed)
    assert machine == latency_model.Machine(6.0, 4.5, 1.6, 0.8, 5000e9, 2100e6, 256)
    machine, missing = latency_model.machine_from_figures({"launch_us": 5.0, "units": 256}, assumed)
    assert machine == assumed._replace(launch_us=5.0) and missing == ["extra_launch_us", "round_trip_us",
                                                                       "atomic_us", "hbm_bytes_per_s", "clock_hz"]


def test_every_candidate_description_reads_back_as_its_choice(sub, monkeypatch):
    simulate_mi355x(sub, monkeypatch)
    for case in CASES:
        for choice in sub.ranked_candidates(*case, CPU):
            assert latency_model.choice_from_description(str(choice)) == choice
    assert latency_model.choice_from_description("scaled t128 w8 s4 combine") is None


def test_every_reader_of_a_log_keeps_each_architectures_last_machine_block(sub, tmp_path):
    """A log with a gfx950 block, then an sm_90 one, then a newer gfx950 one: the model, the
    probe check and the report reader all see the newer gfx950 figures and the sm_90 ones
    (one reader, eval.machine_entries; the model once read the last block only and lost gfx950)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import machine_probe_check

    def block(arch, launch_us):
        return sub.machine_block({"arch": arch, "device": DEVICE, "figures": {**FIGURES, "launch_us": launch_us},
                                  "wall_s": 0.5})
    log = tmp_path / "log.txt"
    log.write_text("\n".join([block("gfx950", 6.0), block("sm_90", 3.0), block("gfx950", 7.0)]) + "\n")
    figures, provenance = latency_model.measured_machine(log, "gfx950")
    assert figures["launch_us"] == 7.0 and DEVICE in provenance
    found = machine_probe_check.machine_figures(log.read_text(), log.name)
    assert {arch: f["launch_us"] for arch, f in found.items()} == {"gfx950": 7.0, "sm_90": 3.0}


def test_the_loop_issue_is_counted_by_instruction_class():
    """compile_report.loop_issue on a hand-written loop body: 3 VALU, a bf16 MFMA (16 clocks) and an fp4 x fp4
    scaled one (16), 2 SALU and s_nop 2 (3 clocks), 2 LDS reads, a buffer load, waits on LDS (named and as a raw
    simm16: lgkmcnt 0, vmcnt at its largest) and one on vector memory, a barrier."""
    body = [("v_add_f32_e32", "v1, v2, v3"), ("v_mul_f32_e32", "v1, v2, v3"), ("v_cvt_pk_bf16_f32", "v1, v2, v3"),
            ("v_mfma_f32_16x16x32_bf16", "a[0:3], v[0:3], v[4:7], a[0:3]"),
            ("v_mfma_scale_f32_16x16x128_f8f6f4", "a[0:3], v[0:7], v[8:15], a[0:3], v1, v2 cbsz:4 blgp:4"),
            ("s_add_i32", "s1, s2, s3"), ("s_mov_b32", "s4, 0"), ("s_nop", "2"), ("ds_read_b128", "v[0:3], v9"),
            ("ds_read_u8", "v10, v9"), ("buffer_load_dwordx4", "v[0:3], v1, s[4:7], 0 offen"),
            ("s_waitcnt", "lgkmcnt(0)"), ("s_waitcnt", "0xc07f"), ("s_waitcnt", "vmcnt(1)"), ("s_barrier", "")]
    assert compile_report.loop_issue(body) == {"valu": 3, "mfma_clocks": 32, "salu": 2, "nop_clocks": 3, "lds": 2,
                                               "vmem": 1, "lgkm_waits": 2, "vm_waits": 1, "barriers": 1}
