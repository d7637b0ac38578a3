"""What the gfx950 emulator builds, and with which Triton (tools/gfx950/build.py, _build_worker.py):
a kernel defined in a script run as `python my_test.py` (its module is __main__) builds without the
script running again; `triton=` picks the Triton (the runner's 3.6.0 by default, this Python's own with
"installed"); the build cache tells apart what Triton's binder tells apart (a view's 16-byte
alignment) and nothing more (its address).
"""
import os
import subprocess
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import gfx950  # noqa: E402

SCRIPT = f'''
import sys
from pathlib import Path
import torch
import triton
import triton.language as tl
sys.path.insert(0, {str(ROOT / "tools")!r})
import gfx950

RUNS = Path(__file__).with_name("runs.txt")
RUNS.open("a").write("script body ran\\n")   # a call at the top level: the build must not run it again


@triton.jit
def double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


x = torch.arange(200, dtype=torch.int32)
out = torch.zeros_like(x)
launch = gfx950.emulate(double_kernel, (2,), x, out, 200, BLOCK=128, num_warps=2)   # unguarded, as scripts are
if __name__ == "__main__":
    assert torch.equal(out, 2 * x), out
    print("right", launch.kernel.name, launch.built.triton)
'''


def test_a_kernel_defined_in_a_script_builds_without_running_it_again(tmp_path):
    script = tmp_path / "my_test.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env["GFX950_BUILD_CACHE"] = str(tmp_path / "cache")   # a fresh build: the worker loads the script
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "right double_kernel 3.6.0", result.stdout
    assert (tmp_path / "runs.txt").read_text() == "script body ran\n"   # once: here, not in the build


@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


def test_the_installed_triton_builds_when_asked():
    x = torch.arange(64, dtype=torch.float32)
    runner, installed = torch.zeros(64), torch.zeros(64)
    built_by_runner = gfx950.emulate(copy_kernel, (1,), x, runner, BLOCK=64, num_warps=1).built
    built_by_own = gfx950.emulate(copy_kernel, (1,), x, installed, BLOCK=64, num_warps=1,
                                  triton=gfx950.INSTALLED_TRITON).built
    assert built_by_runner.triton == "3.6.0" and built_by_own.triton == triton.__version__.split("+")[0]
    assert torch.equal(runner, x) and torch.equal(installed, x)


def test_the_build_cache_keys_on_alignment_not_on_the_address(monkeypatch, tmp_path):
    monkeypatch.setattr(sys.modules["gfx950.build"], "CACHE_DIR", tmp_path)
    storage = torch.arange(256 + 8, dtype=torch.float32)
    out = torch.zeros(256)
    aligned = [gfx950.emulate(copy_kernel, (1,), storage[first:first + 256], out, BLOCK=256, num_warps=1).built
               for first in (0, 4)]   # 0 and 16 bytes in: both 16-byte aligned
    assert aligned[0] == aligned[1] and torch.equal(out, storage[4:260])
    unaligned = gfx950.emulate(copy_kernel, (1,), storage[1:257], out, BLOCK=256, num_warps=1).built
    assert torch.equal(out, storage[1:257])
    assert unaligned.asm != aligned[0].asm   # Triton built it otherwise: a cache that merged them would be wrong
    assert len(list(tmp_path.glob("copy_kernel-*.json"))) == 2   # the two aligned views: one build


def test_the_build_cache_tells_apart_what_the_binder_specializes():
    from gfx950.build import _specialized

    def key(value, fixed=False):
        return _specialized({"kind": "int", "value": value}, fixed)
    assert key(1) != key(2) and key(32) != key(33) and key(2 ** 31) != key(5)   # 1, a multiple of 16, i64
    assert key(17) == key(3) and key(48) == key(16)
    assert key(1, fixed=True) == key(2, fixed=True) != key(2 ** 31, fixed=True)   # do_not_specialize: the type


def test_a_cached_build_names_this_copy_of_its_source():
    """A build cached from a copy of the module elsewhere (the key is its text) names this file in its
    `.file` directive, so an error's Python line reads from here; other files keep theirs."""
    from gfx950.build import _sourced_from
    asm = '\t.file\t1 "/gone/copy" "my_kernels.py"\n\t.file\t2 "/site/triton/language" "standard.py"\n'
    assert _sourced_from(asm, Path("/here/my_kernels.py")) == (
        '\t.file\t1 "/here" "my_kernels.py"\n\t.file\t2 "/site/triton/language" "standard.py"\n')


KERNEL_MODULE = '''
import triton
import triton.language as tl


@triton.jit
def named_copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + 1)
'''


def test_a_fresh_build_names_this_copy_even_where_tritons_cache_held_another(monkeypatch, tmp_path):
    """Two copies of one module in two folders, each built into an empty build cache of ours: the
    second build's Triton finds the first's in its own cache (its key is the text, not the folder),
    and the amdgcn must still name the second folder, the file the verdict's Python line reads."""
    import importlib.util
    for folder in ("first", "second"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "my_kernels.py").write_text(KERNEL_MODULE)
        spec = importlib.util.spec_from_file_location("my_kernels", tmp_path / folder / "my_kernels.py")
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, "my_kernels", module)
        spec.loader.exec_module(module)
        monkeypatch.setattr(sys.modules["gfx950.build"], "CACHE_DIR", tmp_path / folder / "cache")
        x, out = torch.arange(32, dtype=torch.float32), torch.zeros(32)
        built = gfx950.emulate(module.named_copy_kernel, (1,), x, out, BLOCK=32, num_warps=1).built
        assert torch.equal(out, x + 1)
        assert f'"{tmp_path / folder}" "my_kernels.py"' in built.asm, folder
