"""The corpus that proves the gfx950 emulator right independently of our own kernels: small
kernels of our own (triton_kernels.py, gluon_kernels.py), each run by a `launch` and checked
against numpy (reference.py), grouped as CASES.

    for case in CASES:
        case.run(launch, np.random.default_rng(0))   # AssertionError on a wrong answer

`launch(kernel, grid, *args, num_warps=.., num_stages=.., **constexprs)` must act exactly as
`kernel[grid](*args, num_warps=.., num_stages=.., **constexprs)` on CPU torch tensors (updated
in place): gfx950.emulate, or Triton's interpreter for the standard-Triton cases
(tests/test_gfx950_corpus_refs.py, which validates the numpy answers themselves), or
static.py's builder (the instruction forms each case's builds contain).

Triton's gfx950 code generation is tested on the hardware upstream, so a case whose build
the emulator runs to a wrong answer shows a wrong emulation.
"""
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass(frozen=True)
class Case:
    """name: unique; run(launch, rng): builds inputs, launches, checks (AssertionError);
    exercises: the opcode classes it targets; interpreter: None when Triton's interpreter can
    run it, else why not (its numpy answer is then checked only through the emulator);
    runner: None when the runner's Triton 3.6.0 builds it, else why not (it then runs only
    with this Python's newer Triton)."""
    name: str
    run: Callable
    exercises: str
    interpreter: Optional[str] = None
    runner: Optional[str] = None


from .cases import CASES as _OURS  # noqa: E402 - Case first: cases.py builds the list from it
from .common_cases import CASES as _COMMON  # noqa: E402

CASES = _OURS + _COMMON

__all__ = ["Case", "CASES"]
