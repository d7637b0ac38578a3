"""Mutation check: every small deliberate bug in tools/mutations.py (and the harness ones in
tools/mutations_harness.py) must make the tests listed with it fail.

    python tools/mutate.py [--only SUBSTRING] [--file mutations.py|mutations_harness.py] [--list] [--jobs N]
                           [--no-control]

The repository's tracked files (as they are in the working tree; `git add` a new file
first, or name it in an entry: an untracked file that an entry's path or tests name is
copied too) go to a temporary directory; nothing else does (no .venv, caches or other
untracked files). The runner's Triton, which tests/test_compile_targets.py needs, is found
through RUNNER_TRITON_DIR, or else in this repository's own .ci/triton-<version> when it is
there. First the union of the listed tests must PASS in the copy unmodified (the control,
spread over --jobs processes by pytest-xdist where it is installed), then each bug is applied to a copy of its own and its tests run (pytest -x); a bug whose
tests still pass is MISSED. Here a failing test is the good outcome: it caught the bug. One
line per bug as it finishes (caught or MISSED, then its tests' own summary), then
`N of M deliberate bugs caught`. Exit 0 when every bug is caught, 1 otherwise. CI runs it
(.ci/run).
"""
import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from common import has_runner_triton, runner_triton_dir

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 900  # one bug's tests
# The control runs the union of every entry's tests (most of the suite, the AOT builds
# included): 15 minutes was not enough on 2 cores shared with other jobs (measured 2026-12-01).
CONTROL_TIMEOUT_S = 3600


MUTATION_FILES = ("mutations.py", "mutations_harness.py")


def load_mutations(files=MUTATION_FILES):
    """The MUTATIONS of each file in tools/ (the kernel's, the harness's)."""
    found = []
    for name in files:
        path = ROOT / "tools" / name
        if path.exists():
            spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            found += [{**m, "args": m.get("args") or m["tests"]} for m in module.MUTATIONS]
    return found


def named_files(mutations) -> set:
    """The repository files the entries name: each one's path and the test files of its args."""
    return {m["path"] for m in mutations} | {arg.split("::")[0] for m in mutations for arg in m["args"]
                                            if arg.startswith("tests/")}


def files_to_copy(mutations) -> list:
    """The tracked files that exist in the working tree, plus the untracked ones the entries
    name (a test file not yet added); ignored and other untracked files are left behind."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode().split("\0")
    names = set(filter(None, tracked)) | named_files(mutations)
    return sorted(name for name in names if (ROOT / name).is_file())


def copy_repository(target: Path, mutations):
    for name in files_to_copy(mutations):
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target / name)


def runner_triton_env() -> dict:
    """The environment of every pytest run: RUNNER_TRITON_DIR as given, or this repository's
    own .ci/triton-<version> where it exists (the copies have none: without it
    tests/test_compile_targets.py would install the runner's Triton into each copy)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    if has_runner_triton():
        env["RUNNER_TRITON_DIR"] = str(runner_triton_dir())
    return env


def parallel_args(jobs: int) -> list:
    """pytest-xdist's options for the control run (its test files split over `jobs` processes,
    each file whole in one, so a module's fixtures build once), where xdist is installed."""
    if jobs < 2 or importlib.util.find_spec("xdist") is None:
        return []
    return ["-n", str(jobs), "--dist", "loadfile"]


def run_pytest(workdir: Path, args, timeout_s=TIMEOUT_S):
    env = runner_triton_env()
    started = time.time()
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args],
                                cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s)
        code, tail = result.returncode, (result.stdout + result.stderr).strip().splitlines()[-1:]
    except subprocess.TimeoutExpired:
        code, tail = -1, ["timeout"]
    return code, (tail[0] if tail else ""), time.time() - started


def check_one(pristine: Path, mutation):
    """Apply one bug to a private copy and run its tests -> (status, detail, seconds)."""
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        workdir = Path(tmp)
        shutil.copytree(pristine, workdir, dirs_exist_ok=True)
        path = workdir / mutation["path"]
        source = path.read_text()
        count = source.count(mutation["old"])
        if count != 1:
            return "BROKEN", f"the snippet occurs {count} times in {mutation['path']}", 0.0
        path.write_text(source.replace(mutation["old"], mutation["new"]))
        code, tail, seconds = run_pytest(workdir, mutation["args"])
    if code in (4, 5):  # usage error / no tests collected: the entry is wrong, not caught
        return "BROKEN", f"pytest exit {code}: {tail}", seconds
    return ("caught" if code != 0 else "MISSED"), tail, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run the mutations whose name contains this")
    parser.add_argument("--file", choices=MUTATION_FILES, help="run only this file's mutations")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--no-control", action="store_true",
                        help="skip the control run: only where the whole suite has just passed on the same "
                             "tracked files (.ci/run, right after the README's test command)")
    options = parser.parse_args()
    mutations = [m for m in load_mutations((options.file,) if options.file else MUTATION_FILES)
                 if not options.only or options.only in m["name"]]
    if options.list:
        for m in mutations:
            print(f"{m['name']:<62} {m['path']:<14} {' '.join(m['args'])}")
        return 0
    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        pristine = Path(tmp)
        copy_repository(pristine, mutations)
        control_args = sorted({a for m in mutations for a in m["args"] if a.startswith("tests/")})
        test_files = {a.split("::")[0] for a in control_args}
        if options.no_control:
            print(f"control skipped (--no-control: {len(control_args)} test ids in {len(test_files)} test files "
                  f"passed in the suite run before)", flush=True)
        else:
            code, tail, seconds = run_pytest(pristine, parallel_args(options.jobs) + control_args, CONTROL_TIMEOUT_S)
            print(f"control, the listed tests on the unmodified copy ({len(control_args)} test ids in "
                  f"{len(test_files)} test files; they must pass): {'pass' if code == 0 else 'FAIL'} in "
                  f"{seconds:.0f} s, pytest: {tail}", flush=True)
            if code != 0:
                return 1
        results = []
        with ThreadPoolExecutor(options.jobs) as pool:
            futures = [pool.submit(check_one, pristine, m) for m in mutations]
            index = {future: m for future, m in zip(futures, mutations)}
            for future in as_completed(futures):
                m = index[future]
                status, detail, seconds = future.result()
                results.append((m, status))
                counter = f"[{len(results):>{len(str(len(mutations)))}}/{len(mutations)}]"
                detail = detail if status == "BROKEN" else f"its tests: {detail}"
                print(f"{counter} {status:<7} {seconds:5.0f} s  {m['name']:<62} {detail}", flush=True)
    print("\n".join(summary_lines(results)))
    return 1 if any(status != "caught" for _, status in results) else 0


def summary_lines(results) -> list:
    """The closing lines for [(mutation, status)]: each bug not caught by name, then the count
    of caught bugs. A bug is caught when its tests fail, so the words are caught / MISSED,
    never pass / fail (a `215 passed, 0 failed` read as the tests' own verdict is inverted)."""
    not_caught = [(m["name"], status) for m, status in results if status != "caught"]
    why = {"MISSED": "its tests passed with the bug in", "BROKEN": "its tests did not run: the entry is broken"}
    lines = [f"{status} ({why[status]}): {name}" for name, status in not_caught]
    caught = len(results) - len(not_caught)
    return lines + [f"{caught} of {len(results)} deliberate bugs caught"
                    + (f" ({len(not_caught)} not caught)" if not_caught else " (each one made its tests fail)")]


if __name__ == "__main__":
    sys.exit(main())
