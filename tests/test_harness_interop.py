"""Each of our task.py, utils.py, reference.py and eval.py works beside the runner's other three.

The runner's files are not copied here; stand-ins with exactly the runner's interfaces are
(gpu-mode/reference-kernels problems/amd_202602: its eval.py imports set_seed and
clear_l2_cache_large from utils, TestSpec from task (optional), check_implementation and
generate_input from reference; its reference.py imports input_t / output_t from task and
make_match_reference from utils and calls generate_input(batchsize, qseqlen, kvseqlen, seed);
its utils.py is tests/runner_utils_standin.py). Each combination runs one case on this machine.
"""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

RUNNER_TASK = '''
from typing import TypedDict, TypeVar
import torch
input_t = TypeVar("input_t", bound=tuple)
output_t = TypeVar("output_t", bound=torch.Tensor)
class TestSpec(TypedDict):
    batchsize: int
    qseqlen: int
    kvseqlen: int
    seed: int
'''

# The runner's utils.py: its stand-in, written from its description (the two-stage MLA check).
RUNNER_UTILS = (Path(__file__).parent / "runner_utils_standin.py").read_text()

# The runner's reference needs aiter; its stand-in makes the same inputs with our
# generator (saved as ours_reference.py) and checks against exact attention.
RUNNER_REFERENCE = '''
import torch
from task import input_t, output_t
from utils import make_match_reference
import ours_reference

def generate_input(batchsize: int, qseqlen: int, kvseqlen: int, seed: int) -> input_t:
    return ours_reference.generate_input(batchsize, qseqlen, kvseqlen, seed)

def ref_kernel(data: input_t) -> output_t:
    return ours_reference.exact_attention(data).to(torch.bfloat16)

check_implementation = make_match_reference(ref_kernel, rtol=1e-1, atol=1e-1)
'''

# What the runner's eval does for one test case, in the same worker-less form.
RUNNER_EVAL = '''
import os, sys
import torch
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
    import interpreter_shim
    interpreter_shim.install()
from utils import set_seed, clear_l2_cache_large as clear_l2_cache
try:
    from task import TestSpec
except ImportError:
    TestSpec = dict
from reference import check_implementation, generate_input
from submission import custom_kernel

set_seed(42)
data = generate_input(batchsize=2, qseqlen=1, kvseqlen=40, seed=7)
clear_l2_cache()
good, message = check_implementation(data, custom_kernel(data))
print("check:", "pass" if good else "fail", message)
sys.exit(0 if good else 112)
'''

RUNNER_FILES = {"task.py": RUNNER_TASK, "utils.py": RUNNER_UTILS, "reference.py": RUNNER_REFERENCE,
                "eval.py": RUNNER_EVAL}


def make_dir(tmp_path, ours):
    """A runner folder with our `ours` file in place of the runner's one."""
    for name, text in RUNNER_FILES.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    for name in ("submission.py", "interpreter_shim.py", ours):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "reference.py", tmp_path / "ours_reference.py")
    return tmp_path


def run(workdir, *args):
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "POPCORN_FD")}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    return subprocess.run([sys.executable, *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("ours", ["task.py", "utils.py", "reference.py"])
def test_our_file_beside_the_runners_eval(tmp_path, ours):
    result = run(make_dir(tmp_path, ours), "eval.py")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "check: pass" in result.stdout


def test_our_eval_and_submission_in_the_runners_folder(tmp_path):
    """What a user with the runner's folder does: drop in our submission.py and eval.py."""
    workdir = make_dir(tmp_path, "eval.py")
    (workdir / "cases.txt").write_text("batchsize: 2; qseqlen: 1; kvseqlen: 40; seed: 7\n")
    read_fd, write_fd = os.pipe()
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(POPCORN_FD=str(write_fd), TRITON_DEFAULT_FP_FUSION="1")
    proc = subprocess.Popen([sys.executable, "eval.py", "test", "cases.txt"], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(write_fd,))
    os.close(write_fd)
    with os.fdopen(read_fd) as reader:
        protocol = reader.read()
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, protocol + stderr[-3000:]
    assert "test.0.status: pass" in protocol and "check: pass" in protocol


def test_the_stand_ins_reject_a_wrong_answer(tmp_path):
    """The runner-style check in these stand-ins can fail (so the passes above mean something)."""
    workdir = make_dir(tmp_path, "task.py")
    (workdir / "submission.py").write_text(
        "import torch\nfrom reference import ref_kernel\n"
        "def custom_kernel(data):\n    return -ref_kernel(data) - 1\n")
    result = run(workdir, "eval.py")
    assert result.returncode == 112 and "check: fail" in result.stdout
