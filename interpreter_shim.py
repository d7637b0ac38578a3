"""CPU-only compatibility shim for Triton's interpreter (TRITON_INTERPRET=1).

Two measured interpreter bugs (upstream triton-lang/triton#11584, answered "not supported
yet"; seen in triton 3.6 through 3.9):

1. `tl.dot` on bf16 operands multiplies the raw uint16 bit patterns (results ~1e10),
   because the interpreter stores bf16 as uint16 and only upcasts 8-bit float operands.
   Fix: upcast bf16 operands to float32 before the matmul (exact products; float32 sums,
   as the GPU's matrix units accumulate).
2. fp32 -> fp8 casts round on one dropped bit and lose the carry into the exponent
   (1.98 -> 1.0 in e4m3fn). Fix: do the cast with torch's fp8 conversion (round to
   nearest even, as the GPUs do).
3. fp32 -> bf16 casts truncate (1 + 2^-8 + 2^-10 -> 1.0, not 1.0078125): a downward
   bias of ~2^-10 relative on every rounded value, which biased our kernels' CPU output by
   ~0.4% (seen in triton 3.9.0). Fix: round to nearest even with torch, as the GPUs do.

`install()` patches the interpreter's builder in place; `uninstall()` restores it; both
are idempotent. The tests and the CPU path of eval.py call `install()`; the GPU paths
never import this module. Kernels behave the same with or without it on a GPU.
"""
import numpy as np
import torch
import triton.language as tl
from triton.runtime import interpreter as _interp

_ORIGINALS: dict = {}

# Triton fp8 element types -> torch dtypes (only those torch has).
_FP8_TORCH = {
    tl.float8e4nv: torch.float8_e4m3fn,
    tl.float8e5: torch.float8_e5m2,
    tl.float8e4b8: getattr(torch, "float8_e4m3fnuz", None),
    tl.float8e5b16: getattr(torch, "float8_e5m2fnuz", None),
}


def _as_float32(handle) -> np.ndarray:
    """Interpreter tensor data as float32 values (bf16 is stored as raw uint16 bits)."""
    if handle.dtype.scalar == tl.bfloat16:
        return (handle.data.astype(np.uint32) << 16).view(np.float32)
    return handle.data


def _dot(self, a, b, d, input_precision, max_num_imprecise_acc):
    if tl.bfloat16 in (a.dtype.scalar, b.dtype.scalar):
        a = _interp.TensorHandle(_as_float32(a), tl.float32)
        b = _interp.TensorHandle(_as_float32(b), tl.float32)
    return _ORIGINALS["create_dot"](self, a, b, d, input_precision, max_num_imprecise_acc)


def _fp_to_fp(self, src, dst_type, rounding_mode):
    torch_dtype = _FP8_TORCH.get(dst_type.scalar)
    if torch_dtype is not None and src.dtype.scalar in (tl.float32, tl.float16, tl.bfloat16):
        values = torch.from_numpy(np.ascontiguousarray(_as_float32(src), dtype=np.float32))
        data = values.to(torch_dtype).view(torch.uint8).numpy()
        return _interp.TensorHandle(data, dst_type.scalar)
    return _ORIGINALS["create_fp_to_fp"](self, src, dst_type, rounding_mode)


def _cast(self, src, dst_type):
    if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
        values = torch.from_numpy(np.ascontiguousarray(src.data, dtype=np.float32))
        return _interp.TensorHandle(values.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16),
                                    tl.bfloat16)
    return _ORIGINALS["cast_impl"](self, src, dst_type)


_PATCHES = {"create_dot": _dot, "create_fp_to_fp": _fp_to_fp, "cast_impl": _cast}


def install() -> None:
    builder = _interp.InterpreterBuilder
    for name, patched in _PATCHES.items():
        if name not in _ORIGINALS:
            _ORIGINALS[name] = getattr(builder, name)
            setattr(builder, name, patched)


def uninstall() -> None:
    builder = _interp.InterpreterBuilder
    for name in list(_ORIGINALS):
        setattr(builder, name, _ORIGINALS.pop(name))


def installed() -> bool:
    return bool(_ORIGINALS)
