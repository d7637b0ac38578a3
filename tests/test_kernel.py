"""The Triton path of submission.py against exact float32 attention on the same MXFP4 data.

On a CPU the kernels run in Triton's interpreter on small shapes; on a GPU the leaderboard
cases run too, in the dispatched variant and in the portable one. The ONCE family's Gluon
kernel is checked through its standard-Triton twin (tests/once_twin.py), run directly.
"""
import pytest
import torch

import once_twin
import reference as ref
from conftest import SMALL_BLOCK_N

CPU_CASES = [  # (batch, kv_len): a single token, odd lengths, a partial tile, several splits
    (2, 1), (3, 17), (2, 64), (2, 300), (4, 129),
]
VARIANT_CASES = [(2, 1), (2, 64), (4, 129), (2, 300)]  # every loop path: tail only, full only, both
LEADERBOARD = [(4, 1024, 4217), (4, 8192, 4220), (32, 1024, 5412), (32, 8192, 5415),
               (64, 1024, 1357), (64, 8192, 1360), (256, 1024, 9823), (256, 8192, 9826)]
# A correct kernel sits near 2e-3 relative L2 error against float32 attention on the same
# MXFP4 data (bf16 probabilities and output; measured on the CPU cases with the shim's
# round-to-nearest bf16 casts); a uniform 1% scale error gives 1.0e-2.
REL_L2_BOUND = 5e-3


def emulated_scaled(data):
    """Float32 attention with Q as the SCALED family quantizes it (e4m3, one e8m0 scale per
    32 dims per head; submission.quantize_q_reference) on the same MXFP4 data: the family's
    own steps, in float32."""
    import submission
    q_deq = submission.quantize_q_reference(data[0].cpu())[2].to(data[0].device)
    return ref.exact_attention((q_deq, *data[1:]))


def assert_matches_exact(out, data, expected=None):
    """Every element within 8e-3 + 2e-2*|ref| of float32 attention on the MXFP4 data (or
    of `expected`, the float32 emulation of a variant's own quantization steps), and the
    relative L2 error under REL_L2_BOUND (a uniform error the per-element bound lets
    through)."""
    expected = ref.exact_attention(data) if expected is None else expected
    assert out.dtype == torch.bfloat16 and out.shape == expected.shape
    assert bool(torch.isfinite(out).all())
    err = (out.float() - expected).abs()
    bad = err > 8e-3 + 2e-2 * expected.abs()
    assert not bool(bad.any()), f"{int(bad.sum())} elements off, max error {err.max().item():.4g}"
    rel_l2 = (err.norm() / expected.norm()).item()
    assert rel_l2 <= REL_L2_BOUND, f"relative L2 error {rel_l2:.3g} > {REL_L2_BOUND}"


def _device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# (conversion, register pin, split tail, family[, first tile early]) by name: every form a
# dispatch or a fallback can reach. On a CPU every one runs (the inline asm through
# tests/asm_emulation.py); on a GPU those its platform can build.
VARIANT_FORMS = {
    "portable": ("PORTABLE", 0, False, "BF16_SCORES"),
    "portable-tail": ("PORTABLE", 0, True, "BF16_SCORES"),
    "pinned-amd": ("PORTABLE", 1, False, "BF16_SCORES"),
    "gfx950-tail": ("GFX950", 0, True, "BF16_SCORES"),
    "scaled-portable": ("PORTABLE", 0, True, "SCALED_SCORES"),
    "scaled-gfx950": ("GFX950", 0, True, "SCALED_SCORES"),
    # the first tile's loads before Q is quantized, that tile before the loop (EARLY_TILE)
    "scaled-portable-early": ("PORTABLE", 0, True, "SCALED_SCORES", True),
    "scaled-gfx950-early": ("GFX950", 0, True, "SCALED_SCORES", True),
}
GPU_ONLY_ON = {"gfx950": "hip"}  # conversion (CONVERT_NAMES) -> the one platform its asm builds on
PIN_PLATFORM = {1: "hip"}


def skip_unless_builds_here(sub, convert, pin=0):
    """Skip on a GPU whose platform cannot build the conversion's or the pin's asm."""
    platform = sub._platform(_device())
    needs = {GPU_ONLY_ON.get(sub.CONVERT_NAMES[convert]), PIN_PLATFORM.get(pin)} - {None}
    if platform != "cpu" and needs - {platform}:
        pytest.skip(f"{sub.CONVERT_NAMES[convert]} conversion / pin {pin} builds on {needs} only")


def force_variant(sub, monkeypatch, name):
    """Make every plan run the named variant only (no fallback) -> the expected fields."""
    convert, pin, split_tail, family, *early = VARIANT_FORMS[name]
    form = (getattr(sub, convert), pin, split_tail, getattr(sub, family), bool(early))
    skip_unless_builds_here(sub, form[0], pin)
    monkeypatch.setattr(sub, "variants_for", lambda arch, platform, block_n, num_warps, num_stages=1, scores=0,
                        merge=sub.MERGE_COMBINE: [sub.Variant(form[0], pin, block_n, num_warps, num_stages,
                                                              split_tail, form[3], merge, early_tile=form[4])])
    return form


# The ONCE family's Gluon kernel (gfx950 only) through its standard-Triton twin, run directly
# (tests/once_twin.py): its 128-token tiles, the values' conversion by name.
TWIN_FORMS = {"once-portable": "PORTABLE", "once-gfx950": "GFX950"}


def run_form(sub, monkeypatch, name, data):
    """The named form on `data` -> (its output, the float32 attention it must match). A
    VARIANT_FORMS one through custom_kernel, forced and checked to have run; a TWIN_FORMS one
    through the twin, in two splits (COMBINE) where its tiles allow a second one, else one
    (DIRECT), with the Q bytes its split 0 wrote checked against quantize_q_reference."""
    if name not in TWIN_FORMS:
        form = force_variant(sub, monkeypatch, name)
        out = sub.custom_kernel(data)
        assert ran(sub) == form
        return out, expected_for(sub, form, data)
    convert = getattr(sub, TWIN_FORMS[name])
    skip_unless_builds_here(sub, convert)
    splits = 2 if data[4]["kv_seq_len"] > sub.GL_BLOCK_N else 1
    merge = sub.MERGE_COMBINE if splits > 1 else sub.MERGE_DIRECT
    out, scratch = once_twin.run(data, once_twin.twin_variant(convert, merge), splits)
    q8, qs, _ = sub.quantize_q_reference(data[0])
    assert torch.equal(scratch.q8.view(q8.shape), q8) and torch.equal(scratch.qs.view(qs.shape), qs)
    return out, emulated_scaled(data)


def ran(sub):
    """(convert, pin, split_tail, family, early_tile) of the variant the last plan ran."""
    variant = last_plan(sub).variant
    return (variant.convert, variant.pin, variant.split_tail, variant.scores, variant.early_tile)


def expected_for(sub, form, data):
    return emulated_scaled(data) if form[3] != sub.BF16_SCORES else ref.exact_attention(data)


def last_plan(sub):
    return next(reversed(sub.STATE.plans.values()))


@pytest.mark.parametrize("batch, kv_len", CPU_CASES)
def test_matches_exact_attention_small(fresh_plans, batch, kv_len):
    data = ref.generate_input(batch, 1, kv_len, seed=100 + kv_len)
    out = fresh_plans.custom_kernel(data)
    assert_matches_exact(out, data)
    plan = last_plan(fresh_plans)
    assert plan.variant == plan.variants[0]  # no fallback
    if kv_len >= 16:  # below that, MXFP4 itself misses the runner's rule (docs/harness.md)
        ok, message = ref.check_implementation(data, out)
        assert ok, message


@pytest.mark.parametrize("name", list(VARIANT_FORMS) + list(TWIN_FORMS))
@pytest.mark.parametrize("batch, kv_len", VARIANT_CASES)
def test_every_variant_matches_exact_attention(fresh_plans, monkeypatch, name, batch, kv_len):
    """Each conversion, pin and loop structure a dispatch or a fallback can reach, and the
    Gluon kernel's data flow (its twin), in one split and several (the launch gives the
    300-token case 2; the twin two for more than one tile). The scales trimmed to
    (total_kv, 18) and the last sequence's last tile ending past the buffer's last row: a
    tail load that is not masked reads outside the tensors (the interpreter's bounds guard,
    tests/conftest.py; on a GPU, compute-sanitizer)."""
    data = ref.generate_input(batch, 1, kv_len, seed=200 + kv_len, scale_layout="trimmed")
    packed, scales = data[1]["mxfp4"]
    assert scales.shape[0] == packed.shape[0] == packed.untyped_storage().nbytes() // 288
    out, expected = run_form(fresh_plans, monkeypatch, name, data)
    assert_matches_exact(out, data, expected)


def test_several_splits_and_tiles_per_split_are_exercised(fresh_plans):
    data = ref.generate_input(2, 1, 300, seed=1)
    fresh_plans.custom_kernel(data)
    launch = last_plan(fresh_plans).launch
    tiles = -(-300 // launch.block_n)
    assert launch.num_splits > 1 and tiles > launch.num_splits  # a combine and a multi-tile loop


@pytest.mark.parametrize("padding", [None, 0xFF, 0x00, "random"])
def test_padded_scales_give_the_trimmed_answer(fresh_plans, padding):
    """The padded scale buffer (24 columns, rows rounded up to 256, padding of any byte)
    gives bit for bit the answer of the trimmed (total_kv, 18) one."""
    trimmed = ref.generate_input(3, 1, 70, seed=11, scale_layout="trimmed")
    data = ref.generate_input(3, 1, 70, seed=11, scale_layout="padded", scale_padding=padding)
    assert data[1]["mxfp4"][1].shape[1] == 24 and trimmed[1]["mxfp4"][1].shape[1] == 18
    assert torch.equal(fresh_plans.custom_kernel(data), fresh_plans.custom_kernel(trimmed))


@pytest.mark.parametrize("name", list(VARIANT_FORMS) + list(TWIN_FORMS))
def test_e8m0_bytes_0_and_255_as_the_reference(fresh_plans, monkeypatch, name):
    """Byte 255 is NaN in the reference: the sequence holding it is NaN, the others are
    right. Byte 0 is 2^-127: the gfx950 conversion gives exactly that; the portable one
    underflows value * 2^-127 to 0, far below any score's or output's resolution, which
    matches float32 attention within the tolerance. Every conversion and family."""
    data = ref.generate_input(3, 1, 50, seed=17)
    scales = data[1]["mxfp4"][1].view(torch.uint8)
    scales[5, 3] = 0  # sequence 0: one block of one token
    scales[60:70, :18] = 0  # sequence 1: whole tokens
    scales[120, 17] = 255  # sequence 2: one (rope) block of one token
    out, expected = run_form(fresh_plans, monkeypatch, name, data)
    assert bool(expected[2].isnan().all()) and bool(out[2].isnan().all())
    err = (out[:2].float() - expected[:2]).abs()
    assert bool((err <= 8e-3 + 2e-2 * expected[:2].abs()).all())


def test_tile_shapes_agree(fresh_plans, monkeypatch):
    """The same answer from small (SMALL_BLOCK_N) and 64-token tiles (within rounding: the
    order of the float32 sums differs)."""
    data = ref.generate_input(2, 1, 150, seed=15)
    arch = fresh_plans._arch(data[0].device)
    outs = []
    for block_n in (SMALL_BLOCK_N, 64):
        monkeypatch.setitem(fresh_plans.MEASURED_DISPATCH, arch, {(2, 150): f"bf16 t{block_n} w4 s2 st1 combine"})
        fresh_plans.STATE.plans.clear()
        outs.append(fresh_plans.custom_kernel(data).float())
    assert torch.allclose(outs[1], outs[0], atol=4e-3, rtol=1e-2)


def test_random_variable_lengths(fresh_plans):
    gen = torch.Generator().manual_seed(5)
    lens = torch.randint(1, 90, (5,), generator=gen).tolist()
    data = ref.generate_input(5, 1, max(lens), seed=12, kv_lens=lens)
    assert_matches_exact(fresh_plans.custom_kernel(data), data)


def error_summary(out, expected):
    """(max abs error, share of elements outside 8e-3 + 2e-2 |expected|)."""
    err = (out.float() - expected).abs()
    return err.max().item(), (err > 8e-3 + 2e-2 * expected.abs()).float().mean().item()


@pytest.mark.parametrize("batch, kv_len, seed", [(2, 17, 1), (2, 70, 2), (3, 300, 3), (2, 1024, 4)])
def test_scaled_family_is_no_less_accurate_than_the_runners_a8w8(fresh_plans, monkeypatch, batch, kv_len, seed):
    """Against exact float32 attention on the same MXFP4 data, quantizing Q to e4m3 (per 32
    dims) costs less than the runner's own a8w8 math (Q and KV to fp8 per tensor): its max
    error and its share of elements outside the tight tolerance are no larger."""
    force_variant(fresh_plans, monkeypatch, "scaled-portable")
    data = ref.generate_input(batch, 1, kv_len, seed=seed)
    exact = ref.exact_attention(data)
    scaled_max, scaled_share = error_summary(fresh_plans.custom_kernel(data), exact)
    a8w8_max, a8w8_share = error_summary(ref.emulated_a8w8(data), exact)
    assert scaled_max <= a8w8_max and scaled_share <= a8w8_share, (scaled_max, scaled_share, a8w8_max, a8w8_share)


@pytest.fixture(params=[1, 4], ids=["1-split", "4-splits"])
def num_splits(request, fresh_plans, monkeypatch):
    """Run the test's (3, 40) case in one split (output written by the split kernel) and in
    four (two of them empty: the combine kernel merges)."""
    arch = fresh_plans._arch(_device())
    monkeypatch.setitem(fresh_plans.MEASURED_DISPATCH, arch, {(3, 40): str(fresh_plans.Launch(SMALL_BLOCK_N, 4, request.param))})
    return request.param


def test_empty_sequence_gives_zeros_and_others_are_right(fresh_plans, num_splits):
    data = ref.generate_input(3, 1, 40, seed=13, kv_lens=[40, 0, 7])
    out = fresh_plans.custom_kernel(data)
    assert last_plan(fresh_plans).launch.num_splits == num_splits
    assert bool((out[1] == 0).all())
    assert_matches_exact(out, data)


def test_invalid_indptr_values_give_nan_not_garbage(fresh_plans, num_splits):
    """After a plan's first call (which checks values on the host) the kernels guard alone."""
    q, kv_data, qo_indptr, kv_indptr, config = ref.generate_input(3, 1, 40, seed=14)
    fresh_plans.custom_kernel((q, kv_data, qo_indptr, kv_indptr, config))
    assert last_plan(fresh_plans).launch.num_splits == num_splits
    bad = kv_indptr.clone()
    bad[2] = 10  # sequence 1 would run backwards, sequence 2 reads [10, 120)
    out = fresh_plans.custom_kernel((q, kv_data, qo_indptr, bad, config))
    assert bool(out[1].isnan().all()) and bool(torch.isfinite(out[[0, 2]]).all())
    past_end = kv_indptr.clone()
    past_end[3] = 10_000
    out = fresh_plans.custom_kernel((q, kv_data, qo_indptr, past_end, config))
    assert bool(out[2].isnan().all()) and bool(torch.isfinite(out[:2]).all())
    bad_qo = qo_indptr.clone()
    bad_qo[1] = 0  # sequence 0 would own no query row
    out = fresh_plans.custom_kernel((q, kv_data, bad_qo, kv_indptr, config))
    assert bool(out[0].isnan().all())


def test_unaligned_packed_rows_are_copied_not_misread(fresh_plans):
    """Rows that do not start on 4-byte boundaries (a view into a wider buffer) cannot be
    read as words: the call copies them, warns once, and is still right."""
    data = ref.generate_input(2, 1, 33, seed=16)
    packed, scales = data[1]["mxfp4"]
    wide = torch.zeros((packed.shape[0], 1, 290), dtype=torch.uint8, device=packed.device)
    wide[:, :, 1:289] = packed.view(torch.uint8)
    kv_data = {**data[1], "mxfp4": (wide[:, :, 1:289], scales)}
    with pytest.warns(RuntimeWarning, match="not 4-byte aligned"):
        fresh_plans.STATE.warned.discard("unaligned")
        out = fresh_plans.custom_kernel((data[0], kv_data, *data[2:]))
    assert_matches_exact(out, data)


def test_consecutive_calls_fresh_data_and_outputs_kept(fresh_plans):
    first = ref.generate_input(2, 1, 50, seed=21)
    second = ref.generate_input(2, 1, 50, seed=22)
    out1 = fresh_plans.custom_kernel(first)
    kept = out1.clone()
    out2 = fresh_plans.custom_kernel(second)
    assert out2.data_ptr() != out1.data_ptr()
    assert torch.equal(out1, kept)  # call 2 did not overwrite the result of call 1
    assert_matches_exact(out1, first)
    assert_matches_exact(out2, second)


def test_fresh_inputs_every_call_like_leaderboard_mode(fresh_plans):
    calls = 100 if torch.cuda.is_available() else 4
    batch, kv_len = (32, 1024) if torch.cuda.is_available() else (2, 40)
    for i in range(calls):
        data = ref.generate_input(batch, 1, kv_len, seed=1000 + 13 * i)
        out = fresh_plans.custom_kernel(data)
        ok, message = ref.check_implementation(data, out)
        assert ok, f"call {i}: {message}"
    assert_matches_exact(out, data)


def test_plan_cache_is_bounded_and_holds_no_tensors_of_the_call(fresh_plans):
    for i in range(fresh_plans.MAX_PLANS + 5):
        fresh_plans._plan(("probe", i), object)
    assert len(fresh_plans.STATE.plans) == fresh_plans.MAX_PLANS
    fresh_plans.STATE.plans.clear()
    data = ref.generate_input(2, 1, 20, seed=3)
    fresh_plans.custom_kernel(data)
    plan = last_plan(fresh_plans)
    inputs = {id(t) for t in (data[0], data[2], data[3], *data[1]["mxfp4"])}
    assert not inputs & {id(v) for v in vars(plan).values()}


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_len, seed", LEADERBOARD)
def test_leaderboard_cases_on_gpu(fresh_plans, batch, kv_len, seed):
    data = ref.generate_input(batch, 1, kv_len, seed)
    first = fresh_plans.custom_kernel(data)
    moved = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in data[:1]) + data[1:]
    second = fresh_plans.custom_kernel(moved)  # q at a new address
    native = fresh_plans.NATIVE_CONVERT.get(fresh_plans._arch(data[0].device))
    assert last_plan(fresh_plans).variant.convert == (native if native is not None else fresh_plans.PORTABLE)
    for out in (first, second):
        assert_matches_exact(out, data)
        ok, message = ref.check_implementation(data, out)
        assert ok, message


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_len, seed", [LEADERBOARD[0], LEADERBOARD[5]])
def test_portable_conversion_on_gpu(fresh_plans, monkeypatch, batch, kv_len, seed):
    """The fallbacks the dispatch can reach are right on the GPU too, not just in the
    interpreter (which has been right where the GPU was wrong before)."""
    data = ref.generate_input(batch, 1, kv_len, seed)
    native = fresh_plans.custom_kernel(data)
    monkeypatch.setenv("MLA_CONVERT", "portable")
    fresh_plans.STATE.plans.clear()
    portable = fresh_plans.custom_kernel(data)
    assert last_plan(fresh_plans).variant.convert == fresh_plans.PORTABLE
    for out in (native, portable):
        assert_matches_exact(out, data)


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_len, seed", LEADERBOARD)
def test_scaled_family_on_gpu(fresh_plans, monkeypatch, batch, kv_len, seed):
    """The SCALED family compiled (here the portable twin of the gfx950 variant: on sm_90
    Triton emulates dot_scaled) matches its own float32 emulation and the runner's rule."""
    form = force_variant(fresh_plans, monkeypatch, "scaled-portable")
    data = ref.generate_input(batch, 1, kv_len, seed)
    out = fresh_plans.custom_kernel(data)
    assert ran(fresh_plans) == form
    assert_matches_exact(out, data, emulated_scaled(data))
    ok, message = ref.check_implementation(data, out)
    assert ok, message


# The first pass's p = 2^276 overflows to inf by design (that is what sends the program to its
# second pass); on a GPU exp2 gives inf silently, the interpreter's numpy warns (pytest.ini).
@pytest.mark.parametrize("name", list(TWIN_FORMS))
def test_once_family_second_pass_when_a_later_score_dwarfs_the_first_tiles(fresh_plans, monkeypatch, name):
    """The ONCE family takes p against each token group's first valid tile maximum and never
    rescales in the loop; ten tokens of sequence 0's second tile with every code +6 at block
    scale 2^5 score ~192 sum(q) above the first tile's maximum, ~4600 for a head whose Q
    sums to 24: p = 2^(4600 sm_scale log2 e) = 2^276 would overflow float32, so the
    program runs its tiles again from the true maximum: the output still matches float32
    attention on its own e4m3 Q (the twin, in two splits: split 0 holds both tiles)."""
    data = ref.generate_input(2, 1, 300, seed=23)
    packed, scales = data[1]["mxfp4"]
    packed.view(torch.uint8)[200:210] = 0x77
    scales.view(torch.uint8)[200:210, :18] = 132
    out, expected = run_form(fresh_plans, monkeypatch, name, data)
    q_deq = fresh_plans.quantize_q_reference(data[0].cpu())[2][0]
    overflowing = q_deq.float().sum(dim=1) * 192 * data[4]["sm_scale"] * 1.4427 > 128  # p past 2^128
    assert bool(overflowing.any())
    assert_matches_exact(out, data, expected)


@pytest.mark.gpu
@pytest.mark.parametrize("batch, kv_len, seed", [LEADERBOARD[0], LEADERBOARD[2], LEADERBOARD[6]])
def test_once_twin_on_gpu(fresh_plans, batch, kv_len, seed):
    """The ONCE family's standard-Triton twin compiled (NVIDIA: Triton emulates dot_scaled;
    not fast, its accumulators spill: a check of the Gluon kernel's data flow, not a path the
    dispatch takes there) in once_launch's split count and merge, against its float32
    emulation and the runner's rule."""
    launch = fresh_plans.once_launch(batch, kv_len, fresh_plans._num_sms(_device()))
    data = ref.generate_input(batch, 1, kv_len, seed)
    out, _ = once_twin.run(data, once_twin.twin_variant(fresh_plans.PORTABLE, launch.merge), launch.num_splits)
    assert_matches_exact(out, data, emulated_scaled(data))
    ok, message = ref.check_implementation(data, out)
    assert ok, message
