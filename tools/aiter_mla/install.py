"""The single place that reaches into submission.py: under MLA_EMULATE=gfx950 with MLA_PATH=aiter,
submission.STATE.aiter (its aiter API) becomes the emulated stand-in (standin.api()). Names used:
STATE with its fields aiter and aiter_error (declared in tests/test_surface.py's SURFACE)."""
import os

from . import standin
from .launch import HOW_TO_GET, asm_dir


def wanted():
    """True when MLA_PATH=aiter asks for the aiter path."""
    return os.environ.get("MLA_PATH") == "aiter"


def install(submission):
    """Give `submission` the emulated aiter (AITER_ASM_DIR must name aiter's hsa/ directory)."""
    if submission is None:
        return
    if asm_dir() is None:
        submission.STATE.aiter, submission.STATE.aiter_error = None, HOW_TO_GET
        return
    submission.STATE.aiter, submission.STATE.aiter_error = standin.api(), None
