"""What the tools share: the leaderboard's cases (read from benchmarks.txt, seeds included);
without a GPU, Triton's interpreter set up as the tests set it up; and, for the tools that build
kernels ahead of time, the Triton they build with (run_with_triton): the runner's by default."""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The runner's Triton (requirements-runner.txt) lives in a directory of its own, as
# `pip install --no-deps --target` makes it: RUNNER_TRITON_DIR, else .ci/triton-<version>.
RUNNER_TRITON_VERSION = re.search(r"^triton==(\S+)", (ROOT / "requirements-runner.txt").read_text(), re.M)[1]
INSTALLED_TRITON = "installed"  # --triton's name for the Triton this Python imports by itself
TRITON_HELP = (f"the Triton to build with: a directory holding one (as `pip install --no-deps --target DIR "
               f"triton==VERSION` makes it), or `{INSTALLED_TRITON}` for the one this Python imports by itself. "
               f"Default: the runner's Triton {RUNNER_TRITON_VERSION}: this Python's own where it is that version, "
               f"else the one in RUNNER_TRITON_DIR when set, else in .ci/triton-{RUNNER_TRITON_VERSION} of this "
               f"checkout, installed there on first use (about 640 MB)")
# Set in the process run_with_triton starts: the Triton directory it put first on PYTHONPATH.
CHOSEN_TRITON_ENV = "MLA_TOOL_TRITON"


def replace_block(path, begin, end, block):
    """Rewrite the text of `path` with `block` (its own begin and end lines included) in place of the lines from
    the marker `begin` through the marker `end`: the blocks the tools write into submission.py, written by
    eval.py's with_block (the one writer of the generated blocks)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import eval as harness
    path = Path(path)
    path.write_text(harness.with_block(path.read_text(), begin, end, block))


def use_interpreter_without_gpu():
    """Call before importing triton or submission; does nothing on a machine with a GPU."""
    import torch
    if torch.cuda.is_available():
        return
    os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "tests"))
    import asm_emulation
    import interpreter_shim
    interpreter_shim.install()
    asm_emulation.install()


def leaderboard_cases():
    """[(batch, kv_len, seed)] of benchmarks.txt, in its order."""
    cases = []
    for line in (ROOT / "benchmarks.txt").read_text().splitlines():
        values = dict(re.findall(r"(\w+):\s*(-?\d+)", line))
        cases.append((int(values["batchsize"]), int(values["kvseqlen"]), int(values["seed"])))
    return cases


def parse_cases(spec):
    """'BATCHxKV_LEN,...' -> [(batch, kv_len, seed)], a leaderboard case with its seed, any
    other with seed 1; None or '' -> every leaderboard case."""
    if not spec:
        return leaderboard_cases()
    seeds = {(batch, kv_len): seed for batch, kv_len, seed in leaderboard_cases()}
    cases = []
    for item in spec.split(","):
        batch, kv_len = (int(x) for x in item.split("x"))
        cases.append((batch, kv_len, seeds.get((batch, kv_len), 1)))
    return cases


def runner_triton_dir() -> Path:
    """Where the runner's Triton lives when this Python's own is another version: RUNNER_TRITON_DIR when set,
    else .ci/triton-<version>."""
    return Path(os.environ.get("RUNNER_TRITON_DIR") or ROOT / ".ci" / f"triton-{RUNNER_TRITON_VERSION}")


def has_runner_triton(directory=None) -> bool:
    """Whether the runner's Triton version is installed in `directory` (default runner_triton_dir())."""
    return (Path(directory or runner_triton_dir()) / f"triton-{RUNNER_TRITON_VERSION}.dist-info").is_dir()


class RunnerTritonMissing(RuntimeError):
    """The runner's Triton is not here and could not be installed (offline): the message is one line saying
    what to install."""


def missing_runner_triton_line(directory, why) -> str:
    """The one line that says what to install when the runner's Triton is missing."""
    return (f"Triton {RUNNER_TRITON_VERSION} (the runner's, which the gfx950 builds need) is neither this Python's "
            f"own nor in {directory}, and installing it failed ({why}): run `pip install --no-deps --target "
            f"{directory} triton=={RUNNER_TRITON_VERSION}` where a package index is reachable (or set "
            f"RUNNER_TRITON_DIR to a directory holding it)")


def install_runner_triton(directory=None) -> Path:
    """The directory (default runner_triton_dir()) with the runner's Triton in it: installed
    there first (pip install --no-deps --upgrade --target, as .ci/run does), with one line
    saying so, when that version is not there yet. RunnerTritonMissing (one line: what to
    install) when pip fails, e.g. offline."""
    directory = Path(directory or runner_triton_dir())
    if not has_runner_triton(directory):
        print(f"Triton {RUNNER_TRITON_VERSION}, the runner's, is not in {directory} yet: installing it there "
              f"(once, about 640 MB: pip install --no-deps --target)", flush=True)
        try:
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "--no-deps", "--upgrade", "--target", str(directory), f"triton=={RUNNER_TRITON_VERSION}"],
                           check=True, timeout=1800, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
            why = f"pip exited {exc.returncode}" if isinstance(exc, subprocess.CalledProcessError) else str(exc)
            raise RunnerTritonMissing(missing_runner_triton_line(directory, why)) from None
    return directory


def find_runner_triton():
    """THE way every tool finds the runner's Triton (RUNNER_TRITON_VERSION): INSTALLED_TRITON where this
    Python's own Triton is that version (a GPU image with it: nothing to install, works offline), else
    the directory runner_triton_dir() holding it, installed there on first use (install_runner_triton:
    one line says so; offline, RunnerTritonMissing with one line saying what to install)."""
    if own_triton_version() == RUNNER_TRITON_VERSION:
        return INSTALLED_TRITON
    return install_runner_triton()


def triton_path_entry(choice) -> Path:
    """The directory to put first on a subprocess's PYTHONPATH so that it imports the Triton `choice`
    names (INSTALLED_TRITON: the one this Python imports by itself; else a directory holding one)."""
    if choice != INSTALLED_TRITON:
        return Path(choice)
    spec = importlib.util.find_spec("triton")
    if spec is None or spec.origin is None:
        raise RunnerTritonMissing("this Python has no Triton of its own: `pip install triton`, or name a directory "
                                  "holding one")
    return Path(spec.origin).resolve().parents[1]


def triton_version_of(choice) -> str:
    """The version of the Triton `choice` names (INSTALLED_TRITON or a directory), its local part dropped."""
    if choice == INSTALLED_TRITON:
        return own_triton_version()
    found = sorted(Path(choice).glob("triton-*.dist-info"))
    if found:
        return found[-1].name[len("triton-"):-len(".dist-info")].split("+")[0]
    match = re.search(r"""__version__\s*=\s*['"]([^'"]+)""", (Path(choice) / "triton" / "__init__.py").read_text())
    return match[1].split("+")[0]


def add_triton_option(parser):
    """--triton PATH on a tool's command line (run_with_triton reads it)."""
    parser.add_argument("--triton", metavar="PATH", help=TRITON_HELP)


def _shown(path: Path) -> str:
    """A path relative to the checkout when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def own_triton_version():
    """The version of the Triton this Python imports by itself (its local part dropped), None
    without one."""
    if importlib.util.find_spec("triton") is None:
        return None
    import triton
    return triton.__version__.split("+")[0]


def run_with_triton(script, argv=None):
    """Make the tool run with the Triton its `--triton` names (add_triton_option), by default
    the runner's: this Python's own where that is the runner's version (a GPU image with it),
    else the one in runner_triton_dir() (install_runner_triton). Call it in the tool's
    `if __name__ == "__main__":` before anything imports triton, with the tool's file. A
    directory: the tool (`script` with `argv`, default this process's arguments) runs again
    in a subprocess with that directory first on PYTHONPATH, and this process exits with its
    status; `installed`: this process goes on. Either way TRITON_DEFAULT_FP_FUSION defaults
    to 1 (the runner's behaviour, without the newer Tritons' warning that it is unset), and
    the process that goes on prints `Triton <version>, <which> (<where>)` as its first line.
    With -h / --help nothing happens: the tool prints its help."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "-h" in argv or "--help" in argv:
        return
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    chosen = os.environ.get(CHOSEN_TRITON_ENV)
    if chosen is None:
        pre = argparse.ArgumentParser(add_help=False)
        add_triton_option(pre)
        choice = pre.parse_known_args(argv)[0].triton
        if choice is None:
            try:
                choice = find_runner_triton()
            except RunnerTritonMissing as exc:
                sys.exit(str(exc))
        if choice == INSTALLED_TRITON:
            os.environ[CHOSEN_TRITON_ENV] = chosen = INSTALLED_TRITON
        else:
            directory = Path(choice)
            if not (directory / "triton" / "__init__.py").is_file():
                print(f"--triton {choice}: {directory} holds no triton package (`pip install --no-deps --target "
                      f"{directory} triton==VERSION` makes one); --triton {INSTALLED_TRITON}: the one this Python "
                      f"imports by itself", file=sys.stderr)
                sys.exit(2)
            path = os.pathsep.join(filter(None, [str(directory.resolve()), os.environ.get("PYTHONPATH")]))
            env = {**os.environ, "PYTHONPATH": path, CHOSEN_TRITON_ENV: str(directory.resolve())}
            sys.exit(subprocess.run([sys.executable, str(script), *argv], env=env).returncode)
    import triton
    where = Path(triton.__file__).resolve().parents[1]
    if chosen != INSTALLED_TRITON and where != Path(chosen):
        sys.exit(f"Triton came from {where}, not from {chosen}: something else on sys.path has one first")
    if chosen == INSTALLED_TRITON:
        runners = triton.__version__.split("+")[0] == RUNNER_TRITON_VERSION
        which = "installed, the runner's version" if runners else "installed"
    else:
        which = "the runner's" if where == runner_triton_dir().resolve() else "from --triton"
    print(f"Triton {triton.__version__}, {which} ({_shown(where)})", flush=True)
