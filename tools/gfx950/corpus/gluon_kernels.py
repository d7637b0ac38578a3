"""Gluon kernels of the corpus (CDNA4 operations: async copies to LDS, buffer loads, stores and
atomics, scaled and bf16 MFMA). They import under this process's Triton and under the
runner's 3.6.0 (the gfx950 build): layouts are module-level gl.constexpr values, and names
that moved between versions are looked up once here. Gluon kernels do not run in Triton's
interpreter: their numpy answers are checked only through the emulator.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

_barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier  # 3.6 / 3.7+
PUBLIC_REINTERPRET = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))  # 3.6: _reinterpret

# --- buffer_load_to_shared through a 3-slot ring -------------------------------------------------------
COPY_ROWS = gl.constexpr(32)  # rows per tile
WIDE_L = gl.constexpr(gl.BlockedLayout([1, 4], [8, 8], [4, 1], [1, 0]))    # (32, 32) int32: 16 B a lane
NARROW_L = gl.constexpr(gl.BlockedLayout([1, 1], [16, 4], [4, 1], [1, 0]))  # (32, 4) int32: 4 B a lane
FLAT = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))


@gluon.jit
def _copy_tile(wide_ring, narrow_ring, slot, x_ptr, s_ptr, tile, rows):
    """Tile `tile`'s rows of x (32 words a row) and s (4 words a row) into ring slot `slot`: one commit group; rows
    past `rows` are masked (their LDS bytes are not read)."""
    r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, WIDE_L))
    c = gl.arange(0, 32, layout=gl.SliceLayout(0, WIDE_L))
    gl.amd.cdna4.async_copy.buffer_load_to_shared(wide_ring.index(slot), x_ptr, r[:, None] * 32 + c[None, :],
                                                  mask=(r < rows)[:, None])
    r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, NARROW_L))
    c = gl.arange(0, 4, layout=gl.SliceLayout(0, NARROW_L))
    gl.amd.cdna4.async_copy.buffer_load_to_shared(narrow_ring.index(slot), s_ptr, r[:, None] * 4 + c[None, :],
                                                  mask=(r < rows)[:, None])
    gl.amd.cdna4.async_copy.commit_group()


@gluon.jit
def async_copy_kernel(x_ptr, s_ptr, out_x_ptr, out_s_ptr, rows):
    """One program, 4 warps: out_x (rows, 32) int32 = 3 x + row, out_s (rows, 4) = 5 s - 1, with x (rows, 32) and s
    (rows, 4) int32 copied global -> LDS in tiles of 32 rows (buffer_load_to_shared, 16 and 4 bytes a lane) through a
    3-slot ring: tile i + 2's copy is issued while tile i is consumed (wait_group(1) leaves one tile in flight)."""
    wide_ring = gl.allocate_shared_memory(gl.int32, [3, COPY_ROWS, 32], FLAT)
    narrow_ring = gl.allocate_shared_memory(gl.int32, [3, COPY_ROWS, 4], FLAT)
    _copy_tile(wide_ring, narrow_ring, 0, x_ptr, s_ptr, 0, rows)
    _copy_tile(wide_ring, narrow_ring, 1, x_ptr, s_ptr, 1, rows)
    for tile in range(gl.cdiv(rows, COPY_ROWS)):
        gl.amd.cdna4.async_copy.wait_group(1)
        _copy_tile(wide_ring, narrow_ring, (tile + 2) % 3, x_ptr, s_ptr, tile + 2, rows)
        x = gl.amd.cdna4.async_copy.load_shared_relaxed(wide_ring.index(tile % 3), WIDE_L)
        s = gl.amd.cdna4.async_copy.load_shared_relaxed(narrow_ring.index(tile % 3), NARROW_L)
        r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, WIDE_L))
        c = gl.arange(0, 32, layout=gl.SliceLayout(0, WIDE_L))
        gl.amd.cdna4.buffer_store(x * 3 + r[:, None], out_x_ptr, r[:, None] * 32 + c[None, :], mask=(r < rows)[:, None])
        r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, NARROW_L))
        c = gl.arange(0, 4, layout=gl.SliceLayout(0, NARROW_L))
        gl.amd.cdna4.buffer_store(s * 5 - 1, out_s_ptr, r[:, None] * 4 + c[None, :], mask=(r < rows)[:, None])
    gl.amd.cdna4.async_copy.wait_group(0)


# --- fp4 -> bf16 by Triton's own upcast, and a ticket through a buffer atomic ----------------------------
UPCAST_L = gl.constexpr(gl.BlockedLayout([1, 4], [16, 4], [4, 1], [1, 0]))  # (64, 16) uint8 pairs
LANES_L = gl.constexpr(gl.BlockedLayout([1], [64], [4], [0]))


@gluon.jit
def fp4_upcast_kernel(packed_ptr, out_ptr, counter_ptr, ticket_ptr, rows):
    """Program p: rows [64 p, + 64) of packed (rows, 16) uint8 e2m1 pairs (low nibble: the even column) -> out (rows,
    32) bf16 by gl.fp4_to_fp; then lane 0 adds 1 to counter[0] by a buffer atomic and ticket[p] = the old value (every
    lane learns it through a sum over the 256 lanes)."""
    r = gl.program_id(0) * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, UPCAST_L))
    c = gl.arange(0, 16, layout=gl.SliceLayout(0, UPCAST_L))
    ok = (r < rows)[:, None]
    packed = gl.amd.cdna4.buffer_load(packed_ptr, r[:, None] * 16 + c[None, :], mask=ok, other=0)
    values = gl.fp4_to_fp(packed, gl.bfloat16, 1)
    out_l: gl.constexpr = values.type.layout
    r_out = gl.program_id(0) * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, out_l))
    c_out = gl.arange(0, 32, layout=gl.SliceLayout(0, out_l))
    gl.amd.cdna4.buffer_store(values, out_ptr, r_out[:, None] * 32 + c_out[None, :], mask=(r_out < rows)[:, None])
    lane = gl.arange(0, 256, layout=LANES_L)
    first = lane == 0
    # CDNA4's buffer atomic integer add is on uint32
    old = gl.amd.cdna4.buffer_atomic_add(counter_ptr.to(gl.pointer_type(gl.uint32)), lane * 0,
                                         gl.full([256], 1, gl.uint32, LANES_L), mask=first, sem="acq_rel", scope="gpu")
    ticket = gl.sum(gl.where(first, old.to(gl.int32), 0), axis=0)
    gl.amd.cdna4.buffer_store(gl.full([256], 0, gl.int32, LANES_L) + ticket, ticket_ptr, lane * 0 + gl.program_id(0),
                              mask=first)
