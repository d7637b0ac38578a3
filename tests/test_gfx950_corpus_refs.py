"""The gfx950 corpus's numpy answers, checked without the emulator: each standard-Triton case
runs in Triton's interpreter (tests/conftest.py turns it on before triton is imported and
installs interpreter_shim's fixes for bf16 dots and fp8/bf16 casts, and asm_emulation's
inline-asm emulation), so a wrong reference fails here rather than blaming the emulator.
Cases the interpreter cannot run name the reason (Case.interpreter) and are skipped.

One more interpreter bug is mended here, for these tests only: bf16 -> fp32 flushes bf16
denormals to zero (triton 3.9.0's interpreter `_convert_float` clamps their exponent; 0x0001
reads 0.0), where a GPU build is a 16-bit shift, exact (tools/gfx950/corpus/cases.py's
float_conversions checks 0x0001 and 0x807F).
"""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from gfx950.corpus import CASES, Case, static, triton_kernels  # noqa: E402

needs_interpreter = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the references in the CPU interpreter")


@pytest.fixture(autouse=True)
def exact_bf16_to_fp32(monkeypatch):
    """The interpreter's bf16 -> fp32 cast as the GPU's shift (the rest of cast_impl unchanged)."""
    if torch.cuda.is_available():
        return
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    installed = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.bfloat16 and dst_type.scalar == tl.float32:
            bits = src.data.astype(np.uint32) << 16
            return interpreter.TensorHandle(bits.view(np.float32), tl.float32)
        return installed(self, src, dst_type)

    monkeypatch.setattr(builder, "cast_impl", cast_impl)


def interpret(kernel, grid, *args, num_warps=4, num_stages=None, **constexprs):
    """The corpus's launch, in Triton's interpreter: kernel[grid](*args, **options)."""
    options = {"num_warps": num_warps, **({} if num_stages is None else {"num_stages": num_stages})}
    kernel[grid](*args, **options, **constexprs)


def test_case_names_are_unique_and_at_least_14():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names)), names
    assert len(CASES) >= 14


@needs_interpreter
# the interpreter's numpy warns where a kernel computes a value its tl.where then discards: 0 / 0 for an empty
# sequence's norm, a NaN or infinity converted to int32 (float_ops' to_int row, checked only where defined)
@pytest.mark.filterwarnings("ignore:invalid value encountered in (divide|cast):RuntimeWarning:triton.runtime.interpreter")
@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_reference_agrees_with_the_interpreter(case):
    if case.interpreter:
        pytest.skip(f"not in Triton's interpreter: {case.interpreter}")
    case.run(interpret, np.random.default_rng(0))


# --- the static coverage helper (tools/gfx950/corpus/static.py), without building ---------------------------

FAKE_ASM = "\ts_mov_b32 s0, 0\n\tv_add_f32_dpp v1, v1, v1 row_shr:8 row_mask:0xf bank_mask:0xf bound_ctrl:1\n\ts_endpgm\n"


class FakeBuild:
    """build()'s stand-in: records each call, returns a build whose text is FAKE_ASM."""

    def __init__(self):
        self.calls = []

    def __call__(self, kernel, arguments, constexprs, num_warps, num_stages):
        self.calls.append(dict(kernel=kernel, arguments=arguments, constexprs=constexprs, num_warps=num_warps,
                               num_stages=num_stages))
        return type("Built", (), {"asm": FAKE_ASM, "name": kernel.fn.__name__})()


def test_static_launch_builds_each_kernel_with_its_arguments_at_distinct_aligned_addresses(monkeypatch):
    fake = FakeBuild()
    monkeypatch.setattr(static, "build", fake)
    case = next(c for c in CASES if c.name == "masked_tail")
    assert [name for name, _, _ in static.case_builds(case)] == ["masked_tail_kernel"]
    call = fake.calls[0]
    assert call["kernel"] is triton_kernels.masked_tail_kernel
    assert (call["constexprs"], call["num_warps"], call["num_stages"]) == ({"BLOCK": 256}, 2, None)
    described = call["arguments"]
    assert [d["kind"] for d in described] == ["tensor", "tensor", "int"] and described[2]["value"] == 1000
    first, second = described[0], described[1]
    assert first["address"] % static.FAKE_ALIGN == 0 and second["address"] % static.FAKE_ALIGN == 0
    assert second["address"] >= first["address"] + first["nbytes"]  # no overlap
    assert static.case_forms(case) == {"s_mov_b32", "s_endpgm",
                                       "v_add_f32_dpp row_shr:8 row_mask:0xf bank_mask:0xf bound_ctrl:1"}


def test_static_case_without_a_launch_or_with_another_error_is_reported(monkeypatch):
    monkeypatch.setattr(static, "build", lambda *a, **k: None)
    with pytest.raises(RuntimeError, match="no launch"):
        static.case_builds(Case("quiet", lambda launch, rng: None, "nothing"))

    def broken(launch, rng):
        raise ValueError("a bug in the case, not a failed check")
    with pytest.raises(ValueError, match="a bug in the case"):
        static.case_builds(Case("broken", broken, "nothing"))


def test_forms_listing_keeps_bracketed_modifiers(tmp_path):
    listing = tmp_path / "forms.txt"
    listing.write_text("# header line\n"
                       "    12  v_pk_mul_f32 op_sel:[0,1]  [_bf16_split_kernel]\n"
                       "     6  v_mfma_scale_f32_16x16x128_f8f6f4 op_sel:[1,0,0] op_sel_hi:[0,0,0] cbsz:4  [gluon]\n"
                       "    36  ds_swizzle_b32 offset:('swizzle', 'SWAP', 16)  [_mla_combine_kernel, gluon]\n")
    assert static.forms_from_listing(listing) == {
        "v_pk_mul_f32 op_sel:[0,1]", "v_mfma_scale_f32_16x16x128_f8f6f4 op_sel:[1,0,0] op_sel_hi:[0,0,0] cbsz:4",
        "ds_swizzle_b32 offset:('swizzle', 'SWAP', 16)"}
