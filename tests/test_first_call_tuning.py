"""First-call tuning (submission.tune_first_call) with a fake clock and fake timings: the
ranking, the budgets, failing candidates never picked, the measured table first, MLA_TUNE,
and the report. The real timer runs on a GPU in tests/test_kernel.py-style GPU runs and in
`eval.py benchmark` (docs/design.md: first-call tuning)."""
import dataclasses
import pytest
import torch

import reference as ref

CPU = torch.device("cpu")


class FakeClock:
    """Seconds that advance only when a fake run says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def sub(fresh_plans, monkeypatch):
    monkeypatch.setattr(fresh_plans.STATE, "tuned", {})
    monkeypatch.setattr(fresh_plans.STATE, "failed_variants", set())
    monkeypatch.setattr(fresh_plans.STATE, "tune_log", fresh_plans.fresh_tune_log())
    monkeypatch.setattr(fresh_plans, "_arch", lambda device: "gfx950")
    # the ranking's rules, from SCALED's prediction: with the file's EMULATOR_PROVEN the model's fastest form leads
    # the same candidates (tests/test_compile_targets.py: the tuning candidates are the house baseline's)
    monkeypatch.setattr(fresh_plans, "EMULATOR_PROVEN", frozenset())
    return fresh_plans


def fake_world(sub, speed_us, clock, failing=(), build_s=1.0):
    """run_choice and timer for tune_first_call: speed_us(choice) -> the time one run
    takes; failing: choices whose first run raises like a plan whose variants all failed."""
    built = set()
    last = {}

    def run_choice(choice):
        if choice in failing:
            raise sub.NoVariantError("custom_kernel: no kernel variant could run:\nfake: build error at line 3")
        if choice not in built:
            built.add(choice)
            clock.now += build_s
        last["choice"] = choice

    def timer(run, device):
        run()
        us = speed_us(last["choice"])
        clock.now += us * 1e-6 + 1e-3  # the run plus the host's time around it
        return us
    return run_choice, timer


def simulate_mi355x(sub, monkeypatch, aiter=True):
    """The runner's machine as submission.py's helpers see it: gfx950, 256 CUs, hip, and an
    importable aiter (a stand-in: only fake_world runs it)."""
    monkeypatch.setattr(sub, "_arch", lambda device: "gfx950")
    monkeypatch.setattr(sub, "_num_sms", lambda device: 256)
    monkeypatch.setattr(sub, "_platform", lambda device: "hip")
    monkeypatch.setattr(sub.STATE, "aiter", {"stand-in": True} if aiter else None)
    sub.STATE.predictions.clear()


def launch_of(sub, choice):
    assert isinstance(choice, sub.Launch), choice
    return choice


def test_ranking_starts_with_the_prediction_and_stays_near_it(sub, monkeypatch):
    """gfx950: the SCALED family's prediction, then the BF16 family's (the structurally
    different fallback), then the other groups. Elsewhere: the prediction, then another tile
    size, every group once before any group's second."""
    ranked = sub.ranked_candidates(64, 8192, CPU)
    predicted = sub.predicted_choice(64, 8192, CPU, sub._num_sms(CPU))
    assert ranked[0] == predicted and len(ranked) == len(set(ranked))
    assert launch_of(sub, predicted).scores == sub.SCALED_SCORES
    assert ranked[1] == sub.default_launch(64, 8192, sub._num_sms(CPU))
    assert all(c.path == "triton" for c in ranked)  # no aiter on this machine
    monkeypatch.setattr(sub, "_arch", lambda device: "sm_90")
    ranked = sub.ranked_candidates(64, 8192, CPU)
    groups = sub.candidate_groups(64, 8192, CPU)
    firsts = list(dict.fromkeys(choices[0] for _, choices in groups))
    assert ranked[:len(firsts)] == firsts
    assert all(launch_of(sub, c).scores == sub.BF16_SCORES for c in ranked)


@pytest.mark.parametrize("case", [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192),
                                  (256, 1024), (256, 8192)])
def test_on_gfx950_every_family_and_merge_is_a_candidate(sub, monkeypatch, case):
    """On the runner's machine every case's list holds the SCALED prediction and its split
    neighbours, the 64-token SCALED shape at 2 stages and 1 where the grid is small, DIRECT where one
    split per sequence fills the GPU, one BF16 launch, the ONCE family's Gluon kernel where
    Gluon imports, aiter, and the FUSED forms of the prediction and of the Gluon kernel's
    launch."""
    simulate_mi355x(sub, monkeypatch)
    batch, kv_len = case
    ranked = sub.ranked_candidates(batch, kv_len, CPU)
    predicted = launch_of(sub, ranked[0])
    assert predicted == sub.scaled_launch(batch, kv_len, 256)
    launches = [launch_of(sub, c) for c in ranked if c.path == "triton"]
    scaled = {(l.block_n, l.num_warps, l.num_stages, l.num_splits) for l in launches if l.scores == sub.SCALED_SCORES}
    tiles = triton_cdiv(kv_len, predicted.block_n)
    for splits in (predicted.num_splits // 2, predicted.num_splits * 2):
        if 1 <= splits <= tiles:
            assert (predicted.block_n, predicted.num_warps, predicted.num_stages, splits) in scaled, splits
    if batch * triton_cdiv(kv_len, 128) < 2 * 256:
        assert {(64, 4, 2), (64, 4, 1)} <= {l[:3] for l in scaled}
    if batch >= 256:
        assert any(l.merge == sub.MERGE_DIRECT and l.scores == sub.SCALED_SCORES for l in launches)
    assert sum(l.scores == sub.BF16_SCORES for l in launches) == 1
    assert sub.AITER_LAUNCH in ranked
    once_launch = sub.once_launch(batch, kv_len, 256)
    once = once_launch
    assert (once in ranked) == sub.gluon_capable("gfx950")
    with monkeypatch.context() as without_gluon:  # a Triton without Gluon: no ONCE candidate
        without_gluon.setattr(sub, "gl", None)
        assert not any(launch_of(sub, c).scores == sub.ONCE_SCORES
                       for c in sub.ranked_candidates(batch, kv_len, CPU) if c.path == "triton")
    fused = [dataclasses.replace(launch, merge=sub.MERGE_FUSED) for launch in (predicted, once_launch)
             if launch.num_splits > 1 and (launch is predicted or sub.gluon_capable("gfx950"))]
    assert all(choice in ranked for choice in fused)  # right on AMD since issue 24
    assert any(launch_of(sub, c).merge == sub.MERGE_FUSED for c in ranked if c.path == "triton") == bool(fused)


def triton_cdiv(a, b):
    return -(-a // b)


def test_the_fastest_checked_candidate_is_picked_and_used(sub, monkeypatch):
    clock = FakeClock()
    ranked = sub.ranked_candidates(4, 1024, CPU)
    fastest = ranked[3]
    run_choice, timer = fake_world(sub, lambda c: 10.0 if c == fastest else 11.0, clock)  # none dropped
    pick = sub.tune_first_call(4, 1024, CPU, run_choice, clock=clock, timer=timer)
    assert pick == fastest and sub.STATE.tuned[("gfx950", 4, 1024)] == fastest
    assert sub.choose(4, 1024, CPU) == fastest
    entry = sub.STATE.tune_log["cases"][0]
    assert entry["build_s"] == pytest.approx(len(ranked))  # builds counted apart
    assert entry["tried"][0][1] == fastest


def test_a_candidate_that_fails_is_never_picked_and_is_reported(sub):
    clock = FakeClock()
    ranked = sub.ranked_candidates(4, 1024, CPU)
    broken = ranked[1]
    run_choice, timer = fake_world(sub, lambda c: 1.0 if c == broken else 20.0 + ranked.index(c), clock,
                                   failing={broken})
    pick = sub.tune_first_call(4, 1024, CPU, run_choice, clock=clock, timer=timer)
    assert pick == ranked[0] and pick != broken
    report = sub.tuning_report()
    assert f"failed {broken}: NoVariantError: fake: build error at line 3" in report


def test_aiter_failing_in_any_way_is_a_failed_candidate(sub, monkeypatch):
    """aiter is a library outside our tests: whatever it raises on a case's first run once
    built (an API that moved gives TypeError) drops it from that case's ranking; the call
    goes on, and aiter stays a candidate elsewhere."""
    monkeypatch.setattr(sub.STATE, "aiter", {"fake": True})
    clock = FakeClock()
    ranked = sub.ranked_candidates(256, 8192, CPU)
    assert sub.AITER_LAUNCH in ranked
    run_choice, timer = fake_world(sub, lambda c: 10.0 + ranked.index(c) if c in ranked else 30.0, clock)
    case = {}

    def aiter_breaks_on_the_second_case(choice):
        if choice == sub.AITER_LAUNCH and case["now"] == (256, 8192):
            raise TypeError("mla_decode_fwd() got an unexpected keyword argument 'intra_batch_mode'")
        run_choice(choice)
    for case["now"] in ((4, 1024), (256, 8192)):
        pick = sub.tune_first_call(*case["now"], CPU, aiter_breaks_on_the_second_case, clock=clock, timer=timer)
    assert pick == ranked[0] and sub.STATE.aiter is not None
    assert "failed aiter: TypeError: mla_decode_fwd() got an unexpected keyword" in sub.tuning_report()


def test_aiters_first_run_failing_turns_it_off_for_the_process(sub, monkeypatch):
    """aiter's first run is its build: when it fails, aiter is off for the process (one
    warning), the report says so on the build's line and as the case's failed candidate."""
    monkeypatch.setattr(sub.STATE, "aiter", {"fake": True})
    clock = FakeClock()
    ranked = sub.ranked_candidates(256, 8192, CPU)
    run_choice, timer = fake_world(sub, lambda c: 10.0 + ranked.index(c), clock)

    def aiter_breaks(choice):
        if choice == sub.AITER_LAUNCH:
            raise TypeError("mla_decode_fwd() got an unexpected keyword argument 'intra_batch_mode'")
        run_choice(choice)
    with pytest.warns(RuntimeWarning, match="aiter failed .*every case runs on Triton from now on"):
        pick = sub.tune_first_call(256, 8192, CPU, aiter_breaks, clock=clock, timer=timer)
    assert pick == ranked[0] and sub.STATE.aiter is None
    report = sub.tuning_report()
    assert "failed aiter: TypeError: mla_decode_fwd() got an unexpected keyword" in report
    assert "aiter build (its first run: JIT modules; outside the tuning budgets): 0.0 s, failed: TypeError" in report


def test_a_host_side_bug_is_not_swallowed(sub):
    def run_choice(choice):
        raise KeyError("bug")
    with pytest.raises(KeyError):
        sub.tune_first_call(4, 1024, CPU, run_choice, clock=FakeClock(), timer=lambda run, device: 1.0)


def test_the_case_budget_stops_timing_and_slow_candidates_are_dropped(sub, monkeypatch):
    clock = FakeClock()
    ranked = sub.ranked_candidates(4, 1024, CPU)
    runs = {}

    def speed(choice):
        runs[choice] = runs.get(choice, 0) + 1
        return 100.0 if choice == ranked[0] else 300.0
    run_choice, timer = fake_world(sub, speed, clock)
    monkeypatch.setattr(sub, "TUNE_CASE_TIMING_S", 0.015)  # ~1.1 ms per run: a few rounds
    sub.tune_first_call(4, 1024, CPU, run_choice, clock=clock, timer=timer)
    assert runs[ranked[0]] < sub.TUNE_ROUNDS
    assert max(runs[c] for c in ranked[1:]) <= 3  # 3x the leader: dropped after round 3


@pytest.mark.parametrize("build_s, built", [(9.85, 4), (9.9, 3)])
def test_a_candidate_is_skipped_where_the_charged_build_alone_would_pass_the_budget(sub, build_s, built):
    """The edge of the build charge: every candidate costs build_s to build and nothing to time
    (the fake timer's runs come after the builds). Before the k-th candidate (k >= 1), k builds
    have taken k * build_s; it is built only if that plus the charge for its own build (the
    longest build so far, build_s) leaves the timed runs' share: (k + 1) * build_s <= 40 - 0.5.
    At 9.85 s that holds for the fourth (39.4 s), at 9.9 s it does not (39.6 s), though without
    the charge 3 * 9.9 s = 29.7 s would let it start and end past the budget."""
    clock = FakeClock()
    ranked = sub.ranked_candidates(4, 1024, CPU)
    assert len(ranked) > 4 and sub.TUNE_CASE_WALL_S - sub.TUNE_CASE_TIMING_S == pytest.approx(39.5)
    run_choice, timer = fake_world(sub, lambda choice: 10.0, clock, build_s=build_s)
    sub.tune_first_call(4, 1024, CPU, run_choice, clock=clock, timer=timer)
    entry = sub.STATE.tune_log["cases"][0]
    assert list(entry["ran"]) == ranked[:built] and entry["skipped"] == ranked[built:]
    assert entry["build_s"] == pytest.approx(built * build_s) and entry["build_s"] <= entry["budget_s"] - 0.5


def test_each_of_the_eight_cases_is_tuned_and_past_them_the_total_decides(sub, monkeypatch):
    """A slow case cannot take the others' share: the first TUNE_CASES cases are tuned
    whatever the earlier ones spent; after them, only while the total has time left."""
    monkeypatch.setenv("MLA_TUNE", "1")
    sub.STATE.tune_log["spent_wall_s"] = 10 * sub.TUNE_TOTAL_WALL_S
    sub.STATE.tune_log["cases"] = [{}] * (sub.TUNE_CASES - 1)
    assert sub._needs_tuning(4, 1024, CPU)
    sub.STATE.tune_log["cases"] = [{}] * sub.TUNE_CASES
    assert not sub._needs_tuning(4, 1024, CPU)
    sub.STATE.tune_log["spent_wall_s"] = sub.TUNE_TOTAL_WALL_S - 1.0
    assert sub._needs_tuning(4, 1024, CPU)


def test_the_measured_table_wins_and_mla_tune_0_turns_it_off(sub, monkeypatch):
    monkeypatch.setenv("MLA_TUNE", "1")
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "gfx950", {(4, 1024): "bf16 t32 w4 s2 st1 combine"})
    assert not sub._needs_tuning(4, 1024, CPU) and sub._needs_tuning(4, 8192, CPU)
    sub.STATE.tuned[("gfx950", 4, 1024)] = sub.Launch(64, 4, 8, 1, 0)
    assert sub.choose(4, 1024, CPU) == sub.Launch(32, 4, 2, 1, 0, sub.MERGE_COMBINE)
    gpu = torch.device("cuda")  # a device object only: nothing runs on it
    monkeypatch.delenv("MLA_TUNE")
    assert sub._needs_tuning(4, 8192, gpu) and not sub._needs_tuning(4, 8192, CPU)  # default: GPUs only
    monkeypatch.setenv("MLA_TUNE", "0")
    assert not sub._needs_tuning(4, 8192, gpu)
    monkeypatch.setenv("MLA_TUNE", "1")
    monkeypatch.setenv("MLA_PATH", "triton")
    assert not sub._needs_tuning(4, 8192, CPU)  # a forced path is not tuned


def test_the_report_says_what_was_tried(sub):
    clock = FakeClock()
    ranked = sub.ranked_candidates(4, 1024, CPU)
    run_choice, timer = fake_world(sub, lambda c: 10.0 + ranked.index(c), clock, failing={ranked[2]})
    sub.STATE.failed_variants.add(sub.Variant(sub.GFX950, 0, 64, 4, 1, True))
    sub.tune_first_call(4, 1024, CPU, run_choice, clock=clock, timer=timer)
    report = sub.tuning_report().splitlines()
    assert report[0].startswith("submission: first-call tuning") and "architecture gfx950" in report[0]
    assert f"triton {sub.__dict__['triton'].__version__}" in report[0]
    assert any("variant failed: bf16 family, gfx950 conversion" in line for line in report)
    case = next(line for line in report if line.startswith("  case (4, 1024)"))
    assert case == f"  case (4, 1024): pick {ranked[0]}, 10.0 us"
    assert any(line.startswith("    candidates, mean us (runs): ") and "10.0 (" in line for line in report)
    assert any(line.startswith(f"    failed {ranked[2]}") for line in report)
    assert any(line.startswith("    builds and first runs") for line in report)
    assert any(line.startswith("    kernels of the pick, us each (host clock, interpreter): ") for line in report)
    spent = next(i for i, line in enumerate(report) if line.startswith("  spent: timed runs"))
    assert report[spent + 1] == sub.TABLE_BEGIN and report[-1] == sub.TABLE_END and len(report) <= 60


def test_first_call_tuning_end_to_end_returns_the_right_answer(sub, monkeypatch):
    """The real path on the interpreter: the first call tunes (timer on the host clock),
    returns a correct result, and later calls use the pick without tuning again."""
    monkeypatch.setenv("MLA_TUNE", "1")
    ranked = sub.ranked_candidates
    monkeypatch.setattr(sub, "ranked_candidates", lambda *args: ranked(*args)[:3])
    monkeypatch.setattr(sub, "TUNE_ROUNDS", 2)
    monkeypatch.setattr(sub, "_arch", lambda device: "cpu")
    data = ref.generate_input(2, 1, 70, seed=61)
    out = sub.custom_kernel(data)
    assert ("cpu", 2, 70) in sub.STATE.tuned and len(sub.STATE.tune_log["cases"]) == 1
    expected = ref.exact_attention(data)
    assert bool(((out.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())
    sub.custom_kernel(data)
    assert len(sub.STATE.tune_log["cases"]) == 1


def block_of(report):
    """The MEASURED DISPATCH block at the end of a report, evaluated."""
    text = report.split(sub_markers()[0], 1)[1].split(sub_markers()[1], 1)[0]
    names = {}
    exec(text, {}, names)  # the block is plain Python literals
    return names["MEASURED_DISPATCH"], names["MEASURED_ON"]


def sub_markers():
    import submission
    return submission.TABLE_BEGIN, submission.TABLE_END


def test_the_report_ends_with_a_block_that_carries_the_picks(sub):
    """The block to paste: this architecture's pick per tuned case with its time, and the
    provenance with this file's source id (what eval.py ingest checks)."""
    clock = FakeClock()
    for case in ((4, 1024), (32, 8192)):
        ranked = sub.ranked_candidates(*case, CPU)
        run_choice, timer = fake_world(sub, lambda c, ranked=ranked: 10.0 + ranked.index(c), clock)
        sub.tune_first_call(*case, CPU, run_choice, clock=clock, timer=timer)
    table, provenance = block_of(sub.tuning_report())
    assert table == {"gfx950": {case["case"]: str(case["pick"]) for case in sub.STATE.tune_log["cases"]}}
    assert provenance["gfx950"].endswith(f"first-call tuning, source {sub.SOURCE_ID}")
    assert sub.tuning_report().count("# 10.0 us") == 2


def test_a_gfx950_report_tells_a_scaled_from_a_bf16_candidate_of_the_same_tile(sub):
    """Same tile, warps, splits and stages in both families: the report names the family
    (and the merge), so the two never read alike."""
    scaled = sub.Launch(64, 4, 4, 1, sub.SCALED_SCORES)
    bf16 = sub.Launch(64, 4, 4, 1, sub.BF16_SCORES)
    fused = sub.Launch(64, 4, 4, 1, sub.BF16_SCORES, sub.MERGE_FUSED)
    assert str(scaled) == "scaled t64 w4 s4 st1 combine"
    assert str(bf16) == "bf16 t64 w4 s4 st1 combine"
    assert str(fused) == "bf16 t64 w4 s4 st1 fused"
    clock = FakeClock()
    original = sub.ranked_candidates
    sub.ranked_candidates = lambda *args, **kwargs: [scaled, bf16]
    try:
        run_choice, timer = fake_world(sub, lambda c: 5.0 if c == scaled else 7.0, clock)
        sub.tune_first_call(32, 1024, CPU, run_choice, clock=clock, timer=timer)
    finally:
        sub.ranked_candidates = original
    report = sub.tuning_report()
    assert "pick scaled t64 w4 s4 st1 combine, 5.0 us" in report
    assert "scaled t64 w4 s4 st1 combine 5.0 (" in report and "bf16 t64 w4 s4 st1 combine 7.0 (" in report


@pytest.mark.parametrize("error", ["oom", "device-fault"])
def test_out_of_memory_and_device_faults_propagate_from_tuning(sub, monkeypatch, error):
    """No other candidate can run after these: the call fails loudly instead of ranking on."""
    def run_choice(choice):
        if error == "oom":
            raise torch.OutOfMemoryError("out of memory")
        raise sub.NoVariantError("custom_kernel: no kernel variant could run: illegal memory access")
    if error == "device-fault":
        monkeypatch.setattr(sub, "_device_faulted", lambda device: True)
    with pytest.raises((torch.OutOfMemoryError, sub.NoVariantError)):
        sub.tune_first_call(4, 1024, CPU, run_choice, clock=FakeClock(), timer=lambda run, device: 1.0)
    assert not sub.STATE.tuned


def test_a_case_where_no_candidate_ran_is_tuned_once(sub, monkeypatch):
    """Every candidate failed: the case runs the prediction and is not tuned again on the
    next call (its report printed once), while another case still is."""
    monkeypatch.setenv("MLA_TUNE", "1")
    clock = FakeClock()
    ranked = sub.ranked_candidates(4, 1024, CPU)
    run_choice, timer = fake_world(sub, lambda c: 1.0, clock, failing=set(ranked))
    assert sub._needs_tuning(4, 1024, CPU)
    assert sub.tune_first_call(4, 1024, CPU, run_choice, clock=clock, timer=timer) is None
    assert not sub._needs_tuning(4, 1024, CPU) and sub._needs_tuning(4, 8192, CPU)
    assert sub.choose(4, 1024, CPU) == sub.predicted_choice(4, 1024, CPU, 4)


def test_a_candidate_whose_own_form_fell_back_is_dropped_and_reported(sub):
    """Its plan ran a fallback (its own form failed a check): timing it would rank another
    form under its name, so it is reported and dropped."""
    clock = FakeClock()
    ranked = sub.ranked_candidates(4, 1024, CPU)
    run_choice, timer = fake_world(sub, lambda c: 1.0 if c == ranked[1] else 20.0, clock)
    own = sub.Variant(sub.PORTABLE, 0, 64, 4, 1)
    fallback = own._replace(block_n=32)

    class FellBack:
        variants, variant = [own, fallback], fallback
        failures = [(own, "SelfCheckError: wrong answers on the check of the first call's output: 3 of 8 elements")]

    def run(choice):
        run_choice(choice)
        return FellBack() if choice == ranked[1] else None
    pick = sub.tune_first_call(4, 1024, CPU, run, clock=clock, timer=timer)
    assert pick != ranked[1]
    report = sub.tuning_report()
    assert f"failed {ranked[1]}: its own form failed" in report
    assert "check of the first call's output" in report


def test_the_source_id_ignores_the_table_and_sees_the_code():
    import submission
    text = open(submission.__file__, encoding="utf-8").read()
    assert submission.SOURCE_ID == submission.source_id(text)
    begin, end = submission.TABLE_BEGIN, submission.TABLE_END
    retabled = text.split(begin, 1)[0] + begin + "\nMEASURED_DISPATCH = {}\nMEASURED_ON = {}\n" + end \
        + text.split(end, 1)[1]
    assert submission.source_id(retabled) == submission.SOURCE_ID
    begin, end = submission.MACHINE_BEGIN, submission.MACHINE_END
    remeasured = text.split(begin, 1)[0] + begin + "\nMEASURED_MACHINE = {'gfx950': {'launch_us': 4.0}}\n" + end \
        + text.split(end, 1)[1]
    assert submission.source_id(remeasured) == submission.SOURCE_ID
    assert submission.source_id(text.replace("def custom_kernel", "def  custom_kernel")) != submission.SOURCE_ID


BUILD_S = 8.0  # one Triton candidate's build and checks, simulated (1-6 s measured: results/gfx950_build_seconds_*)


def test_a_cold_runner_tunes_all_eight_cases_with_aiters_build_outside_the_budgets(sub, monkeypatch):
    """The runner on a cold pod, simulated: gfx950, 256 CUs, hip, aiter importable; aiter's
    first run costs 240 s (its JIT builds), every Triton candidate's build 8 s. All eight
    benchmark cases are tuned, each within its share of wall time (skipping what would pass
    it, and saying so), aiter's build is on a line of its own and in no case's time."""
    simulate_mi355x(sub, monkeypatch)
    monkeypatch.setenv("MLA_TUNE", "1")
    clock = FakeClock()
    built = set()

    def run_choice(choice):
        if choice not in built:
            built.add(choice)
            clock.now += 240.0 if choice == sub.AITER_LAUNCH else BUILD_S
        run_choice.last = choice

    def timer(run, device):
        run()
        clock.now += 0.02  # the runner-style timing of one call: its cache flush
        return 50.0 if run_choice.last == sub.AITER_LAUNCH else 47.0
    cases = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192), (256, 1024), (256, 8192)]
    for batch, kv_len in cases:
        assert sub._needs_tuning(batch, kv_len, CPU)
        sub.tune_first_call(batch, kv_len, CPU, run_choice, clock=clock, timer=timer,
                            profiler=lambda run, device: [])
    assert all(("gfx950", *case) in sub.STATE.tuned for case in cases)
    entries = sub.STATE.tune_log["cases"]
    assert [entry["case"] for entry in entries] == cases and all(entry["pick"] for entry in entries)
    assert all(entry["wall_s"] <= sub.TUNE_CASE_WALL_S + BUILD_S for entry in entries)  # one build over at most
    assert sub.AITER_LAUNCH in [choice for _, choice, _ in entries[0]["tried"]]  # timed once built
    assert any(entry["skipped"] for entry in entries)  # 8 s builds: not every candidate fits 40 s
    report = sub.tuning_report()
    assert "  aiter build (its first run: JIT modules; outside the tuning budgets): 240.0 s" in report.splitlines()
    assert "skipped for the case's budget of 40 s: " in report
    assert sub.STATE.tune_log["spent_wall_s"] <= sub.TUNE_TOTAL_WALL_S + len(cases) * BUILD_S


def test_the_default_kernel_times_never_touch_torch_profiler(sub, monkeypatch):
    """On ROCm torch.profiler has hung on gfx950: the pick's kernels are timed with events
    around each launch, never with the profiler."""
    simulate_mi355x(sub, monkeypatch, aiter=False)
    import torch.profiler

    def no_profiler(*args, **kwargs):
        raise AssertionError("torch.profiler used")
    monkeypatch.setattr(torch.profiler, "profile", no_profiler)
    clock = FakeClock()
    run_choice, timer = fake_world(sub, lambda c: 10.0, clock)

    def launching(choice):
        with sub._marked("_scaled_split_kernel", CPU):
            run_choice(choice)
        with sub._marked("_mla_combine_kernel", CPU):
            pass
    sub.tune_first_call(4, 1024, CPU, launching, clock=clock, timer=timer)
    assert [name for name, _ in sub.STATE.tune_log["cases"][0]["kernels"]] == ["_scaled_split_kernel", "_mla_combine_kernel"]
    assert "kernels of the pick, us each (host clock, interpreter): _scaled_split_kernel" in sub.tuning_report()


@pytest.mark.skipif(torch.cuda.is_available(), reason="runs gfx950 kernels: CPU interpreter only (the asm emulated)")
def test_a_once_candidate_whose_gluon_kernel_fails_to_build_is_reported_and_not_picked(sub, monkeypatch):
    """gfx950 (the fixture), Gluon offered: a ONCE-family candidate's plan tries the Gluon
    kernel, whose build fails (forced), and runs the SCALED family instead on that call
    (right: the end-to-end interpreter run); the tuner reports the candidate as fallen back
    and times the others, whatever their speed."""
    monkeypatch.setenv("MLA_TUNE", "1")
    monkeypatch.setattr(sub, "_platform", lambda device: "hip")
    monkeypatch.setattr(sub, "gluon_capable", lambda arch: arch == "gfx950")

    class BuildFails:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise sub.triton.errors.TritonError("forced Gluon build failure")
            return launch
    monkeypatch.setattr(sub, "_gluon_split_kernel", BuildFails())
    once = sub.once_launch(2, 300, sub._num_sms(CPU))
    other = sub.Launch(128, 8, 2, 2, sub.SCALED_SCORES)
    monkeypatch.setattr(sub, "ranked_candidates", lambda *args, **kwargs: [once, other])
    data = ref.generate_input(2, 1, 300, seed=59)
    with pytest.warns(RuntimeWarning, match="kernel variant failed.*Gluon kernel"):
        out = sub.custom_kernel(data)
    entry = sub.STATE.tune_log["cases"][-1]
    assert entry["pick"] == other
    assert [choice for choice, _ in entry["failed"]] == [once]
    assert "its own form failed" in entry["failed"][0][1] and "forced Gluon build failure" in entry["failed"][0][1]
    from test_kernel import assert_matches_exact, emulated_scaled
    assert_matches_exact(out, data, emulated_scaled(data))
