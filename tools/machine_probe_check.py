"""The machine probes (submission.py, "Machine probes") held against independent figures on a
GPU, and the runner's own eval.py checked to run them; issue 30's checks, one command each:

    python tools/machine_probe_check.py ours --out DIR [--cases FILE] [--phase-runs N] [--phase-cases SPEC]
    python tools/machine_probe_check.py runner --runner-dir RUNNER --out DIR
    python tools/machine_probe_check.py check-log STDERR [--popcorn FILE ...]

ours: one `MLA_TABLE=0 python eval.py benchmark benchmarks.txt --json` (every case tuned, so the
probes run in the worker that measures the floor columns, before the first case), then
`tools/phase_probe.py` and `eval.py model` of that run's stderr. Compared: the probes' empty
launch with the call floor (within 20%), their copy rate with the floor's copy rate (10%),
their HBM round trip with the phase probes' `range` phase, one dependent round trip (25%; the
case of fewest programs, the least contended). Writes machine_probe_benchmark.{json,stdout.txt,stderr.txt},
machine_probe_phase.{json,txt}, machine_probe_model.{json,txt}, machine_probe_check.json.

runner: the runner's own eval.py and utils.py (and its task.py where RUNNER has one) from
RUNNER, with this repository's reference.py (the runner's needs aiter) and submission.py, in a
fresh folder: `MLA_TABLE=0 POPCORN_FD=3 python eval.py test tests.txt`, then `... leaderboard
benchmarks.txt`; each one's fd-3 lines and stderr into DIR (runner_{mode}_popcorn.txt,
runner_{mode}_stderr.txt), then check-log's checks of them (runner_check.json).

check-log: in a stderr log, the machine probes' title line, their MEASURED MACHINE block (it
must parse), their wall time at most PROBE_BUDGET_S (the first call's extra time); with
--popcorn, `check: pass` in each file. Exit 0 when every check holds, 1 otherwise.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import eval as harness  # noqa: E402

TOLERANCES = {"launch_us": 0.20, "copy_gbs": 0.10, "hbm_round_trip_us": 0.25}
WALL_LIMIT_S = 2.0  # submission.PROBE_BUDGET_S: the first call's extra time at most
TITLE = "submission: machine probes ("
WALL_PATTERN = re.compile(r"probes' wall time ([0-9.]+) s")
RUNNER_FILES = ("eval.py", "utils.py")  # the runner's own, unmodified; task.py too where RUNNER has it


def machine_figures(text, name):
    """{arch: figures} of a text's MEASURED MACHINE blocks (harness.machine_entries; {} without one)."""
    return {arch: figures for arch, (figures, _) in harness.machine_entries(text, name).items()}


def phase_round_trip_us(records):
    """The phase probes' figure for one dependent round trip: the `range` phase (the program's
    kv_indptr read, with the probe's own cost) of the probed case with the fewest programs,
    the least contended (the median where several tie). A grid of 256 programs or more queues
    at the memory: on the H200 its range read 0.40-0.53 us where 64 programs read 0.29
    (results/h200_machine_probe_phase.json), against the one lane's chase of 0.34."""
    probed = [(record["programs"], row["median_ns"] / 1e3) for record in records
              if isinstance(record.get("phases"), list) for row in record["phases"] if row["phase"] == "range"]
    if not probed:
        return None
    fewest = min(programs for programs, _ in probed)
    return statistics.median(us for programs, us in probed if programs == fewest)


def compare(figures, floors, round_trip_us):
    """[{figure, probes, reference, against, ratio, tolerance, within}] of the three checks."""
    references = {"launch_us": (floors.get("call_floor_us"), "eval.py benchmark's call floor"),
                  "copy_gbs": (floors.get("copy_rate_gbs"), "eval.py benchmark's copy rate"),
                  "hbm_round_trip_us": (round_trip_us, "tools/phase_probe.py's range phase, the case of fewest programs")}
    rows = []
    for name, tolerance in TOLERANCES.items():
        reference, against = references[name]
        value = figures.get(name)
        ratio = value / reference if value is not None and reference else None
        rows.append({"figure": name, "probes": value, "reference": reference, "against": against, "ratio": ratio,
                     "tolerance": tolerance, "within": ratio is not None and abs(ratio - 1) <= tolerance})
    return rows


def log_checks(stderr_text, popcorn_texts=()):
    """[{check, ok, detail}] of check-log (module docstring)."""
    titles = [line for line in stderr_text.splitlines() if TITLE in line]
    walls = [float(m[1]) for m in WALL_PATTERN.finditer(stderr_text)]
    try:
        figures = machine_figures(stderr_text, "stderr")
        parsed = f"architectures {', '.join(figures)}" if figures else "no MEASURED MACHINE block"
    except harness.IngestError as exc:
        figures, parsed = {}, str(exc)
    checks = [{"check": "the machine probes' title line on stderr", "ok": bool(titles),
               "detail": titles[0][:200] if titles else "none"},
              {"check": "their MEASURED MACHINE block parses", "ok": bool(figures), "detail": parsed},
              {"check": f"their wall time (the first call's extra time) <= {WALL_LIMIT_S} s",
               "ok": bool(walls) and max(walls) <= WALL_LIMIT_S, "detail": f"{walls} s"}]
    for name, text in popcorn_texts:
        verdicts = re.findall(r"^check: (\w+)", text, re.M)
        checks.append({"check": f"{name}: check: pass", "ok": verdicts == ["pass"], "detail": f"check lines {verdicts}"})
    return checks


def run_logged(command, out_dir, stem, env=None, cwd=ROOT, timeout_s=300, **kwargs):
    """Run a command with its stdout and stderr into out_dir/stem.{stdout,stderr}.txt -> exit status."""
    with open(out_dir / f"{stem}_stdout.txt", "w") as out, open(out_dir / f"{stem}_stderr.txt", "w") as err:
        try:
            return subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, stdout=out, stderr=err,
                                  timeout=timeout_s, **kwargs).returncode
        except subprocess.TimeoutExpired:
            print(f"timed out after {timeout_s} s", file=err)
            return 124


def report(rows, path, **fields):
    """Print the checks and write them with `fields` as JSON -> exit 0 when all hold."""
    ok = all(row.get("within", row.get("ok")) for row in rows)
    for row in rows:
        print(json.dumps(row))
    print("every check holds" if ok else "A CHECK FAILED")
    Path(path).write_text(json.dumps({**harness._environment(), "command": " ".join(sys.argv), **fields,
                                      "checks": rows, "all_hold": ok}, indent=1) + "\n")
    return 0 if ok else 1


def run_ours(out_dir, cases, phase_runs, phase_cases):
    bench = out_dir / "machine_probe_benchmark.json"
    code = run_logged([sys.executable, "eval.py", "benchmark", cases, "--json", str(bench)], out_dir,
                      "machine_probe_benchmark", {"MLA_TABLE": "0"}, timeout_s=400)
    phase = out_dir / "machine_probe_phase.json"
    run_logged([sys.executable, "tools/phase_probe.py", "--runs", str(phase_runs), "--json", str(phase)]
               + (["--cases", phase_cases] if phase_cases else []), out_dir, "machine_probe_phase", timeout_s=120)
    stderr_log = out_dir / "machine_probe_benchmark_stderr.txt"
    run_logged([sys.executable, "eval.py", "model", str(stderr_log), "--json", str(out_dir / "machine_probe_model.json")],
               out_dir, "machine_probe_model", timeout_s=60)
    record = json.loads(bench.read_text()) if bench.exists() else {}
    figures = machine_figures("\n".join(record.get("first_call_tuning", [])), bench.name)
    arch_figures = next(iter(figures.values()), {})
    round_trip = phase_round_trip_us(json.loads(phase.read_text())) if phase.exists() else None
    rows = compare(arch_figures, record.get("floors", {}), round_trip)
    rows += [{**check, "within": check["ok"]} for check in log_checks(stderr_log.read_text())]
    return report(rows, out_dir / "machine_probe_check.json", benchmark_exit=code, figures=arch_figures,
                  floors=record.get("floors"), phase_round_trip_us=round_trip)


def run_runner(runner_dir, out_dir):
    missing = [name for name in RUNNER_FILES if not (runner_dir / name).is_file()]
    if missing:
        print(f"{runner_dir} lacks the runner's {', '.join(missing)}", file=sys.stderr)
        return 2
    popcorn = []
    with tempfile.TemporaryDirectory(prefix="runner-") as tmp:
        folder = Path(tmp)
        for name in RUNNER_FILES + ("task.py",):
            shutil.copy2(runner_dir / name if (runner_dir / name).is_file() else ROOT / name, folder / name)
        for name in ("reference.py", "submission.py", "tests.txt", "benchmarks.txt"):
            shutil.copy2(ROOT / name, folder / name)
        for mode, cases, timeout_s in (("test", "tests.txt", 180), ("leaderboard", "benchmarks.txt", 380)):
            with open(out_dir / f"runner_{mode}_popcorn.txt", "w") as lines:  # the protocol's fd
                code = run_logged([sys.executable, "eval.py", mode, cases], out_dir, f"runner_{mode}",
                                  {"MLA_TABLE": "0", "POPCORN_FD": str(lines.fileno())}, cwd=folder,
                                  timeout_s=timeout_s, pass_fds=(lines.fileno(),))
            print(f"runner's eval.py {mode}: exit {code}")
            popcorn.append((f"runner_{mode}_popcorn.txt", (out_dir / f"runner_{mode}_popcorn.txt").read_text()))
    stderr = "\n".join((out_dir / f"runner_{mode}_stderr.txt").read_text() for mode in ("test", "leaderboard"))
    return report(log_checks(stderr, popcorn), out_dir / "runner_check.json", runner_dir=str(runner_dir))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("ours", "runner", "check-log"))
    parser.add_argument("log", nargs="?", help="check-log: the stderr log")
    parser.add_argument("--out", type=Path, help="ours, runner: the folder for every output")
    parser.add_argument("--runner-dir", type=Path, help="runner: the runner's eval.py and utils.py")
    parser.add_argument("--popcorn", nargs="*", default=[], help="check-log: the fd-3 protocol files")
    parser.add_argument("--cases", default="benchmarks.txt", help="ours: eval.py benchmark's case file")
    parser.add_argument("--phase-runs", type=int, default=10, help="ours: tools/phase_probe.py --runs")
    parser.add_argument("--phase-cases", help="ours: tools/phase_probe.py --cases (default: all 8)")
    options = parser.parse_args(argv)
    if options.what == "check-log":
        if not options.log:
            parser.error("check-log needs the stderr log")
        popcorn = [(Path(name).name, Path(name).read_text()) for name in options.popcorn]
        rows = log_checks(Path(options.log).read_text(errors="replace"), popcorn)
        ok = all(row["ok"] for row in rows)
        print("\n".join(json.dumps(row) for row in rows) + ("\nevery check holds" if ok else "\nA CHECK FAILED"))
        return 0 if ok else 1
    if options.out is None:
        parser.error(f"{options.what} needs --out")
    options.out.mkdir(parents=True, exist_ok=True)
    if options.what == "ours":
        return run_ours(options.out, options.cases, options.phase_runs, options.phase_cases)
    if options.runner_dir is None:
        parser.error("runner needs --runner-dir")
    return run_runner(options.runner_dir, options.out)


if __name__ == "__main__":
    sys.exit(main())
