"""What the tools share: the leaderboard's cases (read from benchmarks.txt, seeds included)
and, without a GPU, Triton's interpreter set up as the tests set it up."""
import os
import re
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


def leaderboard_cases():
    """[(batch, kv_len, seed)] of benchmarks.txt, in its order."""
    cases = []
    for line in (ROOT / "benchmarks.txt").read_text().splitlines():
        values = dict(re.findall(r"(\w+):\s*(-?\d+)", line))
        cases.append((int(values["batchsize"]), int(values["kvseqlen"]), int(values["seed"])))
    return cases


def parse_cases(spec):
    """'BATCHxKV_LEN,...' -> [(batch, kv_len, seed)], a leaderboard case with its seed, any
    other with seed 1; None or '' -> every leaderboard case."""
    if not spec:
        return leaderboard_cases()
    seeds = {(batch, kv_len): seed for batch, kv_len, seed in leaderboard_cases()}
    cases = []
    for item in spec.split(","):
        batch, kv_len = (int(x) for x in item.split("x"))
        cases.append((batch, kv_len, seeds.get((batch, kv_len), 1)))
    return cases
