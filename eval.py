"""Local runner for the amd-mixed-mla leaderboard, interchangeable with the leaderboard's eval.py.

    POPCORN_FD=<fd> python eval.py <test|benchmark|leaderboard|profile> <case file>
        exactly the runner's protocol: `key: value` lines on the fd, exit 0 / 112 (check
        failed) / 113 (bad case file) / 2 (bad arguments), POPCORN_SEED mixed into seeds,
        every case in one spawned worker process.
    python eval.py <mode> [case file] [--json PATH]
        the same lines on stdout, one progress line per case on stderr, then a table per
        case (mean/best/std in us, bytes the MXFP4 path must move, GB/s, and against the
        floor measured in the same run: empty-call floor + bytes / device copy rate) and
        the geometric mean; --json writes the rows with device, versions, date and command.
        The case file defaults to tests.txt / benchmarks.txt on a GPU and to tests_cpu.txt
        on a machine without one, where the kernels run in Triton's interpreter (with
        interpreter_shim) and the benchmark budgets are cut to a few seconds per case.
"""
import base64
import dataclasses
import datetime
import json
import math
import multiprocessing
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:  # must be set before the worker imports triton / the submission
    os.environ.setdefault("TRITON_INTERPRET", "1")

from reference import check_implementation, generate_input  # noqa: E402
from utils import clear_l2_cache, set_seed  # noqa: E402

MODES = ("test", "benchmark", "leaderboard", "profile")
HERE = Path(__file__).resolve().parent
DEFAULT_CASES = {"test": "tests.txt", "benchmark": "benchmarks.txt",
                 "leaderboard": "benchmarks.txt", "profile": "benchmarks.txt"}
CPU_CASES = "tests_cpu.txt"
CASE_PATTERN = r"\s*([a-zA-Z_]\w*):\s*([a-zA-Z_]\w*|[+-]?[0-9]+)\s*"
MXFP4_BYTES_PER_TOKEN = 288 + 18  # e2m1 pairs + e8m0 scales
# kind -> ((max_repeats, max_time_ns) of the warm-up on case 0, of each timed case), as the
# runner; the CPU interpreter gets a few seconds per case.
BUDGETS = {"benchmark": ((100, 10e7), (1000, 50e9)), "leaderboard": ((100, 1e7), (100, 30e9))}
CPU_MAX_TIME_NS = 5e9
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


def get_test_cases(file_name: str, seed) -> list:
    try:
        content = Path(file_name).read_text()
    except OSError as exc:
        print(f"Could not open test file `{file_name}`: {exc}", file=sys.stderr)
        sys.exit(113)
    tests = []
    for line in content.splitlines():
        case = {}
        for part in line.split(";"):
            matched = re.fullmatch(CASE_PATTERN, part)
            if not matched:
                print(f"invalid test case: '{line}': '{part}'", file=sys.stderr)
                sys.exit(113)
            key, value = matched[1], matched[2]
            try:
                value = int(value)
            except ValueError:
                value = {"true": True, "false": False}.get(value, value)
            case[key] = value
        tests.append(TestCase(spec=line, args=case))
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
    clear_l2_cache()
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
        max_time_ns = min(max_time_ns, CPU_MAX_TIME_NS)
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


def _parse_args(argv, popcorn):
    """-> (mode, case file, json path) or an exit code."""
    json_path = None
    if "--json" in argv:
        i = argv.index("--json")
        if i + 1 >= len(argv):
            print("--json needs a path", file=sys.stderr)
            return 2
        json_path = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if popcorn and len(argv) < 2:
        return 2
    if not argv or argv[0] not in MODES:
        print(f"usage: python eval.py {{{','.join(MODES)}}} [case file] [--json PATH]", file=sys.stderr)
        return 2
    mode = argv[0]
    cases = argv[1] if len(argv) > 1 else str(HERE / (DEFAULT_CASES[mode] if HAS_GPU else CPU_CASES))
    return mode, cases, json_path


def main():
    fd = os.getenv("POPCORN_FD")
    parsed = _parse_args(sys.argv[1:], popcorn=bool(fd))
    if isinstance(parsed, int):
        return parsed
    mode, case_file, json_path = parsed
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
            code, results = run_benchmarking(logger, pool, tests, recheck=(mode == "leaderboard"))
            if fd:
                return code
    rows = summary_rows(results, floors)
    print_table(rows, floors)
    if json_path:
        record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "command": "python eval.py " + " ".join(sys.argv[1:]), "mode": mode,
                  "cases": case_file, **_environment(), "floors": floors, "rows": rows}
        Path(json_path).write_text(json.dumps(record, indent=2) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
