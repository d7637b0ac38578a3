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


# --- a software pipeline of masked async copies: C = A @ B in 64 x 64 tiles, K in steps of 32 ------------------------
PIPE_MMA = gl.constexpr(gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                             warps_per_cta=[2, 2]))
PIPE_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=PIPE_MMA, k_width=8))
PIPE_B = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=PIPE_MMA, k_width=8))
A_COPY_L = gl.constexpr(gl.BlockedLayout([1, 8], [16, 4], [4, 1], [1, 0]))   # (64, 32) bf16: 16 B a lane, 4 warps
B_COPY_L = gl.constexpr(gl.BlockedLayout([1, 8], [8, 8], [4, 1], [1, 0]))    # (32, 64) bf16
PIPE_SHARED = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
# (64, 1) fp32 row scales: one warp's 64 lanes hold them, the other 3 warps replicate them, so the copy is masked off in
# those 3 (Triton 3.8+: by an out-of-range M0, the hardware dropping their lanes; 3.6: they branch over it)
SCALE_COPY_L = gl.constexpr(gl.BlockedLayout([1, 1], [64, 1], [4, 1], [1, 0]))


@gluon.jit
def _issue_tiles(a_ring, b_ring, s_ring, a_ptr, b_ptr, s_ptr, M, N, K, row0, col0, step, STAGES: gl.constexpr):
    """K step `step`'s A (64, 32) and B (32, 64) tiles and A's row scales for the step (64, 1) into ring slot
    step % STAGES, one commit group: rows past M, columns past N and k past K masked (their LDS bytes are not read
    as data: the product masks them)."""
    slot = step % STAGES
    r = row0 + gl.arange(0, 64, layout=gl.SliceLayout(1, SCALE_COPY_L))
    steps = gl.cdiv(K, 32)
    gl.amd.cdna4.async_copy.buffer_load_to_shared(s_ring.index(slot), s_ptr, r[:, None] * steps + step
                                                  + gl.zeros([64, 1], gl.int32, SCALE_COPY_L),
                                                  mask=(r < M)[:, None] & (step < steps))
    r = row0 + gl.arange(0, 64, layout=gl.SliceLayout(1, A_COPY_L))
    k = step * 32 + gl.arange(0, 32, layout=gl.SliceLayout(0, A_COPY_L))
    gl.amd.cdna4.async_copy.buffer_load_to_shared(a_ring.index(slot), a_ptr, r[:, None] * K + k[None, :],
                                                  mask=(r < M)[:, None] & (k < K)[None, :])
    k = step * 32 + gl.arange(0, 32, layout=gl.SliceLayout(1, B_COPY_L))
    c = col0 + gl.arange(0, 64, layout=gl.SliceLayout(0, B_COPY_L))
    gl.amd.cdna4.async_copy.buffer_load_to_shared(b_ring.index(slot), b_ptr, k[:, None] * N + c[None, :],
                                                  mask=(k < K)[:, None] & (c < N)[None, :])
    gl.amd.cdna4.async_copy.commit_group()


@gluon.jit
def pipelined_matmul_kernel(a_ptr, b_ptr, s_ptr, c_ptr, M, N, K, STAGES: gl.constexpr):
    """Program (i, j), 4 warps: c[64 i : + 64, 64 j : + 64] (float32) = sum over K steps t of (a[:, 32 t : + 32] x
    s[:, t]) @ b[32 t : + 32] with a (M, K) bf16, b (K, N) bf16 (row-major, K and N multiples of 16), s (M, cdiv(K,
    32)) float32 row scales per step (powers of two: the scaled bf16 exact); K in steps of 32 through a ring of
    STAGES slots of async copies (STAGES - 1 in flight), the tiles' edges masked, the copies past the last step
    masked as a whole. A masked operand element is not read as data: k past K are zeroed in registers after the
    shared-memory load (a dropped copy leaves stale bytes there)."""
    row0 = gl.program_id(0) * 64
    col0 = gl.program_id(1) * 64
    a_ring = gl.allocate_shared_memory(gl.bfloat16, [STAGES, 64, 32], PIPE_SHARED)
    b_ring = gl.allocate_shared_memory(gl.bfloat16, [STAGES, 32, 64], PIPE_SHARED)
    s_ring = gl.allocate_shared_memory(gl.float32, [STAGES, 64, 1], PIPE_SHARED)
    steps = gl.cdiv(K, 32)
    for step in gl.static_range(STAGES - 1):
        _issue_tiles(a_ring, b_ring, s_ring, a_ptr, b_ptr, s_ptr, M, N, K, row0, col0, step, STAGES)
    acc = gl.zeros([64, 64], gl.float32, PIPE_MMA)
    for step in range(steps):
        gl.amd.cdna4.async_copy.wait_group(STAGES - 2)
        _issue_tiles(a_ring, b_ring, s_ring, a_ptr, b_ptr, s_ptr, M, N, K, row0, col0, step + STAGES - 1, STAGES)
        scale = gl.amd.cdna4.async_copy.load_shared_relaxed(s_ring.index(step % STAGES), SCALE_COPY_L)
        scale = gl.convert_layout(gl.reshape(scale, [64]), gl.SliceLayout(1, PIPE_A))
        a = gl.amd.cdna4.async_copy.load_shared_relaxed(a_ring.index(step % STAGES), PIPE_A)
        a = (a.to(gl.float32) * scale[:, None]).to(gl.bfloat16)
        b = gl.amd.cdna4.async_copy.load_shared_relaxed(b_ring.index(step % STAGES), PIPE_B)
        k = step * 32 + gl.arange(0, 32, layout=gl.SliceLayout(0, PIPE_A))
        a = gl.where((k < K)[None, :], a, 0.0)
        kb = step * 32 + gl.arange(0, 32, layout=gl.SliceLayout(1, PIPE_B))
        b = gl.where((kb < K)[:, None], b, 0.0)
        acc = gl.amd.cdna4.mfma(a, b, acc)
    gl.amd.cdna4.async_copy.wait_group(0)
    r = row0 + gl.arange(0, 64, layout=gl.SliceLayout(1, PIPE_MMA))
    c = col0 + gl.arange(0, 64, layout=gl.SliceLayout(0, PIPE_MMA))
    gl.amd.cdna4.buffer_store(acc, c_ptr, r[:, None] * N + c[None, :], mask=(r < M)[:, None] & (c < N)[None, :])
