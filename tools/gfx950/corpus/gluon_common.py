"""Gluon kernels of the corpus in forms common Gluon code takes beyond ours (issue 42): shared-memory round trips
whose loads pair up (ds_read2_b64), and a software pipeline of masked async copies. Importable under the runner's
Triton 3.6.0 and under 3.9.0 (the gfx950 builds); Gluon does not run in Triton's interpreter, so their numpy
answers are checked through the emulator only (common_cases.py).
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

PLAIN = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
ROWS_L = gl.constexpr(gl.BlockedLayout([1, 4], [4, 16], [4, 1], [1, 0]))    # (rows, 64) fp32: 16 B a lane
PAIRS_L = gl.constexpr(gl.BlockedLayout([2, 2], [16, 4], [1, 4], [1, 0]))  # 2 rows x 2 columns a lane


@gluon.jit
def lds_pairs_kernel(x_ptr, out_ptr):
    """One program (4 warps): x (32, 64) float32 written to shared memory row-major in one layout and read back in
    another where each lane holds 2 columns of 2 rows (two 8-byte reads one row pitch apart); out = 3 x - 1."""
    r = gl.arange(0, 32, layout=gl.SliceLayout(1, ROWS_L))
    c = gl.arange(0, 64, layout=gl.SliceLayout(0, ROWS_L))
    x = gl.load(x_ptr + r[:, None] * 64 + c[None, :])
    smem = gl.allocate_shared_memory(gl.float32, [32, 64], PLAIN, x)
    y = smem.load(PAIRS_L)
    r = gl.arange(0, 32, layout=gl.SliceLayout(1, PAIRS_L))
    c = gl.arange(0, 64, layout=gl.SliceLayout(0, PAIRS_L))
    gl.store(out_ptr + r[:, None] * 64 + c[None, :], y * 3.0 - 1.0)
