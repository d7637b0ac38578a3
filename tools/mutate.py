"""Mutation check: every small deliberate bug in tools/mutations.py (and the harness ones in
tools/mutations_harness.py) must make the tests listed with it fail.

    python tools/mutate.py [--only SUBSTRING] [--file mutations.py|mutations_harness.py] [--list] [--jobs N]

The repository (tracked and untracked, not ignored files) is copied to a temporary
directory; first the union of the listed tests must PASS there unmodified (the control),
then each bug is applied to the copy alone and its tests run (pytest -x); a bug whose tests
still pass is MISSED. Exit 0 when every bug is caught, 1 otherwise. CI runs it (.ci/run).
"""
import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 900


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


def copy_repository(target: Path):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def run_pytest(workdir: Path, args):
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    started = time.time()
    try:
        result = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *args],
                                cwd=workdir, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the mutations whose name contains this")
    parser.add_argument("--file", choices=MUTATION_FILES, help="run only this file's mutations")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    options = parser.parse_args()
    mutations = [m for m in load_mutations((options.file,) if options.file else MUTATION_FILES)
                 if not options.only or options.only in m["name"]]
    if options.list:
        for m in mutations:
            print(f"{m['name']:<62} {m['path']:<14} {' '.join(m['args'])}")
        return 0
    with tempfile.TemporaryDirectory(prefix="mutate-") as tmp:
        pristine = Path(tmp)
        copy_repository(pristine)
        control_args = sorted({a for m in mutations for a in m["args"] if a.startswith("tests/")})
        code, tail, seconds = run_pytest(pristine, control_args)
        print(f"control (unmodified, {len(control_args)} test files): {'pass' if code == 0 else 'FAIL'} "
              f"in {seconds:.0f} s: {tail}", flush=True)
        if code != 0:
            return 1
        with ThreadPoolExecutor(options.jobs) as pool:
            results = list(pool.map(lambda m: (m, *check_one(pristine, m)), mutations))
    for m, status, detail, seconds in results:
        print(f"{status:<7} {seconds:5.0f} s  {m['name']:<62} {detail}")
    failed = [m["name"] for m, status, *_ in results if status != "caught"]
    print(f"{len(results) - len(failed)} of {len(results)} deliberate bugs caught")
    print(f"mutations: {len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
