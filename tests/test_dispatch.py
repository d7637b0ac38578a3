"""The dispatch: the measured table's entries are valid launches, choose() follows the table
over the prediction, and the predicted launch keeps its documented invariants."""
import pytest
import torch

import submission as sub

CPU = torch.device("cpu")
LEADERBOARD_CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192),
                     (256, 1024), (256, 8192)]
BLOCK_NS, WARPS, STAGES = {16, 32, 64, 128}, {4, 8}, {1, 2}


def is_power_of_two(value):
    return isinstance(value, int) and value >= 1 and value & (value - 1) == 0


def assert_valid_choice(choice):
    assert choice == ("aiter",) or (choice[0] == "triton" and len(choice) in (5, 6, 7)), choice
    if choice[0] == "triton":
        launch = sub.make_launch(*choice[1:])
        assert launch.merge in sub.MERGE_NAMES and (launch.merge == sub.MERGE_DIRECT) == (launch.num_splits == 1)
        assert launch.block_n in BLOCK_NS and launch.num_warps in WARPS and launch.num_stages in STAGES, choice
        assert launch.scores in (sub.BF16_SCORES, sub.SCALED_SCORES), choice
        assert is_power_of_two(launch.num_splits), choice


def test_measured_table_entries_are_valid_launches_with_provenance():
    assert set(sub.MEASURED_DISPATCH) <= set(sub.MEASURED_ON)
    for arch, table in sub.MEASURED_DISPATCH.items():
        assert table, arch
        for (batch, kv_len), choice in table.items():
            assert isinstance(batch, int) and isinstance(kv_len, int) and batch >= 1 and kv_len >= 1
            assert_valid_choice(choice)


@pytest.fixture
def on_arch(monkeypatch):
    def use(arch, platform, num_sms):
        monkeypatch.setattr(sub, "_arch", lambda device: arch)
        monkeypatch.setattr(sub, "_platform", lambda device: platform)
        monkeypatch.setattr(sub, "_num_sms", lambda device: num_sms)
        sub._cached_prediction.cache_clear()
    yield use
    sub._cached_prediction.cache_clear()


def full(choice):
    """A table's choice with every SplitLaunch field (5-tuples are the BF16 family with the
    default merge)."""
    return choice if choice[0] != "triton" else ("triton", *sub.make_launch(*choice[1:]))


def test_choose_follows_the_measured_table(on_arch):
    on_arch("sm_90", "cuda", 132)
    for case, choice in sub.MEASURED_DISPATCH["sm_90"].items():
        assert sub.choose(*case, CPU) == full(choice)


def test_choose_predicts_where_nothing_was_measured(on_arch, monkeypatch):
    """gfx950: the SCALED family (128-token tiles, 8 warps, 2 stages where the grid has two
    tiles per CU, else 64-token tiles, 4 warps, 2 stages); sm_90 without its table: the BF16
    family's default launch."""
    on_arch("gfx950", "hip", 256)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "gfx950", {(4, 1024): ("triton", 32, 8, 2, 1)})
    assert sub.choose(4, 1024, CPU) == full(("triton", 32, 8, 2, 1))
    assert sub.choose(4, 8192, CPU) == ("triton", 64, 4, 64, 2, sub.SCALED_SCORES, sub.MERGE_COMBINE)
    assert sub.choose(256, 8192, CPU) == ("triton", 128, 8, 2, 2, sub.SCALED_SCORES, sub.MERGE_COMBINE)
    on_arch("sm_90", "cuda", 132)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "sm_90", {})
    assert sub.choose(256, 8192, CPU) == ("triton", *sub.default_launch(256, 8192, 132))


def test_a_failed_scaled_variant_sends_the_prediction_to_the_bf16_family(on_arch, monkeypatch):
    on_arch("gfx950", "hip", 256)
    monkeypatch.setattr(sub, "FAILED_VARIANTS", set())
    scaled = sub.scaled_launch(256, 8192, 256)
    sub.FAILED_VARIANTS.add(sub.variants_for("gfx950", "hip", scaled.block_n, scaled.num_warps,
                                             scaled.num_stages, sub.SCALED_SCORES, scaled.merge)[0])
    assert sub.choose(256, 8192, CPU) == ("triton", *sub.default_launch(256, 8192, 256))


def test_hip_runs_the_bf16_family_in_one_stage_only(on_arch, monkeypatch):
    """Triton 3.6's AMD pipeliner rejects the BF16 family's impure inline asm in a
    pipelined loop; the SCALED family's asm is pure and pipelines."""
    on_arch("gfx950", "hip", 256)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "gfx950", {(4, 1024): ("triton", 64, 4, 16, 2),
                                                          (4, 8192): ("triton", 128, 8, 16, 2, 1)})
    assert sub.choose(4, 1024, CPU) == full(("triton", 64, 4, 16, 1))
    assert sub.choose(4, 8192, CPU) == full(("triton", 128, 8, 16, 2, 1))


def test_the_tuner_offers_128_token_tiles_on_nvidia_only(on_arch):
    """128-token tiles (Q read from shared memory half as often per token; the H200's table
    takes them for (4, 8192) and (32, 1024)) are tuning candidates on NVIDIA, 4 and 8 warps
    with their FUSED twins; on hip, where the BF16 family is a fallback, none."""
    on_arch("sm_90", "cuda", 132)
    wide = {c[1:4] + c[6:7] for c in sub.tune_candidates(4, 8192, CPU) if c[0] == "triton" and c[1] == 128}
    assert {(128, 4, 32, 1), (128, 8, 32, 1), (128, 8, 32, 2)} <= wide
    on_arch("gfx950", "hip", 256)
    assert not [c for c in sub.tune_candidates(4, 8192, CPU) if c[0] == "triton" and c[1] == 128 and c[5] == 0]


def test_the_fused_merge_loads_up_to_four_splits_at_once_in_the_bf16_family():
    """fused_chunk: the FUSED merge's splits per round trip (up to 4); 1 for the SCALED
    family (its 8-warp form spills on gfx950 with more) and for the merges that compile the
    FUSED code away."""
    fused = sub.Variant(sub.PTX_SM90, sub.EVEN_ODD, 0, 64, 4, 1, merge=sub.MERGE_FUSED)
    assert [sub.fused_chunk(fused, splits) for splits in (2, 4, 8, 64)] == [2, 4, 4, 4]
    assert sub.fused_chunk(fused._replace(scores=sub.SCALED_SCORES), 4) == 1
    assert sub.fused_chunk(fused._replace(merge=sub.MERGE_COMBINE), 4) == 1


@pytest.mark.parametrize("num_sms", [4, 132, 256])
@pytest.mark.parametrize("batch, kv_len", LEADERBOARD_CASES + [(2, 17), (3, 300)])
def test_default_launch_invariants(batch, kv_len, num_sms):
    """32- or 64-token tiles (16-token NATURAL tiles were wrong on the H200), 4 warps, a
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
def test_make_launch_gives_each_split_count_its_merge(fields, merge):
    assert sub.make_launch(*fields).merge == merge


@pytest.mark.parametrize("fields", [(64, 4, 3), (48, 4, 2), (64, 3, 2), (64, 4, 0), (64, 4, 2, 0),
                                    (64, 4, 2, 1, 7), (64, 4, 2, 1, 0, 9), (64, "4", 2)])
def test_make_launch_rejects_what_no_kernel_runs(fields):
    with pytest.raises(ValueError, match="a Triton choice is"):
        sub.make_launch(*fields)
