"""interpreter_shim fixes the three interpreter bugs it documents, and only under the interpreter."""
import os

import pytest
import torch
import triton
import triton.language as tl

import interpreter_shim

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="the shim concerns Triton's CPU interpreter")


@triton.jit
def _dot_and_casts(a_ptr, b_ptr, dot_ptr, x_ptr, cast_ptr, bf16_ptr):
    rows = tl.arange(0, 16)
    tile = rows[:, None] * 16 + rows[None, :]
    tl.store(dot_ptr + tile, tl.dot(tl.load(a_ptr + tile), tl.load(b_ptr + tile)))
    tl.store(cast_ptr + rows, tl.load(x_ptr + rows).to(tl.float8e4nv).to(tl.float32))
    tl.store(bf16_ptr + rows, tl.load(x_ptr + rows).to(tl.bfloat16))


def run_kernel():
    torch.manual_seed(0)
    a = torch.randn(16, 16).bfloat16()
    b = torch.randn(16, 16).bfloat16()
    x = torch.linspace(-5, 5, 16)
    x[0] = 1.98  # rounds to 2.0 in e4m3fn
    x[1] = 1 + 2 ** -8 + 2 ** -10  # rounds up to 1 + 2^-7 in bf16
    dot = torch.empty(16, 16)
    cast = torch.empty(16)
    bf16 = torch.empty(16, dtype=torch.bfloat16)
    _dot_and_casts[(1,)](a, b, dot, x, cast, bf16)
    dot_err = (dot - a.float() @ b.float()).abs().max().item()
    cast_err = (cast - x.to(torch.float8_e4m3fn).float()).abs().max().item()
    bf16_err = (bf16.float() - x.to(torch.bfloat16).float()).abs().max().item()
    return dot_err, cast_err, bf16_err


def test_shim_makes_bf16_dot_and_the_casts_match_torch():
    was_installed = interpreter_shim.installed()
    try:
        interpreter_shim.uninstall()
        dot_err, cast_err, bf16_err = run_kernel()
        assert dot_err > 1e3 and cast_err > 0.5 and bf16_err > 0.007  # the bugs are real without the shim
        interpreter_shim.install()
        interpreter_shim.install()  # idempotent
        dot_err, cast_err, bf16_err = run_kernel()
        assert dot_err < 1e-4 and cast_err == 0.0 and bf16_err == 0.0
    finally:
        (interpreter_shim.install if was_installed else interpreter_shim.uninstall)()
