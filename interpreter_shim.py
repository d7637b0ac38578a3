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

4. Not a bug but a blind spot: the interpreter reads and writes host memory through raw
   addresses, so a load past a tensor's end reads whatever lies there and the values may
   still pass (a masked-out tail row, say), where the GPU faults and ends the process.
   `install_bounds_guard()` checks every active (mask-true) lane of every load, store and
   atomic of a launch: its whole element must lie inside the storage of one of the
   launch's tensor arguments; otherwise an IndexError inside the kernel (the launch
   fails) and a record in `bounds_violations()`, which the tests assert empty.

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


# --- the bounds guard -------------------------------------------------------------------
_LAUNCH = {"kernel": None, "storages": None}  # the running launch's tensor arguments
_VIOLATIONS: list = []


def _init_args_hst(self, args_dev, kwargs):
    """The interpreter's copy of the arguments to the host, plus the [start, end) byte
    range of each tensor argument's storage for the guard."""
    args_hst, kwargs_hst = _ORIGINALS["_init_args_hst"](self, args_dev, kwargs)
    storages = [arg.untyped_storage() for arg in [*args_hst, *kwargs_hst.values()] if isinstance(arg, torch.Tensor)]
    _LAUNCH["kernel"] = getattr(self.fn, "__name__", "kernel")
    _LAUNCH["storages"] = np.array([(s.data_ptr(), s.data_ptr() + s.nbytes()) for s in storages] or
                                   np.zeros((0, 2)), dtype=np.uint64).reshape(-1, 2)
    return args_hst, kwargs_hst


def _check(ptrs, mask, what):
    """IndexError (and a record) when an active lane's element is outside every storage."""
    storages = _LAUNCH["storages"]
    if storages is None:
        return
    addresses = np.broadcast_to(ptrs.data, np.shape(mask.data) or np.shape(ptrs.data)).astype(np.uint64)
    active = addresses[np.broadcast_to(mask.data, addresses.shape).astype(bool)]
    width = np.uint64(max(1, ptrs.get_element_ty().primitive_bitwidth // 8))
    inside = np.zeros(active.shape, dtype=bool)
    for start, end in storages:
        inside |= (active >= start) & (active + width <= end)
    if not inside.all():
        bad = int(active[~inside][0])
        nearest = min(storages, key=lambda r: min(abs(bad - int(r[0])), abs(bad - int(r[1]))))
        message = (f"{_LAUNCH['kernel']}: {what} of {int((~inside).sum())} lane(s) outside every tensor argument's "
                   f"storage, e.g. address {bad:#x} ({bad - int(nearest[1]):+d} bytes past the end of the nearest "
                   f"storage, [{int(nearest[0]):#x}, {int(nearest[1]):#x}))")
        _VIOLATIONS.append(message)
        raise IndexError(message)


def _masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
    _check(ptrs, mask, "load")
    return _ORIGINALS["create_masked_load"](self, ptrs, mask, other, cache_policy, is_volatile)


def _masked_store(self, ptrs, value, mask, cache_policy):
    _check(ptrs, mask, "store")
    return _ORIGINALS["create_masked_store"](self, ptrs, value, mask, cache_policy)


def _atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
    _check(ptr, mask, "atomic")
    return _ORIGINALS["create_atomic_rmw"](self, rmw_op, ptr, val, mask, sem, scope)


_GUARD_PATCHES = {"create_masked_load": _masked_load, "create_masked_store": _masked_store,
                  "create_atomic_rmw": _atomic_rmw}


def install_bounds_guard() -> None:
    """Turn the bounds guard on (idempotent): every later launch in the interpreter checks
    its loads, stores and atomics against its tensor arguments' storages."""
    builder = _interp.InterpreterBuilder
    for name, patched in _GUARD_PATCHES.items():
        if name not in _ORIGINALS:
            _ORIGINALS[name] = getattr(builder, name)
            setattr(builder, name, patched)
    if "_init_args_hst" not in _ORIGINALS:
        _ORIGINALS["_init_args_hst"] = _interp.GridExecutor._init_args_hst
        _interp.GridExecutor._init_args_hst = _init_args_hst


def bounds_violations(clear=False) -> list:
    """The guard's records since the last clear (messages naming kernel, access, address)."""
    found = list(_VIOLATIONS)
    if clear:
        _VIOLATIONS.clear()
    return found


def install() -> None:
    builder = _interp.InterpreterBuilder
    for name, patched in _PATCHES.items():
        if name not in _ORIGINALS:
            _ORIGINALS[name] = getattr(builder, name)
            setattr(builder, name, patched)


def uninstall() -> None:
    """Restore the interpreter: the fixes and the bounds guard."""
    builder = _interp.InterpreterBuilder
    for name in list(_ORIGINALS):
        owner = _interp.GridExecutor if name == "_init_args_hst" else builder
        setattr(owner, name, _ORIGINALS.pop(name))
    _LAUNCH.update(kernel=None, storages=None)


def installed() -> bool:
    return bool(_ORIGINALS)
