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

from gfx950.corpus import CASES  # noqa: E402

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


def test_case_names_are_unique_and_cover_the_issue():
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
