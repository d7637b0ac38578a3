"""eval.py as the runner drives it: protocol lines on POPCORN_FD, exit codes, seeds, failures."""
import os
import re
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from conftest import ROOT

import eval as harness

HARNESS_FILES = ("eval.py", "reference.py", "utils.py", "task.py", "interpreter_shim.py", "submission.py")
ONE_CASE = "batchsize: 2; qseqlen: 1; kvseqlen: 40; seed: 7\n"


def run_eval(workdir, mode, cases_text, env_extra=None, popcorn=True, args=(), timeout_s=600):
    """Run `eval.py mode cases.txt *args` in workdir; returns (exit code, protocol lines as dict,
    stdout, stderr). The protocol fd, stdout and stderr are read at once (a process that fills one
    pipe never blocks on it); past timeout_s its whole process group is killed and the test fails
    with the end of its stderr."""
    case_file = workdir / "cases.txt"
    case_file.write_text(cases_text)
    env = {**os.environ, **(env_extra or {})}
    read_fd, write_fd = os.pipe()
    if popcorn:
        env["POPCORN_FD"] = str(write_fd)
    proc = subprocess.Popen([sys.executable, "eval.py", mode, str(case_file), *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(write_fd,),
                            start_new_session=True)
    os.close(write_fd)
    protocol = []
    with os.fdopen(read_fd) as reader:
        drain = threading.Thread(target=lambda: protocol.append(reader.read()), daemon=True)
        drain.start()
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            pytest.fail(f"eval.py {mode} ran past {timeout_s} s; its stderr ends:\n{stderr[-3000:]}")
        drain.join(timeout=60)
    lines = dict(line.split(": ", 1) for line in ("".join(protocol) if popcorn else stdout).splitlines()
                 if re.match(r"^[\w.-]+: ", line))
    return proc.returncode, lines, stdout, stderr


@pytest.fixture
def workdir(tmp_path):
    for name in HARNESS_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_test_mode_protocol(workdir):
    code, lines, _, stderr = run_eval(workdir, "test", ONE_CASE + "batchsize: 3; qseqlen: 1; kvseqlen: 17; seed: 8\n")
    assert code == 0, stderr
    assert lines["test-count"] == "2"
    for i, spec in enumerate(ONE_CASE.strip().split("\n") + ["batchsize: 3; qseqlen: 1; kvseqlen: 17; seed: 8"]):
        assert lines[f"test.{i}.spec"] == spec
        assert lines[f"test.{i}.status"] == "pass"
    assert lines["check"] == "pass"
    assert "[2/2]" in stderr  # one progress line per case


def test_benchmark_mode_protocol(workdir):
    code, lines, _, stderr = run_eval(workdir, "benchmark", ONE_CASE)
    assert code == 0, stderr
    assert lines["benchmark-count"] == "1" and lines["benchmark.0.spec"] == ONE_CASE.strip()
    stats = {k: float(lines[f"benchmark.0.{k}"]) for k in ("runs", "mean", "std", "err", "best", "worst")}
    assert stats["runs"] >= 3 and stats["best"] <= stats["mean"] <= stats["worst"] and stats["err"] >= 0
    assert lines["check"] == "pass"


def test_without_popcorn_fd_prints_lines_table_and_json(workdir):
    code, lines, stdout, stderr = run_eval(workdir, "benchmark", ONE_CASE, popcorn=False)
    assert code == 0, stderr
    assert lines["benchmark.0.spec"] == ONE_CASE.strip() and "geomean of means" in stdout
    assert re.search(r"^\s+2\s+40\s+\d+\s+[\d.]+", stdout, re.M)  # the table row


def test_a_message_stays_one_protocol_line_on_the_fd_and_reads_as_lines_on_stdout(capsys):
    read_fd, write_fd = os.pipe()
    with harness.PopcornOutput(write_fd) as logger:
        logger.log("test.0.error", "Number of mismatched elements: 2\\nMaximum error: 5")
    with os.fdopen(read_fd) as reader:
        assert reader.read() == "test.0.error: Number of mismatched elements: 2\\nMaximum error: 5\n"
    harness.PopcornOutput(None).log("test.0.error", "Number of mismatched elements: 2\\nMaximum error: 5")
    assert capsys.readouterr().out == "test.0.error: Number of mismatched elements: 2\n    Maximum error: 5\n"


def test_malformed_case_line_exits_113_naming_it(workdir):
    code, _, _, stderr = run_eval(workdir, "test", ONE_CASE + "batchsize: 4; kvseqlen: lots of\n")
    assert code == 113
    assert "batchsize: 4; kvseqlen: lots of" in stderr


def test_bad_arguments(workdir):
    env = {**os.environ, "POPCORN_FD": "1"}
    result = subprocess.run([sys.executable, "eval.py", "test"], cwd=workdir, env=env, capture_output=True)
    assert result.returncode == 2


def test_popcorn_seed_combines_as_the_runner(tmp_path):
    cases = tmp_path / "c.txt"
    cases.write_text(ONE_CASE)
    assert harness.get_test_cases(str(cases), None)[0].args["seed"] == 7
    secret = 123456789
    combined = harness.get_test_cases(str(cases), secret)[0].args["seed"]
    assert combined == 7 + (7 + secret) * (7 + secret + 1) // 2
    assert harness.get_test_cases(str(cases), secret + 1)[0].args["seed"] != combined


def test_wrong_submission_fails_check_with_a_useful_message(workdir):
    (workdir / "submission.py").write_text(
        "import torch\n"
        "from reference import exact_attention\n"
        "def custom_kernel(data):\n"
        "    out = exact_attention(data).to(torch.bfloat16)\n"
        "    out[:, :4] *= -1  # a quarter of the heads wrong\n"
        "    return out\n")
    code, lines, _, _ = run_eval(workdir, "test", ONE_CASE)
    assert code == 112 and lines["check"] == "fail" and lines["test.0.status"] == "fail"
    assert "mismatched elements" in lines["test.0.error"] and "ERROR at" in lines["test.0.error"]


# --- how each mode reports a failed case, as the runner's eval.py -------------------------

THREE_CASES = "".join(f"batchsize: {batch}; qseqlen: 1; kvseqlen: 17; seed: {batch}\n" for batch in (2, 3, 4))
QUICK = {"MLA_EVAL_CPU_BUDGET_S": "0.2"}  # the fewest timed calls (3) per case

# Right answers, except for batch 3: wrong (FAILS) or an exception (RAISES); every call says
# in which process it ran, and that process's parent.
STAND_IN = '''
import os, sys
import torch
from reference import exact_attention

def custom_kernel(data):
    print(f"submission: process {{os.getpid()}}, parent {{os.getppid()}}", file=sys.stderr, flush=True)
    out = exact_attention(data).to(torch.bfloat16)
    if data[4]["batch_size"] == 3:
        {on_batch_3}
    return out
'''
FAILS_ON_BATCH_3 = STAND_IN.format(on_batch_3="return -out")
RAISES_ON_BATCH_3 = STAND_IN.format(on_batch_3='raise RuntimeError("batch 3 is broken")')


def test_benchmark_reports_a_failed_case_and_runs_the_next(workdir):
    """The runner's benchmark: the spec line before the case, then its stats or status fail +
    error; the next case runs; `check: fail` and exit 112 at the end."""
    (workdir / "submission.py").write_text(FAILS_ON_BATCH_3)
    code, lines, _, stderr = run_eval(workdir, "benchmark", THREE_CASES, env_extra=QUICK)
    assert code == 112, stderr
    keys = list(lines)
    assert keys.index("benchmark.1.spec") < keys.index("benchmark.1.status") < keys.index("benchmark.2.spec")
    assert lines["benchmark.1.status"] == "fail" and "mismatched elements" in lines["benchmark.1.error"]
    assert int(lines["benchmark.0.runs"]) >= 3 and int(lines["benchmark.2.runs"]) >= 3
    assert "benchmark.2.status" not in lines and keys[-1] == "check" and lines["check"] == "fail"


def test_leaderboard_stops_at_the_first_failed_case_and_exits_0(workdir):
    """The runner's leaderboard: the spec line after the case, the first failure ends the
    run with `check: fail`, and the exit status is 0 (its main returns None there)."""
    (workdir / "submission.py").write_text(FAILS_ON_BATCH_3)
    code, lines, _, stderr = run_eval(workdir, "leaderboard", THREE_CASES, env_extra=QUICK)
    assert code == 0, stderr
    assert lines["benchmark-count"] == "3" and int(lines["benchmark.0.runs"]) >= 3
    assert lines["benchmark.1.status"] == "fail" and lines["check"] == "fail"
    assert not [key for key in lines if key.startswith("benchmark.2.")]


@pytest.mark.parametrize("mode, spec_written", [("benchmark", True), ("leaderboard", False)])
def test_spec_line_before_the_case_in_benchmark_after_it_in_leaderboard(workdir, mode, spec_written):
    """A case that raises ends the run with a traceback (as the runner); benchmark wrote its
    spec line before it ran, leaderboard writes it after."""
    (workdir / "submission.py").write_text(RAISES_ON_BATCH_3)
    code, lines, _, stderr = run_eval(workdir, mode, THREE_CASES, env_extra=QUICK)
    assert code == 1 and "batch 3 is broken" in stderr
    assert ("benchmark.1.spec" in lines) is spec_written
    assert "benchmark.0.mean" in lines and "check" not in lines


@pytest.mark.parametrize("mode, in_main_process", [("profile", True), ("test", False)])
def test_profile_runs_in_the_main_process_others_in_the_worker(workdir, mode, in_main_process):
    (workdir / "submission.py").write_text(FAILS_ON_BATCH_3)
    code, lines, _, stderr = run_eval(workdir, mode, THREE_CASES.splitlines()[0] + "\n")
    assert code == 0 and lines["check"] == "pass", stderr
    parents = set(re.findall(r"submission: process \d+, parent (\d+)", stderr))
    assert parents and (parents == {str(os.getpid())}) is in_main_process  # this test started eval.py


@pytest.mark.parametrize("cases, expected_code", [(ONE_CASE, 2), ("batchsize: 2; nonsense\n", 113)],
                         ids=["good-cases", "malformed-cases"])
def test_popcorn_fd_takes_only_the_runners_modes(workdir, cases, expected_code):
    """With POPCORN_FD a mode that is not the runner's reads the case file (113 when it is
    malformed), then exits 2 without a protocol line, as the runner."""
    (workdir / "submission.py").write_text(FAILS_ON_BATCH_3)  # no ranked_candidates: tune would fail at once
    code, lines, _, stderr = run_eval(workdir, "tune", cases)
    assert code == expected_code and not lines, stderr


# --- a submission that cannot run here ----------------------------------------------------
# The seed submission of the leaderboard imports aiter at module level; aiter exists only in
# ROCm builds. These stand-ins import a module of aiter's that no machine has (aiter missing
# here: "No module named 'aiter'"; on a ROCm machine with aiter: "... 'aiter.no_such_part'").

IMPORTS_AITER = '''
import torch
from aiter.no_such_part import mla_decode_fwd

def custom_kernel(data):
    return mla_decode_fwd(data)
'''
IMPORTS_AITER_IN_ITS_CALL = '''
import torch

def custom_kernel(data):
    from aiter.no_such_part import mla_decode_fwd
    return mla_decode_fwd(data)
'''
TWO_CASES = ONE_CASE + "batchsize: 3; qseqlen: 1; kvseqlen: 17; seed: 8\n"


def assert_says_aiter_and_what_to_do(message, first_words="submission.py cannot be imported: "):
    assert message.startswith(first_words + "ModuleNotFoundError: No module named 'aiter"), message
    assert "aiter exists only in ROCm builds" in message and "make its aiter import optional" in message, message
    assert harness.MESSAGE_SEPARATOR not in message and "Traceback" not in message, message


def test_a_submission_that_imports_aiter_fails_every_case_in_one_line(workdir):
    """The runner's protocol: per case `status: fail` and a one-line error naming aiter and
    saying what to do, `check: fail`, exit 112; no traceback anywhere."""
    (workdir / "submission.py").write_text(IMPORTS_AITER)
    code, lines, stdout, stderr = run_eval(workdir, "test", TWO_CASES)
    assert code == 112, stderr
    assert lines["test-count"] == "2" and lines["check"] == "fail"
    for idx in (0, 1):
        assert lines[f"test.{idx}.status"] == "fail"
        assert_says_aiter_and_what_to_do(lines[f"test.{idx}.error"])
    assert "Traceback" not in stdout + stderr


def test_verbose_adds_the_traceback(workdir):
    (workdir / "submission.py").write_text(IMPORTS_AITER)
    code, lines, stdout, stderr = run_eval(workdir, "test", ONE_CASE, popcorn=False, args=("--verbose",))
    assert code == 112 and lines["check"] == "fail", stderr
    assert "aiter exists only in ROCm builds" in lines["test.0.error"]
    assert re.search(r"^    Traceback \(most recent call last\):$", stdout, re.M), stdout  # under its key
    assert 'submission.py", line 3, in <module>' in stdout, stdout


@pytest.mark.parametrize("mode, expected_code", [("benchmark", 112), ("leaderboard", 0)])
def test_benchmark_and_leaderboard_report_the_failed_import_per_case(workdir, mode, expected_code):
    """benchmark: every case fails with the one line, exit 112; leaderboard: the first case
    fails and ends the run, exit 0 (the runner's rule for that mode)."""
    (workdir / "submission.py").write_text(IMPORTS_AITER)
    code, lines, stdout, stderr = run_eval(workdir, mode, TWO_CASES)
    assert code == expected_code and lines["check"] == "fail", stderr
    failed = [idx for idx in (0, 1) if lines.get(f"benchmark.{idx}.status") == "fail"]
    assert failed == ([0, 1] if mode == "benchmark" else [0]), lines
    for idx in failed:
        assert_says_aiter_and_what_to_do(lines[f"benchmark.{idx}.error"])
    assert "Traceback" not in stdout + stderr


def test_a_module_missing_in_the_first_call_fails_the_case_the_same_way(workdir):
    (workdir / "submission.py").write_text(IMPORTS_AITER_IN_ITS_CALL)
    code, lines, stdout, stderr = run_eval(workdir, "test", ONE_CASE)
    assert code == 112 and lines["test.0.status"] == "fail" and lines["check"] == "fail", stderr
    assert_says_aiter_and_what_to_do(lines["test.0.error"], "submission.py's first call failed: ")
    assert "Traceback" not in stdout + stderr


def test_another_missing_module_says_what_the_runner_has(workdir):
    (workdir / "submission.py").write_text("import torch\nimport no_such_library_anywhere\n")
    code, lines, _, stderr = run_eval(workdir, "test", ONE_CASE)
    assert code == 112, stderr
    error = lines["test.0.error"]
    assert "No module named 'no_such_library_anywhere'" in error and "aiter exists only" not in error, error
    assert "the leaderboard's runner has torch, triton, aiter and the task's files" in error, error
