"""How a sequence's splits become its output, in both kernel families: DIRECT (one split,
the split kernel writes the output: one launch), COMBINE (the combine kernel merges the
partials: two launches) and FUSED (the program that finishes a sequence last merges its
partials: one launch, a counter per sequence that is never reset).

Each against float32 attention on the same MXFP4 data, with empty and single-token ranges,
more splits than tiles, more splits than the combine kernel holds at once, many consecutive
calls with a fresh input each (leaderboard mode) and a call that raised in between, and
invalid ranges (NaN rows, in every family and merge).
"""
import pytest
import torch

import once_twin
import reference as ref
from conftest import SMALL_BLOCK_N
from test_kernel import assert_matches_exact, emulated_scaled, last_plan

MERGES = {"direct": 1, "combine": 4, "fused": 4}  # merge -> split count


@pytest.fixture(params=["bf16", "scaled"])
def family(request, fresh_plans):
    return fresh_plans.BF16_SCORES if request.param == "bf16" else fresh_plans.SCALED_SCORES


@pytest.fixture(params=list(MERGES))
def merge(request, fresh_plans):
    return getattr(fresh_plans, f"MERGE_{request.param.upper()}"), MERGES[request.param]


def use_launch(sub, monkeypatch, case, block_n, splits, family, merge):
    arch = sub._arch(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    monkeypatch.setitem(sub.MEASURED_DISPATCH, arch, {case: str(sub.Launch(block_n, 4, splits, 1, family, merge))})


def expected(sub, family, data):
    return emulated_scaled(data) if family == sub.SCALED_SCORES else ref.exact_attention(data)


def test_each_merge_matches_exact_attention_with_empty_and_single_token_ranges(fresh_plans, monkeypatch, family,
                                                                               merge):
    """Sequences of 40, 0, 1 and 33 tokens in SMALL_BLOCK_N-token tiles: with 4 splits, splits of one
    tile, empty splits, a one-token split; the empty sequence gives zeros."""
    sub = fresh_plans
    merge_mode, splits = merge
    use_launch(sub, monkeypatch, (4, 40), SMALL_BLOCK_N, splits, family, merge_mode)
    data = ref.generate_input(4, 1, 40, seed=71, kv_lens=[40, 0, 1, 33])
    out = sub.custom_kernel(data)
    plan = last_plan(sub)
    assert (plan.variant.merge, plan.variant.scores, plan.launch.num_splits) == (merge_mode, family, splits)
    assert bool((out[1] == 0).all())
    assert_matches_exact(out, data, expected(sub, family, data))


@pytest.mark.parametrize("merge_name", ["combine", "fused"])
def test_more_splits_than_the_combine_kernel_holds_at_once(fresh_plans, monkeypatch, merge_name):
    """64 splits (the combine kernel takes COMBINE_MAX_CHUNK = 32 at a time, with a running
    rescale across chunks): a long sequence of at most one tile per split and a short one
    whose splits are mostly empty."""
    sub = fresh_plans
    assert 64 > sub.COMBINE_MAX_CHUNK
    merge = getattr(sub, f"MERGE_{merge_name.upper()}")
    use_launch(sub, monkeypatch, (2, 600), SMALL_BLOCK_N, 64, sub.BF16_SCORES, merge)
    data = ref.generate_input(2, 1, 600, seed=72, kv_lens=[600, 17])
    assert_matches_exact(sub.custom_kernel(data), data)


@pytest.mark.parametrize("merge_pass, splits", [((4, 16), 2), ((4, 16), 32), ((16, 2), 8)])
def test_the_fused_merge_in_every_pass_shape(fresh_plans, monkeypatch, merge_pass, splits):
    """FUSED_MERGE_PASS (heads, splits a pass; the 8-warp and 4-warp forms' on gfx950) on a 4-warp launch: 4 head
    groups of 16 splits a pass at 2 splits (each loaded 8 times a pass) and at 32 (two passes); all 16
    heads at 2 splits a pass over 8 (four passes); sequences of one tile per split, shorter, empty and one token."""
    sub = fresh_plans
    monkeypatch.setattr(sub, "FUSED_MERGE_PASS", {4: merge_pass})
    use_launch(sub, monkeypatch, (4, 400), SMALL_BLOCK_N, splits, sub.BF16_SCORES, sub.MERGE_FUSED)
    data = ref.generate_input(4, 1, 400, seed=73, kv_lens=[400, 33, 0, 1])
    out = sub.custom_kernel(data)
    assert sub.fused_merge_constants(last_plan(sub).variant) == {"MERGE_HEADS": merge_pass[0],
                                                                 "MERGE_SPLITS": merge_pass[1]}
    assert bool((out[2] == 0).all())
    assert_matches_exact(out, data)


@pytest.mark.parametrize("merge_name", ["combine", "fused"])
def test_merge_holds_over_consecutive_calls_with_fresh_inputs(fresh_plans, monkeypatch, family, merge_name):
    """Leaderboard mode: a fresh input every call (other lengths too, with the same total
    and the same longest, so that every call runs the same plan and its counters), a call that raised on bad input in
    between; every output right. FUSED: the counters stay multiples of the split count
    (each call adds num_splits to each, so the last program of each is found again)."""
    sub = fresh_plans
    merge_mode = getattr(sub, f"MERGE_{merge_name.upper()}")
    use_launch(sub, monkeypatch, (3, 50), SMALL_BLOCK_N, 4, family, merge_mode)
    plans = set()
    for call in range(5):
        lens = [[50, 0, 50], [50, 20, 30], [1, 49, 50], [50, 45, 5], [20, 50, 30]][call]  # longest 50, total 100
        data = ref.generate_input(3, 1, 50, seed=300 + 13 * call, kv_lens=lens)
        if call == 2:
            q, kv_data, qo_indptr, kv_indptr, config = data
            with pytest.raises(TypeError, match="q must have dtype"):
                sub.custom_kernel((q.float(), kv_data, qo_indptr, kv_indptr, config))
        out = sub.custom_kernel(data)
        assert_matches_exact(out, data, expected(sub, family, data))
        plan = last_plan(sub)
        plans.add(id(plan))
        assert plan.variant.merge == merge_mode
        if merge_mode == sub.MERGE_FUSED:
            assert plan.scratch.count.tolist() == [4 * (call + 1)] * 3  # every split of every call counted
    assert len(plans) == 1


def test_fused_on_hip_waits_for_every_wave_and_stays_right(fresh_plans, monkeypatch, family):
    """On hip the FUSED form waits in every wave for its partial's stores before the
    release (wave_fences; its place in the gfx950 ISA: tests/test_compile_targets.py);
    here, in the interpreter (the wait emulated as what it is there, nothing), the same
    answers and counters. NVIDIA's FUSED form does not wait (bar.sync orders the CTA's
    memory)."""
    sub = fresh_plans
    if torch.cuda.is_available():
        pytest.skip("the hip form's asm builds on AMD only")
    assert not sub.variants_for("sm_90", "cuda", 64, 4, 1, family, sub.MERGE_FUSED)[0].wave_fences
    monkeypatch.setattr(sub, "_platform", lambda device: "hip")
    use_launch(sub, monkeypatch, (4, 40), SMALL_BLOCK_N, 4, family, sub.MERGE_FUSED)
    data = ref.generate_input(4, 1, 40, seed=75, kv_lens=[40, 0, 1, 33])
    out = sub.custom_kernel(data)
    plan = last_plan(sub)
    assert (plan.variant.merge, plan.variant.wave_fences, plan.variant.scores) == (sub.MERGE_FUSED, True, family)
    assert plan.scratch.count.tolist() == [4] * 4
    assert bool((out[1] == 0).all())
    assert_matches_exact(out, data, expected(sub, family, data))


def test_an_invalid_range_is_nan_in_every_family_and_merge(fresh_plans, monkeypatch, family, merge):
    """After a plan's first call (which checks the indptr values on the host) the kernels
    guard alone: a sequence whose range runs backwards or past the cache is a NaN row, the
    others stay right; the SCALED family marks it exactly as the BF16 family does."""
    sub = fresh_plans
    merge_mode, splits = merge
    use_launch(sub, monkeypatch, (3, 40), SMALL_BLOCK_N, splits, family, merge_mode)
    q, kv_data, qo_indptr, kv_indptr, config = ref.generate_input(3, 1, 40, seed=73)
    sub.custom_kernel((q, kv_data, qo_indptr, kv_indptr, config))
    bad = kv_indptr.clone()
    bad[2] = 10  # sequence 1 runs backwards, sequence 2 reads [10, 120)
    out = sub.custom_kernel((q, kv_data, qo_indptr, bad, config))
    assert bool(out[1].isnan().all()) and bool(torch.isfinite(out[[0, 2]]).all())
    past_end = kv_indptr.clone()
    past_end[3] = 10_000
    out = sub.custom_kernel((q, kv_data, qo_indptr, past_end, config))
    assert bool(out[2].isnan().all()) and bool(torch.isfinite(out[:2]).all())
    assert last_plan(sub).variant.merge == merge_mode


def test_the_combine_kernel_in_half_rows(fresh_plans, monkeypatch, family):
    """With fewer than one (sequence, head) program per SM the combine kernel splits each
    head's 512 output dims over two programs (combine_dims): the same answer."""
    sub = fresh_plans
    monkeypatch.setattr(sub, "_num_sms", lambda device: 10_000)
    use_launch(sub, monkeypatch, (4, 40), SMALL_BLOCK_N, 4, family, sub.MERGE_COMBINE)
    data = ref.generate_input(4, 1, 40, seed=74, kv_lens=[40, 0, 1, 33])
    out = sub.custom_kernel(data)
    assert last_plan(sub).combine_dims == sub.COMBINE_DIMS_SPLIT < sub.V_HEAD_DIM
    assert bool((out[1] == 0).all())
    assert_matches_exact(out, data, expected(sub, family, data))


@pytest.mark.parametrize("splits, merge", [(1, "direct"), (2, "combine"), (4, "combine"), (2, "fused"),
                                           (4, "fused")])
def test_the_once_family_merges_direct_combine_and_fused_with_empty_single_token_and_invalid_ranges(
        fresh_plans, splits, merge):
    """The ONCE family (its standard-Triton twin, the Gluon kernel's data flow: tests/once_twin.py)
    in 128-token tiles: one split (DIRECT), two and four (COMBINE and FUSED: splits of one tile,
    empty splits); sequences of 300, 0, 1 and 129 tokens (a partial tile, a one-token one, an
    empty one: zeros); then a range running backwards and one past the cache are NaN rows, the
    others right (FUSED: its counters carried over the calls, multiples of the split count)."""
    sub = fresh_plans
    variant = once_twin.twin_variant(sub.PORTABLE, getattr(sub, f"MERGE_{merge.upper()}"))
    data = ref.generate_input(4, 1, 300, seed=75, kv_lens=[300, 0, 1, 129])
    out, scratch = once_twin.run(data, variant, splits)
    assert bool((out[1] == 0).all())
    assert_matches_exact(out, data, emulated_scaled(data))
    q, kv_data, qo_indptr, kv_indptr, config = data
    bad = kv_indptr.clone()
    bad[2] = 150  # sequence 1 runs backwards, sequence 2 reads [150, 301)
    out, _ = once_twin.run((q, kv_data, qo_indptr, bad, config), variant, splits, scratch)
    assert bool(out[1].isnan().all()) and bool(torch.isfinite(out[[0, 2, 3]]).all())
    past_end = kv_indptr.clone()
    past_end[4] = 10_000
    out, _ = once_twin.run((q, kv_data, qo_indptr, past_end, config), variant, splits, scratch)
    assert bool(out[3].isnan().all()) and bool(torch.isfinite(out[:3]).all())
    if variant.merge == sub.MERGE_FUSED:
        assert scratch.count.tolist() == [3 * splits] * 4  # every split of the three calls counted
