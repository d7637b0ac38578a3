"""A kernel variant that fails to build, or a native e2m1 primitive that disagrees with the
portable one, never fails the submission: the plan warns once and uses the next variant.

Both are injected here (a variant with an unknown conversion id, which the kernel's
static_assert rejects at compile time; a pure-Triton stand-in for the NVIDIA primitive
that swaps the two codes of every byte), so they run in the CPU interpreter and on a GPU.
"""
import pytest
import torch
import triton
import triton.language as tl  # noqa: F401 - jit functions need tl among their globals

import reference as ref
from submission import _scale_f32, _word_pairs_portable


@triton.jit
def _swap_halves(pair):
    return ((pair >> 16) & 0xFFFF) | (pair << 16)


@triton.jit
def _swapped_word_pairs(words, scale_bytes):
    """Wrong on purpose: the portable pairs with the two codes of every byte swapped."""
    scale = _scale_f32(scale_bytes)
    return (_swap_halves(_word_pairs_portable(words, scale, 0, 0)), _swap_halves(_word_pairs_portable(words, scale, 1, 0)),
            _swap_halves(_word_pairs_portable(words, scale, 2, 0)), _swap_halves(_word_pairs_portable(words, scale, 3, 0)))


@pytest.fixture
def sub(fresh_plans, monkeypatch):
    monkeypatch.setattr(fresh_plans, "FAILED_VARIANTS", set())
    monkeypatch.setattr(fresh_plans, "_WARNED", set())
    return fresh_plans


def use_variants(sub, monkeypatch, first):
    """Make every plan try `first` (a function of the real list) before the real ones."""
    real = sub.variants_for
    monkeypatch.setattr(sub, "variants_for", lambda *args: [first(real(*args))] + real(*args))


def test_a_variant_that_fails_to_build_falls_back_with_one_warning(sub, monkeypatch):
    use_variants(sub, monkeypatch, lambda real: real[-1]._replace(convert=7))
    data = ref.generate_input(2, 1, 40, seed=51)
    with pytest.warns(RuntimeWarning, match="kernel variant failed") as record:
        out = sub.custom_kernel(data)
        sub.custom_kernel(data)
    assert len([w for w in record if "kernel variant failed" in str(w.message)]) == 1
    plan = next(iter(sub._PLANS.values()))
    assert plan.variant == plan.variants[1]  # the first real variant
    expected = ref.exact_attention(data)
    assert bool(((out.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())


def test_every_variant_failing_is_a_clear_error(sub, monkeypatch):
    monkeypatch.setattr(sub, "variants_for", lambda *args: [sub.Variant(9, 0, 0, 16, 4, 1)])
    with pytest.warns(RuntimeWarning), pytest.raises(RuntimeError, match="no kernel variant could run"):
        sub.custom_kernel(ref.generate_input(2, 1, 40, seed=52))


def test_a_wrong_native_primitive_is_caught_by_the_self_check(sub, monkeypatch):
    monkeypatch.setattr(sub, "_word_pairs_sm90", _swapped_word_pairs)
    use_variants(sub, monkeypatch, lambda real: real[0]._replace(convert=sub.PTX_SM90, layout=sub.NATURAL, pin=0))
    data = ref.generate_input(2, 1, 70, seed=53)
    with pytest.warns(RuntimeWarning, match="ptx-sm90 conversion.*wrong answers on the self-check"):
        out = sub.custom_kernel(data)
    plan = next(iter(sub._PLANS.values()))
    assert plan.variants[0] in sub.FAILED_VARIANTS and plan.variant == plan.variants[1]  # the first real one
    expected = ref.exact_attention(data)
    assert bool(((out.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())
    sub._PLANS.clear()  # later plans skip the failed variant without building it again
    sub.custom_kernel(ref.generate_input(2, 1, 70, seed=54))
    plan = next(iter(sub._PLANS.values()))
    assert plan.variant == plan.variants[1]


@pytest.mark.parametrize("block_n", [16, 64])
@pytest.mark.parametrize("layout_name", ["NATURAL", "EVEN_ODD"])
def test_self_check_passes_the_portable_primitive(sub, layout_name, block_n):
    """The check must not fail a right kernel (it once did, comparing 64-token with 32-token
    tiles on data so large that the softmax followed rounding)."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    pin = sub.PIN_BY_PLATFORM[sub._platform(device)]
    assert sub.self_check(sub.Variant(sub.PORTABLE, getattr(sub, layout_name), pin, block_n, 4, 1), device)


@pytest.mark.gpu
@pytest.mark.parametrize("block_n", [16, 64])
def test_self_check_on_the_native_primitive(sub, block_n):
    device = torch.device("cuda")
    variant = sub.variants_for(sub._arch(device), sub._platform(device), block_n, 4, 1)[0]
    assert sub.self_check(variant, device) or variant.convert == sub.PORTABLE


def test_self_check_fails_a_wrong_kernel(sub, monkeypatch):
    monkeypatch.setattr(sub, "_word_pairs_sm90", _swapped_word_pairs)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert not sub.self_check(sub.Variant(sub.PTX_SM90, sub.NATURAL, 0, 16, 4, 1), device)


def test_dispatch_prefers_aiter_for_big_cases_once_the_native_primitive_failed(sub, monkeypatch):
    monkeypatch.setattr(sub, "AITER", {"fake": True})
    monkeypatch.setattr(sub, "_arch", lambda device: "gfx950")
    cpu = torch.device("cpu")
    choice = sub.choose(256, 8192, cpu)
    assert choice[0] == "triton"
    launch = sub.SplitLaunch(*choice[1:])
    sub.FAILED_VARIANTS.add(sub.variants_for("gfx950", "hip", launch.block_n, launch.num_warps, 1)[0])
    assert sub.choose(256, 8192, cpu) == ("aiter",)
    assert sub.choose(4, 1024, cpu)[0] == "triton"
