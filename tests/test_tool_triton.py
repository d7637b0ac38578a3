"""The Triton the build tools use (tools/common.py, run_with_triton): the runner's by default
(this Python's own where it is the runner's version, else its own directory, installed on first
use with one line saying so), another with --triton DIR or --triton installed, named in the first
line of output; -h / --help installs nothing.

A stand-in tool (a few lines that call run_with_triton, then import triton) runs against stand-in
Triton packages (a directory with triton/__init__.py and its version; "this Python's own" is one
on PYTHONPATH), so nothing here installs or imports the real one; tests/test_compile_targets.py
runs tools/compile_report.py itself.
"""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import common  # noqa: E402

TOOL = f'''
import os, sys
sys.path.insert(0, {str(ROOT / "tools")!r})
from common import run_with_triton
run_with_triton(__file__)
import triton
print("imported", triton.__file__, "fusion", os.environ.get("TRITON_DEFAULT_FP_FUSION"))
'''


def stand_in_triton(folder, version):
    """A directory as `pip install --target` leaves it: triton/__init__.py and its dist-info."""
    (folder / "triton").mkdir(parents=True)
    (folder / "triton" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (folder / f"triton-{version}.dist-info").mkdir()
    return folder


OWN_VERSION = "0.0.1"  # this Python's own Triton in most tests: not the runner's version


def run_tool(tmp_path, *argv, runner_dir, own_version=OWN_VERSION, env_extra=None):
    """The stand-in tool with `argv`, RUNNER_TRITON_DIR=runner_dir and a stand-in Triton of
    `own_version` as this Python's own (first on PYTHONPATH)."""
    script = tmp_path / "tool.py"
    script.write_text(TOOL)
    own = stand_in_triton(tmp_path / "own", own_version)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_DEFAULT_FP_FUSION", common.CHOSEN_TRITON_ENV)}
    env.update(RUNNER_TRITON_DIR=str(runner_dir), PYTHONPATH=str(own), **(env_extra or {}))
    return subprocess.run([sys.executable, str(script), *argv], env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_runners_triton_by_default_named_first(tmp_path):
    runner_dir = stand_in_triton(tmp_path / "runner", common.RUNNER_TRITON_VERSION)
    result = run_tool(tmp_path, runner_dir=runner_dir)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == f"Triton {common.RUNNER_TRITON_VERSION}, the runner's ({runner_dir})", first
    assert second == f"imported {runner_dir / 'triton' / '__init__.py'} fusion 1", second
    assert result.stderr == ""


def test_another_triton_with_triton_dir(tmp_path):
    runner_dir = stand_in_triton(tmp_path / "runner", common.RUNNER_TRITON_VERSION)
    other = stand_in_triton(tmp_path / "other", "9.9.9")
    result = run_tool(tmp_path, "--triton", str(other), runner_dir=runner_dir)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == f"Triton 9.9.9, from --triton ({other})" and str(other / "triton") in second, result.stdout


def test_installed_keeps_this_pythons_triton(tmp_path):
    runner_dir = stand_in_triton(tmp_path / "runner", common.RUNNER_TRITON_VERSION)
    result = run_tool(tmp_path, "--triton", common.INSTALLED_TRITON, runner_dir=runner_dir)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == f"Triton {OWN_VERSION}, installed ({tmp_path / 'own'})", first
    assert second == f"imported {tmp_path / 'own' / 'triton' / '__init__.py'} fusion 1", second


def test_this_pythons_own_triton_of_the_runners_version_by_default(tmp_path):
    """A GPU image whose Triton is the runner's version (the H200's): no other directory."""
    runner_dir = stand_in_triton(tmp_path / "runner", common.RUNNER_TRITON_VERSION)
    result = run_tool(tmp_path, runner_dir=runner_dir, own_version=common.RUNNER_TRITON_VERSION)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == f"Triton {common.RUNNER_TRITON_VERSION}, installed, the runner's version ({tmp_path / 'own'})"
    assert second == f"imported {tmp_path / 'own' / 'triton' / '__init__.py'} fusion 1", second


def test_a_directory_without_triton_is_one_line_exit_2(tmp_path):
    runner_dir = stand_in_triton(tmp_path / "runner", common.RUNNER_TRITON_VERSION)
    result = run_tool(tmp_path, "--triton", str(tmp_path / "empty"), runner_dir=runner_dir)
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr.startswith(f"--triton {tmp_path / 'empty'}: ") and "holds no triton package" in result.stderr


def test_first_use_installs_the_runners_triton_with_one_line(tmp_path, monkeypatch, capsys):
    commands = []
    monkeypatch.setattr(common.subprocess, "run", lambda command, **kwargs: commands.append(command))
    assert common.install_runner_triton(tmp_path / "new") == tmp_path / "new"
    command, = commands
    assert command[:4] == [sys.executable, "-m", "pip", "install"]
    assert {"--no-deps", f"triton=={common.RUNNER_TRITON_VERSION}"} <= set(command)
    assert command[command.index("--target") + 1] == str(tmp_path / "new")
    line, = capsys.readouterr().out.splitlines()
    assert line.startswith(f"Triton {common.RUNNER_TRITON_VERSION}, the runner's, is not in {tmp_path / 'new'} "
                           f"yet: installing it there"), line
    stand_in_triton(tmp_path / "new", common.RUNNER_TRITON_VERSION)
    common.install_runner_triton(tmp_path / "new")
    assert len(commands) == 1 and capsys.readouterr().out == ""  # there now: nothing to do


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_installs_nothing(monkeypatch, flag):
    def refuse(*_):
        raise AssertionError("installed for --help")
    monkeypatch.setattr(common, "install_runner_triton", refuse)
    monkeypatch.delenv(common.CHOSEN_TRITON_ENV, raising=False)
    assert common.run_with_triton("tool.py", ["--target", "gfx950", flag]) is None


OFFLINE = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": ""}  # pip finds no package: a machine without a network


def test_offline_without_the_runners_triton_one_line_says_what_to_install(tmp_path):
    missing = tmp_path / "absent"
    result = run_tool(tmp_path, runner_dir=missing, env_extra=OFFLINE)
    assert result.returncode == 1, result.stdout + result.stderr
    line, = result.stderr.splitlines()
    assert line.startswith(f"Triton {common.RUNNER_TRITON_VERSION} (the runner's"), line
    assert f"pip install --no-deps --target {missing} triton=={common.RUNNER_TRITON_VERSION}" in line, line


def test_one_function_finds_the_runners_triton_for_every_tool():
    """tools/common.py alone reads RUNNER_TRITON_DIR, names the runner's version or installs Triton; the
    emulator's builds (tools/gfx950/build.py) ask its find_runner_triton."""
    finders = re.compile(r'environ\.get\("RUNNER_TRITON_DIR"|"-m", "pip"|RUNNER_TRITON\s*=\s*"')
    found = [f"{path.relative_to(ROOT)}:{number}" for path in sorted((ROOT / "tools").rglob("*.py"))
             if path.name != "common.py"
             for number, line in enumerate(path.read_text().splitlines(), 1) if finders.search(line)]
    assert found == [], found
    assert "find_runner_triton() if triton is None" in (ROOT / "tools" / "gfx950" / "build.py").read_text()


def own_runner_triton(folder):
    """A folder that makes the runner's Triton this Python's own (on PYTHONPATH): the H200 image's case."""
    folder.mkdir()
    for name in ("triton", f"triton-{common.RUNNER_TRITON_VERSION}.dist-info"):
        (folder / name).symlink_to(common.install_runner_triton() / name)
    return folder


def test_mla_emulate_works_offline_with_this_pythons_own_runners_triton(tmp_path):
    """`MLA_EMULATE=gfx950 python eval.py test` where this Python's own Triton is 3.6.0, no runner's Triton
    directory and no network: it builds with its own (nothing installed) and the case passes."""
    import shutil
    for name in ("eval.py", "reference.py", "utils.py", "task.py", "interpreter_shim.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "tests" / "competitor_submission.py", tmp_path / "submission.py")
    (tmp_path / "tools").symlink_to(ROOT / "tools")
    (tmp_path / "cases.txt").write_text("batchsize: 1; qseqlen: 1; kvseqlen: 40; seed: 5\n")
    missing = tmp_path / "absent"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", common.CHOSEN_TRITON_ENV)}
    env.update(OFFLINE, MLA_EMULATE="gfx950", RUNNER_TRITON_DIR=str(missing),
               PYTHONPATH=str(own_runner_triton(tmp_path / "own")), GFX950_BUILD_CACHE=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "eval.py", "test", "cases.txt"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "check: pass" in result.stdout, result.stdout + result.stderr[-3000:]
    assert "test.0.emulated: _decode_kernel 1 launch" in result.stdout
    assert not missing.exists() and len(list((tmp_path / "cache").glob("_decode_kernel-*.json"))) == 1
