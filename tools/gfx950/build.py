"""Build a Triton or Gluon kernel for gfx950 with the runner's Triton (3.6.0), as the
runner's JIT would for the same arguments, on a machine without a GPU.

    built = build(kernel, args, constexprs, num_warps=4, num_stages=None, triton=None)
    built.asm          # the amdgcn text
    built.shared       # bytes of LDS the launch allocates (Triton allocates it dynamically)
    built.params       # [(name, kind)] of the kernel's arguments in kernarg order
                       #   kind: '*fp32'-style pointer, 'i32', 'fp32', ...

The build runs in a subprocess with the runner's Triton first on PYTHONPATH (this process
may have a newer Triton imported, or its interpreter switched on); triton="installed"
(INSTALLED_TRITON) builds with this Python's own Triton instead (3.9.0 here), a directory
with the Triton in it. The kernel's module is
imported there from its file; its arguments are described, not sent: a tensor by its
dtype, the device address the emulator gives it and its size, so Triton 3.6.0's own
binder specializes them as at a launch (16-byte alignment, integers equal to 1 or
divisible by 16, buffers under 2 GB). Builds are cached on disk (.cache/gfx950-builds, or
GFX950_BUILD_CACHE) by the module file's text (and Triton's cache key of the kernel and the
JIT functions it calls, where the kernel object has one), the kernel, the argument
description and the options.
"""
import dataclasses
import hashlib
import inspect
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))
from common import INSTALLED_TRITON, find_runner_triton, triton_path_entry, triton_version_of  # noqa: E402,F401
CACHE_DIR = Path(os.environ.get("GFX950_BUILD_CACHE", ROOT / ".cache" / "gfx950-builds"))


class BuildError(RuntimeError):
    """The kernel did not build for gfx950: carries the compiler's message."""


@dataclass(frozen=True)
class Built:
    name: str
    asm: str
    shared: int
    num_warps: int
    params: tuple        # ((name, kind), ...) of the runtime (non-constexpr) arguments, in order
    signature: dict      # every parameter's kind as the binder specialized it
    triton: str


def _kernel_function(kernel):
    """The Python function behind a triton.jit / gluon.jit object (or an interpreted one)."""
    fn = getattr(kernel, "fn", None)
    if fn is None:
        raise TypeError(f"kernel: expected a triton.jit or gluon.jit function, got {type(kernel).__name__}")
    return fn


def describe_argument(value, address=None):
    """One argument as the build subprocess needs it (JSON)."""
    if hasattr(value, "data_ptr") and hasattr(value, "dtype"):
        if address is None:
            raise ValueError("a tensor argument needs the device address the emulator gives it")
        nbytes = value.untyped_storage().nbytes() if hasattr(value, "untyped_storage") else value.numel() * value.element_size()
        return {"kind": "tensor", "dtype": str(value.dtype), "address": int(address), "nbytes": int(nbytes)}
    if isinstance(value, bool):
        return {"kind": "bool", "value": value}
    if isinstance(value, int):
        return {"kind": "int", "value": value}
    if isinstance(value, float):
        return {"kind": "float", "value": value}
    if value is None:
        return {"kind": "none"}
    raise TypeError(f"argument of type {type(value).__name__} is not supported (tensor, int, float, bool, None)")


def _sourced_from(asm, path):
    """A build's amdgcn with its `.file` directive for the kernel's module naming `path` (our cache
    key and Triton's own hold the module's text, not where it lies: a build made from a copy
    elsewhere, ours or one Triton's cache gives the build worker, names the copy, which may be
    gone), so an error's source line reads from this file."""
    pattern = re.compile(rf'^(\s*\.file\s+\d+\s+)"[^"]*"(\s+"{re.escape(path.name)}")', re.M)
    return pattern.sub(lambda m: f'{m[1]}"{path.parent}"{m[2]}', asm)


def _specialized(description, fixed=False):
    """What Triton's binder (3.6 to 3.9: jit.py's specialize_impl and the HIP backend's) takes from an
    argument, for the build's cache key: a tensor's dtype, whether its address is 16-byte aligned and
    whether its allocation is under 2 GB; an integer's type (i32, i64, u64), whether it is 1 and whether
    it is a multiple of 16 (neither where the kernel says do_not_specialize: `fixed`); a float's nothing
    but its kind. Not the values themselves: every view and stride would otherwise build anew."""
    kind = description["kind"]
    if kind == "tensor":
        return {"kind": kind, "dtype": description["dtype"], "aligned_16": description["address"] % 16 == 0,
                "under_2gb": description["nbytes"] <= 2 ** 31 - 1}
    if kind == "int":
        value = description["value"]
        width = "i32" if -2 ** 31 <= value < 2 ** 31 else "u64" if value >= 2 ** 63 else "i64"
        if fixed:
            return {"kind": kind, "type": width}
        return {"kind": kind, "type": width, "one": value == 1, "multiple_16": value % 16 == 0}
    if kind == "float":
        return {"kind": kind}
    return description


def build(kernel, arguments, constexprs=None, num_warps=4, num_stages=None, triton=None, options=None):
    """arguments: the described runtime arguments in order (describe_argument); constexprs:
    {name: value} of the kernel's constexpr parameters passed by keyword; triton: the Triton
    to build with: None the runner's (common.find_runner_triton), "installed" the one this
    Python imports by itself (e.g. 3.9.0), or a directory holding one. -> Built."""
    fn = _kernel_function(kernel)
    path = Path(inspect.getfile(fn)).resolve()
    opts = {"num_warps": num_warps, **({"num_stages": num_stages} if num_stages is not None else {}),
            **(options or {})}
    request = {"file": str(path), "module": fn.__module__, "name": fn.__name__, "arguments": arguments,
               "constexprs": constexprs or {}, "options": opts}
    choice = find_runner_triton() if triton is None else triton
    triton_path = triton_path_entry(choice)
    # the key: what the build depends on, wherever the file lies (a copy of the repository
    # shares the cache): the module's text, and where the kernel object has one, Triton's own
    # cache key of the function and the JIT functions it calls (other files included)
    depends = {k: v for k, v in request.items() if k not in ("file", "arguments")}
    runtime = [p for p in getattr(kernel, "params", []) if not getattr(p, "is_constexpr", False)]
    fixed = [bool(getattr(p, "do_not_specialize", False)) for p in runtime]
    if len(fixed) != len(arguments):
        fixed = [False] * len(arguments)
    depends["arguments"] = [_specialized(d, f) for d, f in zip(arguments, fixed)]
    depends.update(source=path.read_text(), triton=f"triton-{triton_version_of(choice)}",
                   fp_fusion=os.environ.get("TRITON_DEFAULT_FP_FUSION"))
    try:
        depends["jit"] = kernel.cache_key
    except Exception:  # noqa: BLE001 - an interpreted or otherwise keyless kernel: the module's text
        pass
    key = hashlib.sha256(json.dumps(depends, sort_keys=True, default=str).encode()).hexdigest()[:24]
    cached = CACHE_DIR / f"{fn.__name__}-{key}.json"
    if cached.exists():
        built = Built(**{k: (tuple(tuple(p) for p in v) if k == "params" else v)
                         for k, v in json.loads(cached.read_text()).items()})
        return dataclasses.replace(built, asm=_sourced_from(built.asm, path))
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(triton_path), str(ROOT)])
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    result = subprocess.run([sys.executable, str(Path(__file__).with_name("_build_worker.py"))],
                            input=json.dumps(request), cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=1200)
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    if result.returncode != 0 or not last.startswith("{"):
        raise BuildError(f"{fn.__name__}: the gfx950 build failed:\n{(result.stderr or result.stdout)[-3000:]}")
    answer = json.loads(last)
    if "error" in answer:
        raise BuildError(f"{fn.__name__}: the gfx950 build failed: {answer['error']}")
    built = Built(name=answer["name"], asm=answer["asm"], shared=answer["shared"], num_warps=answer["num_warps"],
                  params=tuple(tuple(p) for p in answer["params"]), signature=answer["signature"],
                  triton=answer["triton"])
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    tmp.write_text(json.dumps(built.__dict__))
    tmp.replace(cached)
    return dataclasses.replace(built, asm=_sourced_from(built.asm, path))
