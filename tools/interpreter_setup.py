"""For the tools: without a GPU, run the kernels in Triton's interpreter (TRITON_INTERPRET must
be set before triton is imported) with the shim and the inline-asm emulator the tests use."""
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def use_interpreter_without_gpu():
    """Call before importing triton or submission; does nothing on a machine with a GPU."""
    if torch.cuda.is_available():
        return
    os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    import asm_emulation
    import interpreter_shim
    interpreter_shim.install()
    asm_emulation.install()
