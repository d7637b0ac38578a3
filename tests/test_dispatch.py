"""The dispatch: the measured table's entries are valid launches, choose() follows a table
(present: monkeypatched here, the file's own is empty until `eval.py tune` or `ingest` fills
it) over the prediction, and the predicted launch keeps its documented invariants."""
import pytest
import torch

import submission as sub

CPU = torch.device("cpu")
LEADERBOARD_CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192),
                     (256, 1024), (256, 8192)]
BLOCK_NS, WARPS, STAGES = {16, 32, 64, 128}, {4, 8}, {1, 2}


def is_power_of_two(value):
    return isinstance(value, int) and value >= 1 and value & (value - 1) == 0


def assert_valid_choice(launch):
    """A Launch whose literal form reads back as itself; a Triton one in the tiles, warps and stages the kernels run."""
    assert isinstance(launch, sub.Launch) and sub.Launch.parse(str(launch)) == launch, launch
    choice = launch
    if launch.path == "triton":
        assert launch.merge in sub.MERGE_NAMES and (launch.merge == sub.MERGE_DIRECT) == (launch.num_splits == 1)
        assert launch.block_n in BLOCK_NS and launch.num_warps in WARPS and launch.num_stages in STAGES, choice
        assert launch.scores in sub.FAMILY_NAMES, choice
        assert is_power_of_two(launch.num_splits), choice


def test_measured_table_entries_are_valid_launches_with_provenance():
    """The file's table (empty or not): each architecture with its provenance, each entry a
    valid launch."""
    assert set(sub.MEASURED_DISPATCH) <= set(sub.MEASURED_ON)
    for arch, table in sub.MEASURED_DISPATCH.items():
        assert table, arch
        for (batch, kv_len), choice in table.items():
            assert isinstance(batch, int) and isinstance(kv_len, int) and batch >= 1 and kv_len >= 1
            assert_valid_choice(sub.Launch.parse(choice))


@pytest.mark.parametrize("arch, platform, num_sms", [("gfx950", "hip", 256), ("sm_90", "cuda", 132)])
def test_every_candidate_tuning_can_write_is_a_valid_table_entry(on_arch, monkeypatch, arch, platform, num_sms):
    """What `eval.py tune` and `ingest` write into the table: first-call tuning's candidates
    (every family, the Gluon kernel's included, and aiter)."""
    on_arch(arch, platform, num_sms)
    monkeypatch.setattr(sub.STATE, "aiter", object())
    monkeypatch.setattr(sub, "gluon_capable", lambda name: name == "gfx950")
    for case in LEADERBOARD_CASES:
        for choice in sub.ranked_candidates(*case, CPU):
            assert_valid_choice(choice)


@pytest.fixture
def on_arch(monkeypatch):
    def use(arch, platform, num_sms):
        monkeypatch.setattr(sub, "_arch", lambda device: arch)
        monkeypatch.setattr(sub, "_platform", lambda device: platform)
        monkeypatch.setattr(sub, "_num_sms", lambda device: num_sms)
        sub.STATE.predictions.clear()
    yield use
    sub.STATE.predictions.clear()


full = sub.Launch.parse  # a table's literal -> its Launch

# A table as `eval.py tune` writes one (the old H200 table's choices): one split (DIRECT), the FUSED merge, SCALED.
TABLE = {(4, 1024): "bf16 t64 w4 s16 st1 combine", (4, 8192): "bf16 t128 w8 s32 st1 combine",
         (32, 1024): "bf16 t128 w8 s4 st2 combine", (64, 8192): "bf16 t64 w4 s4 st1 fused",
         (256, 1024): "bf16 t64 w4 s1 st1 direct", (256, 8192): "scaled t128 w8 s2 st2 combine"}


def test_choose_follows_the_measured_table(on_arch, monkeypatch):
    """The architecture's own table wins over the prediction and over what first-call tuning
    measured in this process (an aiter entry only where aiter imports); another
    architecture's table is not read, nor any with MLA_TABLE=0."""
    on_arch("sm_90", "cuda", 132)
    monkeypatch.setattr(sub.STATE, "aiter", None)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "sm_90", {**TABLE, (64, 1024): "aiter"})
    monkeypatch.setitem(sub.STATE.tuned, ("sm_90", 4, 1024), sub.Launch(32, 4, 2))
    for case, choice in TABLE.items():
        assert sub.choose(*case, CPU) == full(choice), case
    assert sub.choose(64, 1024, CPU) == sub.default_launch(64, 1024, 132)
    on_arch("gfx950", "hip", 256)
    assert sub.choose(4, 1024, CPU) == sub.predicted_choice(4, 1024, CPU, 256)
    on_arch("sm_90", "cuda", 132)
    monkeypatch.setenv("MLA_TABLE", "0")
    assert sub.choose(4, 1024, CPU) == sub.Launch(32, 4, 2)  # then TUNED
    assert sub.choose(256, 8192, CPU) == sub.default_launch(256, 8192, 132)


def test_choose_predicts_where_nothing_was_measured(on_arch, monkeypatch):
    """gfx950: the model's fastest candidate among the file's EMULATOR_PROVEN forms (the Gluon kernel where the
    Triton has Gluon); with none proven, the SCALED family (128-token tiles, 8 warps, 2 stages where the grid has
    two tiles per CU, else 64-token tiles, 4 warps, 2 stages); NVIDIA: the BF16 family's default launch."""
    on_arch("gfx950", "hip", 256)
    monkeypatch.setattr(sub, "gluon_capable", lambda name: name == "gfx950")
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "gfx950", {(4, 1024): "bf16 t32 w8 s2 st1 combine"})
    assert sub.choose(4, 1024, CPU) == full("bf16 t32 w8 s2 st1 combine")
    for case in [(4, 8192), (256, 8192)]:
        assert sub.choose(*case, CPU) == full(sub.PREDICTED_US[case][0][1]), case
    monkeypatch.setattr(sub, "EMULATOR_PROVEN", frozenset())
    sub.STATE.predictions.clear()
    assert sub.choose(4, 8192, CPU) == sub.Launch(64, 4, 64, 2, sub.SCALED_SCORES, sub.MERGE_COMBINE)
    assert sub.choose(256, 8192, CPU) == sub.Launch(128, 8, 2, 2, sub.SCALED_SCORES, sub.MERGE_COMBINE)
    on_arch("sm_90", "cuda", 132)
    assert sub.choose(256, 8192, CPU) == sub.default_launch(256, 8192, 132)


def test_a_failed_scaled_variant_sends_the_prediction_to_the_bf16_family(on_arch, monkeypatch):
    """With no form proven on the emulator."""
    on_arch("gfx950", "hip", 256)
    monkeypatch.setattr(sub, "EMULATOR_PROVEN", frozenset())
    monkeypatch.setattr(sub.STATE, "failed_variants", set())
    scaled = sub.scaled_launch(256, 8192, 256)
    sub.STATE.failed_variants.add(sub.variants_for("gfx950", "hip", scaled.block_n, scaled.num_warps,
                                             scaled.num_stages, sub.SCALED_SCORES, scaled.merge)[0])
    assert sub.choose(256, 8192, CPU) == sub.default_launch(256, 8192, 256)


def test_hip_runs_the_bf16_family_in_one_stage_only(on_arch, monkeypatch):
    """Triton 3.6's AMD pipeliner rejects the BF16 family's impure inline asm in a
    pipelined loop; the SCALED family's asm is pure and pipelines."""
    on_arch("gfx950", "hip", 256)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "gfx950", {(4, 1024): "bf16 t64 w4 s16 st2 combine",
                                                          (4, 8192): "scaled t128 w8 s16 st2 combine"})
    assert sub.choose(4, 1024, CPU) == full("bf16 t64 w4 s16 st1 combine")
    assert sub.choose(4, 8192, CPU) == full("scaled t128 w8 s16 st2 combine")


@pytest.mark.parametrize("num_sms", [4, 132, 256])
@pytest.mark.parametrize("batch, kv_len", LEADERBOARD_CASES + [(2, 17), (3, 300)])
def test_default_launch_invariants(batch, kv_len, num_sms):
    """32- or 64-token tiles (16-token tiles were wrong on the H200), 4 warps, a
    power-of-two split count with at least two tiles per split when there are two tiles,
    and no more programs than about two per SM."""
    launch = sub.default_launch(batch, kv_len, num_sms)
    assert launch.block_n in (32, 64) and launch.num_warps == 4 and launch.num_stages == 1
    assert is_power_of_two(launch.num_splits)
    tiles = -(-kv_len // launch.block_n)
    assert tiles < 2 or tiles // launch.num_splits >= 2
    assert launch.num_splits == 1 or batch * launch.num_splits <= 4 * num_sms


@pytest.mark.parametrize("fields, merge", [
    ((64, 4, 1), sub.MERGE_DIRECT),  # one split writes the output
    ((64, 4, 1, 1, 0, sub.MERGE_FUSED), sub.MERGE_DIRECT),
    ((64, 4, 4), sub.MERGE_COMBINE),  # the default for several splits
    ((64, 4, 4, 1, 0, sub.MERGE_DIRECT), sub.MERGE_COMBINE),
    ((64, 4, 4, 1, 1, sub.MERGE_FUSED), sub.MERGE_FUSED),
])
def test_launch_gives_each_split_count_its_merge(fields, merge):
    assert sub.Launch(*fields).merge == merge


@pytest.mark.parametrize("fields", [(64, 4, 3), (48, 4, 2), (64, 3, 2), (64, 4, 0), (64, 4, 2, 0),
                                    (64, 4, 2, 1, 7), (64, 4, 2, 1, 0, 9), (64, "4", 2), (64, 4, True),
                                    (64, 4, 2, 1, 0, 1, "cuda"), (64, 4, 2, 1, 0, 1, "aiter")])
def test_launch_rejects_what_no_kernel_runs(fields):
    with pytest.raises(ValueError, match="a launch is"):
        sub.Launch(*fields)


@pytest.mark.parametrize("text", ["aiter t32", "('triton', 64, 4, 8, 1)", "bf16 t64 w4 s8", "fp8 t64 w4 s8 st1 combine",
                                  "bf16 t64 w4 s8 st1 merged", "bf16 t64 w4 s3 st1 combine", ("triton", 64, 4, 8, 1)])
def test_a_launch_literal_reads_back_or_fails_by_name(text):
    """str(Launch) is its one literal form (tables, report, logs); anything else, the old tuples included, fails."""
    with pytest.raises(ValueError, match="a launch (reads|is)"):
        sub.Launch.parse(text)
    for launch in (sub.AITER_LAUNCH, sub.Launch(128, 4, 4, 1, sub.ONCE_SCORES, sub.MERGE_FUSED), sub.Launch(64, 4, 1)):
        assert sub.Launch.parse(str(launch)) == launch


def first_form(choice):
    launch = full(choice)
    return sub.variants_for("gfx950", "hip", launch.block_n, launch.num_warps, launch.num_stages, launch.scores,
                            launch.merge)[0]


def test_the_prediction_follows_the_models_table_among_the_forms_the_emulator_proved(on_arch, monkeypatch):
    """gfx950 (the Gluon kernel available): with every form proven, the model's fastest candidate per case
    (PREDICTED_US's first, which tools/mi355x_prediction.py orders and tests/test_mi355x_prediction.py holds to the
    compile report); with the SCALED forms only, the fastest SCALED one; a proven form that failed here is passed
    over; with none proven, SCALED's launch as before; NVIDIA never reads it. The file's own EMULATOR_PROVEN
    (tools/gfx950/matrix.py's, held to its results by tests/test_gfx950_submission.py) holds every candidate's
    first form, so its prediction is the model's fastest per case."""
    on_arch("gfx950", "hip", 256)
    monkeypatch.setattr(sub, "gluon_capable", lambda name: name == "gfx950")
    monkeypatch.setattr(sub.STATE, "failed_variants", set())
    assert set(sub.PREDICTED_US) == set(LEADERBOARD_CASES)
    for case, ranked in sub.PREDICTED_US.items():
        assert sub.predicted_choice(*case, CPU, 256) == full(ranked[0][1]), case
    monkeypatch.setattr(sub, "EMULATOR_PROVEN", frozenset())
    for case in LEADERBOARD_CASES:
        assert sub.predicted_choice(*case, CPU, 256) == sub.scaled_launch(*case, 256), case
    every = frozenset(first_form(choice).describe() for ranked in sub.PREDICTED_US.values() for _, choice in ranked)
    monkeypatch.setattr(sub, "EMULATOR_PROVEN", every)
    for case, ranked in sub.PREDICTED_US.items():
        times = [us for us, _ in ranked]
        assert times == sorted(times) and sub.predicted_choice(*case, CPU, 256) == full(ranked[0][1]), case
    scaled = [choice for _, choice in sub.PREDICTED_US[(256, 8192)] if full(choice).scores == sub.SCALED_SCORES]
    monkeypatch.setattr(sub, "EMULATOR_PROVEN", frozenset(first_form(choice).describe() for choice in scaled))
    assert sub.predicted_choice(256, 8192, CPU, 256) == full(scaled[0])
    sub.STATE.failed_variants.add(first_form(scaled[0]))
    later = next(c for c in scaled if first_form(c) != first_form(scaled[0]))
    assert sub.predicted_choice(256, 8192, CPU, 256) == full(later)
    on_arch("sm_90", "cuda", 132)
    monkeypatch.setattr(sub, "EMULATOR_PROVEN", every)
    assert sub.predicted_choice(256, 8192, CPU, 132) == sub.default_launch(256, 8192, 132)


def test_a_plan_in_use_outlives_more_than_max_plans_others(fresh_plans):
    """The plan cache is least-recently-used: a plan used between the creation of each of
    MAX_PLANS + 8 others stays the same object and is never built again (first-in-first-out
    would drop it at the (MAX_PLANS)-th other and rebuild it, with its checks, inside a timed
    call); the oldest unused plan is the one dropped."""
    sub = fresh_plans
    built = []

    def factory(name):
        def make():
            built.append(name)
            return object()
        return make
    kept = sub._plan(("kept",), factory("kept"))
    for index in range(sub.MAX_PLANS + 8):
        sub._plan(("other", index), factory(index))
        assert sub._plan(("kept",), factory("kept")) is kept
    assert built.count("kept") == 1 and len(sub.STATE.plans) == sub.MAX_PLANS
    assert ("other", 0) not in sub.STATE.plans and ("other", sub.MAX_PLANS + 7) in sub.STATE.plans
