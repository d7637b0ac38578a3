"""The fallback: a kernel variant that fails to build, fit or launch, or disagrees with float32
attention on the self-check (synthetic input) or on the check of the first call's own output,
is dropped with one warning and the next variant runs; a host-side bug, an out-of-memory
error and a device fault are NOT a fallback (they propagate, naming the variant); every
variant failing is a clear error.

The failures are injected here so they run in the CPU interpreter and on a GPU:
* a build failure: 24-token tiles (tl.arange needs a power of two), rejected while the
  kernel is built, after every host-side step succeeded;
* wrong primitives: stand-ins for the gfx950 conversion (_word_pairs_gfx950) built from the
  portable one (the same exact-value output convention, no asm: they build on any GPU),
  each wrong by one small realistic defect (two bytes of a word swapped, one code's sign,
  one block exponent), beside the unmodified stand-in as the control that must pass.
"""
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

import once_twin
import reference as ref
from conftest import ROOT, SMALL_BLOCK_N
from test_kernel import emulated_scaled
from submission import _bf16_bits, _bf16_halves, _quantize_e4m3_blocks, _word_pairs_portable

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@triton.jit
def _times_2_pow_14(pair):
    """A bf16 pair in the portable convention (x 2^-14) in the gfx950 one (exact values)."""
    low, high = _bf16_halves(pair)
    return _bf16_bits(low.to(tl.float32) * 16384.0) | (_bf16_bits(high.to(tl.float32) * 16384.0) << 16)


@triton.jit
def _stand_in(words, scale, DEFECT: tl.constexpr):
    """The gfx950 primitive's contract (_word_pairs_gfx950: scale a float32 2^(k - 127) for
    e8m0 byte k) from portable parts; DEFECT 0 is right, 1 swaps bytes 1 and 2 of every
    word, 2 reads code 3 (1.5) as -1.5 in the low nibble of byte 0, 3 doubles the scale of
    blocks whose e8m0 byte is a multiple of 7."""
    if DEFECT == 2:
        words = words ^ tl.where((words & 0xF) == 3, 0x8, 0)
    if DEFECT == 3:
        scale_bytes = (scale.to(tl.int32, bitcast=True) >> 23) & 0xFF
        scale = tl.where(scale_bytes % 7 == 0, scale * 2.0, scale)
    r0 = _times_2_pow_14(_word_pairs_portable(words, scale, 0, 0))
    r1 = _times_2_pow_14(_word_pairs_portable(words, scale, 1, 0))
    r2 = _times_2_pow_14(_word_pairs_portable(words, scale, 2, 0))
    r3 = _times_2_pow_14(_word_pairs_portable(words, scale, 3, 0))
    if DEFECT == 1:
        return r0, r2, r1, r3
    return r0, r1, r2, r3


@triton.jit
def _right(words, scale, PURE: tl.constexpr):
    return _stand_in(words, scale, 0)


@triton.jit
def _bytes_swapped(words, scale, PURE: tl.constexpr):
    return _stand_in(words, scale, 1)


@triton.jit
def _one_sign(words, scale, PURE: tl.constexpr):
    return _stand_in(words, scale, 2)


@triton.jit
def _one_exponent(words, scale, PURE: tl.constexpr):
    return _stand_in(words, scale, 3)


@triton.jit
def _quantize_one_exponent_up(q, ROWS: tl.constexpr, BLOCKS: tl.constexpr):
    """Wrong on purpose, and nearly invisible in the output: the real quantizer, then every
    block's exponent one higher and its e4m3 values halved (the same numbers but for the
    smallest ones, which lose their last bit): not the bytes of quantize_q_reference."""
    q8, scales = _quantize_e4m3_blocks(q, ROWS, BLOCKS)
    return (q8.to(tl.float32) * 0.5).to(tl.float8e4nv), scales + 1


WRONG_PRIMITIVES = {"bytes-swapped": _bytes_swapped, "one-sign": _one_sign, "one-exponent": _one_exponent}


def forget_compiled_kernels(module):
    """Make Triton rebuild the module's kernels on their next launch: a compiled kernel is
    cached by its arguments, not by the jit functions it calls, so a stand-in monkeypatched
    into the module would otherwise never run on a GPU. (The interpreter runs the source.)"""
    for value in vars(module).values():
        if isinstance(value, triton.runtime.JITFunction):
            value.hash = None
            if hasattr(value, "device_caches"):
                value.device_caches.clear()


@pytest.fixture
def sub(fresh_plans, monkeypatch):
    monkeypatch.setattr(fresh_plans.STATE, "failed_variants", set())
    monkeypatch.setattr(fresh_plans.STATE, "warned", set())
    forget_compiled_kernels(fresh_plans)
    yield fresh_plans
    monkeypatch.undo()
    forget_compiled_kernels(fresh_plans)


def use_variants(sub, monkeypatch, first):
    """Make every plan try `first` (a function of the real list) before the real ones."""
    real = sub.variants_for
    monkeypatch.setattr(sub, "variants_for", lambda *args: [first(real(*args))] + real(*args))


def another_tile(variant):
    """`variant` in another small tile (SMALL_BLOCK_N, or twice that where it has that one): a
    form of its own before the real ones."""
    return variant._replace(block_n=SMALL_BLOCK_N if variant.block_n != SMALL_BLOCK_N else 2 * SMALL_BLOCK_N)


def the_plan(sub):
    return next(iter(sub.STATE.plans.values()))


def assert_right(out, data):
    expected = ref.exact_attention(data)
    assert bool(((out.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())


def synthetic_like():
    """(q, packed, scales) of a real-looking call, for self_check to lay its input out like."""
    q, kv_data, *_ = ref.generate_input(2, 1, 64, seed=50)
    packed, scales = kv_data["mxfp4"]
    return q, packed.view(torch.uint8), scales.view(torch.uint8)


def passes_self_check(sub, variant, num_splits=2):
    return sub.self_check(variant, num_splits, synthetic_like(), 1 / 24, sub.V_HEAD_DIM) is None


def gfx950_stand_in_variant(sub, real):
    return real[0]._replace(convert=sub.GFX950, pin=0, split_tail=True)


def test_a_variant_that_fails_to_build_falls_back_with_one_warning(sub, monkeypatch):
    use_variants(sub, monkeypatch, lambda real: real[-1]._replace(block_n=24))
    data = ref.generate_input(2, 1, 40, seed=51)
    with pytest.warns(RuntimeWarning, match="kernel variant failed.*24-token tiles.*KernelLaunchError") as record:
        out = sub.custom_kernel(data)
        sub.custom_kernel(data)
    assert len([w for w in record if "kernel variant failed" in str(w.message)]) == 1
    plan = the_plan(sub)
    assert plan.variant == plan.variants[1]  # the first real variant
    assert_right(out, data)


def test_a_host_side_bug_propagates_instead_of_falling_back(sub, monkeypatch):
    """A KeyError in the launcher's own Python is a bug to see, not a variant to drop."""
    monkeypatch.setattr(sub, "LOG2_SHIFT", {})
    with pytest.raises(KeyError):
        sub.custom_kernel(ref.generate_input(2, 1, 40, seed=55))
    assert not sub.STATE.failed_variants


def raises_from_the_toolchain(exc):
    """A function that raises `exc` from a frame inside Triton's AMD backend, as a failing
    pass (AssertionError) or the linker (subprocess.CalledProcessError) would."""
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "amd", "compiler.py")
    namespace = {}
    exec(compile("def make_hsaco(exc):\n    raise exc\n", path, "exec"), namespace)
    return lambda: namespace["make_hsaco"](exc)


class BuildsBadly:
    """The split kernel, except that a launch of the first variant's conversion fails to
    build with a non-Triton exception raised inside Triton's backend."""

    def __init__(self, real, convert, exc):
        self.real, self.convert, self.exc, self.__name__ = real, convert, exc, "_bf16_split_kernel"
        self.arg_names = real.arg_names  # read by _TritonPlan._replayable

    def __getitem__(self, grid):
        def launch(*args, **constants):
            if constants["CONVERT"] == self.convert:
                raises_from_the_toolchain(self.exc)()
            return self.real[grid](*args, **constants)
        return launch


@pytest.mark.parametrize("exc", [AssertionError("LLVM ERROR: cannot select"),
                                 subprocess.CalledProcessError(1, ["ld.lld", "-shared"])],
                         ids=["pass-assertion", "linker"])
def test_a_compiler_failure_of_any_type_falls_back(sub, monkeypatch, exc):
    """A build that fails in Triton's backend with an exception that is not a Triton error
    (an assertion of a pass, the linker's CalledProcessError) is a variant that failed to
    build: one warning and the next variant."""
    use_variants(sub, monkeypatch, lambda real: real[0]._replace(convert=sub.GFX950, split_tail=True))
    monkeypatch.setattr(sub, "_bf16_split_kernel", BuildsBadly(sub._bf16_split_kernel, sub.GFX950, exc))
    data = ref.generate_input(2, 1, 40, seed=57)
    with pytest.warns(RuntimeWarning, match=f"kernel variant failed.*KernelLaunchError: {type(exc).__name__}"):
        out = sub.custom_kernel(data)
    plan = the_plan(sub)
    assert plan.variant == plan.variants[1]  # the first real variant
    assert_right(out, data)


def test_a_same_typed_error_from_our_own_code_still_propagates(sub, monkeypatch):
    """The same AssertionError raised by our own launcher code (not inside the toolchain)
    is a bug to see."""
    class Broken:
        __name__ = "_bf16_split_kernel"

        def __getitem__(self, grid):
            def launch(*args, **constants):
                raise AssertionError("our own bug")
            return launch
    monkeypatch.setattr(sub, "_bf16_split_kernel", Broken())
    with pytest.raises(AssertionError, match="our own bug"):
        sub.custom_kernel(ref.generate_input(2, 1, 40, seed=58))
    assert not sub.STATE.failed_variants


def test_every_variant_failing_is_a_clear_error(sub, monkeypatch):
    monkeypatch.setattr(sub, "variants_for", lambda *args: [sub.Variant(sub.PORTABLE, 0, 24, 4, 1)])
    with pytest.warns(RuntimeWarning), pytest.raises(RuntimeError, match="no kernel variant could run"):
        sub.custom_kernel(ref.generate_input(2, 1, 40, seed=52))


def test_the_right_stand_in_passes_and_runs_without_fallback(sub, monkeypatch):
    """The control: the stand-in without a defect is a right gfx950 primitive."""
    monkeypatch.setattr(sub, "_word_pairs_gfx950", _right)
    use_variants(sub, monkeypatch, lambda real: gfx950_stand_in_variant(sub, real))
    data = ref.generate_input(2, 1, 70, seed=53)
    out = sub.custom_kernel(data)
    plan = the_plan(sub)
    assert plan.variant == plan.variants[0] and not sub.STATE.failed_variants
    assert_right(out, data)


@pytest.mark.parametrize("defect", list(WRONG_PRIMITIVES))
def test_a_slightly_wrong_native_primitive_is_caught_by_the_self_check(sub, monkeypatch, defect):
    monkeypatch.setattr(sub, "_word_pairs_gfx950", WRONG_PRIMITIVES[defect])
    use_variants(sub, monkeypatch, lambda real: gfx950_stand_in_variant(sub, real))
    data = ref.generate_input(2, 1, 70, seed=53)
    with pytest.warns(RuntimeWarning, match="gfx950 conversion.*SelfCheckError.*wrong answers"):
        out = sub.custom_kernel(data)
    plan = the_plan(sub)
    assert plan.variants[0] in sub.STATE.failed_variants and plan.variant == plan.variants[1]  # the first real one
    assert_right(out, data)
    sub.STATE.plans.clear()  # later plans skip the failed variant without building it again
    sub.custom_kernel(ref.generate_input(2, 1, 70, seed=54))
    assert the_plan(sub).variant == the_plan(sub).variants[1]


@pytest.mark.parametrize("factor, passes", [(1.0, True), (1.005, True), (1.03, False), (0.97, False)])
def test_self_check_tolerance_is_the_stated_one(sub, monkeypatch, factor, passes):
    """A kernel whose output is off by a uniform 3% (1.5 x the relative tolerance) fails
    the self-check; 0.5% (a quarter of it) passes."""
    real = sub._attention

    def scaled(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, *rest):
        real(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, *rest)
        out.mul_(factor)

    monkeypatch.setattr(sub, "_attention", scaled)
    variant = sub.Variant(sub.PORTABLE, sub.PIN_BY_PLATFORM[sub._platform(DEVICE)], 32, 4, 1)
    assert passes_self_check(sub, variant) is passes


def test_the_fallback_order_is_native_pinned_then_plain(sub):
    """The declared order: the native conversion (in its split-tail loop on gfx950), the
    portable one with the register pin (AMD's v_mov_b32), and on hip the plainest form (no
    asm, 16 tokens); on NVIDIA and a CPU the portable one alone."""
    expected = {
        ("gfx950", "hip"): [(sub.GFX950, 0, 64, True), (sub.PORTABLE, 1, 64, False),
                            (sub.PORTABLE, 0, sub.PLAIN_BLOCK_N, False)],
        ("sm_90", "cuda"): [(sub.PORTABLE, 0, 64, False)],
        ("cpu", "cpu"): [(sub.PORTABLE, 0, 64, False)],
    }
    for (arch, platform), order in expected.items():
        got = [(v.convert, v.pin, v.block_n, v.split_tail) for v in sub.variants_for(arch, platform, 64, 4)]
        assert got == order, arch
    # the SCALED family: its native form, the same at one stage, then the BF16 family's order
    scaled = sub.variants_for("gfx950", "hip", 128, 8, 2, sub.SCALED_SCORES)
    assert [(v.scores, v.convert, v.block_n, v.num_warps, v.num_stages) for v in scaled[:2]] == [
        (sub.SCALED_SCORES, sub.GFX950, 128, 8, 2), (sub.SCALED_SCORES, sub.GFX950, 128, 8, 1)]
    assert scaled[2:] == sub.variants_for("gfx950", "hip", 64, 4, 1)
    # its first tile early where the registers allow: not in the 2-stage 128-token form
    assert [v.early_tile for v in scaled[:2]] == [False, True]
    small = sub.variants_for("gfx950", "hip", 64, 4, 2, sub.SCALED_SCORES)
    assert [(v.block_n, v.num_stages, v.early_tile) for v in small[:2]] == [(64, 2, True), (64, 1, True)]
    assert not any(v.early_tile for v in small[2:])  # the BF16 family has no such form
    # a FUSED merge: tried in the first form only (on hip fenced in every wave), then every
    # form with the combine kernel
    for arch, platform in (("sm_90", "cuda"), ("gfx950", "hip")):
        fused = sub.variants_for(arch, platform, 64, 4, 2, sub.BF16_SCORES, sub.MERGE_FUSED)
        combine = sub.variants_for(arch, platform, 64, 4, 2, sub.BF16_SCORES, sub.MERGE_COMBINE)
        assert fused == [combine[0]._replace(merge=sub.MERGE_FUSED, wave_fences=platform == "hip")] + combine
    # a DIRECT plan (one split): every form of every family, fallbacks included, writes the output itself
    for scores, (block_n, num_warps) in ((sub.BF16_SCORES, (64, 4)), (sub.SCALED_SCORES, (128, 8)),
                                         (sub.ONCE_SCORES, (sub.GL_BLOCK_N, sub.GL_NUM_WARPS))):
        direct = sub.variants_for("gfx950", "hip", block_n, num_warps, 2, scores, sub.MERGE_DIRECT)
        assert len(direct) > 2 and {v.merge for v in direct} == {sub.MERGE_DIRECT}, sub.FAMILY_NAMES[scores]


@pytest.mark.parametrize("family, merge", [("BF16", "COMBINE"), ("SCALED", "COMBINE"), ("SCALED", "FUSED"),
                                           ("BF16", "DIRECT")])
def test_each_family_launches_its_own_split_kernel_then_the_combine(sub, monkeypatch, family, merge):
    """_attention launches the family's split kernel with the variant's constexprs (the
    SCALED kernel its EARLY_TILE, the BF16 one its PIN, both the FUSED merge's pass of its warps:
    FUSED_MERGE_PASS), then the combine kernel for COMBINE only."""
    launches = []
    monkeypatch.setattr(sub, "_launch_kernel", lambda kernel, grid, args, constants, what: launches.append(
        (kernel, constants)))
    scores, merge = getattr(sub, f"{family}_SCORES"), getattr(sub, f"MERGE_{merge}")
    variant = sub.Variant(sub.PORTABLE, int(scores == sub.BF16_SCORES), 64, 4, 1, True, scores, merge,
                          early_tile=scores == sub.SCALED_SCORES)
    q, kv_data, qo_indptr, kv_indptr, config = ref.generate_input(2, 1, 40, seed=58)
    packed, scales = sub._mxfp4_operands(kv_data, q.device)
    out = torch.empty((2, sub.NUM_HEADS, sub.V_HEAD_DIM), dtype=torch.bfloat16, device=q.device)
    sub._attention(variant, 4, q, packed.view(torch.uint8), scales.view(torch.uint8), qo_indptr, kv_indptr, out,
                   sub.make_scratch(2, 4, q.device, [variant]), config["sm_scale"], sub.V_HEAD_DIM, sub.Q_BYTES_TIMED)
    kernel, constants = launches[0]
    assert kernel is (sub._scaled_split_kernel if scores == sub.SCALED_SCORES else sub._bf16_split_kernel)
    own = {"EARLY_TILE": True} if scores == sub.SCALED_SCORES else {"PIN": 1}
    assert {key: constants.get(key) for key in ("EARLY_TILE", "PIN")} == {"EARLY_TILE": None, "PIN": None, **own}
    assert (constants["MERGE"], constants["SPLIT_TAIL"], constants["BLOCK_N"]) == (merge, True, 64)
    assert (constants["MERGE_HEADS"], constants["MERGE_SPLITS"]) == sub.FUSED_MERGE_PASS[4]
    assert [k for k, _ in launches[1:]] == ([sub._mla_combine_kernel] if merge == sub.MERGE_COMBINE else [])


@pytest.mark.parametrize("quantizer, passes", [("real", True), ("one-exponent-up", False)])
def test_self_check_compares_the_scaled_q_quantization_bytes(sub, monkeypatch, quantizer, passes):
    """The SCALED family's self-check holds Q's quantization to its emulation bit for bit:
    a quantizer whose bytes differ fails it even where the output barely moves."""
    if quantizer != "real":
        monkeypatch.setattr(sub, "_quantize_e4m3_blocks", _quantize_one_exponent_up)
    variant = sub.Variant(sub.PORTABLE, 0, 64, 4, 1, True, sub.SCALED_SCORES)
    assert passes_self_check(sub, variant) is passes


@pytest.mark.parametrize("block_n", [32, 64])
def test_self_check_passes_the_portable_primitive(sub, block_n):
    """The check must not fail a right kernel (it once did, comparing 64-token with 32-token
    tiles on data so large that the softmax followed rounding)."""
    pin = sub.PIN_BY_PLATFORM[sub._platform(DEVICE)]
    assert passes_self_check(sub, sub.Variant(sub.PORTABLE, pin, block_n, 4, 1))


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", [32, 64])
def test_self_check_on_the_native_primitive(sub, block_n):
    variant = sub.variants_for(sub._arch(DEVICE), sub._platform(DEVICE), block_n, 4, 1)[0]
    assert passes_self_check(sub, variant) or variant.convert == sub.PORTABLE


def test_dispatch_prefers_aiter_for_big_cases_once_the_native_primitives_failed(sub, monkeypatch):
    """gfx950 with aiter, no form proven on the emulator: the SCALED family first; once its native variant
    failed, the BF16 family's; once that failed too, aiter above 64k tokens in the batch."""
    monkeypatch.setattr(sub, "EMULATOR_PROVEN", frozenset())
    monkeypatch.setattr(sub.STATE, "aiter", {"fake": True})
    monkeypatch.setattr(sub, "_arch", lambda device: "gfx950")
    cpu = torch.device("cpu")
    choice = sub.choose(256, 8192, cpu)
    launch = choice
    assert choice.path == "triton" and launch.scores == sub.SCALED_SCORES
    sub.STATE.failed_variants.add(sub.variants_for("gfx950", "hip", launch.block_n, launch.num_warps, launch.num_stages, launch.scores,
                                             launch.merge)[0])
    sub.STATE.predictions.clear()
    launch = sub.choose(256, 8192, cpu)
    assert launch.scores == sub.BF16_SCORES
    sub.STATE.failed_variants.add(sub.variants_for("gfx950", "hip", launch.block_n, launch.num_warps, 1, launch.scores,
                                             launch.merge)[0])
    assert sub.choose(256, 8192, cpu) == sub.AITER_LAUNCH
    assert sub.choose(4, 1024, cpu).path == "triton"


def test_a_variant_right_on_the_synthetic_input_but_wrong_on_the_real_one_falls_back(sub, monkeypatch):
    """A miscompile that only the real input shows (here: the first variant's output is 3%
    high whenever the batch is the real input's 5, not the synthetic input's 3): the check of
    the first call's own output catches it, the next variant runs on the same input, and the
    call returns its right answer."""
    real = sub._attention
    first = {}

    def wrong_on_real_input(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, *rest, **kwargs):
        real(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, *rest, **kwargs)
        if variant == first.setdefault("variant", variant) and out.shape[0] == 5:
            out.mul_(1.03)

    monkeypatch.setattr(sub, "_attention", wrong_on_real_input)
    use_variants(sub, monkeypatch, lambda real: another_tile(real[0]))  # two forms everywhere
    data = ref.generate_input(5, 1, 70, seed=56)
    with pytest.warns(RuntimeWarning, match="check of the first call's output"):
        out = sub.custom_kernel(data)
    plan = the_plan(sub)
    assert plan.variants[0] in sub.STATE.failed_variants and plan.variant == plan.variants[1]
    assert plan.failures[0][0] == plan.variants[0]
    assert_right(out, data)


def test_a_host_side_type_error_in_the_launch_path_propagates(sub, monkeypatch):
    """Our launch code passing one argument too few is a bug to see (TypeError from the
    kernel's binder), not a variant to drop."""
    real = sub._launch_kernel
    monkeypatch.setattr(sub, "_launch_kernel", lambda kernel, grid, args, constants, variant: real(
        kernel, grid, args[:-1], constants, variant))
    with pytest.raises(TypeError):
        sub.custom_kernel(ref.generate_input(2, 1, 40, seed=57))
    assert not sub.STATE.failed_variants


class FailingKernel:
    """A stand-in for a kernel whose launch raises `error` (a fresh exception each time)."""

    def __init__(self, error):
        self.error = error

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            raise self.error()
        return launch


@pytest.mark.parametrize("error, faulted, propagates", [
    (lambda: torch.OutOfMemoryError("CUDA out of memory"), False, torch.OutOfMemoryError),
    (lambda: RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"), True, RuntimeError),
    (lambda: RuntimeError("Triton Error [CUDA]: invalid argument"), False, None),
    (lambda: triton.runtime.errors.OutOfResources(300000, 232448, "shared memory"), False, None),
], ids=["oom", "device-fault", "launch-refused", "out-of-resources"])
def test_errors_are_sorted_by_kind(sub, monkeypatch, error, faulted, propagates):
    """Out of memory and a faulted device propagate with the variant named (no fallback can
    run); a refused launch or a kernel that does not fit, with the device still usable,
    falls back like a build error."""
    monkeypatch.setattr(sub, "_device_faulted", lambda device: faulted)
    real_kernel = sub._bf16_split_kernel
    failing = FailingKernel(error)
    first = {}

    class FirstVariantFails:
        arg_names = real_kernel.arg_names  # read by _TritonPlan._replayable

        def __getitem__(self, grid):
            def launch(*args, **constants):
                key = tuple(sorted(constants.items()))
                target = failing if first.setdefault("key", key) == key else real_kernel
                return target[grid](*args, **constants)
            return launch

    monkeypatch.setattr(sub, "_bf16_split_kernel", FirstVariantFails())
    use_variants(sub, monkeypatch, lambda real: another_tile(real[0]))  # two forms everywhere
    data = ref.generate_input(2, 1, 40, seed=58)
    if propagates is not None:
        with pytest.raises(propagates, match=r"custom_kernel: .* launching bf16 family"):
            sub.custom_kernel(data)
        assert not sub.STATE.failed_variants
        return
    with pytest.warns(RuntimeWarning, match="KernelLaunchError"):
        out = sub.custom_kernel(data)
    plan = the_plan(sub)
    assert plan.variants[0] in sub.STATE.failed_variants and plan.variant == plan.variants[1]
    assert_right(out, data)


def test_error_summary_names_the_reason_not_the_caret(sub):
    """A Triton compile error's text ends with the source line and a caret under it; the
    warning and the report give the innermost cause's type and its last informative line."""
    try:
        try:
            raise ValueError("arange's range must be a power of 2")
        except ValueError as reason:
            raise triton.compiler.errors.CompilationError(
                "at 3:4:\n    offs = tl.arange(0, 24)\n           ^", None, None) from reason
    except triton.compiler.errors.CompilationError as compile_error:
        wrapped = sub.KernelLaunchError("bf16 family ...: CompilationError: at 3:4:\n    offs\n   ^")
        wrapped.__cause__ = compile_error
    assert sub.error_summary(wrapped) == "KernelLaunchError: ValueError: arange's range must be a power of 2"
    assert sub.error_summary(RuntimeError("one line")) == "RuntimeError: one line"
    bare = sub.KernelLaunchError("bf16 family ...: CompilationError")  # a compile error without a cause
    bare.__cause__ = triton.compiler.errors.CompilationError("at 3:4:\n    offs = tl.arange(0, 24)\n           ^",
                                                             None, None)
    assert sub.error_summary(bare) == "KernelLaunchError: CompilationError: offs = tl.arange(0, 24)"


# --- the ONCE family: its Gluon kernel on gfx950, the SCALED family after it ------------------

class _GluonBuildFails:
    """A stand-in for the Gluon kernel whose build fails (as a compile error of a Triton
    without the CDNA4 operations it needs would)."""

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            raise triton.errors.TritonError("forced Gluon build failure")
        return launch


# pretending to be an MI355X runs the gfx950 inline asm: the interpreter emulates it, a GPU cannot run it
GFX950_IN_THE_INTERPRETER = pytest.mark.skipif(torch.cuda.is_available(), reason="gfx950 stand-in: CPU interpreter only")


def as_gfx950(sub, monkeypatch):
    """The dispatch and the plans answering as on an MI355X (the interpreter runs the
    standard-Triton forms, the gfx950 inline asm emulated)."""
    monkeypatch.setattr(sub, "_arch", lambda device: "gfx950")
    monkeypatch.setattr(sub, "_platform", lambda device: "hip")
    monkeypatch.setattr(sub, "gluon_capable", lambda arch: arch == "gfx950")


def test_the_once_family_order_is_the_gluon_kernel_then_the_scaled_family(sub, monkeypatch):
    """gfx950 with Gluon: the Gluon kernel (128-token tiles, 4 warps), then the SCALED
    family's order at ONCE_FALLBACK_TILE; without it (or another tile, or elsewhere) that
    SCALED order alone (the family's standard-Triton twin is a test's, tests/once_twin.py); a
    FUSED launch tries the first form FUSED, then merges with the combine kernel."""
    monkeypatch.setattr(sub, "gluon_capable", lambda arch: arch == "gfx950")
    once = sub.variants_for("gfx950", "hip", 128, 4, 1, sub.ONCE_SCORES, sub.MERGE_COMBINE)
    assert once[0] == sub.Variant(sub.GFX950, 0, 128, 4, 1, False, sub.ONCE_SCORES, sub.MERGE_COMBINE, gluon=True)
    assert once[1:] == sub.variants_for("gfx950", "hip", *sub.ONCE_FALLBACK_TILE, sub.SCALED_SCORES, sub.MERGE_COMBINE)
    assert "Gluon kernel" in once[0].describe()
    for arch, platform, block_n in (("gfx950", "hip", 64), ("cpu", "cpu", 128), ("sm_90", "cuda", 128)):
        assert sub.variants_for(arch, platform, block_n, 4, 1, sub.ONCE_SCORES) == sub.variants_for(
            arch, platform, *sub.ONCE_FALLBACK_TILE, sub.SCALED_SCORES), arch
    monkeypatch.setattr(sub, "gluon_capable", lambda arch: False)
    assert not any(v.gluon or v.scores == sub.ONCE_SCORES
                   for v in sub.variants_for("gfx950", "hip", 128, 4, 1, sub.ONCE_SCORES))
    monkeypatch.setattr(sub, "gluon_capable", lambda arch: arch == "gfx950")
    fused = sub.variants_for("gfx950", "hip", 128, 4, 1, sub.ONCE_SCORES, sub.MERGE_FUSED)
    assert fused[0] == once[0]._replace(merge=sub.MERGE_FUSED, wave_fences=True) and fused[1:] == once
    assert sub.Launch(128, 4, 4, 1, sub.ONCE_SCORES, sub.MERGE_FUSED).merge == sub.MERGE_FUSED


def test_gluon_capable_needs_gluon_and_gfx950(sub, monkeypatch):
    assert sub.gluon_capable("gfx950") == (sub.gl is not None)
    assert not sub.gluon_capable("gfx942") and not sub.gluon_capable("sm_90") and not sub.gluon_capable("cpu")
    monkeypatch.setenv("MLA_GLUON", "0")
    assert not sub.gluon_capable("gfx950")


@GFX950_IN_THE_INTERPRETER
def test_the_gluon_kernel_failing_to_build_falls_back_to_the_scaled_family(sub, monkeypatch):
    """On gfx950 a plan of the ONCE family tries the Gluon kernel first; its build failing
    is one warning, and the SCALED family's first form runs the same call, right."""
    as_gfx950(sub, monkeypatch)
    monkeypatch.setattr(sub, "_gluon_split_kernel", _GluonBuildFails())
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "gfx950", {(2, 300): "once t128 w4 s2 st1 combine"})
    data = ref.generate_input(2, 1, 300, seed=57)
    with pytest.warns(RuntimeWarning, match="kernel variant failed.*Gluon kernel.*forced Gluon build failure"):
        out = sub.custom_kernel(data)
    plan = the_plan(sub)
    assert plan.variants[0].gluon and plan.failures[0][0] == plan.variants[0]
    assert plan.variant == plan.variants[1] and plan.variant.scores == sub.SCALED_SCORES
    assert plan.variants[0] in sub.STATE.failed_variants
    assert_matches(out, data)


@GFX950_IN_THE_INTERPRETER
def test_a_call_the_gluon_kernel_cannot_read_runs_the_next_variant_checked(sub, monkeypatch):
    """gluon_layout_problem: the runner's layout (16-byte aligned rows, 24-byte scale rows)
    is readable, the trimmed one (18-byte scale rows) is not. A plan using the Gluon kernel
    (here its standard-Triton twin standing in for it, tests/once_twin.py, so that the
    interpreter runs it) meets a call with trimmed scales: another key, whose plan runs the
    SCALED family, checked on it, right."""
    as_gfx950(sub, monkeypatch)
    monkeypatch.setattr(sub, "_launch_gluon", once_twin.launch)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "gfx950", {(2, 70): "once t128 w4 s1 st1 direct"})
    padded = ref.generate_input(2, 1, 70, seed=58)
    trimmed = ref.generate_input(2, 1, 70, seed=58, scale_layout="trimmed")
    for data, problem in ((padded, None), (trimmed, "scale rows of 18 bytes")):
        q, packed, scales = data[0], *(t.view(torch.uint8) for t in data[1]["mxfp4"])
        found = sub.gluon_layout_problem(q, packed, scales, 2, 1)
        assert found == problem if problem is None else problem in found
    out = sub.custom_kernel(padded)
    plan = the_plan(sub)
    assert plan.variant.gluon
    assert_matches(out, padded)
    with pytest.warns(RuntimeWarning, match="kernel variant not run.*scale rows of 18 bytes"):
        out = sub.custom_kernel(trimmed)
    trimmed_plan = sub.STATE.plans[sub.input_key(*trimmed)]  # another layout: another key, another plan
    assert trimmed_plan.variant == trimmed_plan.variants[1] and trimmed_plan.variant.scores == sub.SCALED_SCORES
    assert plan.variant.gluon  # the padded input's plan keeps the Gluon kernel
    assert_matches(out, trimmed)


def assert_matches(out, data):
    expected = emulated_scaled(data)
    assert bool(((out.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())


NO_GLUON_SCRIPT = """
import builtins, os, sys
real_import = builtins.__import__

def no_gluon(name, globals=None, locals=None, fromlist=(), level=0):
    from_submission = (globals or {}).get("__name__") == "submission"
    if from_submission and (name.startswith("triton.experimental.gluon")
                            or (name == "triton.experimental" and "gluon" in (fromlist or ()))):
        raise ImportError("this Triton has no Gluon")
    return real_import(name, globals, locals, fromlist, level)

builtins.__import__ = no_gluon
os.environ["MLA_TUNE"] = "0"
sys.path[:0] = ["tests", "."]
import torch
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if device.type == "cpu":  # the real kernels where there is a GPU, the interpreter elsewhere
    os.environ["TRITON_INTERPRET"] = "1"
    import interpreter_shim, asm_emulation
    interpreter_shim.install(); asm_emulation.install()
import reference as ref, submission as sub
assert sub.gl is None and sub.gluon is None and "no Gluon" in sub.GLUON_ERROR, sub.GLUON_ERROR
assert not sub.gluon_capable("gfx950")
assert not any(v.gluon for v in sub.variants_for("gfx950", "hip", 128, 4, 1, sub.ONCE_SCORES))
data = ref.generate_input(2, 1, 40, seed=60, device=device)
ok, message = ref.check_implementation(data, sub.custom_kernel(data))
assert ok, message
print("ok")
"""


def test_a_triton_without_gluon_leaves_every_other_path_working():
    """The Gluon import is guarded: with it failing (a subprocess in which submission's
    import of triton.experimental.gluon raises; Triton's own lazy imports of it still
    work), submission imports, says why, offers no Gluon kernel (the ONCE family runs the
    SCALED family) and a call runs right."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, "-c", NO_GLUON_SCRIPT], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
