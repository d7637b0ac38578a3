"""Local runner for the amd-mixed-mla leaderboard, interchangeable with the leaderboard's eval.py.

    POPCORN_FD=<fd> python eval.py <test|benchmark|leaderboard|profile> <case file>
        exactly the runner's protocol: `key: value` lines on the fd, exit 0 / 112 (a test or
        benchmark case failed) / 113 (bad case file) / 2 (bad arguments), leaderboard and
        profile exit 0 as the runner's (its main returns None there; `check: fail` says it),
        POPCORN_SEED mixed into seeds, every case in one spawned worker process (profile in
        the main process, as the runner).
    python eval.py --help
        what each mode and flag does.
    python eval.py <mode> [case file] [--json PATH]
        the same lines on stdout, one progress line per case on stderr, then a table per
        case (mean/best/std in us, bytes the MXFP4 path must move, GB/s, and against the
        floor measured in the same run: empty-call floor + bytes / device copy rate) and
        the geometric mean; --json writes the rows with device, versions, date and command.
        The case file defaults to tests.txt / benchmarks.txt on a GPU and to tests_cpu.txt
        on a machine without one, where the kernels run in Triton's interpreter (with
        interpreter_shim), the table has no GB/s or floor columns (its host-clock times mean
        nothing for the leaderboard; a line below it says so) and each case's timed calls stop
        after MLA_EVAL_CPU_BUDGET_S seconds of calls (default 5).
    python eval.py profile [case file] [--json PATH]
        per case, after one warm call: one call timed as the runner times it, and one call
        under torch.profiler: each GPU kernel's time, their sum, and the gap (event time -
        sum: launch gaps, idle time). The table and the profiler's own: printed as text, and
        with POPCORN_FD in benchmark.<i>.report (base64) instead.
    python eval.py tune [case file] [--json PATH] [--runs N] [--no-write]
        for every case (default benchmarks.txt) and every candidate of tune_candidates
        (first-call tuning's ranked list for the case, submission.ranked_candidates, and
        each Triton candidate at its other stage count where that builds another kernel):
        one checked call (the runner's rule, and for Triton every element within
        8e-3 + 2e-2 |exact attention on the MXFP4 data|), then N timed calls exactly as
        benchmark times them (default 30). Candidates that fail the check or do not run
        are reported and never ranked. The fastest per case is written into the MEASURED
        DISPATCH block of submission.py for this GPU's architecture (unless --no-write),
        so the pasted file carries the measured choice; the architecture's other cases
        keep their entries.
    python eval.py compare OTHER [case file] [--json PATH]
        submission.py (A) and the submission file OTHER (B) timed in the same worker,
        alternating call by call, each checked on its first call; per case both means and
        the ratio B/A with a 95% interval, then the geometric mean over the cases.
    python eval.py ingest LOG [SUBMISSION] [--arch ARCH] [--force]
        the measured choices of the first-call tuning reports in a runner's log (the
        MEASURED DISPATCH blocks the submission prints on stderr) written into the MEASURED
        DISPATCH block of SUBMISSION (default submission.py), with the same merge rules as
        tune.

A case line is `batchsize: <int>; qseqlen: <int>; kvseqlen: <int>; seed: <int>` (the
arguments of generate_input); blank lines and `#` comments are skipped; any other line is
reported on stderr, quoted, with exit 113 before any case runs.

A submission that cannot run here (it fails to import, or its first call of a case needs a
module that is missing, such as aiter off ROCm) fails each case with one line saying why and
what to do (`check: fail`, exit 112 in test and benchmark); --verbose adds the traceback.
"""
import ast
import base64
import dataclasses
import datetime
import hashlib
import importlib.util
import inspect
import io
import json
import math
import multiprocessing
import os
import platform
import re
import statistics
import sys
import textwrap
import time
import tokenize
import traceback
from pathlib import Path
from typing import NamedTuple

import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:  # must be set before the worker imports triton / the submission
    os.environ.setdefault("TRITON_INTERPRET", "1")
# MLA_EMULATE=gfx950: the submission's launches on CPU tensors run their gfx950 builds on the
# emulator (tools/gfx950), and submission.py dispatches as on the MI355X
EMULATE = os.environ.get("MLA_EMULATE") not in (None, "", "0")
EMULATE_NOTE = ("MLA_EMULATE=gfx950: submission.py's kernels run their gfx950 builds (the runner's Triton 3.6.0) on "
                "the emulator in tools/gfx950, dispatched as on the MI355X (256 CUs); its answers are checked, its "
                "times are the emulator's, not the MI355X's")

from reference import check_implementation, generate_input  # noqa: E402
from utils import clear_l2_cache_large, set_seed  # noqa: E402

MODES = {
    "test": "check each case once: the runner's rule (|out - ref| <= 0.1 + 0.1 |ref| on every "
            "element, or at most 5% of them not torch.isclose); exit 112 when one fails",
    "benchmark": "per case one checked call, then timed calls until the standard error is under "
                 "0.1% of the mean; a failed case is reported and the next one runs (exit 112 at "
                 "the end); a table of the times",
    "leaderboard": "benchmark with a fresh input (seed + 13) and a check on every timed call, "
                   "as the leaderboard ranks; stops at the first failed case with `check: fail` "
                   "and exit 0, as the runner",
    "profile": "per case, after one warm call: one call timed as the runner times it (event us) "
               "and one under torch.profiler: each GPU kernel's us, their sum, the gap (event "
               "us - sum); the table and the profiler's own as text (with POPCORN_FD: in "
               "benchmark.<i>.report, base64). "
               "Kernel times need a GPU: on a CPU, the CPU profiler's table",
    "tune": "check and time, per case, every candidate first-call tuning ranks "
            "(submission.ranked_candidates) and each Triton one at its other stage count (1 or 2) "
            "where that builds another kernel (the SCALED family; the BF16 family off hip); "
            "write the fastest into submission.py's MEASURED DISPATCH block",
    "compare": "compare OTHER [case file]: submission.py (A) and the submission file OTHER (B) in "
               "one worker, each checked on its first call (a failed check: the case is reported "
               "failed, not timed), then timed as the runner times them, alternating A B, B A, "
               "... until both standard errors are under 0.1% of their means, or the budget "
               "(benchmark's) or 120 s per case. Per case: both means, the ratio B/A (> 1: OTHER "
               "is slower) as the geometric mean of the per-round ratios B_i/A_i, its 95% "
               "interval a t interval on their logs; over the cases the geometric mean of the "
               "ratios, its interval from the cases' standard errors (Welch-Satterthwaite degrees "
               "of freedom). Exit 112 when a case failed",
    "ingest": "ingest LOG [SUBMISSION]: write the measured choices of every first-call tuning "
              "report in LOG (a runner's output, any text around it; each report's MEASURED "
              "DISPATCH block, later blocks overriding earlier ones per case) into SUBMISSION's "
              "MEASURED DISPATCH block (default submission.py), merged as tune merges, each block's "
              "provenance + '; ingested from LOG', and the last MEASURED MACHINE block's figures per "
              "architecture into its MEASURED MACHINE block (refused when SUBMISSION keeps another "
              "device's). A block's `source` id must be SUBMISSION's source_id. Any problem: one line on "
              "stderr, exit 2, SUBMISSION untouched",
    "model": "model LOG: each timed candidate of LOG's first-call tuning reports beside the latency "
             "model's prediction (tools/latency_model.py, from the compile report's build of the form it "
             "runs first) under the assumed machine parameters and under the ones LOG's MEASURED MACHINE "
             "block measured (else submission.py's, of the same device and source); then the model's error "
             "per case for the pick and the worst candidate",
}
RUNNER_MODES = ("test", "benchmark", "leaderboard", "profile")  # what POPCORN_FD accepts, as the runner
class Flag(NamedTuple):
    """One command-line option: the options key it sets, the modes it applies to, the type
    of its value (None: a switch, which sets switch_value)."""
    key: str
    modes: tuple
    convert: object = None
    switch_value: object = True


FLAG_SPECS = {  # what each option sets and where it applies (--help's text: FLAGS)
    "--json": Flag("json", ("benchmark", "leaderboard", "profile", "tune", "compare", "model"), str),
    "--report": Flag("report", ("model",), str),
    "--runs": Flag("runs", ("tune",), int),
    "--no-write": Flag("write", ("tune",), switch_value=False),
    "--arch": Flag("arch", ("ingest",), str),
    "--force": Flag("force", ("ingest",)),
    "--verbose": Flag("verbose", ("test", "benchmark", "leaderboard", "profile", "tune", "compare")),
    "--all-forms": Flag("all_forms", ("test",)),
}
OPTION_DEFAULTS = {"json": None, "runs": 30, "write": True, "arch": None, "force": False, "report": None,
                   "verbose": False, "all_forms": False}


FLAGS = {  # --help's text of each option, after the modes it applies to (FLAG_SPECS)
    "--json PATH": "also write the rows as JSON with device, versions, date and command",
    "--runs N": "timed calls per candidate (default 30)",
    "--all-forms": "with MLA_EMULATE=gfx950, after each case's check: every form (kernel variant and split "
                   "count) first-call tuning would time for the case's shape on the MI355X, each run on the "
                   "emulator and held to float32 attention on the same MXFP4 data; the case fails when one "
                   "does (this repository's submission.py only)",
    "--no-write": "leave submission.py as it is",
    "--arch ARCH": "only this architecture's entries (e.g. gfx950)",
    "--report PATH": "the compile report (tools/compile_report.py --json) to predict from (default: "
                     "results/compile_report_triton<the log's Triton>.json, else 3.6.0's)",
    "--force": "write even when a block's source id is not SUBMISSION's (the file changed since "
               "the run that measured it)",
    "--verbose": "the traceback of a submission that fails to import (or whose first call misses a module), "
                 "and a pass line's notes: the share of elements outside the task README's stricter "
                 "rtol 2e-2 / atol 8e-3, an output dtype other than bf16",
    "-h, --help": "this text",
}
# mode -> its positional arguments after the mode: (options key, name in messages, required)
POSITIONALS = {"compare": (("other", "OTHER", True), ("cases", "case file", False)),
               "ingest": (("log", "LOG", True), ("target", "SUBMISSION", False)),
               "model": (("log", "LOG", True),)}
DEFAULT_POSITIONALS = (("cases", "case file", False),)
HERE = Path(__file__).resolve().parent
DEFAULT_CASES = {"test": "tests.txt", "benchmark": "benchmarks.txt", "leaderboard": "benchmarks.txt",
                 "profile": "benchmarks.txt", "tune": "benchmarks.txt", "compare": "benchmarks.txt"}
CPU_CASES = "tests_cpu.txt"
CASE_PATTERN = r"\s*([a-zA-Z_]\w*):\s*([a-zA-Z_]\w*|[+-]?[0-9]+)\s*"
# generate_input's arguments (task.TestSpec): each case line gives each once, as an integer;
# the sizes are at least 1.
CASE_KEYS = ("batchsize", "qseqlen", "kvseqlen", "seed")
CASE_SIZE_KEYS = ("batchsize", "qseqlen", "kvseqlen")
CASE_LINE = "; ".join(f"{key}: <int>" for key in CASE_KEYS)  # for messages
CASE_COMMENT = "#"  # a case file's comment runs from here to the line's end
MXFP4_BYTES_PER_TOKEN = 288 + 18  # e2m1 pairs + e8m0 scales
# kind -> ((max_repeats, max_time_ns) of the warm-up on case 0, of each timed case), as the
# runner; without a GPU max_time_ns is cut to MLA_EVAL_CPU_BUDGET_S (the interpreter is slow).
BUDGETS = {"benchmark": ((100, 10e7), (1000, 50e9)), "leaderboard": ((100, 1e7), (100, 30e9))}
# How each timed mode reports a failed case, as the runner's eval.py: benchmark writes the
# spec line before the case runs, goes on with the next case and exits 112 at the end;
# leaderboard writes the spec line after the case, stops at the first failure and exits 0
# (the runner's main returns None there): `check: fail` is the signal.
PROTOCOL = {"benchmark": {"spec_before_case": True, "stop_at_first_failure": False, "exit_on_failure": 112},
            "leaderboard": {"spec_before_case": False, "stop_at_first_failure": True, "exit_on_failure": 0}}
CPU_BUDGET_ENV = "MLA_EVAL_CPU_BUDGET_S"  # seconds of timed calls per case without a GPU
CPU_BUDGET_DEFAULT_S = 5.0
# Below the tables of a run without a GPU (benchmark, leaderboard, compare): what its times are, and are not.
INTERPRETER_TIMES_NOTE = ("Times on a CPU are the host clock around Triton's interpreter running the kernels in "
                          "Python: they mean nothing for the leaderboard's ranking")
WALL_LIMIT_NS = 120e9
# The runner joins a message's lines with a backslash and an n (two characters), so that the
# message stays on its one protocol line (utils.MESSAGE_SEPARATOR; not imported: eval.py runs
# beside the runner's utils.py too).
MESSAGE_SEPARATOR = "\\n"


class PopcornOutput:
    """`key: value` lines to the runner's fd, or to stdout when there is none. On stdout a
    message's lines (joined by the runner's two-character separator, MESSAGE_SEPARATOR, to
    stay on one protocol line) are printed as lines, indented under their key."""

    def __init__(self, fd):
        self.protocol = fd is not None  # False: the lines are for people (stdout)
        self.file = os.fdopen(fd, "w") if fd is not None else sys.stdout
        if fd is not None:
            os.set_inheritable(fd, False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.file is not sys.stdout:
            self.file.close()

    def log(self, key, value):
        text = str(value) if self.protocol else str(value).replace(MESSAGE_SEPARATOR, "\n    ")
        print(f"{key}: {text}", file=self.file, flush=True)


@dataclasses.dataclass
class TestCase:
    args: dict
    spec: str


@dataclasses.dataclass
class Stats:
    runs: int
    mean: float
    std: float
    err: float
    best: float
    worst: float


def _combine(a: int, b: int) -> int:
    """The runner's Cantor pairing of a case seed with the secret POPCORN_SEED."""
    return int(a + (a + b) * (a + b + 1) // 2)


def _parse_case_line(line: str) -> tuple:
    """-> (args, problems) of one case line; problems is [] when generate_input can take args.

    Values are read as the runner reads them (integers, `true` / `false`, other words as
    text); the problems are everything the runner would only find in its worker: a part
    that is not `key: value`, a key that is unknown, missing or repeated, a value that is
    not an integer (a bool is not), a size below 1.
    """
    pairs = []
    for part in line.split(";"):
        matched = re.fullmatch(CASE_PATTERN, part)
        if not matched:
            return {}, [f"'{part}' is not `key: value`"]
        pairs.append((matched[1], matched[2]))
    keys = [key for key, _ in pairs]
    problems = [f"unknown key '{key}'" for key in keys if key not in CASE_KEYS]
    problems += [f"key '{key}' given {keys.count(key)} times" for key in CASE_KEYS if keys.count(key) > 1]
    problems += [f"missing key '{key}'" for key in CASE_KEYS if key not in keys]
    args = {}
    for key, text in pairs:
        try:
            value = int(text)
        except ValueError:
            value = {"true": True, "false": False}.get(text, text)
        if key in CASE_KEYS and type(value) is not int:  # noqa: E721 - bool is an int subclass
            problems.append(f"'{key}' must be an integer, not '{text}'")
        elif key in CASE_SIZE_KEYS and value < 1:
            problems.append(f"'{key}' must be at least 1, not {value}")
        args[key] = value
    return args, problems


def case_line_text(line: str) -> str:
    """A case file's line without its `#` comment (the whole line's text when it has none);
    blank for a blank or comment-only line, which is skipped. The runner's own case files
    have neither: its eval.py rejects both."""
    return line.split(CASE_COMMENT, 1)[0].rstrip() if CASE_COMMENT in line else line


def get_test_cases(file_name: str, seed) -> list:
    """The cases of a case file (blank lines and `#` comments skipped); any malformed line, or
    no case at all: message on stderr, exit 113."""
    try:
        content = Path(file_name).read_text()
    except OSError as exc:
        print(f"Could not open test file `{file_name}`: {exc}", file=sys.stderr)
        sys.exit(113)
    tests = []
    for number, line in enumerate(content.splitlines(), start=1):
        text = case_line_text(line)
        if not text.strip():
            continue
        args, problems = _parse_case_line(text)
        if problems:
            print(f"invalid test case: '{line}' (line {number} of {file_name}): {'; '.join(problems)}."
                  f" A case line is `{CASE_LINE}`.", file=sys.stderr)
            sys.exit(113)
        tests.append(TestCase(spec=text, args=args))
    if not tests:
        print(f"no test case in `{file_name}`: it has only blank lines and `#` comments. A case line is "
              f"`{CASE_LINE}`.", file=sys.stderr)
        sys.exit(113)
    if seed is not None:
        for test in tests:
            if "seed" in test.args:
                test.args["seed"] = _combine(test.args["seed"], seed)
    return tests


def calculate_stats(durations_ns: list) -> Stats:
    runs = len(durations_ns)
    mean = sum(durations_ns) / runs
    std = math.sqrt(sum((x - mean) ** 2 for x in durations_ns) / (runs - 1)) if runs > 1 else 0.0
    return Stats(runs=runs, mean=mean, std=std, err=std / math.sqrt(runs),
                 best=float(min(durations_ns)), worst=float(max(durations_ns)))


def _clone_data(data):
    if isinstance(data, tuple):
        return tuple(_clone_data(x) for x in data)
    if isinstance(data, list):
        return [_clone_data(x) for x in data]
    if isinstance(data, dict):
        return {k: _clone_data(v) for k, v in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


def _check(data, output):
    """(ok, message) of reference.check_implementation; with --verbose its notes too, where it
    takes `verbose` (the runner's reference.py does not)."""
    if _VERBOSE and "verbose" in inspect.signature(check_implementation).parameters:
        result = check_implementation(data, output, verbose=True)
    else:
        result = check_implementation(data, output)
    return result if isinstance(result, tuple) else (not bool(result), result)


def _cpu_budget_s() -> float:
    """Seconds of timed calls per case without a GPU (MLA_EVAL_CPU_BUDGET_S, default 5)."""
    text = os.environ.get(CPU_BUDGET_ENV)
    if text is None:
        return CPU_BUDGET_DEFAULT_S
    try:
        budget_s = float(text)
    except ValueError:
        budget_s = -1.0
    if not budget_s > 0:
        raise ValueError(f"{CPU_BUDGET_ENV}={text!r}: expected a number of seconds above 0")
    return budget_s


def _synchronize():
    if HAS_GPU:
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------------------
# Worker side (one spawned process runs every case)
# ---------------------------------------------------------------------------------------

_VERBOSE = False  # --verbose, in the process that runs the cases (_worker_init sets it)
# MLA_EMULATE: why the emulator could not be installed in the worker (one line), or None. An
# initializer that raises would make multiprocessing's pool start a new worker forever (a hang):
# the failure is kept here instead and every case's _emulated reports it as its verdict.
_EMULATOR_NOT_INSTALLED = None


def _worker_init(verbose=False):
    global _VERBOSE, _EMULATOR_NOT_INSTALLED
    _VERBOSE = verbose
    if not HAS_GPU:
        import interpreter_shim
        interpreter_shim.install()
    if EMULATE:
        try:
            _install_emulator()
        except Exception as exc:  # noqa: BLE001 - reported by every case (_emulated), never a hang
            _EMULATOR_NOT_INSTALLED = " ".join(f"{type(exc).__name__}: {exc}".split())


def _install_emulator():
    """MLA_EMULATE=gfx950: every launch on CPU tensors runs on the gfx950 emulator, and the
    submission (when it imports: otherwise each case says why) dispatches as on the MI355X."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "tools"))
    from gfx950 import dispatch
    dispatch.requested()
    try:
        import submission
    except Exception:  # noqa: BLE001 - each case reports the failed import in one line
        submission = None
    dispatch.install(submission)
    from aiter_mla import install as aiter_install   # MLA_PATH=aiter: aiter's code objects, emulated
    if aiter_install.wanted():
        aiter_install.install(submission)


class SubmissionUnavailable(Exception):
    """A submission that cannot run here: it fails to import, or its first call of a case
    needs a module that is missing. The message (unavailable_message) is one line: a failed
    case's error, not a traceback."""


class EmulatorVerdict(Exception):
    """MLA_EMULATE: a kernel of the case failed on the gfx950 emulator (a fault, an instruction it
    does not implement, a hang, a detector's finding), or the emulator could not run it (the
    runner's Triton missing, a build error that escaped the submission). The message is the
    one-line verdict: the kernel, the amdgcn instruction and its line, the Python source line,
    the fault. Defined here, not in tools/, so that it crosses from the worker to this process,
    which never imports the emulator."""


# The modules under tools/: an exception of theirs cannot be unpickled where tools/ is not on
# the path (this process), so the worker turns one into an EmulatorVerdict.
TOOL_MODULES = frozenset(path.stem for path in (Path(__file__).resolve().parent / "tools").glob("*")
                         if path.suffix == ".py" or (path / "__init__.py").is_file())


def _emulated(function, *args):
    """In the worker under MLA_EMULATE: function(*args) -> (its result, the kernels it ran on
    the emulator: one line). EmulatorVerdict when a launch failed there, even where the
    submission caught the error and answered otherwise, or when an exception of the tools'
    own escaped."""
    if _EMULATOR_NOT_INSTALLED is not None:
        raise EmulatorVerdict(f"the emulator could not be installed: {_EMULATOR_NOT_INSTALLED}")
    from gfx950 import dispatch
    dispatch.take_record()
    try:
        result = function(*args)
    except SubmissionUnavailable:
        raise
    except Exception as exc:
        failures = dispatch.take_record()["failures"]
        if failures:
            raise EmulatorVerdict(failures[0]) from None
        if type(exc).__module__.split(".")[0] in TOOL_MODULES:
            raise EmulatorVerdict(" ".join(f"{type(exc).__name__}: {exc}".split())) from None
        raise
    record = dispatch.take_record()
    if record["failures"]:
        raise EmulatorVerdict(record["failures"][0])
    return result, dispatch.summary(record["launches"])


def _apply(pool, function, args, label=None):
    """function(*args) in the worker (pool.apply; `pool` None: in this process). Under
    MLA_EMULATE through _emulated: with a label, the kernels it ran go to stdout as
    `<label>.emulated: ...`; a failed kernel is EmulatorVerdict."""
    if not EMULATE:
        return function(*args) if pool is None else pool.apply(function, args)
    result, ran = _emulated(function, *args) if pool is None else pool.apply(_emulated, (function, *args))
    if label is not None:
        print(f"{label}.emulated: {ran}", flush=True)
    return result


def _verdict_line(label, exc):
    """An EmulatorVerdict on stdout when the protocol lines go to the runner's fd (on stdout they
    hold it already)."""
    if isinstance(exc, EmulatorVerdict) and os.getenv("POPCORN_FD"):
        print(f"{label}.emulator: {exc}", flush=True)


# What to do about a module the runner has and this machine lacks, or one the runner lacks too.
AITER_ADVICE = ("aiter exists only in ROCm builds (the leaderboard's MI355X runner has it): check this file on an "
                "MI355X or on the leaderboard's runner, or make its aiter import optional (try/except ImportError, "
                "with a path that runs without it), as this repository's submission.py does")
MISSING_MODULE_ADVICE = ("the leaderboard's runner has torch, triton, aiter and the task's files (task.py, utils.py, "
                         "reference.py): a module beyond those fails there too")


def unavailable_message(what: str, exc: BaseException, verbose: bool) -> str:
    """`what` (e.g. "submission.py cannot be imported"), the exception in one line, what to do
    when a module is missing (AITER_ADVICE for aiter, else MISSING_MODULE_ADVICE), then the
    traceback's lines when verbose (joined by the protocol's separator: one protocol line),
    else where to find it."""
    lines = f"{exc}".strip().splitlines()
    parts = [f"{what}: {type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")]
    if isinstance(exc, ModuleNotFoundError):
        parts.append(AITER_ADVICE if (exc.name or "").split(".")[0] == "aiter" else MISSING_MODULE_ADVICE)
    if not verbose:
        return ". ".join(parts) + " (--verbose: the traceback)"
    trace = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return MESSAGE_SEPARATOR.join([". ".join(parts), *trace])


_IMPORT_FAILURE = []  # why submission.py failed to import in this process (it is imported once)


def _submission():
    """The submission module, which must define custom_kernel; SubmissionUnavailable when
    submission.py fails to import (any exception: a missing module, a syntax error, ...),
    for every later call too, without importing it again."""
    if not _IMPORT_FAILURE:
        try:
            import submission
            submission.custom_kernel  # noqa: B018 - the runner imports this name
            return submission
        except Exception as exc:  # noqa: BLE001 - each case reports it
            _IMPORT_FAILURE.append(unavailable_message("submission.py cannot be imported", exc, _VERBOSE))
    raise SubmissionUnavailable(_IMPORT_FAILURE[0])


def _first_call(kernel, data, name="submission.py"):
    """kernel(data), a case's first (checked) call; a module missing inside it (an import the
    call makes) is SubmissionUnavailable, as a failed import. Later calls are not wrapped."""
    try:
        return kernel(data)
    except ImportError as exc:
        raise SubmissionUnavailable(unavailable_message(f"{name}'s first call failed", exc, _VERBOSE)) from None


def _run_single_test(test: TestCase):
    custom_kernel = _submission().custom_kernel
    data = generate_input(**test.args)
    _synchronize()
    output = _first_call(custom_kernel, _clone_data(data))
    _synchronize()
    return _check(data, output)


def _tuning_form(test: TestCase, k=None):
    """--all-forms, in the worker: the forms first-call tuning would time for the case's shape on
    the MI355X, [(description, split count)]; with k, form k run on the case's input -> None when
    its answer is right (tools/gfx950/mla.py's rule), else what disagreed. (Forms cross to the
    parent by description: a variant object would import submission.py there.)"""
    from gfx950 import mla
    sub = _submission()
    forms = mla.tuning_forms(sub, test.args["batchsize"], test.args["kvseqlen"])
    if k is None:
        return [(variant.describe(), num_splits) for variant, num_splits in forms]
    variant, num_splits = forms[k]
    data = generate_input(**test.args)
    return mla.wrong(sub, variant, data, mla.run_variant(sub, variant, data, num_splits))


def _all_forms_verdict(pool, test: TestCase, idx: int, message: str):
    """--all-forms: each form of _tuning_form run on the emulator (`test.<idx>.form.<k>` on
    stdout: the form, the kernels it ran, its verdict). -> (all right, message: the case's
    own, or the first wrong form's)."""
    verdicts = []
    for k, (described, num_splits) in enumerate(pool.apply(_tuning_form, (test,))):
        label = f"test.{idx}.form.{k}"
        print(f"{label}: {described}, {num_splits} split(s)", flush=True)
        try:
            problem = _apply(pool, _tuning_form, (test, k), label)
        except EmulatorVerdict as exc:
            problem = str(exc)
        print(f"{label}.verdict: {problem or 'right'}", flush=True)
        if problem:
            verdicts.append(f"form {described}, {num_splits} split(s): {problem}")
    return (False, verdicts[0]) if verdicts else (True, message)


def _timed_call(custom_kernel, data):
    """(output, duration in ns): device events right around the call, as the runner."""
    _synchronize()
    clear_l2_cache_large()
    if HAS_GPU:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        output = custom_kernel(data)
        end.record()
        torch.cuda.synchronize()
        return output, start.elapsed_time(end) * 1e6
    start_ns = time.perf_counter_ns()
    output = custom_kernel(data)
    return output, float(time.perf_counter_ns() - start_ns)


def _case_budget_ns(max_time_ns: float) -> float:
    """A case's budget of timed calls: the runner's, cut to MLA_EVAL_CPU_BUDGET_S without a GPU."""
    return max_time_ns if HAS_GPU else min(max_time_ns, _cpu_budget_s() * 1e9)


def _enough_runs(durations_ns: list, max_time_ns: float, start_ns: int) -> bool:
    """The runner's stopping rule, checked after each run from the third on, for one kernel's
    durations or several timed together (compare: one list each): every standard error under
    0.1% of its mean, or one kernel's runs adding up past max_time_ns, or 120 s of wall
    time since start_ns."""
    stats = [calculate_stats(durations) for durations in durations_ns]
    return (all(one.err / one.mean < 0.001 for one in stats)
            or any(one.mean * one.runs > max_time_ns for one in stats)
            or time.perf_counter_ns() - start_ns > WALL_LIMIT_NS)


def _run_single_benchmark(test: TestCase, recheck: bool, max_repeats: int, max_time_ns: float):
    """One case of benchmark (recheck False) or leaderboard (recheck True: the seed moves on
    by 13 and the answer is checked on every timed call), as the runner's: one checked
    call, then timed calls. -> Stats, or the failed check's message."""
    custom_kernel = _submission().custom_kernel
    max_time_ns = _case_budget_ns(max_time_ns)
    args = dict(test.args)  # the runner changes its (pickled) copy of test.args the same way
    data = generate_input(**args)
    check_copy = _clone_data(data)
    good, message = _check(check_copy, _first_call(custom_kernel, data))
    if not good:
        return message
    durations = []
    start_ns = time.perf_counter_ns()
    for i in range(max_repeats):
        if recheck:
            if "seed" in args:
                args["seed"] += 13
            data = generate_input(**args)
            check_copy = _clone_data(data)
        output, duration = _timed_call(custom_kernel, data)
        if recheck:
            good, message = _check(check_copy, output)
            if not good:
                return message
        del output
        durations.append(duration)
        if i > 1 and _enough_runs([durations], max_time_ns, start_ns):
            break
    return calculate_stats(durations)


def device_kernels(events) -> list:
    """[(name, start us, duration us)] of the GPU activities among torch.profiler events
    (kernels, memcpy, memset: device type CUDA, which ROCm's are too), in start order; user
    annotations left out. Empty on a CPU."""
    from torch.autograd import DeviceType
    kernels = [(event.name, event.time_range.start, event.time_range.elapsed_us()) for event in events
               if event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation", False)]
    return sorted(kernels, key=lambda kernel: kernel[1])


def kernel_breakdown(kernels: list, event_us: float) -> dict:
    """One call's kernels against its event time. kernels: [(name, start us, duration us)]
    of one profiled call; event_us: the same call timed as the runner times it. -> rows
    (name, start_us from the first kernel's start, gpu_us) in start order, kernels_sum_us,
    kernels_span_us (first start to last end), event_us, and gap_us = event_us - the sum
    (launch gaps and idle time between dependent kernels; negative when kernels overlap or
    the two calls differ; None when no kernel was recorded: on a CPU)."""
    ordered = sorted(kernels, key=lambda kernel: kernel[1])
    first_start_us = ordered[0][1] if ordered else 0.0
    rows = [{"name": name, "start_us": start_us - first_start_us, "gpu_us": duration_us}
            for name, start_us, duration_us in ordered]
    sum_us = float(sum(row["gpu_us"] for row in rows))
    span_us = max((row["start_us"] + row["gpu_us"] for row in rows), default=0.0)
    return {"kernels": rows, "kernels_sum_us": sum_us, "kernels_span_us": span_us, "event_us": event_us,
            "gap_us": event_us - sum_us if rows else None}


def format_kernel_table(spec: str, breakdown: dict, has_gpu: bool = HAS_GPU, torch_ops_us=None) -> str:
    """The per-kernel table of one case (kernel, start us, GPU us, then the sum, the span, the
    event time and the gap); without a GPU it says that kernel times need one, and how much
    of the call the CPU profiler's table covers (torch_ops_us: its operators' self CPU time;
    the rest is Triton's interpreter, Python the profiler does not list)."""
    lines = [f"case {spec}"]
    if not breakdown["kernels"]:
        reason = ("torch.profiler recorded no GPU kernel" if has_gpu
                  else "kernel times need a GPU (this machine has none; below, the CPU profiler's table)")
        clock = "events" if has_gpu else "the host clock"
        lines += [f"  {reason}", f"  one call timed as the runner times it ({clock}): {breakdown['event_us']:.1f} us"]
        if not has_gpu and torch_ops_us is not None:
            lines.append(f"  the CPU profiler's table lists torch's operators only: {torch_ops_us:.1f} us of "
                         f"the profiled call; the rest is Triton's interpreter running the kernels in Python")
        return "\n".join(lines)
    width = max(40, *(len(row["name"]) for row in breakdown["kernels"]))
    lines.append(f"  {'kernel':<{width}} {'start us':>9} {'GPU us':>9}")
    lines += [f"  {row['name']:<{width}} {row['start_us']:>9.1f} {row['gpu_us']:>9.1f}" for row in breakdown["kernels"]]
    for label, key in (("sum of kernels", "kernels_sum_us"), ("span (first start to last end)", "kernels_span_us"),
                       ("event (one call, timed as the runner)", "event_us"),
                       ("gap (event - sum: launch gaps, idle)", "gap_us")):
        lines.append(f"  {label:<{width}} {'':>9} {breakdown[key]:>9.1f}")
    return "\n".join(lines)


# torch.profiler's Kineto prints `USDT: ... profiler_start` / `profiler_stop` lines on stderr
# around every profiled call at its default level; 6 is past its last level (VERBOSE 0 ..
# USDT 5), so it prints nothing. Set KINETO_LOG_LEVEL yourself to see its lines again.
QUIET_PROFILER_LOG_LEVEL = "6"


def _run_single_profile(test: TestCase) -> dict:
    """One case of profile, in the calling process (the runner profiles in its main
    process): one warm call (builds, plans, first-call tuning: the runner profiles this
    first call itself), one call timed as the runner times it, one under torch.profiler.
    -> {event_us, kernels: [(name, start us, duration us)], profiler_table}."""
    os.environ.setdefault("KINETO_LOG_LEVEL", QUIET_PROFILER_LOG_LEVEL)  # read when the profiler starts
    from torch.profiler import ProfilerActivity, profile

    custom_kernel = _submission().custom_kernel
    data = generate_input(**test.args)
    _synchronize()
    _first_call(custom_kernel, data)
    _, event_ns = _timed_call(custom_kernel, data)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if HAS_GPU else [])
    with profile(activities=activities) as prof:
        custom_kernel(data)
        _synchronize()
    sort_by = "self_cuda_time_total" if HAS_GPU else "self_cpu_time_total"
    averages = prof.key_averages()
    return {"event_us": event_ns / 1e3, "kernels": device_kernels(prof.events()),
            "torch_ops_us": float(sum(row.self_cpu_time_total for row in averages)),
            "profiler_table": averages.table(sort_by=sort_by, row_limit=20)}


_OTHER_SUBMISSIONS = {}  # path -> module: compare's other submission, imported once per worker


def _other_submission(path: str):
    """The submission file at `path` imported under a module name of its own
    (compare_other_<n>), so that its module-level caches (plans, tuning) are its own."""
    if path not in _OTHER_SUBMISSIONS:
        name = f"compare_other_{len(_OTHER_SUBMISSIONS)}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickling look their module up there
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        if not callable(getattr(module, "custom_kernel", None)):
            raise AttributeError(f"{path} defines no custom_kernel")
        _OTHER_SUBMISSIONS[path] = module
    return _OTHER_SUBMISSIONS[path]


def _compare_import_problems(path: str) -> list:
    """Why submission.py (A) or the other submission of compare (B, at `path`) does not
    import in this worker: one line each (unavailable_message), [] when both do."""
    problems = []
    try:
        _submission()
    except SubmissionUnavailable as exc:
        problems.append(f"A: {exc}")
    try:
        _other_submission(path)
    except Exception as exc:  # noqa: BLE001 - reported on stderr by the driver, exit 2
        problems.append("B: " + unavailable_message(f"{Path(path).name} cannot be imported", exc, _VERBOSE))
    return problems


COMPARE_SIDES = ("A", "B")  # A: this repository's submission.py, B: the other file


def _run_compare_case(test: TestCase, other_path: str, max_repeats: int, max_time_ns: float) -> dict:
    """One case of compare: one input; A and B each get their own copy and one checked
    call; then rounds of one timed call each (as the runner times a call), A first in even
    rounds and B first in odd ones (A B B A ...), until _enough_runs. -> {"A": [ns], "B": [ns]},
    or {"failed": side, "error": message} when a first call fails its check."""
    custom_kernel = _submission().custom_kernel
    kernels = {"A": custom_kernel, "B": _other_submission(other_path).custom_kernel}
    max_time_ns = _case_budget_ns(max_time_ns)
    data = generate_input(**test.args)
    check_copy = _clone_data(data)
    inputs = {"A": data, "B": _clone_data(data)}
    for side in COMPARE_SIDES:
        try:
            good, message = _check(check_copy, kernels[side](inputs[side]))
        except Exception as exc:  # noqa: BLE001 - a broken side is a failed case, reported
            good, message = False, unavailable_message("its first call failed", exc, _VERBOSE)
        if not good:
            return {"failed": side, "error": message}
    durations = {side: [] for side in COMPARE_SIDES}
    start_ns = time.perf_counter_ns()
    for round_index in range(max_repeats):
        for side in (COMPARE_SIDES if round_index % 2 == 0 else COMPARE_SIDES[::-1]):
            output, duration = _timed_call(kernels[side], inputs[side])
            del output
            durations[side].append(duration)
        if round_index > 1 and _enough_runs(list(durations.values()), max_time_ns, start_ns):
            break
    return durations


def _exact_ok(data, output, quantize_q=None) -> bool:
    """Every element within 8e-3 + 2e-2 |ref| of float32 attention on the MXFP4 data (needs
    our reference.py; with the runner's, only its own check applies). quantize_q: the
    variant's own quantization of Q (submission.quantize_q_reference for the SCALED
    family), whose float32 emulation it is held to instead."""
    import reference
    exact = getattr(reference, "exact_attention", None)
    if exact is None:
        return True
    if quantize_q is not None:
        q = data[0]
        data = (quantize_q(q.cpu())[2].to(q.device), *data[1:])
    expected = exact(data)
    return bool(((output.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())


def tune_candidates(submission, batch, kv_len, device) -> list:
    """What `eval.py tune` measures for one case: first-call tuning's candidates in its order
    (submission.ranked_candidates: the prediction, then candidate_groups' groups in turns),
    then each Triton candidate at its other stage count (1 <-> 2) where that is another
    kernel: the SCALED family's, and the BF16 family's off hip (where choose() runs it in one
    stage only); the ONCE family's Gluon kernel has one form. Each choice once."""
    ranked = submission.ranked_candidates(batch, kv_len, device)
    bf16_pipelines = not submission._one_stage_only(device)
    restaged = []
    for launch in ranked:
        if launch.path != "triton" or launch.num_stages not in (1, 2):
            continue
        scores = launch.scores
        if scores == submission.SCALED_SCORES or (scores == submission.BF16_SCORES and bf16_pipelines):
            restaged.append(dataclasses.replace(launch, num_stages=3 - launch.num_stages))
    return list(dict.fromkeys(ranked + restaged))


def _run_tune_case(test: TestCase, runs: int) -> list:
    """Check, then time, every candidate choice of one case (see `python eval.py tune`)."""
    submission = _submission()
    data = generate_input(**test.args)
    device = data[0].device
    batch, kv_len = data[4]["batch_size"], data[4]["kv_seq_len"]
    table = submission.MEASURED_DISPATCH.setdefault(submission._arch(device), {})
    saved = table.get((batch, kv_len))
    rows = []
    try:
        for choice in tune_candidates(submission, batch, kv_len, device):
            table[(batch, kv_len)] = str(choice)
            submission.STATE.plans.clear()
            row = {"choice": str(choice)}
            try:
                output = submission.custom_kernel(_clone_data(data))
                _synchronize()
                good, message = _check(data, output)
                plan = next(reversed(submission.STATE.plans.values()))
                variant = getattr(plan, "variant", None)
                if variant is not None:
                    row["variant"] = variant.describe()
                if good and choice.path == "triton":
                    scores = getattr(variant, "scores", None)  # the e4m3-Q families: held to their own Q
                    scaled = scores is not None and scores != submission.BF16_SCORES
                    good = _exact_ok(data, output, submission.quantize_q_reference if scaled else None)
                    message = message if good else "outside 8e-3 + 2e-2|ref| of exact attention"
            except Exception as exc:  # noqa: BLE001 - reported, never ranked
                good, message = False, f"{type(exc).__name__}: {exc}"[:300]
            row["checked"] = good
            if good:
                times = [_timed_call(submission.custom_kernel, data)[1] / 1e3 for _ in range(runs)]
                row.update(mean_us=statistics.fmean(times), median_us=statistics.median(times),
                           best_us=min(times))
            else:
                row["error"] = message
            rows.append(row)
    finally:
        if saved is None:
            table.pop((batch, kv_len), None)
        else:
            table[(batch, kv_len)] = saved
        submission.STATE.plans.clear()
    return rows


def _measure_floors(repeats: int = 100) -> dict:
    """The physical floor's two terms, measured like a case.

    call_floor_us: events around a graph replay of a one-element kernel, each run after a
    cache flush (the least a timed call can cost); copy_rate_gbs: device-to-device copy of
    2 GiB, bytes read plus written over the median time.
    """
    if not HAS_GPU:
        return {}
    scratch = torch.zeros(1, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        scratch.add_(1.0)
    call_ns = [_timed_call(lambda _: graph.replay(), None)[1] for _ in range(repeats)]
    src = torch.randint(0, 255, (1 << 31,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ns = [_timed_call(lambda _: dst.copy_(src), None)[1] for _ in range(20)]
    del src, dst
    return {"call_floor_us": statistics.median(call_ns) / 1e3,
            "copy_rate_gbs": 2 * (1 << 31) / min(copy_ns)}  # the best copy: a ceiling


def _environment() -> dict:
    import triton
    device = torch.cuda.get_device_name() if HAS_GPU else f"CPU ({platform.processor() or platform.machine()})"
    return {"device": device, "torch": torch.__version__, "triton": triton.__version__,
            "hip": torch.version.hip, "cuda": torch.version.cuda,
            "interpreter": os.environ.get("TRITON_INTERPRET") == "1"}


# ---------------------------------------------------------------------------------------
# Driver side
# ---------------------------------------------------------------------------------------

def _progress(index, total, spec, status, seconds):
    print(f"[{index + 1}/{total}] {spec} -> {status} ({seconds:.1f} s)", file=sys.stderr, flush=True)


def run_testing(logger, pool, tests, all_forms=False):
    """test: each case once in the worker; the runner's protocol and exit 0 / 112. all_forms
    (--all-forms, MLA_EMULATE): then every form first-call tuning would time for the case's
    shape on the MI355X (_all_forms_verdict)."""
    passed = True
    logger.log("test-count", len(tests))
    for idx, test in enumerate(tests):
        start = time.time()
        logger.log(f"test.{idx}.spec", test.spec)
        try:
            good, message = _apply(pool, _run_single_test, (test,), f"test.{idx}")
            if good and all_forms:
                good, message = _all_forms_verdict(pool, test, idx, message)
        except (SubmissionUnavailable, EmulatorVerdict) as exc:
            _verdict_line(f"test.{idx}", exc)
            good, message = False, str(exc)
        logger.log(f"test.{idx}.status", "pass" if good else "fail")
        if not good:
            logger.log(f"test.{idx}.error", message)
            passed = False
        elif message:
            logger.log(f"test.{idx}.message", message)
        _progress(idx, len(tests), test.spec, "pass" if good else "FAIL", time.time() - start)
    logger.log("check", "pass" if passed else "fail")
    return 0 if passed else 112


def run_benchmarking(logger, pool, tests, kind):
    """benchmark or leaderboard (`kind`): the runner's warm-up on the first case, then each
    case in the worker, reported as the runner's protocol for that kind (PROTOCOL: where the
    spec line goes, whether a failed case stops the run, the exit status).
    -> (exit status, [(test, Stats)] of the cases that passed)."""
    protocol = PROTOCOL[kind]
    warmup_budget, case_budget = BUDGETS[kind]
    try:
        _apply(pool, _run_single_benchmark, (tests[0], False, *warmup_budget))
    except (SubmissionUnavailable, EmulatorVerdict):
        pass  # every case reports it
    logger.log("benchmark-count", len(tests))
    results, passed = [], True
    for idx, test in enumerate(tests):
        start = time.time()
        if protocol["spec_before_case"]:
            logger.log(f"benchmark.{idx}.spec", test.spec)
        try:
            result = _apply(pool, _run_single_benchmark, (test, kind == "leaderboard", *case_budget),
                            f"benchmark.{idx}")
        except (SubmissionUnavailable, EmulatorVerdict) as exc:
            _verdict_line(f"benchmark.{idx}", exc)
            result = str(exc)
        if not protocol["spec_before_case"]:
            logger.log(f"benchmark.{idx}.spec", test.spec)
        if isinstance(result, Stats):
            for field in dataclasses.fields(Stats):
                logger.log(f"benchmark.{idx}.{field.name}", getattr(result, field.name))
            results.append((test, result))
            _progress(idx, len(tests), test.spec, f"mean {result.mean / 1e3:.1f} us", time.time() - start)
            continue
        passed = False
        logger.log(f"benchmark.{idx}.status", "fail")
        logger.log(f"benchmark.{idx}.error", str(result))
        _progress(idx, len(tests), test.spec, "FAIL", time.time() - start)
        if protocol["stop_at_first_failure"]:
            break
    logger.log("check", "pass" if passed else "fail")
    return (0 if passed else protocol["exit_on_failure"]), results


def run_profiling(logger, tests, verbose=False):
    """profile, in this process as the runner's (it runs no profile in its worker): per case
    the spec line, then benchmark.<i>.report: the per-kernel table (format_kernel_table) and
    the profiler's key_averages table, base64 with the runner's alphabet, on the protocol's
    fd only (without one, main prints the reports as text); `check: pass` and exit 0 as the
    runner. A submission that cannot run here (SubmissionUnavailable): each case's status
    fail and its one-line error, `check: fail`, still exit 0 (as leaderboard).
    -> (0, rows: spec, batch, kv_len, the kernel breakdown, the report)."""
    _worker_init(verbose)  # the interpreter shim, without a GPU
    logger.log("benchmark-count", len(tests))
    rows, passed = [], True
    for idx, test in enumerate(tests):
        start = time.time()
        logger.log(f"benchmark.{idx}.spec", test.spec)
        try:
            profiled = _apply(None, _run_single_profile, (test,), f"benchmark.{idx}")
        except (SubmissionUnavailable, EmulatorVerdict) as exc:
            _verdict_line(f"benchmark.{idx}", exc)
            passed = False
            logger.log(f"benchmark.{idx}.status", "fail")
            logger.log(f"benchmark.{idx}.error", str(exc))
            _progress(idx, len(tests), test.spec, "FAIL", time.time() - start)
            continue
        breakdown = kernel_breakdown(profiled["kernels"], profiled["event_us"])
        table = format_kernel_table(test.spec, breakdown, torch_ops_us=profiled["torch_ops_us"])
        report = f"{table}\n\n{profiled['profiler_table']}"
        if logger.protocol:
            logger.log(f"benchmark.{idx}.report", base64.b64encode(report.encode("utf-8"), b"+*").decode("utf-8"))
        rows.append({"spec": test.spec, "batch": test.args["batchsize"], "kv_len": test.args["kvseqlen"],
                     **breakdown, "report": report})
        timed = (f"event {breakdown['event_us']:.1f} us, {len(breakdown['kernels'])} GPU kernels" if HAS_GPU
                 else f"host clock {breakdown['event_us'] / 1e3:.1f} ms (Triton's interpreter)")
        _progress(idx, len(tests), test.spec, timed, time.time() - start)
    logger.log("check", "pass" if passed else "fail")
    return 0, rows


# ---------------------------------------------------------------------------------------
# compare: two submissions timed in the same worker
# ---------------------------------------------------------------------------------------

def t_quantile_975(df) -> float:
    """The 97.5% quantile of Student's t (a two-sided 95% interval's half-width in standard
    errors) for `df` degrees of freedom, rounded down to an integer (at least 1): bisection
    on the exact distribution for integer df (Abramowitz & Stegun 26.7.3-4)."""
    df = max(1, int(df))

    def central(t):  # P(|T| <= t)
        theta = math.atan(t / math.sqrt(df))
        cos2 = math.cos(theta) ** 2
        if df % 2:
            term, total = math.cos(theta), 0.0
            for j in range(1, (df - 1) // 2 + 1):
                total += term
                term *= cos2 * (2 * j) / (2 * j + 1)
            return 2 / math.pi * (theta + math.sin(theta) * total)
        term, total = 1.0, 0.0
        for j in range(1, df // 2 + 1):
            total += term
            term *= cos2 * (2 * j - 1) / (2 * j)
        return math.sin(theta) * total

    low, high = 0.0, 1e3
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if central(middle) < 0.95 else (low, middle)
    return (low + high) / 2


def _log_interval(log_mean: float, log_se: float, df) -> tuple:
    """(ratio, low, high): exp of a log mean and of its 95% t interval."""
    half = t_quantile_975(df) * log_se if df >= 1 else math.inf
    return math.exp(log_mean), math.exp(log_mean - half), math.exp(log_mean + half)


def paired_ratio(a_ns: list, b_ns: list) -> dict:
    """B/A of one case from paired per-round times: the geometric mean of the per-round
    ratios B_i/A_i and its 95% t interval on log(B_i/A_i) (n - 1 degrees of freedom).
    -> ratio, low, high, log_mean, log_se, df."""
    logs = [math.log(b / a) for a, b in zip(a_ns, b_ns)]
    log_mean = statistics.fmean(logs)
    log_se = statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    ratio, low, high = _log_interval(log_mean, log_se, len(logs) - 1)
    return {"ratio": ratio, "low": low, "high": high, "log_mean": log_mean, "log_se": log_se, "df": len(logs) - 1}


def geomean_ratio(cases: list) -> dict:
    """The geometric mean of the cases' ratios (paired_ratio dicts) with its 95% interval:
    the mean of their log means, its standard error from theirs, t with Welch-Satterthwaite
    degrees of freedom. -> ratio, low, high, df, cases."""
    count = len(cases)
    log_mean = statistics.fmean(case["log_mean"] for case in cases)
    shares = [case["log_se"] ** 2 / count ** 2 for case in cases]
    variance = sum(shares)
    if variance > 0:
        df = variance ** 2 / sum(share ** 2 / max(case["df"], 1) for share, case in zip(shares, cases))
    else:
        df = sum(case["df"] for case in cases)
    ratio, low, high = _log_interval(log_mean, math.sqrt(variance), df)
    return {"ratio": ratio, "low": low, "high": high, "df": df, "cases": count}


def compare_row(test: TestCase, result: dict) -> dict:
    """One case of compare as a row: both means (us), runs and the ratio B/A with its
    interval, or the side that failed and why."""
    row = {"spec": test.spec, "batch": test.args["batchsize"], "kv_len": test.args["kvseqlen"]}
    if "failed" in result:
        return {**row, "status": "fail", "failed": result["failed"], "error": str(result["error"])}
    a_stats, b_stats = calculate_stats(result["A"]), calculate_stats(result["B"])
    return {**row, "status": "pass", "runs": a_stats.runs, "a_mean_us": a_stats.mean / 1e3,
            "b_mean_us": b_stats.mean / 1e3, "a_err_us": a_stats.err / 1e3, "b_err_us": b_stats.err / 1e3,
            **paired_ratio(result["A"], result["B"]),
            "a_us": [ns / 1e3 for ns in result["A"]], "b_us": [ns / 1e3 for ns in result["B"]]}


def print_compare_table(rows, summary, other_name, file=sys.stdout, interpreter=not HAS_GPU):
    """compare's table: per case both means, B/A and its interval; then the geometric mean;
    without a GPU (`interpreter`), INTERPRETER_TIMES_NOTE below."""
    print(f"\nA = submission.py, B = {other_name}; B/A > 1: B is slower", file=file)
    print(f"{'batch':>5} {'kv_len':>6} {'runs':>5} {'A us':>10} {'B us':>10} {'B/A':>7}  95% interval",
          file=file)
    for row in rows:
        head = f"{row['batch']:>5} {row['kv_len']:>6}"
        if row["status"] == "fail":
            side = {"A": "A (submission.py)", "B": f"B ({other_name})"}.get(row["failed"], row["failed"])
            print(f"{head} FAILED: {side}: {row['error'].split(MESSAGE_SEPARATOR)[0]}", file=file)
            continue
        print(f"{head} {row['runs']:>5} {row['a_mean_us']:>10.1f} {row['b_mean_us']:>10.1f} {row['ratio']:>7.3f}  "
              f"[{row['low']:.3f}, {row['high']:.3f}]", file=file)
    if summary:
        print(f"geomean B/A over {summary['cases']} cases: {summary['ratio']:.3f} "
              f"[{summary['low']:.3f}, {summary['high']:.3f}]", file=file)
    if interpreter:
        print(textwrap.fill(INTERPRETER_TIMES_NOTE + ", and neither does B/A here: compare on a GPU.", width=100),
              file=file)


def run_compare(pool, tests, other_path: str, json_path, case_file) -> int:
    """compare: per case _run_compare_case in the worker (on a GPU after benchmark's warm-up on
    the first case), the table, --json; exit 0, or 112 when a case failed."""
    problems = pool.apply(_compare_import_problems, (other_path,))
    for problem in problems:
        print(f"compare: {problem}", file=sys.stderr)
    if problems:
        return 2
    warmup_budget, case_budget = BUDGETS["benchmark"]
    if HAS_GPU:
        _apply(pool, _run_compare_case, (tests[0], other_path, *warmup_budget))
    rows = []
    for idx, test in enumerate(tests):
        start = time.time()
        try:
            result = _apply(pool, _run_compare_case, (test, other_path, *case_budget), f"compare.{idx}")
        except EmulatorVerdict as exc:
            result = {"failed": "A or B", "error": str(exc)}
        row = compare_row(test, result)
        rows.append(row)
        status = (f"FAILED ({row['failed']})" if row["status"] == "fail"
                  else f"B/A {row['ratio']:.3f} [{row['low']:.3f}, {row['high']:.3f}]")
        _progress(idx, len(tests), test.spec, status, time.time() - start)
    compared = [row for row in rows if row["status"] == "pass"]
    summary = geomean_ratio(compared) if compared else None
    print_compare_table(rows, summary, Path(other_path).name)
    if json_path:
        write_json(json_path, "compare", case_file, pool.apply(_environment), a=str(HERE / "submission.py"),
                   b=other_path, ratio="B/A", rows=rows, geomean=summary)
    return 0 if len(compared) == len(rows) else 112


def fastest_checked(rows):
    """The fastest candidate row that passed its check, or None: unchecked ones are never ranked."""
    ranked = [row for row in rows if row.get("checked")]
    return min(ranked, key=lambda row: row["mean_us"]) if ranked else None


def run_tuning(pool, tests, runs):
    """-> {(batch, kv_len): candidate rows}; one progress line per case."""
    results = {}
    for idx, test in enumerate(tests):
        start = time.time()
        rows = _apply(pool, _run_tune_case, (test, runs), f"tune.{idx}")
        results[(test.args["batchsize"], test.args["kvseqlen"])] = rows
        best = fastest_checked(rows)
        status = f"best {best['choice']} {best['mean_us']:.1f} us" if best else "NO CANDIDATE PASSED"
        checked = sum(1 for row in rows if row.get("checked"))
        _progress(idx, len(tests), test.spec, f"{checked}/{len(rows)} checked, {status}", time.time() - start)
    return results


TABLE_BEGIN = "# --- BEGIN MEASURED DISPATCH ---"
TABLE_END = "# --- END MEASURED DISPATCH ---"
# The machine probes' block (submission.machine_block), beside the dispatch block in a
# submission and in a report: MEASURED_MACHINE = {arch: {figure: number or None}},
# MACHINE_ON = {arch: provenance ending in `source <id>`}.
MACHINE_BEGIN = "# --- BEGIN MEASURED MACHINE ---"
MACHINE_END = "# --- END MEASURED MACHINE ---"
MACHINE_FIGURES = ("units", "clock_mhz", "memory_clock_mhz", "memory_bus_bits", "xcds", "launch_us",
                   "two_launches_us", "copy_gbs", "hbm_round_trip_us", "l2_round_trip_us", "atomic_round_trip_us",
                   "probes_wall_s")


def _measured_block(source: str, begin: str = TABLE_BEGIN, end: str = TABLE_END) -> str:
    """The text between a block's markers (by default the MEASURED DISPATCH block's)."""
    return source.split(begin, 1)[1].split(end, 1)[0]


def _top_level_dicts(block: str) -> dict:
    """{name: ast node} of the `NAME = {...}` assignments in a block."""
    return {node.targets[0].id: node.value for node in ast.parse(block).body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}


def measured_table(source: str) -> tuple:
    """(MEASURED_DISPATCH, MEASURED_ON) as written between the markers of submission.py."""
    values = {name: ast.literal_eval(node) for name, node in _top_level_dicts(_measured_block(source)).items()}
    return values.get("MEASURED_DISPATCH", {}), values.get("MEASURED_ON", {})


def measured_times_us(source: str) -> dict:
    """{(arch, (batch, kv_len)): mean us} from the `# NN.N us` comments that end the entries of
    MEASURED_DISPATCH (entries without one are left out)."""
    block = _measured_block(source)
    comments = {token.start[0]: token.string for token in tokenize.generate_tokens(io.StringIO(block).readline)
                if token.type == tokenize.COMMENT}
    table = _top_level_dicts(block).get("MEASURED_DISPATCH", ast.Dict(keys=[], values=[]))
    times_us = {}
    for arch_node, cases in zip(table.keys, table.values):
        for case_node, choice_node in zip(cases.keys, cases.values):
            matched = re.fullmatch(r"#\s*([0-9]+(?:\.[0-9]*)?)\s*us\s*", comments.get(choice_node.end_lineno, ""))
            if matched:
                times_us[(ast.literal_eval(arch_node), ast.literal_eval(case_node))] = float(matched[1])
    return times_us


OTHER_CASES = "; other cases: "  # joins an architecture's provenance to the earlier one it keeps


def merge_measured_table(source: str, arch: str, best: dict, provenance: str) -> tuple:
    """Merge `best` ({(batch, kv_len): (choice, mean us or None)}) into `arch`'s entries of
    the MEASURED DISPATCH block of `source` (a submission's text): each given case replaces
    its entry; the other cases of `arch` and every other architecture stay, with their
    `# NN.N us` comments. `arch`'s MEASURED_ON line becomes `provenance`, followed (after
    OTHER_CASES) by the earlier one's parts other than this provenance while earlier entries
    remain, so that merging the same provenance again adds nothing. -> (new source, new
    block). ValueError when `source` has no block."""
    if TABLE_BEGIN not in source or TABLE_END not in source:
        raise ValueError(f"no {TABLE_BEGIN!r} ... {TABLE_END!r} block")
    table, measured_on = measured_table(source)
    times_us = measured_times_us(source)
    kept = {case: choice for case, choice in table.get(arch, {}).items() if case not in best}
    table[arch] = {**kept, **{case: str(choice) for case, (choice, _) in best.items()}}
    times_us.update({(arch, case): mean_us for case, (_, mean_us) in best.items()})
    earlier = measured_on.get(arch, "").split(OTHER_CASES) if kept and measured_on.get(arch) else []
    measured_on[arch] = OTHER_CASES.join([provenance, *(part for part in earlier if part != provenance)])
    lines = [TABLE_BEGIN, "MEASURED_DISPATCH = {"]
    for name in sorted(table):
        lines.append(f"    {name!r}: {{")
        for case, choice in sorted(table[name].items()):
            time_us = times_us.get((name, case))
            note = f"  # {time_us:.1f} us" if time_us is not None else ""
            lines.append(f"        {case!r}: {choice!r},{note}")
        lines.append("    },")
    lines.append("}")
    lines.append("MEASURED_ON = {")
    lines += [f"    {name!r}: {measured_on[name]!r}," for name in sorted(measured_on)]
    lines += ["}", TABLE_END]
    block = "\n".join(lines)
    return with_block(source, TABLE_BEGIN, TABLE_END, block), block


def with_block(text: str, begin: str, end: str, block: str) -> str:
    """`text` with `block` (its own begin and end lines included) in place of the text from the
    marker `begin` through the marker `end`: the one writer of submission.py's generated blocks
    (MEASURED DISPATCH and MEASURED MACHINE here; EMULATOR PROVEN and MI355X PREDICTION through
    tools/common.replace_block). ValueError when `text` lacks either marker."""
    if begin not in text or end not in text.split(begin, 1)[1]:
        raise ValueError(f"no {begin!r} ... {end!r} block")
    head, rest = text.split(begin, 1)
    return head + block + rest.split(end, 1)[1]


def write_measured_table(path: Path, arch: str, best: dict, provenance: str) -> str:
    """merge_measured_table on the file at `path`, written back. -> the new block."""
    try:
        source, block = merge_measured_table(path.read_text(), arch, best, provenance)
    except ValueError as exc:
        raise ValueError(f"{path} has {exc}") from None
    path.write_text(source)
    return block


def source_id(text: str) -> str:
    """A submission's source id, computed by submission.py's own `source_id` (the file beside
    eval.py; one definition, its docstring says what it hashes: the text without its MEASURED
    DISPATCH and MEASURED MACHINE blocks, so that writing either leaves the id unchanged).
    The submission's first-call tuning report names it (`source <id>` in its MEASURED_ON
    line); `ingest` checks it."""
    return _submission_definitions()["source_id"](text)


# submission.py's definitions eval.py reads without importing it: the source id, and the Launch record
# whose literal form (str(launch)) the MEASURED DISPATCH block holds.
_SUBMISSION_PARTS = ("source_id", "TABLE_BEGIN", "TABLE_END", "MACHINE_BEGIN", "MACHINE_END", "Launch",
                     "LAUNCH_SIZES", "_fail", "FAMILY_NAMES", "MERGE_NAMES", "BF16_SCORES", "MERGE_DIRECT",
                     "MERGE_COMBINE", "MERGE_FUSED", "SCALED_SCORES", "ONCE_SCORES")
_SUBMISSION_NAMESPACE = {}


def _assigned_names(node) -> set:
    targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
    return {getattr(target, "id", None) for target in targets}


def _submission_definitions() -> dict:
    """submission.py's _SUBMISSION_PARTS, taken from the file's text (not imported: no kernels
    built, no aiter imported); ValueError naming what is missing."""
    if not _SUBMISSION_NAMESPACE:
        path = HERE / "submission.py"
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"source_id is submission.py's, beside eval.py: cannot read {path}: {exc.strerror}")
        nodes = [node for node in tree.body
                 if (isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in _SUBMISSION_PARTS)
                 or (isinstance(node, ast.Assign) and _assigned_names(node) & set(_SUBMISSION_PARTS))]
        namespace = {"hashlib": hashlib, "dataclasses": dataclasses, "re": re}
        exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
        missing = [name for name in _SUBMISSION_PARTS if name not in namespace]
        if missing:
            raise ValueError(f"{path} lacks {', '.join(missing)}: eval.py's source_id and Launch are the submission's")
        _SUBMISSION_NAMESPACE.update(namespace)
    return _SUBMISSION_NAMESPACE


# ---------------------------------------------------------------------------------------
# ingest: the measured choices of a runner's log into the MEASURED DISPATCH block
# ---------------------------------------------------------------------------------------

class IngestError(ValueError):
    """A log or a target that ingest cannot use: one line for stderr, exit 2, nothing written."""


SOURCE_PATTERN = re.compile(r"\bsource ([0-9a-f]{12})\b")


def choice_problem(choice) -> str:
    """'' when `choice` is a launch's literal form, as submission.py's Launch.parse reads it
    ('aiter', or e.g. 'scaled t128 w8 s4 st2 combine'); else what is wrong with it."""
    try:
        _submission_definitions()["Launch"].parse(choice)
    except ValueError as exc:
        return str(exc).removeprefix("custom_kernel: ")
    return ""


def marked_blocks(log_text: str, log_name: str, begin: str = TABLE_BEGIN, end: str = TABLE_END) -> list:
    """[(line number, block text)] of every complete block between `begin` and `end` markers
    in a log, in order (none: []). Whatever precedes the BEGIN marker on its line (a
    timestamp, "stderr: ") is taken off every line of that block that starts with it.
    IngestError when a block does not end (no END marker before the next BEGIN or the log's end)."""
    lines = log_text.splitlines()
    name = begin.split("BEGIN ", 1)[1].rstrip(" -")
    blocks, index = [], 0
    while index < len(lines):
        if begin not in lines[index]:
            index += 1
            continue
        prefix = lines[index][:lines[index].index(begin)]
        body = []
        for last in range(index, len(lines)):
            line = lines[last][len(prefix):] if prefix and lines[last].startswith(prefix) else lines[last]
            if last > index and begin in line:
                raise IngestError(f"{log_name} line {index + 1}: a {name} block begins and another "
                                  f"begins at line {last + 1} before its {end!r}: the report is truncated")
            body.append(line)
            if end in line:
                break
        else:
            raise IngestError(f"{log_name} line {index + 1}: a {name} block begins and the log ends "
                              f"before its {end!r}: the log is truncated (copy the whole report)")
        blocks.append((index + 1, "\n".join(body)))
        index = last + 1
    return blocks


def report_blocks(log_text: str, log_name: str) -> list:
    """marked_blocks of the MEASURED DISPATCH blocks; IngestError when there is none."""
    blocks = marked_blocks(log_text, log_name)
    if not blocks:
        raise IngestError(f"no first-call tuning report in {log_name}: no line contains {TABLE_BEGIN!r}. Copy "
                          f"everything the leaderboard shows for a run of the submission, its stderr included: "
                          f"the report ends in a block from that line to {TABLE_END!r}")
    return blocks


def parse_report_block(text: str, where: str) -> tuple:
    """(MEASURED_DISPATCH, MEASURED_ON, {(arch, case): us}) of one report block, every entry
    checked (architecture names, (batch, kv_len) keys of integers >= 1, choice_problem, text
    provenance). `where` names the block in errors (IngestError)."""
    try:
        names = _top_level_dicts(_measured_block(text))
        table, measured_on = measured_table(text)
    except (SyntaxError, ValueError, TypeError, tokenize.TokenError) as exc:
        detail = getattr(exc, "msg", None) or str(exc)
        raise IngestError(f"{where}: the MEASURED DISPATCH block does not parse ({type(exc).__name__}: "
                          f"{detail})") from None
    missing = [name for name in ("MEASURED_DISPATCH", "MEASURED_ON") if name not in names]
    if missing:
        raise IngestError(f"{where}: the MEASURED DISPATCH block has no {' and no '.join(missing)}")
    if not isinstance(table, dict) or not isinstance(measured_on, dict):
        raise IngestError(f"{where}: MEASURED_DISPATCH and MEASURED_ON must be dicts")
    for arch, cases in table.items():
        if not isinstance(arch, str) or not isinstance(cases, dict):
            raise IngestError(f"{where}: MEASURED_DISPATCH maps architecture names to dicts, not {arch!r}: {cases!r}")
        for case, choice in cases.items():
            if not (isinstance(case, tuple) and len(case) == 2
                    and all(type(size) is int and size >= 1 for size in case)):  # noqa: E721
                raise IngestError(f"{where}: {arch} case {case!r} is not (batch, kv_len) of integers >= 1")
            problem = choice_problem(choice)
            if problem:
                raise IngestError(f"{where}: {arch} {case}: bad choice {problem}")
    for arch, provenance in measured_on.items():
        if not isinstance(provenance, str):
            raise IngestError(f"{where}: MEASURED_ON[{arch!r}] must be text, not {provenance!r}")
    return table, measured_on, measured_times_us(text)


def parse_machine_block(text: str, where: str) -> tuple:
    """(MEASURED_MACHINE, MACHINE_ON) of one MEASURED MACHINE block, checked: architecture
    names to dicts of MACHINE_FIGURES names to numbers >= 0 (not bools) or None, text
    provenance. IngestError otherwise."""
    try:
        values = {name: ast.literal_eval(node) for name, node in
                  _top_level_dicts(_measured_block(text, MACHINE_BEGIN, MACHINE_END)).items()}
    except (SyntaxError, ValueError, TypeError) as exc:
        raise IngestError(f"{where}: the MEASURED MACHINE block does not parse ({type(exc).__name__}: "
                          f"{getattr(exc, 'msg', None) or exc})") from None
    machine, machine_on = values.get("MEASURED_MACHINE"), values.get("MACHINE_ON")
    if not isinstance(machine, dict) or not isinstance(machine_on, dict):
        raise IngestError(f"{where}: the MEASURED MACHINE block needs the dicts MEASURED_MACHINE and MACHINE_ON")
    for arch, figures in machine.items():
        if not isinstance(arch, str) or not isinstance(figures, dict):
            raise IngestError(f"{where}: MEASURED_MACHINE maps architecture names to dicts, not {arch!r}: {figures!r}")
        for name, value in figures.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
            if name not in MACHINE_FIGURES or not (number or value is None):
                raise IngestError(f"{where}: {arch} {name!r}: {value!r} is not a figure of the probes "
                                  f"({', '.join(MACHINE_FIGURES)}: numbers >= 0 or None)")
        if not isinstance(machine_on.get(arch), str):
            raise IngestError(f"{where}: MACHINE_ON[{arch!r}] must be text, not {machine_on.get(arch)!r}")
    return machine, machine_on


def provenance_device(provenance: str) -> str:
    """The device a block's provenance names (its text before ', torch ')."""
    return provenance.split(", torch ", 1)[0]


def merge_machine_block(source: str, arch: str, figures: dict, provenance: str) -> tuple:
    """`arch`'s entry of source's MEASURED MACHINE block replaced by `figures` (the other
    architectures kept); a source without the block gets one right after its MEASURED
    DISPATCH block. -> (new source, new block)."""
    machine, machine_on = {}, {}
    if MACHINE_BEGIN in source and MACHINE_END in source:
        machine, machine_on = parse_machine_block(source, "the submission")
    else:  # its own lines after the dispatch block's (source_id drops them with their newline)
        cut = source.index(TABLE_END) + len(TABLE_END) + 1
        source = source[:cut] + f"{MACHINE_BEGIN}\n{MACHINE_END}\n" + source[cut:]
    machine[arch], machine_on[arch] = dict(figures), provenance
    lines = [MACHINE_BEGIN, "MEASURED_MACHINE = {"]
    for name in sorted(machine):
        lines += [f"    {name!r}: {{"] + [f"        {key!r}: {value!r}," for key, value in machine[name].items()]
        lines.append("    },")
    lines += ["}", "MACHINE_ON = {"] + [f"    {name!r}: {machine_on[name]!r}," for name in sorted(machine_on)]
    block = "\n".join(lines + ["}", MACHINE_END])
    return with_block(source, MACHINE_BEGIN, MACHINE_END, block), block


def _source_problem(where, name, provenance, target_id, target_name, field="MEASURED_ON"):
    """'' when a block's provenance (its `field` entry) names the target's source id, else why not."""
    matched = SOURCE_PATTERN.search(provenance)
    if matched and matched[1] == target_id:
        return ""
    measured = f"submission source {matched[1]}" if matched else f"no `source <id>` in its {field}"
    return (f"{where}: {name} was measured with {measured}, but {target_name} has source {target_id} (the file "
            f"changed since that run; --force ingests anyway)")


def _machine_merges(log_text, log_name, source, target, arch, force) -> list:
    """[(arch, figures, provenance)] of the log's MEASURED MACHINE blocks (later ones
    replace earlier ones), each of the target's source (unless force) and, where the target
    keeps an entry for that architecture, of the device it names (unless force)."""
    kept = parse_machine_block(source, target.name)[1] if MACHINE_BEGIN in source and MACHINE_END in source else {}
    merges = {}
    for line_number, text in marked_blocks(log_text, log_name, MACHINE_BEGIN, MACHINE_END):
        where = f"{log_name} line {line_number}"
        machine, machine_on = parse_machine_block(text, where)
        for name, figures in machine.items():
            if arch is not None and name != arch:
                continue
            problem = _source_problem(where, f"{name}'s machine", machine_on[name], source_id(source), target.name,
                                      "MACHINE_ON")
            device, kept_device = provenance_device(machine_on[name]), provenance_device(kept.get(name, ""))
            if not problem and kept.get(name) and device != kept_device:
                problem = (f"{where}: {name}'s machine was measured on {device}, but {target.name} keeps the "
                           f"figures of {kept_device} (another device; --force replaces them)")
            if problem and not force:
                raise IngestError(problem)
            merges[name] = (name, figures, f"{machine_on[name]}; ingested from {log_name}")
    return list(merges.values())


def ingest(log_path, target_path, arch=None, force=False) -> str:
    """Write the measured choices of every report block of the log at `log_path` into the
    MEASURED DISPATCH block of the submission at `target_path`: blocks in order (later ones
    override earlier ones per case), only `arch`'s entries when given, each through
    merge_measured_table with the block's MEASURED_ON text + '; ingested from <log name>';
    and the last MEASURED MACHINE block's entry per architecture into its MEASURED MACHINE
    block (merge_machine_block, _machine_merges). Every block must parse and every choice be
    valid, and each used entry's `source` id must be the target's source_id (unless force),
    before anything is written. A log of machine blocks only writes those.
    -> a summary of what was written. IngestError on any problem (the target untouched)."""
    log_name, target = Path(log_path).name, Path(target_path)
    try:
        log_text = Path(log_path).read_text(encoding="utf-8", errors="replace")
        source = target.read_text(encoding="utf-8")
    except OSError as exc:
        raise IngestError(f"cannot read {exc.filename}: {exc.strerror}") from None
    if TABLE_BEGIN not in source or TABLE_END not in source:
        raise IngestError(f"{target} has no {TABLE_BEGIN!r} ... {TABLE_END!r} block to write into")
    machines = _machine_merges(log_text, log_name, source, target, arch, force)
    merges, found_archs = [], set()
    blocks = marked_blocks(log_text, log_name) if machines else report_blocks(log_text, log_name)
    target_id = source_id(source)
    for line_number, text in blocks:
        where = f"{log_name} line {line_number}"
        table, measured_on, times_us = parse_report_block(text, where)
        found_archs |= {name for name, cases in table.items() if cases}
        for name, cases in table.items():
            if not cases or (arch is not None and name != arch):
                continue
            provenance = measured_on.get(name, "")
            problem = _source_problem(where, name, provenance, target_id, target.name)
            if problem and not force:
                raise IngestError(problem)
            merges.append((name, {case: (choice, times_us.get((name, case))) for case, choice in cases.items()},
                           f"{provenance or 'no provenance'}; ingested from {log_name}"))
    if not merges and not machines:
        held = ", ".join(sorted(found_archs)) or "no measured choice"
        wanted = f"no entry for --arch {arch}" if arch is not None else "nothing to ingest"
        raise IngestError(f"{wanted} in the {len(blocks)} report block(s) of {log_name} (they hold: {held})")
    block = ""
    for name, best, provenance in merges:
        source, block = merge_measured_table(source, name, best, provenance)
    for name, figures, provenance in machines:
        source, machine_block = merge_machine_block(source, name, figures, provenance)
        block += ("\n" if block else "") + machine_block
    target.write_text(source, encoding="utf-8")
    written = {}
    for name, best, _ in merges:
        written.setdefault(name, set()).update(best)
    counts = [f"{len(cases)} case(s) for {name}" for name, cases in sorted(written.items())]
    counts += [f"the machine of {name}" for name, _, _ in machines]
    return (f"ingested {', '.join(counts)} from {len(blocks)} report block(s) of {log_name} into {target}; its "
            f"blocks now read:\n{block}")


def run_ingest(options) -> int:
    """ingest, from the command line: exit 0, or 2 with one line on stderr."""
    target = options["target"] or str(HERE / "submission.py")
    try:
        print(ingest(options["log"], target, options["arch"], options["force"]))
    except IngestError as exc:
        print(f"ingest: {exc}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------------------------------
# model: each timed candidate of a runner's log beside the latency model's prediction
# ---------------------------------------------------------------------------------------

HEADER_PATTERN = re.compile(r"submission: first-call tuning \(.*?\): architecture (\S+), (.+?), torch (\S+), "
                            r"triton (\S+), .*\bsource ([0-9a-f]{12})")
PICK_PATTERN = re.compile(r"\bcase \((\d+), (\d+)\): pick (.+?), ([0-9.]+) us")
CANDIDATES_MARK = "candidates, mean us (runs): "
CANDIDATE_PATTERN = re.compile(r"(.+) ([0-9.]+) \((\d+)\)")


def read_tuning_log(log_text: str, log_name: str) -> dict:
    """The first-call tuning reports in a log -> {arch: {"device", "torch", "triton",
    "source", "cases": {(batch, kv_len): [(candidate, mean us, runs), the pick first]},
    "machine": {arch: (figures, provenance)} of the log's last MEASURED MACHINE block}}: per
    architecture the last report header's fields and each case's last candidates line (lines
    may carry a prefix). IngestError when the log has no report header."""
    reports, arch, case, pick = {}, None, None, None
    for line in log_text.splitlines():
        header = HEADER_PATTERN.search(line)
        if header:
            arch = header[1]
            found = reports.setdefault(arch, {"cases": {}})
            found.update(zip(("device", "torch", "triton", "source"), header.groups()[1:]))
        picked = PICK_PATTERN.search(line)
        if picked and arch is not None:
            case, pick = (int(picked[1]), int(picked[2])), picked[3]
        if CANDIDATES_MARK in line and case is not None:
            tried = [CANDIDATE_PATTERN.fullmatch(item.strip()) for item in line.split(CANDIDATES_MARK, 1)[1].split("; ")]
            tried = [(m[1], float(m[2]), int(m[3])) for m in tried if m]
            reports[arch]["cases"][case] = sorted(tried, key=lambda item: item[0] != pick)
            case = None
    if not reports:
        raise IngestError(f"no first-call tuning report in {log_name}: no line starts it "
                          f"('submission: first-call tuning (...): architecture ...')")
    machine = machine_entries(log_text, log_name)
    for found in reports.values():
        found["machine"] = machine
    return reports


def machine_entries(text: str, name: str) -> dict:
    """{arch: (figures, provenance)} of every MEASURED MACHINE block in a text (a log or a
    submission), each checked by parse_machine_block; a later block's entry for an
    architecture replaces an earlier one's. {} without a block."""
    entries = {}
    for line_number, block in marked_blocks(text, name, MACHINE_BEGIN, MACHINE_END):
        figures, provenance = parse_machine_block(block, f"{name} line {line_number}")
        entries.update({arch: (figures[arch], provenance[arch]) for arch in figures})
    return entries


def model_machine(report: dict, arch: str, log_name: str, kept_path: Path) -> tuple:
    """The measured figures the model may use for one architecture's report -> (figures or
    None, what they are or why there are none). The log's own block first, else the one
    `kept_path` keeps (ingested earlier); either is refused when it names another device or
    another source than the report's header."""
    entry, where = report["machine"].get(arch), f"{log_name}'s MEASURED MACHINE block"
    if entry is None:
        why = f"{log_name} has no MEASURED MACHINE block for {arch} (a submission from before the machine probes)"
        if not (kept_path.is_file() and MACHINE_BEGIN in kept_path.read_text(encoding="utf-8")):
            return None, why
        machine, machine_on = parse_machine_block(kept_path.read_text(encoding="utf-8"), kept_path.name)
        if arch not in machine:
            return None, f"{why}, and {kept_path.name} keeps none for it"
        entry, where = (machine[arch], machine_on[arch]), f"{kept_path.name}'s MEASURED MACHINE block"
    figures, provenance = entry
    matched = SOURCE_PATTERN.search(provenance)
    if provenance_device(provenance) != report["device"]:
        return None, (f"{where} was measured on {provenance_device(provenance)}, the candidates on "
                      f"{report['device']}: refused")
    if not matched or matched[1] != report["source"]:
        return None, (f"{where} is of submission source {matched[1] if matched else 'unknown'}, the candidates' "
                      f"of {report['source']}: refused")
    return figures, f"{where}: {provenance}"


def run_model(options) -> int:
    """model, from the command line: the comparison per architecture of LOG, exit 0; 2 with
    one line on stderr when LOG cannot be read or has no report."""
    sys.path.insert(0, str(HERE / "tools"))
    import latency_model
    log_path = Path(options["log"])
    try:
        reports = read_tuning_log(log_path.read_text(encoding="utf-8", errors="replace"), log_path.name)
    except (OSError, IngestError) as exc:
        print(f"model: {exc}", file=sys.stderr)
        return 2
    written = []
    for arch, report in reports.items():
        target = latency_model.ARCH_TARGET.get(arch)
        if target is None:
            print(f"\n{arch}: no compile-report target for this architecture (the model knows "
                  f"{', '.join(latency_model.ARCH_TARGET)})")
            continue
        compile_path = Path(options["report"] or HERE / "results" / f"compile_report_triton{report['triton']}.json")
        if not compile_path.is_file():
            compile_path = HERE / "results" / "compile_report_triton3.6.0.json"
        assumed = latency_model.ASSUMED[target]
        machines, missing = {"assumed": assumed}, []
        figures, note = model_machine(report, arch, log_path.name, HERE / "submission.py")
        if figures is not None:
            machines["measured"], missing = latency_model.machine_from_figures(figures, assumed)
        compared = latency_model.compare_cases(report["cases"], latency_model.load_rows(compile_path), target, machines)
        print(f"\n{arch}, {report['device']}, torch {report['torch']}, triton {report['triton']}, source "
              f"{report['source']}: {len(compared)} case(s) of {log_path.name}; compile report {compile_path.name}")
        print(f"  assumed parameters: {assumed}")
        print(f"  measured parameters: {machines['measured'] if figures is not None else 'none'} ({note}"
              + (f"; assumed where not measured: {', '.join(missing)})" if missing else ")"))
        print(latency_model.format_comparison(compared, list(machines)))
        written.append({"arch": arch, **{k: report[k] for k in ("device", "torch", "triton", "source")},
                        "compile_report": compile_path.name, "machine_note": note, "assumed_fields": missing,
                        "machines": {name: machine._asdict() for name, machine in machines.items()},
                        "cases": compared})
    if options["json"]:
        write_json(options["json"], "model", None, {}, log=log_path.name, reports=written)
    return 0


def finish_tuning(results, pool, options, case_file) -> int:
    """Print every candidate, write the fastest per case into submission.py and --json."""
    best = {}
    for case, rows in results.items():
        print(f"\nbatch {case[0]} kv_len {case[1]}:")
        for row in sorted(rows, key=lambda r: r.get("mean_us", float("inf"))):
            timing = f"{row['mean_us']:9.1f} us" if row.get("checked") else f"not ranked: {row.get('error')}"
            print(f"  {row['choice']:<30} {timing}  {row.get('variant', '')}")
        winner = fastest_checked(rows)
        if winner is not None:
            best[case] = (winner["choice"], winner["mean_us"])
    env = pool.apply(_environment)
    arch = pool.apply(_device_arch)
    provenance = (f"{env['device']}, torch {env['torch']}, triton {env['triton']}, "
                  f"{datetime.date.today().isoformat()}: python eval.py tune {Path(case_file).name}")
    if options["write"] and best:
        block = write_measured_table(HERE / "submission.py", arch, best, provenance)
        print(f"\nwrote {len(best)} measured choices for {arch} into submission.py:\n{block}")
    if options["json"]:
        write_json(options["json"], "tune", case_file, env, arch=arch,
                   results=[{"batch": batch, "kv_len": kv_len, "candidates": rows}
                            for (batch, kv_len), rows in results.items()],
                   best=[{"batch": batch, "kv_len": kv_len, "choice": choice, "mean_us": mean_us}
                         for (batch, kv_len), (choice, mean_us) in best.items()])
    return 0 if len(best) == len(results) else 112


def write_json(path, mode, case_file, env, **fields):
    """One run as JSON: date, command, mode, case file, device and versions, then `fields`."""
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "command": "python eval.py " + " ".join(sys.argv[1:]), "mode": mode, "cases": case_file,
              "env": {name: value for name, value in os.environ.items() if name.startswith("MLA_")},
              **env, **fields}
    Path(path).write_text(json.dumps(record, indent=2) + "\n")


def _device_arch() -> str:
    submission = _submission()
    device = torch.device("cuda", torch.cuda.current_device()) if HAS_GPU else torch.device("cpu")
    return submission._arch(device)


def case_bytes(args: dict) -> int:
    """Bytes the MXFP4 path must move: the KV cache once, Q once, the output once."""
    batch, q_len, kv_len = args["batchsize"], args.get("qseqlen", 1), args["kvseqlen"]
    return batch * kv_len * MXFP4_BYTES_PER_TOKEN + batch * q_len * 16 * (576 + 512) * 2


def summary_rows(results, floors) -> list:
    rows = []
    for test, stats in results:
        nbytes = case_bytes(test.args)
        mean_us = stats.mean / 1e3
        row = {"spec": test.spec, "batch": test.args["batchsize"], "kv_len": test.args["kvseqlen"],
               "runs": stats.runs, "mean_us": mean_us, "best_us": stats.best / 1e3,
               "std_us": stats.std / 1e3, "bytes": nbytes, "gbs": nbytes / stats.mean}
        if floors:
            floor_us = floors["call_floor_us"] + nbytes / floors["copy_rate_gbs"] / 1e3
            row.update(floor_us=floor_us, ratio_to_floor=mean_us / floor_us)
        rows.append(row)
    return rows


def print_table(rows, floors, file=sys.stdout, interpreter=not HAS_GPU):
    """The benchmark table; `interpreter` (no GPU): no GB/s column, and INTERPRETER_TIMES_NOTE below."""
    header = f"{'batch':>5} {'kv_len':>6} {'runs':>5} {'mean us':>9} {'best us':>9} {'std us':>8} {'MB':>8}"
    if not interpreter:
        header += f" {'GB/s':>7}"
    if floors:
        header += f" {'floor us':>9} {'x floor':>7}"
    print("\n" + header, file=file)
    for row in rows:
        line = (f"{row['batch']:>5} {row['kv_len']:>6} {row['runs']:>5} {row['mean_us']:>9.1f} "
                f"{row['best_us']:>9.1f} {row['std_us']:>8.1f} {row['bytes'] / 1e6:>8.2f}")
        if not interpreter:
            line += f" {row['gbs']:>7.0f}"
        if floors:
            line += f" {row['floor_us']:>9.1f} {row['ratio_to_floor']:>7.2f}"
        print(line, file=file)
    if rows:
        geo = math.exp(sum(math.log(r["mean_us"]) for r in rows) / len(rows))
        line = f"geomean of means: {geo:.1f} us"
        if floors:
            geo_floor = math.exp(sum(math.log(r["floor_us"]) for r in rows) / len(rows))
            line += (f"; floor geomean {geo_floor:.1f} us (call floor {floors['call_floor_us']:.1f} us,"
                     f" copy rate {floors['copy_rate_gbs']:.0f} GB/s)")
        print(line, file=file)
    if interpreter:
        print(textwrap.fill(INTERPRETER_TIMES_NOTE + " (hence no GB/s and no floor). Time on a GPU, or build for "
                            "the MI355X with python tools/compile_report.py.", width=100), file=file)


USAGE_LINES = ("python eval.py {test,benchmark,leaderboard,profile,tune} [case file] [--json PATH] [--verbose]",
               "                      [--runs N (tune)] [--no-write (tune)] [--all-forms (test)]",
               "python eval.py compare OTHER [case file] [--json PATH] [--verbose]",
               "python eval.py ingest LOG [SUBMISSION] [--arch ARCH] [--force]",
               "python eval.py model LOG [--report PATH] [--json PATH]")
USAGE = "usage: " + " | ".join(" ".join(line.split()) for line in USAGE_LINES) + "; python eval.py --help says more"


def _help_items(items: dict) -> list:
    """`  name         text` lines, the text wrapped under itself."""
    return [textwrap.fill(text, width=92, initial_indent=f"  {name:<12} ", subsequent_indent=" " * 15)
            for name, text in items.items()]


def _flag_help() -> dict:
    """FLAGS with the modes each option applies to in front of its text."""
    modes = {name: FLAG_SPECS[name.split()[0]].modes for name in FLAGS if name.split()[0] in FLAG_SPECS}
    return {name: f"{', '.join(modes[name])}: {text}" if name in modes else text for name, text in FLAGS.items()}


HELP = "\n".join([
    "usage: " + USAGE_LINES[0],
    *[("       " if line.startswith("python") else "") + line for line in USAGE_LINES[1:]],
    "",
    "The case file defaults to tests.txt (test) or benchmarks.txt (the other modes) on a GPU,",
    "and to tests_cpu.txt without one (the kernels then run in Triton's interpreter).",
    "",
    "modes:",
    *_help_items(MODES),
    "",
    "options:",
    *_help_items(_flag_help()),
    "",
    "environment: POPCORN_FD=<fd> makes eval.py the leaderboard's runner: its four modes only,",
    "the protocol lines on that fd, exit 0 pass (and always for leaderboard and profile, as the",
    "runner: `check: fail` tells), 112 a test or benchmark case failed, 113 a malformed case",
    "line, 2 bad arguments; POPCORN_SEED=<int> is mixed into every case seed;",
    "MLA_EVAL_CPU_BUDGET_S (default 5) caps the seconds of timed calls per case without a GPU.",
    "MLA_EMULATE=gfx950 runs the submission's kernels as their MI355X builds (Triton 3.6.0) on the",
    "gfx950 emulator (tools/gfx950, docs/gfx950_emulator.md), dispatched as on the MI355X: what the",
    "answers say holds for those binaries; the times are the emulator's.",
    "Other exit statuses: compare 112 when a case failed, 2 when a file does not import; ingest",
    "2 on any problem (the submission file then untouched).",
    "",
    "A submission that cannot run here (it fails to import, or a case's first call misses a",
    "module: aiter exists only in ROCm builds) fails every case with one line saying why and what",
    "to do; --verbose adds the traceback. Case files may hold blank lines and # comments.",
])


def _usage_error(message: str) -> int:
    print(f"{message}; {USAGE}", file=sys.stderr)
    return 2


def _parse_args(argv, popcorn):
    """-> (mode, case file or None, options) or an exit code. With POPCORN_FD a mode that is
    not the runner's comes back as it is (main reads the case file, then exits 2, as the
    runner); without it, an unknown mode or option, a flag of another mode, a missing or
    extra positional argument is exit 2 with the usage."""
    if popcorn and len(argv) < 2:
        return 2  # the runner's rule
    if "-h" in argv or "--help" in argv:
        print(HELP)
        return 0
    options, given = dict(OPTION_DEFAULTS), []
    for name, flag in FLAG_SPECS.items():
        if name not in argv:
            continue
        index = argv.index(name)
        if flag.convert is None:
            options[flag.key] = flag.switch_value
            argv = argv[:index] + argv[index + 1:]
        else:
            try:
                options[flag.key] = flag.convert(argv[index + 1])
            except (IndexError, ValueError):
                return _usage_error(f"{name} needs a value")
            argv = argv[:index] + argv[index + 2:]
        given.append(name)
    if options["runs"] < 1:
        print(f"--runs needs at least 1 timed call, not {options['runs']}", file=sys.stderr)
        return 2
    if options["all_forms"] and not EMULATE:
        print("--all-forms runs on the gfx950 emulator: MLA_EMULATE=gfx950 python eval.py test --all-forms",
              file=sys.stderr)
        return 2
    unknown = [a for a in argv if a.startswith("-")]
    if unknown:
        return _usage_error(f"unknown option {unknown[0]}")
    if not argv:
        return _usage_error("no mode")
    mode = argv[0]
    if popcorn and mode not in RUNNER_MODES:
        return mode, argv[1], options
    if mode not in MODES:
        return _usage_error(f"unknown mode {mode!r}")
    misplaced = [name for name in given if mode not in FLAG_SPECS[name].modes]
    if misplaced:
        return _usage_error(f"{misplaced[0]} applies to {', '.join(FLAG_SPECS[misplaced[0]].modes)}, not {mode}")
    wanted = POSITIONALS.get(mode, DEFAULT_POSITIONALS)
    values = argv[1:]
    if len(values) > len(wanted) and not popcorn:  # the runner ignores extra arguments
        return _usage_error(f"too many arguments for {mode}: {' '.join(values[len(wanted):])}")
    for index, (key, name, required) in enumerate(wanted):
        if index >= len(values) and required:
            return _usage_error(f"{mode} needs {name}")
        options[key] = values[index] if index < len(values) else None
    cases = options.pop("cases", None)
    if cases is None and mode not in ("ingest", "model"):
        cases = str(HERE / (DEFAULT_CASES[mode] if HAS_GPU else CPU_CASES))
    return mode, cases, options


def main():
    fd = os.getenv("POPCORN_FD")
    parsed = _parse_args(sys.argv[1:], popcorn=bool(fd))
    if isinstance(parsed, int):
        return parsed
    mode, case_file, options = parsed
    runner_only = bool(fd) and mode not in RUNNER_MODES  # the runner reads the cases, then returns 2
    if mode == "ingest" and not runner_only:
        return run_ingest(options)
    if mode == "model" and not runner_only:
        return run_model(options)
    json_path = options["json"]
    try:
        _cpu_budget_s()
        if EMULATE:
            _check_emulate_value()
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    seed = os.getenv("POPCORN_SEED")
    os.environ.pop("POPCORN_SEED", None)
    seed = int(seed) if seed else None
    set_seed(seed or 42)
    tests = get_test_cases(case_file, seed)
    if runner_only:
        return 2
    if mode == "compare" and not Path(options["other"]).is_file():
        print(f"compare: {options['other']} is not a file", file=sys.stderr)
        return 2
    if EMULATE:
        print(EMULATE_NOTE, file=sys.stderr)
    tuning = ""
    with PopcornOutput(int(fd) if fd else None) as logger:
        if mode == "profile":
            code, rows = run_profiling(logger, tests, options["verbose"])
        else:
            context = multiprocessing.get_context("spawn")
            with context.Pool(1, initializer=_worker_init, initargs=(options["verbose"],)) as pool:
                if mode == "test":
                    return run_testing(logger, pool, tests, options["all_forms"])
                if mode == "tune":
                    try:
                        return finish_tuning(run_tuning(pool, tests, options["runs"]), pool, options, case_file)
                    except SubmissionUnavailable as exc:
                        print(f"tune: {exc}", file=sys.stderr)
                        return 112
                if mode == "compare":
                    return run_compare(pool, tests, str(Path(options["other"]).resolve()), json_path, case_file)
                floors = pool.apply(_measure_floors) if not fd else {}
                code, results = run_benchmarking(logger, pool, tests, mode)
                if not fd:
                    tuning = pool.apply(_tuning_report)
    if fd:
        return code
    if mode == "profile":
        print("\n" + "\n\n".join(row["report"] for row in rows))
        if json_path:
            write_json(json_path, mode, case_file, _environment(), rows=rows)
        return code
    rows = summary_rows(results, floors)
    if rows:
        print_table(rows, floors)
    if tuning:
        print("\n" + tuning)
    if json_path:
        write_json(json_path, mode, case_file, _environment(), floors=floors, rows=rows,
                   first_call_tuning=tuning.splitlines())
    return code


def _check_emulate_value():
    """ValueError unless MLA_EMULATE names the one machine the emulator runs."""
    value = os.environ.get("MLA_EMULATE")
    if value != "gfx950":
        raise ValueError(f"MLA_EMULATE={value!r}: the emulator runs gfx950 only (MLA_EMULATE=gfx950)")


def _tuning_report() -> str:
    """What the submission's first-call tuning did in this worker (empty when it did
    nothing, with a submission that has no such report, or one that did not import: each case
    said so)."""
    if _IMPORT_FAILURE:
        return ""
    return getattr(_submission(), "tuning_report", lambda: "")()


if __name__ == "__main__":
    sys.exit(main())
