"""Test setup: on a machine without a GPU the kernels run in Triton's interpreter.

TRITON_INTERPRET must be set before submission.py decorates its kernels, and the
interpreter shim (interpreter_shim.py) must be installed for bf16 dots to be right there.
"""
import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    import interpreter_shim  # noqa: E402

    import asm_emulation  # noqa: E402 - the native variants' inline asm, emulated

    interpreter_shim.install()
    interpreter_shim.install_bounds_guard()  # every load, store and atomic inside a tensor argument
    asm_emulation.install()

# A kernel variant that falls back outside tests/test_fallback.py is a failure: the
# variant under test did not run.
FALLBACK_IS_AN_ERROR = "error:submission. kernel variant failed:RuntimeWarning"
# The tile of the tests that pin a small one: 16 tokens in the interpreter (fast), 32 on a GPU.
# On the H200 the portable conversion in 16-token tiles gives wrong answers (24224 of 24576
# elements of the self-check's input, results/h200_gpu_failures_v13.log; a GPU-only fault the
# self-check catches and falls back from; no dispatch picks 16-token tiles there).
SMALL_BLOCK_N = 32 if HAS_GPU else 16


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA or ROCm GPU (skipped elsewhere)")


def pytest_sessionstart(session):
    """One line before the tests when the runner's Triton is not installed yet: the tests that
    build with it (tests/test_compile_targets.py and others) install it on first use."""
    sys.path.insert(0, str(ROOT / "tools"))
    import common
    if common.has_runner_triton() or hasattr(session.config, "workerinput"):  # the xdist controller says it
        return
    session.config.pluginmanager.get_plugin("terminalreporter").write_line(
        f"The runner's Triton {common.RUNNER_TRITON_VERSION} is not in {common.runner_triton_dir()}: the tests that "
        f"build with it "
        f"install it there on first use (about 640 MB, once; RUNNER_TRITON_DIR=DIR names another place).")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if item.path.name != "test_fallback.py":
            item.add_marker(pytest.mark.filterwarnings(FALLBACK_IS_AN_ERROR))
        if not HAS_GPU and "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_access_out_of_bounds():
    """In the interpreter, a test fails when any kernel it ran touched memory outside its
    tensor arguments (interpreter_shim's bounds guard), even where the values passed or a
    fallback hid the failed launch: on a GPU that access can fault and end the process."""
    if HAS_GPU:
        yield
        return
    interpreter_shim.bounds_violations(clear=True)
    yield
    found = interpreter_shim.bounds_violations(clear=True)
    assert not found, "out-of-bounds access in the interpreter:\n" + "\n".join(found[:5])


@pytest.fixture
def fresh_plans(monkeypatch):
    """Run with a fresh submission.STATE (no plans, failed variants, tuning...), reset
    afterwards too, and no first-call tuning (tests/test_first_call_tuning.py turns it on where it tests it)."""
    import submission
    monkeypatch.setenv("MLA_TUNE", "0")
    submission.STATE.reset()
    yield submission
    submission.STATE.reset()
