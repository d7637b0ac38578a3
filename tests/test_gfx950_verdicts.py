"""Under `MLA_EMULATE=gfx950 python eval.py test`, every failure of a kernel on the emulator is the
case's verdict (eval.py's EmulatorVerdict): the runner's lines for a failed case (`test.<i>.status:
fail`, its error), `check: fail`, exit 112, and on stdout one line naming the kernel, the amdgcn
instruction and its line, the Python source line the build's `.loc` gives it, and the fault; within
60 s for a hang, at once for the rest. A pass names the kernels it emulated.

A competitor's own file (tests/competitor_submission.py: bf16 attention in one Triton kernel) runs
from a copy of the harness with one right case and a planted bug in each other (PLANTED_BUG): a read
past the KV buffer, an opcode the emulator does not implement (inline asm), a spin on a flag nobody
sets, and the read past the buffer with the failed launch caught (the answer from torch: right, and
still a failed case). One eval.py run: the worker starts once.
"""
import pickle
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from test_harness import run_eval

HARNESS = ("eval.py", "reference.py", "utils.py", "task.py", "interpreter_shim.py")
CASES = {  # kv_len -> (planted bug, what the verdict names: the source line's text and the fault)
    40: ("", None),
    41: ("read_past_end", r"\[submission\.py:\d+: kv = tl\.load\(row \+ dims\[None, :\]\)\]: MemoryFault: lane \d+, "
                          r"address 0x[0-9a-f]+: 16-byte access at offset 0x[0-9a-f]+ outside kv_ptr \[0x0, 0xb880\)"),
    42: ("unsupported_opcode", r"line \d+: v_cubeid_f32 v\d+, v\d+, v\d+, v\d+ \[submission\.py:\d+: out = "
                               r"tl\.inline_asm_elementwise.*\]: Unsupported: opcode v_cubeid_f32 is not emulated"),
    43: ("spin", r"\[submission\.py:\d+: while tl\.atomic_add\(flag_ptr, 0, sem=\"acquire\"\) == 0:\]: a hang: the "
                 r"workgroup ran past its budget of 1000000 wave instructions"),
    44: ("caught", r"MemoryFault: lane \d+, address 0x[0-9a-f]+: 16-byte access at offset 0x[0-9a-f]+ outside "
                   r"kv_ptr \[0x0, 0xc600\)"),
}
VERDICT_S = 60


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    """eval.py test over CASES in a folder holding the harness, the competitor's file as
    submission.py and tools/ -> (exit code, protocol lines, stdout, stderr)."""
    workdir = tmp_path_factory.mktemp("competitor")
    for name in HARNESS:
        shutil.copy(ROOT / name, workdir / name)
    shutil.copy(ROOT / "tests" / "competitor_submission.py", workdir / "submission.py")
    (workdir / "tools").symlink_to(ROOT / "tools")
    cases = "".join(f"batchsize: 1; qseqlen: 1; kvseqlen: {kv_len}; seed: 5\n" for kv_len in CASES)
    planted = ",".join(f"{kv_len}={bug}" for kv_len, (bug, _) in CASES.items() if bug)
    return run_eval(workdir, "test", cases, env_extra={"MLA_EMULATE": "gfx950", "PLANTED_BUG": planted})


def case_seconds(stderr, index):
    """The seconds eval.py's progress line gives case `index`."""
    return float(re.search(rf"^\[{index + 1}/{len(CASES)}\] .* \((\d+\.\d) s\)$", stderr, re.M)[1])


def test_the_right_case_passes_and_names_what_it_emulated(planted_run):
    code, lines, stdout, stderr = planted_run
    assert lines["test.0.status"] == "pass", stderr[-3000:]
    assert re.search(r"^test\.0\.emulated: _decode_kernel 1 launch [\d,]+ wave instructions$", stdout, re.M), stdout


@pytest.mark.parametrize("index", range(1, len(CASES)))
def test_a_planted_bug_is_the_cases_verdict_in_time(planted_run, index):
    code, lines, stdout, stderr = planted_run
    bug, verdict = list(CASES.values())[index]
    assert lines[f"test.{index}.status"] == "fail", (bug, stderr[-3000:])
    line = re.search(rf"^test\.{index}\.emulator: (.*)$", stdout, re.M)
    assert line, stdout
    assert line[1] == lines[f"test.{index}.error"]   # the protocol's error is the same one line
    assert re.match(r"_decode_kernel: workgroup \(0, 0, 0\), wave \d, line \d+: ", line[1]), line[1]
    assert re.search(verdict, line[1]), line[1]
    assert case_seconds(stderr, index) < VERDICT_S, (bug, stderr)


def test_a_failed_case_is_the_runners_check_fail_exit_112(planted_run):
    code, lines, stdout, stderr = planted_run
    assert code == 112 and lines["check"] == "fail", stderr[-3000:]
    assert "Traceback" not in stderr and "Exception in thread" not in stderr, stderr[-3000:]


def test_an_emulator_that_cannot_be_installed_is_every_cases_verdict_never_a_hang(tmp_path):
    """A fork that keeps one of the dispatch hooks but lost the others cannot be made to dispatch as on the
    MI355X: the worker's install fails, and each case says so (a pool initializer that raised would start
    a new worker forever)."""
    for name in HARNESS:
        shutil.copy(ROOT / name, tmp_path / name)
    source = (ROOT / "tests" / "competitor_submission.py").read_text()
    (tmp_path / "submission.py").write_text(source + "\n_arch = None   # one hook of ours, the others missing\n")
    (tmp_path / "tools").symlink_to(ROOT / "tools")
    code, lines, stdout, stderr = run_eval(tmp_path, "test", "batchsize: 1; qseqlen: 1; kvseqlen: 40; seed: 5\n",
                                           env_extra={"MLA_EMULATE": "gfx950"}, timeout_s=45)
    assert code == 112 and lines["check"] == "fail", stderr[-3000:]
    assert lines["test.0.error"] == ("the emulator could not be installed: AttributeError: submission lacks "
                                     "_platform, _num_sms, STATE: it cannot be made to dispatch as on the MI355X "
                                     "(tools/gfx950/dispatch.py sets them)"), lines


def test_the_verdict_crosses_to_a_process_without_the_tools():
    """The worker's exception unpickles where tools/ is not on the path (eval.py's own process)."""
    import eval as harness
    data = pickle.dumps(harness.EmulatorVerdict("_k: line 3: s_endpgm: a fault"))
    code = f"import pickle, sys; sys.path.insert(0, {str(ROOT)!r}); print(pickle.loads({data!r}))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / "tests",
                            timeout=120, env={"PATH": "/usr/bin:/bin", "MLA_EMULATE": "gfx950"})
    assert result.stdout.strip() == "_k: line 3: s_endpgm: a fault", result.stderr[-2000:]


def test_a_tools_exception_becomes_a_verdict_in_the_worker(monkeypatch):
    import eval as harness
    sys.path.insert(0, str(ROOT / "tools"))
    from gfx950.build import BuildError
    monkeypatch.setattr(harness, "EMULATE", True)

    def fails():
        raise BuildError("_k: the gfx950 build failed:\nline two")
    with pytest.raises(harness.EmulatorVerdict, match="^BuildError: _k: the gfx950 build failed: line two$"):
        harness._emulated(fails)
    with pytest.raises(ZeroDivisionError):   # the submission's own: as it is
        harness._emulated(lambda: 1 / 0)
