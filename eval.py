"""Local runner for the amd-mixed-mla leaderboard, interchangeable with the leaderboard's eval.py.

    POPCORN_FD=<fd> python eval.py <test|benchmark|leaderboard|profile> <case file>
        exactly the runner's protocol: `key: value` lines on the fd, exit 0 / 112 (check
        failed) / 113 (bad case file) / 2 (bad arguments), POPCORN_SEED mixed into seeds,
        every case in one spawned worker process.
    python eval.py --help
        what each mode and flag does.
    python eval.py <mode> [case file] [--json PATH]
        the same lines on stdout, one progress line per case on stderr, then a table per
        case (mean/best/std in us, bytes the MXFP4 path must move, GB/s, and against the
        floor measured in the same run: empty-call floor + bytes / device copy rate) and
        the geometric mean; --json writes the rows with device, versions, date and command.
        The case file defaults to tests.txt / benchmarks.txt on a GPU and to tests_cpu.txt
        on a machine without one, where the kernels run in Triton's interpreter (with
        interpreter_shim), the table has no floor columns and each case's timed calls stop
        after MLA_EVAL_CPU_BUDGET_S seconds of calls (default 5).
    python eval.py tune [case file] [--json PATH] [--runs N] [--no-write]
        for every case (default benchmarks.txt) and every candidate of
        submission.tune_candidates: one checked call (the runner's rule, and for Triton
        every element within 8e-3 + 2e-2 |exact attention on the MXFP4 data|), then N
        timed calls exactly as benchmark times them (default 30). Candidates that fail the
        check or do not run are reported and never ranked. The fastest per case is written
        into the MEASURED DISPATCH block of submission.py for this GPU's architecture
        (unless --no-write), so the pasted file carries the measured choice; the
        architecture's other cases keep their entries.

A case line is `batchsize: <int>; qseqlen: <int>; kvseqlen: <int>; seed: <int>` (the
arguments of generate_input); any other line is reported on stderr, quoted, with exit 113
before any case runs.
"""
import ast
import base64
import dataclasses
import datetime
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
from pathlib import Path

import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:  # must be set before the worker imports triton / the submission
    os.environ.setdefault("TRITON_INTERPRET", "1")

from reference import check_implementation, generate_input  # noqa: E402
from utils import clear_l2_cache_large, set_seed  # noqa: E402

MODES = {
    "test": "check each case once: the runner's rule (|out - ref| <= 0.1 + 0.1 |ref| on 95% "
            "of the elements); exit 112 when one fails",
    "benchmark": "per case one checked call, then timed calls until the standard error is under "
                 "0.1% of the mean; a table of the times",
    "leaderboard": "benchmark with a fresh input (seed + 13) and a check on every timed call, "
                   "as the leaderboard ranks",
    "profile": "torch.profiler table of one call per case (base64 in benchmark.<i>.report)",
    "tune": "check and time every candidate choice of submission.tune_candidates per case; "
            "write the fastest into submission.py's MEASURED DISPATCH block",
}
FLAGS = {
    "--json PATH": "benchmark, leaderboard, tune: also write the rows as JSON with device, "
                   "versions, date and command",
    "--runs N": "tune: timed calls per candidate (default 30)",
    "--no-write": "tune: leave submission.py as it is",
    "-h, --help": "this text",
}
HERE = Path(__file__).resolve().parent
DEFAULT_CASES = {"test": "tests.txt", "benchmark": "benchmarks.txt",
                 "leaderboard": "benchmarks.txt", "profile": "benchmarks.txt", "tune": "benchmarks.txt"}
CPU_CASES = "tests_cpu.txt"
CASE_PATTERN = r"\s*([a-zA-Z_]\w*):\s*([a-zA-Z_]\w*|[+-]?[0-9]+)\s*"
# generate_input's arguments (task.TestSpec): each case line gives each once, as an integer;
# the sizes are at least 1.
CASE_KEYS = ("batchsize", "qseqlen", "kvseqlen", "seed")
CASE_SIZE_KEYS = ("batchsize", "qseqlen", "kvseqlen")
MXFP4_BYTES_PER_TOKEN = 288 + 18  # e2m1 pairs + e8m0 scales
# kind -> ((max_repeats, max_time_ns) of the warm-up on case 0, of each timed case), as the
# runner; without a GPU max_time_ns is cut to MLA_EVAL_CPU_BUDGET_S (the interpreter is slow).
BUDGETS = {"benchmark": ((100, 10e7), (1000, 50e9)), "leaderboard": ((100, 1e7), (100, 30e9))}
CPU_BUDGET_ENV = "MLA_EVAL_CPU_BUDGET_S"  # seconds of timed calls per case without a GPU
CPU_BUDGET_DEFAULT_S = 5.0
WALL_LIMIT_NS = 120e9


class PopcornOutput:
    """`key: value` lines to the runner's fd, or to stdout when there is none."""

    def __init__(self, fd):
        self.file = os.fdopen(fd, "w") if fd is not None else sys.stdout
        if fd is not None:
            os.set_inheritable(fd, False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.file is not sys.stdout:
            self.file.close()

    def log(self, key, value):
        print(f"{key}: {value}", file=self.file, flush=True)


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
    that is not `key: value` (a blank line included, as the runner), a key that is unknown,
    missing or repeated, a value that is not an integer (a bool is not), a size below 1.
    """
    if not line.strip():
        return {}, ["a blank line (the runner rejects it too)"]
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


def get_test_cases(file_name: str, seed) -> list:
    """The cases of a case file; any malformed line: message on stderr, exit 113."""
    try:
        content = Path(file_name).read_text()
    except OSError as exc:
        print(f"Could not open test file `{file_name}`: {exc}", file=sys.stderr)
        sys.exit(113)
    tests = []
    for number, line in enumerate(content.splitlines(), start=1):
        args, problems = _parse_case_line(line)
        if problems:
            print(f"invalid test case: '{line}' (line {number} of {file_name}): {'; '.join(problems)}."
                  f" A case line is `{'; '.join(f'{key}: <int>' for key in CASE_KEYS)}`.", file=sys.stderr)
            sys.exit(113)
        tests.append(TestCase(spec=line, args=args))
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

def _worker_init():
    if not HAS_GPU:
        import interpreter_shim
        interpreter_shim.install()


def _run_single_test(test: TestCase):
    from submission import custom_kernel
    data = generate_input(**test.args)
    _synchronize()
    output = custom_kernel(_clone_data(data))
    _synchronize()
    return _check(data, output)


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


def _run_single_benchmark(test: TestCase, recheck: bool, max_repeats: int, max_time_ns: float):
    from submission import custom_kernel
    if not HAS_GPU:
        max_time_ns = min(max_time_ns, _cpu_budget_s() * 1e9)
    args = dict(test.args)
    data = generate_input(**args)
    check_copy = _clone_data(data)
    good, message = _check(check_copy, custom_kernel(data))
    if not good:
        return message
    durations = []
    start_ns = time.perf_counter_ns()
    for i in range(max_repeats):
        if recheck:
            args["seed"] = args.get("seed", 0) + 13
            data = generate_input(**args)
            check_copy = _clone_data(data)
        output, duration = _timed_call(custom_kernel, data)
        if recheck:
            good, message = _check(check_copy, output)
            if not good:
                return message
        del output
        durations.append(duration)
        if i > 1:
            stats = calculate_stats(durations)
            if (stats.err / stats.mean < 0.001 or stats.mean * stats.runs > max_time_ns
                    or time.perf_counter_ns() - start_ns > WALL_LIMIT_NS):
                break
    return calculate_stats(durations)


def _run_single_profile(test: TestCase) -> str:
    from torch.profiler import ProfilerActivity, profile

    from submission import custom_kernel
    data = generate_input(**test.args)
    _synchronize()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if HAS_GPU else [])
    with profile(activities=activities) as prof:
        custom_kernel(data)
        _synchronize()
    sort_by = "self_cuda_time_total" if HAS_GPU else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort_by, row_limit=20)


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


def _run_tune_case(test: TestCase, runs: int) -> list:
    """Check, then time, every candidate choice of one case (see `python eval.py tune`)."""
    import submission
    data = generate_input(**test.args)
    device = data[0].device
    batch, kv_len = data[4]["batch_size"], data[4]["kv_seq_len"]
    table = submission.MEASURED_DISPATCH.setdefault(submission._arch(device), {})
    saved = table.get((batch, kv_len))
    rows = []
    try:
        for choice in submission.tune_candidates(batch, kv_len, device):
            table[(batch, kv_len)] = choice
            submission._PLANS.clear()
            row = {"choice": list(choice)}
            try:
                output = submission.custom_kernel(_clone_data(data))
                _synchronize()
                good, message = _check(data, output)
                plan = next(reversed(submission._PLANS.values()))
                variant = getattr(plan, "variant", None)
                if variant is not None:
                    row["variant"] = variant.describe()
                if good and choice[0] == "triton":
                    scaled = getattr(variant, "scores", None) == getattr(submission, "SCALED_SCORES", -1)
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
        submission._PLANS.clear()
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


def run_testing(logger, pool, tests):
    passed = True
    logger.log("test-count", len(tests))
    for idx, test in enumerate(tests):
        start = time.time()
        logger.log(f"test.{idx}.spec", test.spec)
        good, message = pool.apply(_run_single_test, (test,))
        logger.log(f"test.{idx}.status", "pass" if good else "fail")
        if not good:
            logger.log(f"test.{idx}.error", message)
            passed = False
        elif message:
            logger.log(f"test.{idx}.message", message)
        _progress(idx, len(tests), test.spec, "pass" if good else "FAIL", time.time() - start)
    logger.log("check", "pass" if passed else "fail")
    return 0 if passed else 112


def run_benchmarking(logger, pool, tests, recheck):
    """benchmark (recheck False) or leaderboard (fresh input + check on every timed call)."""
    kind = "leaderboard" if recheck else "benchmark"
    warmup_budget, case_budget = BUDGETS[kind]
    pool.apply(_run_single_benchmark, (tests[0], False, *warmup_budget))
    logger.log("benchmark-count", len(tests))
    results = []
    for idx, test in enumerate(tests):
        start = time.time()
        result = pool.apply(_run_single_benchmark, (test, recheck, *case_budget))
        logger.log(f"benchmark.{idx}.spec", test.spec)
        if not isinstance(result, Stats):
            logger.log(f"benchmark.{idx}.status", "fail")
            logger.log(f"benchmark.{idx}.error", str(result))
            _progress(idx, len(tests), test.spec, "FAIL", time.time() - start)
            logger.log("check", "fail")
            return 112, results
        for field in dataclasses.fields(Stats):
            logger.log(f"benchmark.{idx}.{field.name}", getattr(result, field.name))
        results.append((test, result))
        _progress(idx, len(tests), test.spec, f"mean {result.mean / 1e3:.1f} us", time.time() - start)
    logger.log("check", "pass")
    return 0, results


def run_profiling(logger, pool, tests):
    logger.log("benchmark-count", len(tests))
    for idx, test in enumerate(tests):
        logger.log(f"benchmark.{idx}.spec", test.spec)
        report = pool.apply(_run_single_profile, (test,))
        logger.log(f"benchmark.{idx}.report", base64.b64encode(report.encode("utf-8"), b"+*").decode("utf-8"))
    logger.log("check", "pass")
    return 0


def fastest_checked(rows):
    """The fastest candidate row that passed its check, or None: unchecked ones are never ranked."""
    ranked = [row for row in rows if row.get("checked")]
    return min(ranked, key=lambda row: row["mean_us"]) if ranked else None


def run_tuning(pool, tests, runs):
    """-> {(batch, kv_len): candidate rows}; one progress line per case."""
    results = {}
    for idx, test in enumerate(tests):
        start = time.time()
        rows = pool.apply(_run_tune_case, (test, runs))
        results[(test.args["batchsize"], test.args["kvseqlen"])] = rows
        best = fastest_checked(rows)
        status = f"best {tuple(best['choice'])} {best['mean_us']:.1f} us" if best else "NO CANDIDATE PASSED"
        checked = sum(1 for row in rows if row.get("checked"))
        _progress(idx, len(tests), test.spec, f"{checked}/{len(rows)} checked, {status}", time.time() - start)
    return results


TABLE_BEGIN = "# --- BEGIN MEASURED DISPATCH ---"
TABLE_END = "# --- END MEASURED DISPATCH ---"


def _measured_block(source: str) -> str:
    """The text between the MEASURED DISPATCH markers."""
    return source.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0]


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


def write_measured_table(path: Path, arch: str, best: dict, provenance: str) -> str:
    """Merge `best` ({(batch, kv_len): (choice, mean us)}) into `arch`'s entries of the MEASURED
    DISPATCH block of the file at `path`: each tuned case replaces its entry; the other cases
    of `arch` and every other architecture stay, with their `# NN.N us` comments. `arch`'s
    MEASURED_ON line becomes `provenance`, followed by the earlier one while earlier entries
    remain. Returns the new block."""
    source = path.read_text()
    if TABLE_BEGIN not in source or TABLE_END not in source:
        raise ValueError(f"{path} has no {TABLE_BEGIN!r} ... {TABLE_END!r} block")
    table, measured_on = measured_table(source)
    times_us = measured_times_us(source)
    kept = {case: choice for case, choice in table.get(arch, {}).items() if case not in best}
    table[arch] = {**kept, **{case: tuple(choice) for case, (choice, _) in best.items()}}
    times_us.update({(arch, case): mean_us for case, (_, mean_us) in best.items()})
    earlier = measured_on.get(arch)
    measured_on[arch] = f"{provenance}; other cases: {earlier}" if kept and earlier else provenance
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
    head, rest = source.split(TABLE_BEGIN, 1)
    path.write_text(head + "\n".join(lines) + rest.split(TABLE_END, 1)[1])
    return "\n".join(lines)


def finish_tuning(results, pool, options, case_file) -> int:
    """Print every candidate, write the fastest per case into submission.py and --json."""
    best = {}
    for case, rows in results.items():
        print(f"\nbatch {case[0]} kv_len {case[1]}:")
        for row in sorted(rows, key=lambda r: r.get("mean_us", float("inf"))):
            timing = f"{row['mean_us']:9.1f} us" if row.get("checked") else f"not ranked: {row.get('error')}"
            print(f"  {str(tuple(row['choice'])):<28} {timing}  {row.get('variant', '')}")
        winner = fastest_checked(rows)
        if winner is not None:
            best[case] = (tuple(winner["choice"]), winner["mean_us"])
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
                   best=[{"batch": batch, "kv_len": kv_len, "choice": list(choice), "mean_us": mean_us}
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
    import submission
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


def print_table(rows, floors, file=sys.stdout):
    header = f"{'batch':>5} {'kv_len':>6} {'runs':>5} {'mean us':>9} {'best us':>9} {'std us':>8} {'MB':>8} {'GB/s':>7}"
    if floors:
        header += f" {'floor us':>9} {'x floor':>7}"
    print("\n" + header, file=file)
    for row in rows:
        line = (f"{row['batch']:>5} {row['kv_len']:>6} {row['runs']:>5} {row['mean_us']:>9.1f} "
                f"{row['best_us']:>9.1f} {row['std_us']:>8.1f} {row['bytes'] / 1e6:>8.2f} {row['gbs']:>7.0f}")
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


USAGE = (f"usage: python eval.py {{{','.join(MODES)}}} [case file] [--json PATH] "
         "[--runs N (tune)] [--no-write (tune)]; python eval.py --help says more")


def _help_items(items: dict) -> list:
    """`  name         text` lines, the text wrapped under itself."""
    return [textwrap.fill(text, width=92, initial_indent=f"  {name:<12} ", subsequent_indent=" " * 15)
            for name, text in items.items()]


HELP = "\n".join([
    f"usage: python eval.py {{{','.join(MODES)}}} [case file] [options]",
    "",
    "The case file defaults to tests.txt (test) or benchmarks.txt (the other modes) on a GPU,",
    "and to tests_cpu.txt without one (the kernels then run in Triton's interpreter).",
    "",
    "modes:",
    *_help_items(MODES),
    "",
    "options:",
    *_help_items(FLAGS),
    "",
    "environment: POPCORN_FD=<fd> writes the protocol lines to that fd, as the leaderboard's",
    "runner (exit 0 pass, 112 a check failed, 113 a malformed case line, 2 bad arguments);",
    "POPCORN_SEED=<int> is mixed into every case seed; MLA_EVAL_CPU_BUDGET_S (default 5) caps",
    "the seconds of timed calls per case without a GPU.",
])


def _parse_args(argv, popcorn):
    """-> (mode, case file, options) or an exit code."""
    if popcorn and len(argv) < 2:
        return 2  # the runner's rule
    if "-h" in argv or "--help" in argv:
        print(HELP)
        return 0
    options = {"json": None, "runs": 30, "write": True}
    for flag, key, convert in (("--json", "json", str), ("--runs", "runs", int)):
        if flag in argv:
            i = argv.index(flag)
            try:
                options[key] = convert(argv[i + 1])
            except (IndexError, ValueError):
                print(f"{flag} needs a value; {USAGE}", file=sys.stderr)
                return 2
            argv = argv[:i] + argv[i + 2:]
    if options["runs"] < 1:
        print(f"--runs needs at least 1 timed call, not {options['runs']}", file=sys.stderr)
        return 2
    if "--no-write" in argv:
        options["write"] = False
        argv = [a for a in argv if a != "--no-write"]
    unknown = [a for a in argv if a.startswith("-")]
    if unknown:
        print(f"unknown option {unknown[0]}; {USAGE}", file=sys.stderr)
        return 2
    if not argv or argv[0] not in MODES:
        print(USAGE, file=sys.stderr)
        return 2
    mode = argv[0]
    cases = argv[1] if len(argv) > 1 else str(HERE / (DEFAULT_CASES[mode] if HAS_GPU else CPU_CASES))
    return mode, cases, options


def main():
    fd = os.getenv("POPCORN_FD")
    parsed = _parse_args(sys.argv[1:], popcorn=bool(fd))
    if isinstance(parsed, int):
        return parsed
    mode, case_file, options = parsed
    json_path = options["json"]
    try:
        _cpu_budget_s()
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    seed = os.getenv("POPCORN_SEED")
    os.environ.pop("POPCORN_SEED", None)
    seed = int(seed) if seed else None
    set_seed(seed or 42)
    tests = get_test_cases(case_file, seed)
    with PopcornOutput(int(fd) if fd else None) as logger:
        context = multiprocessing.get_context("spawn")
        with context.Pool(1, initializer=_worker_init) as pool:
            floors = pool.apply(_measure_floors) if (not fd and mode in ("benchmark", "leaderboard")) else {}
            if mode == "test":
                return run_testing(logger, pool, tests)
            if mode == "profile":
                return run_profiling(logger, pool, tests)
            if mode == "tune":
                return finish_tuning(run_tuning(pool, tests, options["runs"]), pool, options, case_file)
            code, results = run_benchmarking(logger, pool, tests, recheck=(mode == "leaderboard"))
            if fd:
                return code
            tuning = pool.apply(_tuning_report)
    rows = summary_rows(results, floors)
    if rows:
        print_table(rows, floors)
    if tuning:
        print("\n" + tuning)
    if json_path:
        write_json(json_path, mode, case_file, _environment(), floors=floors, rows=rows,
                   first_call_tuning=tuning.splitlines())
    return code


def _tuning_report() -> str:
    """What the submission's first-call tuning did in this worker (empty when it did
    nothing, or with a submission that has no such report)."""
    import submission
    return getattr(submission, "tuning_report", lambda: "")()


if __name__ == "__main__":
    sys.exit(main())
