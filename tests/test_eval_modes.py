"""eval.py's modes and its own checks, fast on a CPU: case-file validation (exit 113 before any
worker starts), --help, leaderboard (protocol lines, --json, the check on every timed call),
profile, tune (a candidate that fails its check is never ranked nor written) and the merge of
the MEASURED DISPATCH block.

Most runs use tiny cases and stand-in submissions (exact attention, no kernel), so no test
waits on Triton's interpreter for long; the ones that run the real submission cap its timed
calls with MLA_EVAL_CPU_BUDGET_S. tools/mutations_harness.py lists a deliberate bug in eval.py
for each test here; every one makes its tests fail.
"""
import base64
import dataclasses
import inspect
import io
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

import eval as harness
import reference
import task
from conftest import ROOT
from test_harness import HARNESS_FILES, run_eval

TINY_CASE = "batchsize: 2; qseqlen: 1; kvseqlen: 17; seed: 5"
QUICK = {"MLA_EVAL_CPU_BUDGET_S": "0.2"}  # the fewest timed calls (3) per case in the interpreter
ARCH = "cuda" if torch.cuda.is_available() else "cpu"  # what the tune stand-in's _arch() names

# A right answer from reference.exact_attention, no kernel; importing it leaves a marker file,
# so a test can tell whether any case ran.
EXACT_SUBMISSION = '''
from pathlib import Path
import torch
from reference import exact_attention
Path("submission_imported").touch()

def custom_kernel(data):
    return exact_attention(data).to(torch.bfloat16)
'''

# Right on its first input, then that answer for every later input: what a cache keyed on
# shapes instead of data does. Only a check after every timed call (leaderboard) sees it.
STALE_SUBMISSION = '''
import torch
from reference import exact_attention
FIRST_OUTPUT = []

def custom_kernel(data):
    if not FIRST_OUTPUT:
        FIRST_OUTPUT.append(exact_attention(data).to(torch.bfloat16))
    return FIRST_OUTPUT[0].clone()
'''

# What `eval.py tune` uses of submission.py (MEASURED_DISPATCH, _arch, STATE.plans, ranked_candidates,
# _one_stage_only, the family numbers, custom_kernel) with three candidates: RIGHT (slow), WRONG
# (fast, negated: fails the runner's check) and OFF (fast, 0.02 off: passes the runner's check,
# not ours), BF16 choices where that family runs in one stage only (no other stage counts).
# Ranked on time alone, a failed one would win.
RIGHT, WRONG, OFF = "bf16 t16 w4 s1 st1 direct", "bf16 t32 w4 s1 st1 direct", "bf16 t64 w4 s1 st1 direct"
TUNE_SUBMISSION = f'''
import dataclasses
import time
from collections import OrderedDict
from types import SimpleNamespace
import torch
from reference import exact_attention



@dataclasses.dataclass(frozen=True)
class Launch:
    block_n: int
    num_stages: int = 1
    scores: int = 0
    path: str = "triton"

    def __str__(self):
        return f"bf16 t{{self.block_n}} w4 s1 st{{self.num_stages}} direct"


RIGHT, WRONG, OFF = Launch(16), Launch(32), Launch(64)
# --- BEGIN MEASURED DISPATCH ---
MEASURED_DISPATCH = {{
    {ARCH!r}: {{
        (9, 99): 'bf16 t64 w8 s2 st1 combine',  # 1.5 us
    }},
}}
MEASURED_ON = {{
    {ARCH!r}: 'an earlier tune',
}}
# --- END MEASURED DISPATCH ---
STATE = SimpleNamespace(plans=OrderedDict())
BF16_SCORES, SCALED_SCORES = 0, 1


def _arch(device):
    return device.type


def _one_stage_only(device):
    return True


def ranked_candidates(batch, kv_len, device):
    return [RIGHT, WRONG, OFF]


def custom_kernel(data):
    config = data[4]
    choice = MEASURED_DISPATCH[_arch(data[0].device)][(config["batch_size"], config["kv_seq_len"])]
    STATE.plans[choice] = SimpleNamespace(variant=None)
    out = exact_attention(data)
    if choice == str(WRONG):
        return (-out).to(torch.bfloat16)
    if choice == str(OFF):
        return (out + 0.02).to(torch.bfloat16)
    time.sleep(0.005)
    return out.to(torch.bfloat16)
'''


@pytest.fixture
def harness_dir(tmp_path):
    """A folder with our harness files and the real submission."""
    for name in HARNESS_FILES:
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def with_submission(folder, text):
    (folder / "submission.py").write_text(text)
    return folder


def run_plain(folder, *args, env_extra=None):
    """eval.py with these arguments and no case file of its own."""
    env = {k: v for k, v in os.environ.items() if k != "POPCORN_FD"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "eval.py", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=120)


def choices(rows):
    """The candidates' choices of JSON rows (their literal form)."""
    return [row["choice"] for row in rows]


# --- case file validation -----------------------------------------------------------------

MALFORMED = {
    "non-integer": ("batchsize: four; qseqlen: 1; kvseqlen: 1024; seed: 3", "'batchsize' must be an integer"),
    "missing-key": ("batchsize: 2; kvseqlen: 17; seed: 5", "missing key 'qseqlen'"),
    "unknown-key": (TINY_CASE + "; colour: 3", "unknown key 'colour'"),
    "bool": ("batchsize: true; qseqlen: 1; kvseqlen: 17; seed: 5", "'batchsize' must be an integer, not 'true'"),
    "repeated-key": (TINY_CASE + "; seed: 6", "key 'seed' given 2 times"),
    "size-zero": ("batchsize: 2; qseqlen: 1; kvseqlen: 0; seed: 5", "'kvseqlen' must be at least 1"),
    "garbage": ("hello world", "'hello world' is not `key: value`"),
    "commented-garbage": ("hello world  # a note", "'hello world' is not `key: value`"),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_case_line_exits_113_before_any_worker(harness_dir, name):
    line, reason = MALFORMED[name]
    folder = with_submission(harness_dir, EXACT_SUBMISSION)
    code, lines, _, stderr = run_eval(folder, "test", f"{TINY_CASE}\n{line}\n{TINY_CASE}\n")
    assert code == 113, stderr
    assert f"invalid test case: '{line}' (line 2 of" in stderr and reason in stderr
    assert "Traceback" not in stderr and not lines  # no protocol line: nothing ran
    assert not (folder / "submission_imported").exists()


def test_blank_lines_and_comments_are_skipped(harness_dir):
    """A case file may hold blank lines, whole-line `#` comments and a comment after a case;
    the spec line is the case without its comment, and line numbers in messages still count
    every line."""
    folder = with_submission(harness_dir, EXACT_SUBMISSION)
    cases = f"# my cases\n\n{TINY_CASE}\n   \n{TINY_CASE.replace('seed: 5', 'seed: 6')}  # seed 6: another input\n"
    code, lines, _, stderr = run_eval(folder, "test", cases)
    assert code == 0, stderr
    assert lines["test-count"] == "2" and lines["check"] == "pass"
    assert lines["test.0.spec"] == TINY_CASE and lines["test.1.spec"] == TINY_CASE.replace("seed: 5", "seed: 6")
    code, _, _, stderr = run_eval(folder, "test", f"# my cases\n\n{TINY_CASE}\nbatchsize: 2 # cut short\n")
    assert code == 113 and "'batchsize: 2 # cut short' (line 4 of" in stderr, stderr


@pytest.mark.parametrize("verbose", [False, True], ids=["quiet", "verbose"])
def test_a_pass_line_is_the_stage_of_the_rule_and_its_figures_unless_verbose(harness_dir, verbose):
    folder = with_submission(harness_dir, EXACT_SUBMISSION)
    code, lines, _, stderr = run_eval(folder, "test", TINY_CASE + "\n", args=("--verbose",) if verbose else ())
    assert code == 0 and lines["test.0.status"] == "pass", stderr
    message = lines["test.0.message"]
    assert re.fullmatch(r"pass \(the runner's rule, stage [12]: [^;]*; maximum error [0-9.e-]+\)"
                        + ("; for information, not checked: .*" if verbose else ""), message), message
    assert ("for information" in message) is verbose, message


def test_a_case_file_of_comments_only_exits_113(harness_dir):
    folder = with_submission(harness_dir, EXACT_SUBMISSION)
    code, lines, _, stderr = run_eval(folder, "test", "# nothing yet\n\n")
    assert code == 113 and "no test case in" in stderr and not lines, stderr
    assert not (folder / "submission_imported").exists()


def test_a_good_case_file_runs(harness_dir):
    folder = with_submission(harness_dir, EXACT_SUBMISSION)
    cases = f"{TINY_CASE}\nbatchsize: 1; qseqlen: 1; kvseqlen: 20; seed: -4\n"
    code, lines, _, stderr = run_eval(folder, "test", cases)
    assert code == 0, stderr
    assert lines["test-count"] == "2" and lines["check"] == "pass"
    assert (folder / "submission_imported").exists()  # the marker the tests above rely on works


def test_case_keys_are_generate_inputs_arguments(tmp_path):
    required = [name for name, parameter in inspect.signature(reference.generate_input).parameters.items()
                if parameter.default is inspect.Parameter.empty]
    assert list(harness.CASE_KEYS) == required == list(task.TestSpec.__annotations__)
    cases = tmp_path / "cases.txt"
    cases.write_text("batchsize: 4; qseqlen: 1; kvseqlen: 1024; seed: 4217\n"
                     "  batchsize:2 ;seed: 7;kvseqlen: 3;qseqlen: 1\n")  # any order, spaces as the runner
    parsed = harness.get_test_cases(str(cases), None)
    assert [test.args for test in parsed] == [dict(batchsize=4, qseqlen=1, kvseqlen=1024, seed=4217),
                                             dict(batchsize=2, seed=7, kvseqlen=3, qseqlen=1)]
    assert all(type(value) is int for test in parsed for value in test.args.values())


# --- arguments ----------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_names_every_mode_and_flag(harness_dir, flag):
    result = run_plain(harness_dir, flag)
    assert result.returncode == 0, result.stderr
    for name in [*harness.MODES, *harness.FLAGS]:  # each starts a described line
        assert re.search(rf"^  {re.escape(name)} +\S", result.stdout, re.M), name
    for name, flag in harness.FLAG_SPECS.items():  # and says where it applies
        assert re.search(rf"^  {re.escape(name)}\b.* +{', '.join(flag.modes)}: ", result.stdout, re.M), name
    assert set(harness.FLAG_SPECS) == {name.split()[0] for name in harness.FLAGS} - {"-h,"}


def test_no_mode_exits_2_with_usage(harness_dir):
    result = run_plain(harness_dir)
    assert result.returncode == 2 and "usage: python eval.py" in result.stderr and not result.stdout


@pytest.mark.parametrize("argv, popcorn, message", [
    pytest.param(["bogus"], False, "usage: python eval.py", id="unknown-mode"),
    pytest.param(["test", "--bogus"], False, "unknown option --bogus", id="unknown-option"),
    pytest.param(["tune", "--runs", "0"], False, "--runs needs at least 1", id="runs-zero"),
    pytest.param(["tune", "--runs"], False, "--runs needs a value", id="runs-without-value"),
    pytest.param(["test", "--arch", "gfx950"], False, "--arch applies to ingest, not test", id="flag-of-another-mode"),
    pytest.param(["compare"], False, "compare needs OTHER", id="compare-without-other"),
    pytest.param(["ingest"], False, "ingest needs LOG", id="ingest-without-log"),
    pytest.param(["test", "a.txt", "b.txt"], False, "too many arguments for test: b.txt", id="extra-argument"),
    # with POPCORN_FD and fewer than 2 arguments: exit 2, as the runner, --help or not
    pytest.param(["--help"], True, "", id="popcorn-one-argument"),
])
def test_bad_arguments_exit_2(capsys, argv, popcorn, message):
    assert harness._parse_args(argv, popcorn=popcorn) == 2
    captured = capsys.readouterr()
    assert message in captured.err and not captured.out


# --- leaderboard --------------------------------------------------------------------------

def test_leaderboard_on_cpu_writes_the_protocol(harness_dir):
    code, lines, _, stderr = run_eval(harness_dir, "leaderboard", TINY_CASE + "\n", env_extra=QUICK)
    assert code == 0, stderr
    assert lines["benchmark-count"] == "1" and lines["benchmark.0.spec"] == TINY_CASE
    assert int(lines["benchmark.0.runs"]) >= 3 and float(lines["benchmark.0.mean"]) > 0
    assert lines["check"] == "pass"


def test_leaderboard_json_has_provenance_and_rows(harness_dir):
    folder = with_submission(harness_dir, EXACT_SUBMISSION)
    out = folder / "out.json"
    code, _, stdout, stderr = run_eval(folder, "leaderboard", TINY_CASE + "\n", env_extra=QUICK,
                                       popcorn=False, args=("--json", str(out)))
    assert code == 0, stderr
    assert "geomean of means" in stdout
    assert ("floor us" in stdout) == torch.cuda.is_available()  # no floor columns on a CPU
    record = json.loads(out.read_text())
    assert record["mode"] == "leaderboard" and record["date"] and "leaderboard" in record["command"]
    for field in ("device", "torch", "triton", "interpreter"):
        assert field in record, field
    assert [row["spec"] for row in record["rows"]] == [TINY_CASE]
    assert record["rows"][0]["mean_us"] > 0 and record["rows"][0]["runs"] >= 3


def table_text(interpreter: bool) -> str:
    stats = harness.Stats(runs=5, mean=73e6, std=2e6, err=1e6, best=71e6, worst=76e6)
    test = harness.TestCase(args={"batchsize": 2, "qseqlen": 1, "kvseqlen": 17, "seed": 5}, spec=TINY_CASE)
    file = io.StringIO()
    harness.print_table(harness.summary_rows([(test, stats)], {}), {}, file=file, interpreter=interpreter)
    return file.getvalue()


def test_the_interpreters_table_has_no_bandwidth_and_says_its_times_mean_nothing():
    """On a CPU the bandwidth would read 0 GB/s (tens of ms for a few hundred kB): no such
    column, and a line saying what the host-clock times are not."""
    text = table_text(interpreter=True)
    header, row = text.strip().splitlines()[:2]
    assert header.split() == ["batch", "kv_len", "runs", "mean", "us", "best", "us", "std", "us", "MB"], header
    assert row.split() == ["2", "17", "5", "73000.0", "71000.0", "2000.0", "0.08"], row
    assert "GB/s" not in text.replace("no GB/s", "")
    assert "mean nothing for the leaderboard's ranking" in " ".join(text.split())
    gpu_text = table_text(interpreter=False)
    assert gpu_text.strip().splitlines()[0].split()[-1] == "GB/s" and "mean nothing" not in gpu_text


def test_leaderboard_checks_every_timed_call(harness_dir):
    """A submission stuck on its first answer passes benchmark (same input every call) and
    fails leaderboard (a fresh input per call)."""
    folder = with_submission(harness_dir, STALE_SUBMISSION)
    code, lines, _, stderr = run_eval(folder, "benchmark", TINY_CASE + "\n", env_extra=QUICK)
    assert code == 0 and lines["check"] == "pass", stderr
    code, lines, _, stderr = run_eval(folder, "leaderboard", TINY_CASE + "\n", env_extra=QUICK)
    assert code == 0, stderr  # as the runner: leaderboard mode exits 0; `check: fail` says it
    assert lines["benchmark.0.status"] == "fail" and "mismatched elements" in lines["benchmark.0.error"]
    assert lines["check"] == "fail"


# --- profile ------------------------------------------------------------------------------

def test_profile_on_cpu_reports_a_profiler_table(harness_dir):
    code, lines, _, stderr = run_eval(harness_dir, "profile", TINY_CASE + "\n")
    assert code == 0, stderr
    assert lines["benchmark-count"] == "1" and lines["check"] == "pass"
    report = base64.b64decode(lines["benchmark.0.report"], altchars=b"+*").decode("utf-8")
    assert "Self CPU time total" in report and "Name" in report


# --- tune ---------------------------------------------------------------------------------

def test_tune_ranks_only_checked_candidates(harness_dir):
    folder = with_submission(harness_dir, TUNE_SUBMISSION)
    out = folder / "tune.json"
    code, _, stdout, stderr = run_eval(folder, "tune", TINY_CASE + "\n", popcorn=False,
                                       args=("--no-write", "--json", str(out), "--runs", "3"))
    assert code == 0, stderr
    assert (folder / "submission.py").read_text() == TUNE_SUBMISSION  # --no-write
    record = json.loads(out.read_text())
    assert record["mode"] == "tune" and record["date"] and record["arch"] == ARCH
    for field in ("device", "torch", "triton"):
        assert field in record, field
    rows = record["results"][0]["candidates"]
    assert choices(rows) == [RIGHT, WRONG, OFF]
    assert [row["checked"] for row in rows] == [True, False, False]
    assert "mismatched elements" in rows[1]["error"] and "exact attention" in rows[2]["error"]
    assert all("mean_us" not in row for row in rows[1:])  # never timed, never ranked
    assert choices(record["best"]) == [RIGHT]
    assert "not ranked" in stdout


def test_tune_writes_only_a_checked_choice_and_keeps_other_cases(harness_dir):
    folder = with_submission(harness_dir, TUNE_SUBMISSION)
    code, _, _, stderr = run_eval(folder, "tune", TINY_CASE + "\n", popcorn=False, args=("--runs", "3"))
    assert code == 0, stderr
    source = (folder / "submission.py").read_text()
    table, measured_on = harness.measured_table(source)
    assert table[ARCH] == {(2, 17): RIGHT, (9, 99): "bf16 t64 w8 s2 st1 combine"}
    times_us = harness.measured_times_us(source)
    assert times_us[(ARCH, (9, 99))] == 1.5 and times_us[(ARCH, (2, 17))] > 0
    assert "eval.py tune" in measured_on[ARCH] and "an earlier tune" in measured_on[ARCH]


def test_tune_case_in_process_with_the_real_submission(fresh_plans, monkeypatch):
    """_run_tune_case against the real submission's dispatch table and plans: two Triton
    candidates, the second corrupted after the kernel, so it fails the check."""
    submission = fresh_plans
    right, wrong = submission.Launch(16, 4, 1, 1), submission.Launch(32, 4, 1, 1)
    monkeypatch.setattr(harness, "tune_candidates", lambda module, batch, kv_len, device: [right, wrong])
    kernel = submission.custom_kernel

    def corrupt_the_wrong_one(data):
        out = kernel(data)
        config = data[4]
        table = submission.MEASURED_DISPATCH[submission._arch(data[0].device)]
        return -out if table[(config["batch_size"], config["kv_seq_len"])] == str(wrong) else out

    monkeypatch.setattr(submission, "custom_kernel", corrupt_the_wrong_one)
    case = harness.TestCase(args=dict(batchsize=2, qseqlen=1, kvseqlen=17, seed=5), spec=TINY_CASE)
    before = {arch: dict(cases) for arch, cases in submission.MEASURED_DISPATCH.items()}
    rows = harness._run_tune_case(case, runs=2)
    assert [row["choice"] for row in rows] == [str(right), str(wrong)]
    assert rows[0]["checked"] and rows[0]["mean_us"] > 0 and rows[0]["variant"]
    assert not rows[1]["checked"] and "mean_us" not in rows[1] and rows[1]["error"]
    assert harness.fastest_checked(rows) is rows[0]
    assert {arch: dict(cases) for arch, cases in submission.MEASURED_DISPATCH.items() if cases} == \
        {arch: cases for arch, cases in before.items() if cases}  # the table is restored


def test_tune_holds_a_scaled_candidate_to_its_own_emulation(fresh_plans, monkeypatch):
    """A SCALED-family candidate quantizes Q to e4m3: on a short sequence it misses
    8e-3 + 2e-2 |ref| of attention with the bf16 Q, so tune checks it against attention
    with its own dequantized Q (and still against the runner's rule)."""
    scaled = fresh_plans.Launch(64, 4, 1, 1, fresh_plans.SCALED_SCORES)
    monkeypatch.setattr(harness, "tune_candidates", lambda module, batch, kv_len, device: [scaled])
    case = harness.TestCase(args=dict(batchsize=2, qseqlen=1, kvseqlen=17, seed=5), spec=TINY_CASE)
    row, = harness._run_tune_case(case, runs=1)
    assert row["checked"], row.get("error")
    assert "scaled" in row["variant"]


@pytest.mark.parametrize("arch, platform, num_sms", [("gfx950", "hip", 256), ("sm_90", "cuda", 132)])
@pytest.mark.parametrize("batch, kv_len", [(4, 8192), (256, 1024)])
def test_tune_measures_the_ranked_list_and_each_other_stage_count(fresh_plans, monkeypatch, arch, platform,
                                                                  num_sms, batch, kv_len):
    """tune's candidates: first-call tuning's ranked list in its order, then each Triton
    candidate at its other stage count where that is another kernel: the SCALED family's
    everywhere, the BF16 family's off hip; never the ONCE family's, nor aiter's."""
    submission = fresh_plans
    monkeypatch.setattr(submission, "_arch", lambda device: arch)
    monkeypatch.setattr(submission, "_platform", lambda device: platform)
    monkeypatch.setattr(submission, "_num_sms", lambda device: num_sms)
    monkeypatch.setattr(submission.STATE, "aiter", object())  # aiter's candidate is in the list, never restaged
    monkeypatch.setattr(submission, "gluon_capable", lambda name: name == "gfx950")  # the ONCE family too
    cpu = torch.device("cpu")
    ranked = submission.ranked_candidates(batch, kv_len, cpu)
    candidates = harness.tune_candidates(submission, batch, kv_len, cpu)
    assert candidates[:len(ranked)] == ranked and len(set(candidates)) == len(candidates)
    restaged_families = {submission.SCALED_SCORES} | ({submission.BF16_SCORES} if platform != "hip" else set())
    expected = [dataclasses.replace(choice, num_stages=3 - choice.num_stages) for choice in ranked
                if choice.path == "triton" and choice.scores in restaged_families]
    assert expected and candidates[len(ranked):] == [c for c in dict.fromkeys(expected) if c not in ranked]
    assert submission.AITER_LAUNCH in ranked
    if arch == "gfx950":
        assert {c.scores for c in ranked if c.path == "triton"} >= {submission.SCALED_SCORES, submission.ONCE_SCORES}
        assert {(c.block_n, c.num_warps, c.num_splits, c.num_stages) for c in candidates[len(ranked):]} >= {
            (128, 8, c.num_splits, 1) for c in ranked if (c.block_n, c.num_warps, c.num_stages) == (128, 8, 2)}


# --- the MEASURED DISPATCH block ----------------------------------------------------------

BLOCK = f"""{harness.TABLE_BEGIN}
MEASURED_DISPATCH = {{
    'gfx950': {{
        (4, 1024): 'bf16 t32 w4 s8 st1 combine',  # 20.0 us
    }},
    'sm_90': {{
        (4, 1024): 'bf16 t64 w4 s16 st2 combine',  # 17.5 us
        (32, 8192): 'bf16 t64 w4 s8 st1 combine',  # 95.1 us
        (256, 8192): 'bf16 t64 w4 s1 st1 direct',
    }},
}}
MEASURED_ON = {{
    'gfx950': 'MI355X run',
    'sm_90': 'H200 run',
}}
{harness.TABLE_END}"""
HEAD, TAIL = "import os\n\n# the dispatch\n", "\n\nPATHS = ('triton', 'aiter')\n"


def test_writing_one_case_keeps_the_others(tmp_path):
    path = tmp_path / "submission.py"
    path.write_text(HEAD + BLOCK + TAIL)
    harness.write_measured_table(path, "sm_90", {(4, 1024): ("bf16 t32 w8 s4 st1 combine", 16.04)}, "new run")
    text = path.read_text()
    assert text.startswith(HEAD + harness.TABLE_BEGIN) and text.endswith(harness.TABLE_END + TAIL)
    namespace = {}
    exec(compile(text, str(path), "exec"), namespace)
    table, measured_on = harness.measured_table(text)
    assert table == namespace["MEASURED_DISPATCH"] and measured_on == namespace["MEASURED_ON"]
    assert table == {"gfx950": {(4, 1024): "bf16 t32 w4 s8 st1 combine"},
                     "sm_90": {(4, 1024): "bf16 t32 w8 s4 st1 combine", (32, 8192): "bf16 t64 w4 s8 st1 combine",
                               (256, 8192): "bf16 t64 w4 s1 st1 direct"}}
    assert harness.measured_times_us(text) == {("gfx950", (4, 1024)): 20.0, ("sm_90", (4, 1024)): 16.0,
                                               ("sm_90", (32, 8192)): 95.1}
    assert measured_on == {"gfx950": "MI355X run", "sm_90": "new run; other cases: H200 run"}

    every_case = {case: ("bf16 t16 w4 s1 st1 direct", 1.0) for case in table["sm_90"]}
    harness.write_measured_table(path, "sm_90", every_case, "full run")
    table, measured_on = harness.measured_table(path.read_text())
    assert table["sm_90"] == {case: choice for case, (choice, _) in every_case.items()}
    assert measured_on == {"gfx950": "MI355X run", "sm_90": "full run"}  # nothing earlier is left


def test_writing_the_real_submission_round_trips(tmp_path):
    source = (ROOT / "submission.py").read_text()
    path = tmp_path / "submission.py"
    path.write_text(source)
    table, measured_on = harness.measured_table(source)
    times_us = harness.measured_times_us(source)
    harness.write_measured_table(path, "gfx950", {(4, 1024): ("bf16 t64 w4 s8 st1 combine", 12.3)}, "MI355X, today")
    text = path.read_text()
    compile(text, "submission.py", "exec")
    new_table, new_on = harness.measured_table(text)
    assert new_table == {**table, "gfx950": {**table.get("gfx950", {}), (4, 1024): "bf16 t64 w4 s8 st1 combine"}}
    assert {arch: on for arch, on in new_on.items() if arch != "gfx950"} == \
        {arch: on for arch, on in measured_on.items() if arch != "gfx950"}
    assert harness.measured_times_us(text) == {**times_us, ("gfx950", (4, 1024)): 12.3}
    outside = lambda t: (t.split(harness.TABLE_BEGIN)[0], t.split(harness.TABLE_END)[1])  # noqa: E731
    assert outside(text) == outside(source)
