"""gfx950 (AMD MI355X, CDNA4) on a CPU: the amdgcn that the runner's Triton 3.6.0 builds,
executed lane by lane.

    import gfx950                       # with tools/ on sys.path
    gfx950.emulate(kernel, grid, *args, num_warps=4, num_stages=None, **constexprs)

is used like `kernel[grid](*args, num_warps=..., **constexprs)` with CPU torch tensors,
which are updated in place. The kernel (a triton.jit or gluon.jit function defined in any
importable file) is built for gfx950 with Triton 3.6.0 in a subprocess (build.py) and
that binary runs here (executor.py): every instruction with its modifiers, the waves of a
workgroup interleaved up to each s_barrier, memory operations completing only when an
s_waitcnt retires them, buffer bounds as the resource descriptor sets them, and an access
outside every tensor an error naming the kernel, instruction, lane and address.

What it proves and what it does not: docs/gfx950_emulator.md.
"""
import dataclasses
import inspect
import json
import os

import numpy as np

from ._build_worker import BUILD_WORKER_ENV
from .asm import parse
from .build import INSTALLED_TRITON, BuildError, Built, build, describe_argument
from .codeobject import load_code_object
from .executor import DEFAULT_BUDGET, Dispatch, Kernel
from .memory import REGION_BYTES, Memory
from .registry import Unsupported
from .wave import EmulationError

__all__ = ["emulate", "load", "load_code_object", "run_built", "BuildError", "EmulationError", "Unsupported", "Launch", "INSTALLED_TRITON"]


class Launch:
    """What one emulated launch did: the kernel (its program and any unsupported forms),
    the wave instructions executed, and the build."""

    def __init__(self, built, kernel, dispatch):
        self.built, self.kernel, self.dispatch = built, kernel, dispatch

    @property
    def instructions(self):
        return self.dispatch.instructions


_KERNELS = {}


def load(built):
    """A Built -> its compiled Kernel (cached by the asm text)."""
    key = (built.asm, built.shared, built.num_warps)
    if key not in _KERNELS:
        _KERNELS[key] = Kernel(parse(built.asm), built.shared, built.num_warps)
    return _KERNELS[key]


def reset_counts():
    """Zero the per-instruction execution counts of every loaded kernel (coverage.py counts
    each corpus case's own)."""
    for kernel in _KERNELS.values():
        kernel.counts = [0] * len(kernel.counts)


def _storage_view(tensor):
    """A uint8 numpy view of the tensor's whole storage (writes go to the tensor)."""
    import torch
    storage = tensor.untyped_storage()
    return torch.empty(0, dtype=torch.uint8).set_(storage).numpy()


def _extent(tensor):
    """(first byte, end byte) of the memory a kernel may read through the tensor: its whole
    storage (the allocation; a read past the view inside it is safe on the GPU too, and
    submission.py reads whole words of padded scale rows that way)."""
    return 0, tensor.untyped_storage().nbytes()


def _offset_bytes(tensor):
    """Where the tensor's first element lies in its storage: data_ptr() - the storage's
    address (a view's storage offset, e.g. `q[..., 512:]` starts 1,024 bytes into q's)."""
    return tensor.storage_offset() * tensor.element_size()


def _add_tensor(memory, tensor, name, storages):
    """The device address of `tensor` (its storage's region + its offset in it, as data_ptr()
    has it) with its storage's extent named `name`; `storages` maps storages to regions."""
    key = tensor.untyped_storage().data_ptr()
    if key not in storages:
        storages[key] = memory.add_region(_storage_view(tensor))
    first, end = _extent(tensor)
    memory.add_extent(storages[key], first, end, name)
    return storages[key] + _offset_bytes(tensor)


def _is_tensor(value):
    return hasattr(value, "data_ptr") and hasattr(value, "untyped_storage")


def _constexpr_names(kernel, parameters):
    """The kernel's tl.constexpr parameters (from the JIT object, or the annotations of an
    interpreted function)."""
    if hasattr(kernel, "params") and all(hasattr(p, "is_constexpr") for p in kernel.params):
        return {p.name for p in kernel.params if p.is_constexpr}
    return {p.name for p in parameters if "constexpr" in str(p.annotation)}


class _Arguments:
    """The launch's arguments bound to the kernel's parameter names, with a device address
    for every tensor (one region per storage)."""

    def __init__(self, kernel, args, kwargs, memory):
        fn = kernel.fn
        parameters = list(inspect.signature(fn).parameters.values())
        names = [p.name for p in parameters]
        if len(args) > len(names):
            raise TypeError(f"{fn.__name__}: {len(args)} positional arguments for {len(names)} parameters")
        self.values = {}
        for name, value in zip(names, args):
            self.values[name] = value
        for name, value in kwargs.items():
            if name not in names:
                raise TypeError(f"{fn.__name__}: no parameter named {name!r}")
            if name in self.values:
                raise TypeError(f"{fn.__name__}: argument {name!r} given twice")
            self.values[name] = value
        for p in parameters:
            if p.name not in self.values and p.default is not inspect.Parameter.empty:
                self.values[p.name] = p.default
        missing = [n for n in names if n not in self.values]
        if missing:
            raise TypeError(f"{fn.__name__}: missing argument(s) {missing}")
        self.names = names
        self.constexpr = _constexpr_names(kernel, parameters)
        self.address = {}
        storages = {}
        for name in names:
            value = self.values[name]
            if not _is_tensor(value):
                continue
            if value.device.type != "cpu":
                raise ValueError(f"argument {name!r}: the emulator takes CPU tensors (got {value.device})")
            self.address[name] = _add_tensor(memory, value, name, storages)

    def described(self):
        """(positional descriptions of the runtime parameters, constexprs by name)."""
        positional, constexprs = [], {}
        for name in self.names:
            value = self.values[name]
            if name in self.constexpr:
                constexprs[name] = getattr(value, "value", value) if type(value).__name__ == "constexpr" else value
            else:
                positional.append(describe_argument(value, self.address.get(name)))
        return positional, constexprs


# Hidden arguments that hold a pointer to something the emulator does not model: each points at
# a region of its own, so a read stops the run naming it (a null would read as a plain fault).
_HIDDEN_POINTERS = ("hidden_printf_buffer", "hidden_hostcall_buffer", "hidden_heap_v1", "hidden_default_queue",
                    "hidden_completion_action", "hidden_multigrid_sync_arg", "hidden_queue_ptr")


def _hidden_value(kind, grid, workgroup_size, shared, memory):
    """A hidden (implicit) kernel argument of code object v5 (LLVM's AMDGPUUsage) for a launch
    of `grid` workgroups of (workgroup_size, 1, 1) work-items with `shared` bytes of dynamic LDS."""
    axis = "xyz".find(kind[-1]) if kind[-1] in "xyz" else -1
    if kind.startswith("hidden_block_count_"):
        return grid[axis]
    if kind.startswith("hidden_group_size_"):
        return (workgroup_size, 1, 1)[axis]
    if kind == "hidden_grid_dims":
        return max([i + 1 for i, g in enumerate(grid) if g != 1], default=1)
    if kind.startswith(("hidden_remainder_", "hidden_global_offset_")) or kind == "hidden_none":
        return 0   # whole workgroups only (the grid counts workgroups), no global offset
    if kind == "hidden_dynamic_lds_size":
        return shared   # Triton allocates its shared memory dynamically, at launch
    if kind in _HIDDEN_POINTERS:
        return memory.add_region(np.zeros(0, dtype=np.uint8), writable=False,
                                 unmodelled=f"the kernel argument {kind} points at something the emulator does not "
                                            "model")
    raise Unsupported(f"hidden kernel argument {kind} is not provided by the emulator")


def _kernarg_bytes(program, built, arguments, grid, memory):
    """The kernel argument segment: each runtime parameter at the offset the build's
    metadata gives it, the two scratch pointers Triton appends (null), and the hidden
    arguments (grid and workgroup sizes) where the build reads them."""
    size = program.metadata.get("kernarg_segment_size", 0)
    segment = bytearray(size)
    explicit = [e for e in program.kernargs if not str(e.get("value_kind", "")).startswith("hidden_")]
    for entry in program.kernargs:
        kind = str(entry.get("value_kind", ""))
        if kind.startswith("hidden_"):
            value = _hidden_value(kind, grid + (1,) * (3 - len(grid)), 64 * built.num_warps, built.shared, memory)
            segment[entry["offset"]:entry["offset"] + entry["size"]] = int(value).to_bytes(entry["size"], "little")
    for (name, kind), entry in zip(built.params, explicit):
        value = arguments.values[name]
        offset, nbytes = entry["offset"], entry["size"]
        if kind.startswith("*"):
            raw = arguments.address[name] if _is_tensor(value) else (0 if value is None else int(value))
            data = int(raw).to_bytes(8, "little")
        elif kind in ("fp32", "f32"):
            data = np.float32(value).tobytes()
        elif kind in ("fp64", "f64"):
            data = np.float64(value).tobytes()
        elif kind in ("fp16",):
            data = np.float16(value).tobytes()
        elif kind in ("bf16",):
            data = (np.float32(value).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        elif kind in ("i1", "u1"):
            data = int(bool(value)).to_bytes(nbytes, "little")
        else:
            data = (int(value) & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little")
        segment[offset:offset + nbytes] = data[:nbytes]
    return bytes(segment)


def emulate(kernel, grid, *args, num_warps=4, num_stages=None, order=None, budget=DEFAULT_BUDGET, options=None,
            edit_asm=None, detectors=True, observers=(), triton=None, executor=None, **kwargs):
    """Run `kernel` on the gfx950 emulator over `grid` (an int or a tuple of up to 3), like
    `kernel[grid](*args, num_warps=num_warps, num_stages=num_stages, **kwargs)`. order: the
    workgroups' linear ids in the order they run (default ascending); budget: wave
    instructions a workgroup may execute before it counts as hung (GFX950_BUDGET, default
    1M: a hang ends within a minute); options: other Triton compile options;
    triton: the Triton that builds it: None the runner's (3.6.0), "installed"
    (INSTALLED_TRITON) the one this Python imports by itself (3.9.0 here), or a directory
    holding one (`pip install --no-deps --target DIR triton==VERSION`);
    edit_asm: a function of the amdgcn text run instead of it (to try a change to the binary,
    e.g. a wait removed); detectors: stop at a race, a read of data not landed yet, or a
    register read before any write (on by default); observers: objects whose lds(...)
    sees every LDS access (tools/gfx950/banks.py); executor: "lockstep" (the default: the waves
    at one instruction execute it together) or "serial" (GFX950_EXECUTOR). -> Launch."""
    if os.environ.get(BUILD_WORKER_ENV):
        raise RuntimeError("gfx950.emulate called while the script is loaded for a gfx950 build (its calls do not run "
                           "there)")
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3 or any(g < 0 for g in grid):
        raise ValueError(f"grid: expected 1-3 non-negative sizes, got {grid}")
    memory = Memory()
    names = set(inspect.signature(kernel.fn).parameters)
    options = {**(options or {}), **{k: v for k, v in kwargs.items() if k not in names}}
    kwargs = {k: v for k, v in kwargs.items() if k in names}
    arguments = _Arguments(kernel, args, kwargs, memory)
    positional, constexprs = arguments.described()
    built = build(kernel, positional, constexprs, num_warps=num_warps, num_stages=num_stages, triton=triton,
                  options=options or None)
    if edit_asm is not None:
        built = dataclasses.replace(built, asm=edit_asm(built.asm))
    return run_built(built, arguments, memory, grid, order=order, budget=budget, detectors=detectors,
                     observers=observers, executor=executor)


def _log_launch(launch, grid):
    """GFX950_LOG=PATH: one JSON line per emulated launch appended there (which binaries ran)."""
    path = os.environ.get("GFX950_LOG")
    if path:
        with open(path, "a") as log:
            log.write(json.dumps({"kernel": launch.kernel.name, "grid": list(grid), "num_warps": launch.kernel.num_warps,
                                  "wave_instructions": launch.instructions,
                                  "triton": launch.built.triton if launch.built else None}) + "\n")


RECORD_ENV = "GFX950_RECORD"


def _record_launch(dispatch):
    """GFX950_RECORD=PATH: one JSON line per emulated launch appended there, what it did by workgroup
    (Dispatch.record: wave instructions by class, bytes read and written, the longest wave)."""
    path = os.environ.get(RECORD_ENV)
    if path:
        with open(path, "a") as log:
            log.write(json.dumps(dispatch.record()) + "\n")


def run_built(built, arguments, memory, grid, order=None, budget=DEFAULT_BUDGET, detectors=True, observers=(),
              executor=None):
    compiled = load(built)
    try:
        kernarg = _kernarg_bytes(compiled.program, built, arguments, grid, memory)
    except Unsupported as exc:
        raise EmulationError(f"{compiled.name}: the kernel arguments: Unsupported: {exc}") from None
    kernarg_data = np.frombuffer(kernarg + b"\0" * 64, dtype=np.uint8).copy()
    kernarg_base = memory.add_region(kernarg_data, "kernel arguments", writable=False)
    dispatch = Dispatch(compiled, memory, kernarg_base, kernarg, grid, budget=budget, detectors=detectors,
                        observers=observers, executor=executor)
    if 0 not in grid:
        with np.errstate(all="ignore"):
            dispatch.run(order=order)
    launch = Launch(built, compiled, dispatch)
    _log_launch(launch, grid)
    _record_launch(dispatch)
    return launch


def run_asm(text, args=(), grid=(1,), num_warps=1, lds_bytes=0, order=None, budget=DEFAULT_BUDGET, detectors=True,
            observers=(), executor=None):
    """Run hand-written amdgcn `text` (instructions and labels; `.amdhsa_*` directives
    optional) over `grid`: the kernel arguments are `args` (CPU tensors as 8-byte device
    addresses, Python ints as 4-byte values, naturally aligned), their segment's address in
    s[0:1], the workgroup id in s2 (after the kernarg pointer, as a build without preloaded
    arguments has it), the work-item id in v0; observers as emulate's. -> Launch."""
    program = parse(text)
    program.descriptor.setdefault("user_sgpr_kernarg_segment_ptr", 1)
    memory = Memory()
    segment, storages = bytearray(), {}
    for value in args:
        if _is_tensor(value):
            segment += b"\0" * (-len(segment) % 8)
            segment += _add_tensor(memory, value, f"argument {len(segment)}", storages).to_bytes(8, "little")
        else:
            segment += b"\0" * (-len(segment) % 4)
            segment += (int(value) & 0xFFFFFFFF).to_bytes(4, "little")
    kernel = Kernel(program, lds_bytes, num_warps)
    kernarg_data = np.frombuffer(bytes(segment) + b"\0" * 64, dtype=np.uint8).copy()
    base = memory.add_region(kernarg_data, "kernel arguments", writable=False)
    dispatch = Dispatch(kernel, memory, base, bytes(segment), tuple(grid), budget=budget, detectors=detectors,
                        observers=observers, executor=executor)
    with np.errstate(all="ignore"):
        dispatch.run(order=order)
    _record_launch(dispatch)
    return Launch(None, kernel, dispatch)
