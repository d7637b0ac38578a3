"""submission.py on the emulator: every Triton or Gluon launch on CPU tensors runs the
gfx950 binary (built with the runner's Triton 3.6.0) in the emulator, and submission.py
dispatches as it would on the MI355X.

    from gfx950 import dispatch
    dispatch.install(submission_module)   # eval.py does this under MLA_EMULATE=gfx950

What changes: `kernel[grid](*args, **kwargs)` of any triton.jit / gluon.jit kernel whose
tensor arguments are on the CPU calls gfx950.emulate (launches on a GPU are untouched);
and, where the module has them, submission.py's device queries answer as the MI355X's
(`_arch` -> gfx950, `_platform` -> hip, `_num_sms` -> 256 CUs), so it picks the variants,
launch shapes, split counts, scratch buffers, self-checks and fallback order of the runner.
Nothing in submission.py changes: the pasted file has no trace of the switch. aiter does
not exist on a CPU, so the aiter path is absent here (as on a runner where its import
failed).

A failure to build is a Triton compile error to the submission (it falls back to its next
variant, as on the runner); an emulation error (a fault, an unknown instruction, a hang,
a detector's finding) is not: it stops the call with the emulator's message, as a fault
stops the runner. Every launch and every such failure is recorded (take_record), so the
caller can name the kernels a call ran, and fail a call whose code caught the error.
"""
import functools
import os

ARCH = "gfx950"
NUM_CUS = 256
ENV = "MLA_EMULATE"
_INSTALLED = {}
_RECORD = {"launches": [], "builds": [], "failures": []}


def take_record():
    """What the launches since the last call did, and clears it: {"launches": [(kernel name,
    wave instructions)], "builds": [their gfx950.Built], "failures": [one-line message]}: each
    emulation error (and a missing runner's Triton), even one the calling code caught."""
    record = {key: list(values) for key, values in _RECORD.items()}
    for values in _RECORD.values():
        values.clear()
    return record


def summary(launches):
    """'_k 2 launches 3,120 wave instructions; _m 1 launch 80 wave instructions' (first-launch
    order), or 'no kernel'."""
    totals = {}
    for name, instructions in launches:
        count, total = totals.get(name, (0, 0))
        totals[name] = (count + 1, total + instructions)
    return "; ".join(f"{name} {count} launch{'es' if count > 1 else ''} {total:,} wave instructions"
                     for name, (count, total) in totals.items()) or "no kernel"


def record(name, instructions=None, failure=None):
    """A launch made outside gfx950.emulate (aiter's code objects, tools/aiter_mla) into the record:
    its kernel name and wave instructions, or its failure's one-line message."""
    if failure is not None:
        _RECORD["failures"].append(failure)
    else:
        _RECORD["launches"].append((name, instructions))


def _emulate_recorded(kernel, grid, args, kwargs):
    """gfx950.emulate, its launch or its failure recorded."""
    import gfx950
    from common import RunnerTritonMissing
    try:
        launch = gfx950.emulate(kernel, grid, *args, **_INSTALLED["options"], **kwargs)
    except (gfx950.EmulationError, RunnerTritonMissing) as exc:
        _RECORD["failures"].append(str(exc))
        raise
    _RECORD["launches"].append((launch.kernel.name, launch.instructions))
    _RECORD["builds"].append(launch.built)
    return launch


def requested():
    """The emulated architecture MLA_EMULATE asks for (None when unset); only gfx950 exists."""
    value = os.environ.get(ENV)
    if value in (None, "", "0"):
        return None
    if value != ARCH:
        raise ValueError(f"{ENV}={value!r}: the emulator runs {ARCH} only (MLA_EMULATE=gfx950)")
    return value


def _on_cpu(args, kwargs):
    tensors = [a for a in list(args) + list(kwargs.values()) if hasattr(a, "device") and hasattr(a, "data_ptr")]
    return bool(tensors) and all(t.device.type == "cpu" for t in tensors)


def _bound_arguments(kernel, args, kwargs):
    import inspect
    names = list(inspect.signature(kernel.fn).parameters)
    bound = dict(zip(names, args))
    bound.update({k: v for k, v in kwargs.items() if k in names})
    return bound


def _launch_classes():
    """The classes whose run() a launch `kernel[grid](...)` calls: Triton's JIT functions
    (Gluon's derive from them) and, where the interpreter is on, its interpreted ones."""
    import triton.runtime.interpreter as interpreter
    import triton.runtime.jit as jit
    return [jit.JITFunction, interpreter.InterpretedFunction]


def install(submission=None, **emulate_options):
    """Route CPU launches to the emulator; make `submission` (a module) dispatch as on the
    MI355X. emulate_options go to every gfx950.emulate call (order, budget, ...)."""
    for cls in _launch_classes():
        if cls in _INSTALLED:
            continue
        _INSTALLED[cls] = original = cls.run

        def run(self, *args, grid, warmup, _original=original, **kwargs):
            if warmup or not _on_cpu(args, kwargs):
                return _original(self, *args, grid=grid, warmup=warmup, **kwargs)
            if callable(grid):
                grid = grid(_bound_arguments(self, args, kwargs))
            return _emulate_recorded(self, grid, args, kwargs)
        cls.run = run
    _INSTALLED["options"] = dict(emulate_options)
    if submission is not None:
        _as_mi355x(submission)


MI355X_HOOKS = ("_arch", "_platform", "_num_sms", "STATE")  # what _as_mi355x sets or clears in the module


def _as_mi355x(sub):
    """Make `sub` (submission.py, or a fork of it) dispatch as on the MI355X; AttributeError naming what a fork lacks.
    A module with none of the hooks (a competitor's own file) is left as it is: it dispatches as it is written."""
    missing = [name for name in MI355X_HOOKS if not hasattr(sub, name)]
    if len(missing) == len(MI355X_HOOKS):
        return
    if missing:
        raise AttributeError(f"{getattr(sub, '__name__', sub)!s} lacks {', '.join(missing)}: it cannot be made to "
                             f"dispatch as on the MI355X (tools/gfx950/dispatch.py sets them)")
    _INSTALLED.setdefault("module", (sub, {name: getattr(sub, name) for name in ("_arch", "_platform", "_num_sms")}))
    sub._arch = functools.lru_cache(maxsize=None)(lambda device: ARCH)
    sub._platform = lambda device: "hip"
    sub._num_sms = functools.lru_cache(maxsize=None)(lambda device: NUM_CUS)
    sub.STATE.predictions.clear()


def uninstall():
    """Undo install: Triton's launches and the module's device queries as they were."""
    for cls in _launch_classes():
        if cls in _INSTALLED:
            cls.run = _INSTALLED.pop(cls)
    if "module" in _INSTALLED:
        sub, saved = _INSTALLED.pop("module")
        for name, value in saved.items():
            setattr(sub, name, value)
        sub.STATE.predictions.clear()
