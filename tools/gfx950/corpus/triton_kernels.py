"""Standard-Triton kernels of the corpus (written for it; none is taken from submission.py).

Self-contained (imports triton only): the gfx950 build imports this file by path under the
runner's Triton 3.6.0, and tests/ import it under Triton's interpreter. Each kernel's
docstring gives its pointer arguments' shapes and what one program computes; cases.py holds
the numpy answers.
"""
import triton
import triton.language as tl

# rows of integer_ops_kernel's output, in order (cases.py computes the same list in numpy)
INT_OPS = ("mul_add", "xor_ashr", "lshr", "bfe_u", "bfe_i", "byte_perm", "max", "min", "med3", "div", "rem",
           "bitsel", "xor3", "and_xor", "int16_add", "int16_shl", "mad_u24", "mul_u24", "mul_i24", "add3", "or3",
           "xad", "and_or", "lshl_add", "add_lshl", "lshl_or", "umulhi", "mul64_shr", "udiv", "bfrev_not", "popc",
           "int16_bitsel", "uint16_shr", "minus_n", "add64_low")
NUM_INT_OPS = tl.constexpr(len(INT_OPS))
FLOAT_OPS = ("fma", "fms", "fnma", "div", "exp2", "max", "min", "clamp", "abs_max", "sub", "where_lt", "nan_to_zero",
             "to_int", "from_int", "from_uint", "mul_add_pair", "rcp_scaled", "eq_select", "is_eq", "is_ne", "is_ge",
             "not_lt", "asm_mul")
NUM_FLOAT_OPS = tl.constexpr(len(FLOAT_OPS))


# --- elementwise and bit operations ----------------------------------------------------------
@triton.jit
def integer_ops_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """a, b, c (n,) int32 (b != 0, never INT_MIN / -1); out (NUM_INT_OPS, n) int32: row k is INT_OPS[k] of
    elements [pid BLOCK, + BLOCK), masked past n."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    a = tl.load(a_ptr + offs, mask=ok, other=1)
    b = tl.load(b_ptr + offs, mask=ok, other=1)
    c = tl.load(c_ptr + offs, mask=ok, other=1)
    au = a.to(tl.uint32, bitcast=True)
    bu = b.to(tl.uint32, bitcast=True)
    cu = c.to(tl.uint32, bitcast=True)
    a16 = a.to(tl.int16)
    b16 = b.to(tl.int16)
    wide = a.to(tl.int64) * b.to(tl.int64)
    results = (
        a * b + 12345,
        a ^ (b >> 7),
        (au >> 5).to(tl.int32, bitcast=True),
        (a >> 3) & 0x3FF,
        (a << 20) >> 26,
        ((a & 0xFF) << 24) | (((a >> 8) & 0xFF) << 16) | (((b >> 16) & 0xFF) << 8) | ((b >> 24) & 0xFF),
        tl.maximum(a, b),
        tl.minimum(a, b),
        tl.maximum(tl.minimum(a, b), tl.minimum(tl.maximum(a, b), c)),
        a // b,
        a % b,
        (a & b) | (~a & c),
        a ^ b ^ c,
        (a & b) ^ c,
        (a16 + b16).to(tl.int32),
        (a16 << 3).to(tl.int32),
        (a & 0xFFFF) * (b & 0xFFF) + c,
        (a & 0xFFFF) * (b & 0xFF),
        ((a << 8) >> 8) * ((b << 8) >> 8),
        a + b + c,
        a | b | c,
        (a ^ b) + c,
        (a & b) | c,
        (a << 4) + b,
        (a + b) << 3,
        (a << 6) | (b & 63),
        tl.umulhi(au, bu).to(tl.int32, bitcast=True),
        (wide >> 17).to(tl.int32),
        (au // ((bu >> 16) | 1)).to(tl.int32, bitcast=True),
        ~(cu >> 1).to(tl.int32, bitcast=True),
        ((au & 0xF0F0F0F0) >> 4).to(tl.int32, bitcast=True) + (au & 0x0F0F0F0F).to(tl.int32, bitcast=True),
        ((a16 & b16) | (~a16 & c.to(tl.int16))).to(tl.int32),
        (a.to(tl.uint16) >> 5).to(tl.int32),
        a - n,
        ((a.to(tl.int64) << 20) + c.to(tl.int64) + n).to(tl.int32),
    )
    for k in tl.static_range(NUM_INT_OPS):
        tl.store(out_ptr + k * n + offs, results[k], mask=ok)


HALF_OPS = ("add_hi", "bitsel", "shr", "byte_shl", "byte_shl_var")
NUM_HALF_OPS = tl.constexpr(len(HALF_OPS))


@triton.jit
def byte_ops_kernel(b_ptr, h_ptr, f_ptr, field_ptr, half_ptr, pack_ptr, word_ptr, rows, shift, ROWS: tl.constexpr):
    """Narrow integers packed in registers; program p takes rows [p ROWS, + ROWS), masked past `rows`; shift a runtime
    shift amount (in [8, 15]: the 16-bit shifts use it too).
    b (rows, 16) uint8 -> field (2, rows, 16) int32 = b << 23 (a byte as a float's exponent field), b << shift;
    h (rows, 8) int16 -> half (NUM_HALF_OPS, rows, 8) int16: h + 0x7F00, (h & 0x0FF0) | (~h & b[:, :8]), h as uint16
    >> 3, b[:, 8:] << 8, b[:, 8:] << shift (16-bit); word (rows, 8) int32 = (h as uint16) << shift;
    f (rows, 8) float32 -> pack (rows, 8) bf16 = f x 0.5 (rounded to nearest even)."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = (r < rows)[:, None]
    cols8 = tl.arange(0, 8)[None, :]
    b = tl.load(b_ptr + r[:, None] * 16 + tl.arange(0, 16)[None, :], mask=ok, other=0)
    tl.store(field_ptr + r[:, None] * 16 + tl.arange(0, 16)[None, :], b.to(tl.int32) << 23, mask=ok)
    tl.store(field_ptr + rows * 16 + r[:, None] * 16 + tl.arange(0, 16)[None, :], b.to(tl.int32) << shift, mask=ok)
    h = tl.load(h_ptr + r[:, None] * 8 + cols8, mask=ok, other=0)
    low_bytes = tl.load(b_ptr + r[:, None] * 16 + cols8, mask=ok, other=0).to(tl.int16)
    high_bytes = tl.load(b_ptr + r[:, None] * 16 + 8 + cols8, mask=ok, other=0).to(tl.int16)
    results = (
        h + 0x7F00,
        (h & 0x0FF0) | (~h & low_bytes),
        (h.to(tl.uint16, bitcast=True) >> 3).to(tl.int16, bitcast=True),
        high_bytes << 8,
        high_bytes << shift.to(tl.int16),
    )
    for k in tl.static_range(NUM_HALF_OPS):
        tl.store(half_ptr + k * rows * 8 + r[:, None] * 8 + cols8, results[k], mask=ok)
    tl.store(word_ptr + r[:, None] * 8 + cols8, h.to(tl.uint16, bitcast=True).to(tl.int32) << shift, mask=ok)
    f = tl.load(f_ptr + r[:, None] * 8 + cols8, mask=ok, other=0.0)
    tl.store(pack_ptr + r[:, None] * 8 + cols8, (f * 0.5).to(tl.bfloat16), mask=ok)


@triton.jit
def float_ops_kernel(x_ptr, y_ptr, z_ptr, i_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """x, y, z (n,) float32, i (n,) int32; out (NUM_FLOAT_OPS, n) float32: row k is FLOAT_OPS[k]."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    z = tl.load(z_ptr + offs, mask=ok, other=1.0)
    i = tl.load(i_ptr + offs, mask=ok, other=1)
    results = (
        tl.fma(x, y, z),
        tl.fma(x, y, -z),
        tl.fma(-x, y, z),
        x / y,
        tl.exp2(z),
        tl.maximum(x, y),
        tl.minimum(x, y),
        tl.minimum(tl.maximum(x, -1.5), 2.5),
        tl.maximum(tl.abs(x), tl.abs(y)),
        x - y,
        tl.where(x < y, x, z),
        tl.where(x != x, 0.0, x),
        (x * 100.0).to(tl.int32).to(tl.float32),
        i.to(tl.float32),
        i.to(tl.uint32, bitcast=True).to(tl.float32),
        x * 3.0 + y * 0.25,
        1.0 / (y * 8.0),
        tl.where(x == z, y, x),
        (x == z).to(tl.float32),
        (x != z).to(tl.float32),
        (x >= y).to(tl.float32),
        tl.where(x < y, 0.0, 1.0),
        tl.inline_asm_elementwise("v_mul_f32 $0, $1, $2", "=v,v,v", [x, y], dtype=tl.float32, is_pure=True, pack=1),
    )
    for k in tl.static_range(NUM_FLOAT_OPS):
        tl.store(out_ptr + k * n + offs, results[k], mask=ok)


@triton.jit
def scalar_compare_kernel(x_ptr, y_ptr, w_ptr, out_ptr, out_w_ptr, s, n, BLOCK: tl.constexpr):
    """x, y (n,) float32, s a float32 argument, w (n,) int32: out[:n] = where(x == s, y, x); out[n + program] = the
    block's max of x where it equals s (a branch on a value every lane holds); w (n,) int32: out_w[:n] = w's byte 3
    << 8 as int16, sign-extended (a 16-bit shift of an SDWA byte-3 select), out_w[n + program] the sum of all of
    them (a loop over w with a branch on a scalar condition: full block or tail)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    tl.store(out_ptr + offs, tl.where(x == s, y, x), mask=ok)
    top = tl.max(tl.where(ok, x, float("-inf")), axis=0)
    if top == s:
        tl.store(out_ptr + n + tl.program_id(0), top)
    w = tl.load(w_ptr + offs, mask=ok, other=0)
    tl.store(out_w_ptr + offs, (((w >> 24) & 0xFF).to(tl.int16) << 8).to(tl.int32), mask=ok)
    total = 0
    for start in range(0, n, BLOCK):  # the whole of w in every program: full blocks unmasked, the tail masked
        cols = start + tl.arange(0, BLOCK)
        if n - start >= BLOCK:
            block = tl.load(w_ptr + cols)
        else:
            block = tl.load(w_ptr + cols, mask=cols < n, other=0)
        total += tl.sum((((block >> 24) & 0xFF).to(tl.int16) << 8).to(tl.int32), axis=0)
    tl.store(out_w_ptr + n + tl.program_id(0), total)


@triton.jit
def masked_tail_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """x (n,) int32 -> out[:n] = (x * 1103515245 + 12345) ^ (x >> 7); out past n untouched."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok)
    tl.store(out_ptr + offs, (x * 1103515245 + 12345) ^ (x >> 7), mask=ok)


# --- reductions ----------------------------------------------------------------------------------
@triton.jit
def block_reduce_kernel(x_ptr, i_ptr, out_ptr, out_i_ptr, n, BLOCK: tl.constexpr):
    """One program: x (n,) float32, i (n,) int32 -> out (3,) = max, sum, max |x| of x; out_i (4,) = max, min, sum
    (wrapping) of i, then if max x > 16 the count of x > 16 (else out_i[3] is left as it was) (n <= BLOCK, masked
    lanes neutral)."""
    offs = tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=float("-inf"))
    i = tl.load(i_ptr + offs, mask=ok, other=-(2**31))
    tl.store(out_ptr, tl.max(x, axis=0))
    tl.store(out_ptr + 1, tl.sum(tl.where(ok, x, 0.0), axis=0))
    tl.store(out_ptr + 2, tl.max(tl.abs(tl.where(ok, x, 0.0)), axis=0))
    tl.store(out_i_ptr, tl.max(i, axis=0))
    tl.store(out_i_ptr + 1, tl.min(tl.where(ok, i, 2**31 - 1), axis=0))
    tl.store(out_i_ptr + 2, tl.sum(tl.where(ok, i, 0), axis=0))
    if tl.max(x, axis=0) > 16.0:  # a uniform branch on a value every lane holds, around a loop
        count = 0
        for start in range(0, n, 128):
            chunk = start + tl.arange(0, 128)
            count += tl.sum((tl.load(x_ptr + chunk, mask=chunk < n, other=0.0) > 16.0).to(tl.int32), axis=0)
        tl.store(out_i_ptr + 3, count)


@triton.jit
def tile_reduce_kernel(x_ptr, row_max_ptr, row_sum_ptr, col_max_ptr, col_sum_ptr, rows, cols, stride,
                       ROWS: tl.constexpr, COLS: tl.constexpr):
    """x (rows, cols) float32, row stride `stride`; one program: row_max / row_sum (rows,) over axis 1,
    col_max / col_sum (cols,) over axis 0 (rows <= ROWS, cols <= COLS)."""
    r = tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    ok = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(x_ptr + r[:, None] * stride + c[None, :], mask=ok, other=0.0)
    low = tl.where(ok, x, float("-inf"))
    tl.store(row_max_ptr + r, tl.max(low, axis=1), mask=r < rows)
    tl.store(row_sum_ptr + r, tl.sum(x, axis=1), mask=r < rows)
    tl.store(col_max_ptr + c, tl.max(low, axis=0), mask=c < cols)
    tl.store(col_sum_ptr + c, tl.sum(x, axis=0), mask=c < cols)


@triton.jit
def spill_kernel(x_ptr, y_ptr, out_ptr, ROWS: tl.constexpr, COLS: tl.constexpr):
    """One program (meant for one warp): x, y (ROWS, COLS) float32 -> out = x * z[:, None] + y * w[None, :] with
    z = sum(x * y, axis 1), w = sum(x + y, axis 0): x and y stay live across both reductions, so at 128 x 128 on one
    wave (512 registers a lane for them alone) the build spills to scratch memory."""
    offs = tl.arange(0, ROWS)[:, None] * COLS + tl.arange(0, COLS)[None, :]
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    z = tl.sum(x * y, axis=1)
    w = tl.sum(x + y, axis=0)
    tl.store(out_ptr + offs, x * z[:, None] + y * w[None, :])


# --- conversions -----------------------------------------------------------------------------------
@triton.jit
def to_fp8_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """x (n,) float32 -> out (n,) e4m3fn bytes: x.to(tl.float8e4nv)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok)
    tl.store(out_ptr + offs, x.to(tl.float8e4nv).to(tl.uint8, bitcast=True), mask=ok)


@triton.jit
def float_conversions_kernel(x_ptr, h_ptr, b_ptr, bf16_out_ptr, f32_from_fp16_ptr, f32_from_bf16_ptr, n,
                             BLOCK: tl.constexpr):
    """x (n,) float32, h (n,) fp16, b (n,) bf16 -> bf16_out = x.to(bf16) (RNE), f32_from_fp16 = h.to(float32),
    f32_from_bf16 = b.to(float32) (exact)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.store(bf16_out_ptr + offs, tl.load(x_ptr + offs, mask=ok).to(tl.bfloat16), mask=ok)
    tl.store(f32_from_fp16_ptr + offs, tl.load(h_ptr + offs, mask=ok).to(tl.float32), mask=ok)
    tl.store(f32_from_bf16_ptr + offs, tl.load(b_ptr + offs, mask=ok).to(tl.float32), mask=ok)


# --- matrix products -------------------------------------------------------------------------------
@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, stride_am, stride_ak, stride_bk, stride_bn, M: tl.constexpr,
               N: tl.constexpr, K: tl.constexpr, TRANS_B: tl.constexpr):
    """One program: out (M, N) float32 = a (M, K) @ b (K, N) + c (M, N); a, b bf16 (or both e4m3fn) with the given
    strides.
    TRANS_B: b is read as tl.trans of an (N, K) tile (b's strides still index b[k, n])."""
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * stride_am + k[None, :] * stride_ak)
    if TRANS_B:
        b = tl.trans(tl.load(b_ptr + n[:, None] * stride_bn + k[None, :] * stride_bk))
    else:
        b = tl.load(b_ptr + k[:, None] * stride_bk + n[None, :] * stride_bn)
    c = tl.load(c_ptr + m[:, None] * N + n[None, :])
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, c))


@triton.jit
def dot_scaled_kernel(a_ptr, a_scale_ptr, b_ptr, b_scale_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
                      K: tl.constexpr, A_FORMAT: tl.constexpr, B_FORMAT: tl.constexpr):
    """One program: out (M, N) float32 = (a * 2^a_scale) @ (b * 2^b_scale) by tl.dot_scaled.
    a: (M, K) e4m3 bytes or (M, K / 2) e2m1 pairs (low nibble: even k); a_scale (M, K / 32) e8m0.
    b: (N, K / 2) e2m1 pairs or (N, K) e4m3 bytes, row n holding column n of the product (read through
    tl.trans, as a K-major B); b_scale (N, K / 32) e8m0. A_FORMAT / B_FORMAT: "e4m3" or "e2m1"."""
    A_K: tl.constexpr = K // 2 if A_FORMAT == "e2m1" else K
    B_K: tl.constexpr = K // 2 if B_FORMAT == "e2m1" else K
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    blocks = tl.arange(0, K // 32)
    a = tl.load(a_ptr + m[:, None] * A_K + tl.arange(0, A_K)[None, :])
    b = tl.load(b_ptr + n[:, None] * B_K + tl.arange(0, B_K)[None, :])
    a_scale = tl.load(a_scale_ptr + m[:, None] * (K // 32) + blocks[None, :])
    b_scale = tl.load(b_scale_ptr + n[:, None] * (K // 32) + blocks[None, :])
    out = tl.dot_scaled(a, a_scale, A_FORMAT, tl.trans(b), b_scale, B_FORMAT)
    tl.store(out_ptr + m[:, None] * N + n[None, :], out)


@triton.jit
def dot_scaled_bf16_kernel(a_ptr, a_scale_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """One program: out (M, N) float32 = (a * 2^a_scale) @ b with a (M, K / 2) e2m1 pairs, a_scale (M, K / 32) e8m0,
    b (K, N) bf16: tl.dot_scaled(a, a_scale, "e2m1", b, None, "bf16") (the e2m1 side is upcast to bf16)."""
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    a = tl.load(a_ptr + m[:, None] * (K // 2) + tl.arange(0, K // 2)[None, :])
    a_scale = tl.load(a_scale_ptr + m[:, None] * (K // 32) + tl.arange(0, K // 32)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + n[None, :])
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot_scaled(a, a_scale, "e2m1", b, None, "bf16"))


# --- atomics -----------------------------------------------------------------------------------------
@triton.jit
def ticket_kernel(x_ptr, partial_ptr, ticket_ptr, counter_ptr, total_ptr, BLOCK: tl.constexpr):
    """Program p sums x[p BLOCK : + BLOCK] (float32) into partial[p], then takes a ticket: ticket[p] = the counter's
    old value (tl.atomic_add, acq_rel); the program that draws the last ticket (num_programs - 1) sums all
    partials into total[0]. counter (1,) int32 starts at 0."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    partial = tl.sum(tl.load(x_ptr + pid * BLOCK + tl.arange(0, BLOCK)), axis=0)
    tl.store(partial_ptr + pid, partial)
    tl.debug_barrier()
    ticket = tl.atomic_add(counter_ptr, 1, sem="acq_rel", scope="gpu")
    tl.store(ticket_ptr + pid, ticket)
    if ticket == programs - 1:
        offs = tl.arange(0, BLOCK)
        total = tl.zeros([BLOCK], tl.float32)
        for first in range(0, programs, BLOCK):
            total += tl.load(partial_ptr + first + offs, mask=first + offs < programs, other=0.0, cache_modifier=".cg")
        tl.store(total_ptr, tl.sum(total, axis=0))


# --- quantization ----------------------------------------------------------------------------------
@triton.jit
def _e4m3_blocks(x, ROWS: tl.constexpr, BLOCKS: tl.constexpr):
    """x (ROWS, 32 BLOCKS) float32 -> (e4m3 (ROWS, 32 BLOCKS), e8m0 bytes (ROWS, BLOCKS) uint8): per 32-block the
    least exponent e in [-126, 127] with max |x| / 2^e <= 448; the codes are x / 2^e rounded to nearest even."""
    blocks = tl.reshape(x, (ROWS, BLOCKS, 32))
    amax_bits = tl.max(tl.abs(blocks), axis=2).to(tl.int32, bitcast=True)
    # amax = 1.f x 2^E: 448 = 1.75 x 2^8, so e = E - 8, plus one when 1.f > 1.75 (f > 0x600000)
    e = ((amax_bits >> 23) & 0xFF) - 135 + ((amax_bits & 0x7FFFFF) > 0x600000).to(tl.int32)
    e = tl.minimum(tl.maximum(e, -126), 127)
    codes = (blocks * ((127 - e) << 23).to(tl.float32, bitcast=True)[:, :, None]).to(tl.float8e4nv)
    return tl.reshape(codes, (ROWS, BLOCKS * 32)), (e + 127).to(tl.uint8)


@triton.jit
def quantize_blocks_kernel(x_ptr, q_ptr, scale_ptr, rows, COLS: tl.constexpr, ROWS: tl.constexpr):
    """x (rows, COLS) float32 -> q (rows, COLS) e4m3 bytes, scale (rows, COLS / 32) e8m0 (_e4m3_blocks); program p
    takes rows [p ROWS, + ROWS), masked past `rows`."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = (r < rows)[:, None]
    x = tl.load(x_ptr + r[:, None] * COLS + tl.arange(0, COLS)[None, :], mask=ok, other=0.0)
    q, scale = _e4m3_blocks(x, ROWS, COLS // 32)
    tl.store(q_ptr + r[:, None] * COLS + tl.arange(0, COLS)[None, :], q.to(tl.uint8, bitcast=True), mask=ok)
    tl.store(scale_ptr + r[:, None] * (COLS // 32) + tl.arange(0, COLS // 32)[None, :], scale, mask=ok)


TENSOR_AMAX_FLOOR = tl.constexpr(2.0 ** -40)
ONE_PASS, AMAX_PASS, QUANTIZE_PASS = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)


@triton.jit
def quantize_tensor_kernel(x_ptr, partials_ptr, q_ptr, scale_ptr, tokens, num_partials, token_stride, head_stride,
                           HEADS: tl.constexpr, COLS: tl.constexpr, ROWS: tl.constexpr, PASS: tl.constexpr):
    """Per-tensor e4m3: x (tokens, HEADS, COLS) bf16 with strides (token_stride, head_stride, 1) as rows (token, head);
    scale = bf16(max(amax, 2^-40) / 448) (scale (1,) float32), q (tokens, HEADS, COLS) e4m3 bytes (contiguous) =
    e4m3(clamp(bf16(x * (1 / scale)), -448, 448)), every rounding to nearest even. Program p owns rows
    [p ROWS, + ROWS). PASS: ONE_PASS (one program holds every row), AMAX_PASS (partials[p] = its rows' amax),
    QUANTIZE_PASS (after AMAX_PASS: amax = max of partials[0 .. num_partials - 1])."""
    first = tl.program_id(0) * ROWS
    r = first + tl.arange(0, ROWS)
    ok = r < tokens * HEADS
    rows = x_ptr + (r // HEADS) * token_stride + (r % HEADS) * head_stride
    x = tl.load(rows[:, None] + tl.arange(0, COLS)[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
    if PASS == AMAX_PASS:
        tl.store(partials_ptr + tl.program_id(0), tl.max(tl.max(tl.abs(x), axis=1), axis=0))
    else:
        if PASS == ONE_PASS:
            amax = tl.max(tl.max(tl.abs(x), axis=1), axis=0)
        else:
            amax = tl.zeros((), tl.float32)
            for start in range(0, num_partials, 128):
                offs = start + tl.arange(0, 128)
                amax = tl.maximum(amax, tl.max(tl.load(partials_ptr + offs, mask=offs < num_partials, other=0.0)))
        scale = tl.div_rn(tl.maximum(amax, TENSOR_AMAX_FLOOR), 448.0).to(tl.bfloat16).to(tl.float32)
        inverse = tl.div_rn(tl.full((), 1.0, tl.float32), scale)
        ratio = tl.minimum(tl.maximum((x * inverse).to(tl.bfloat16).to(tl.float32), -448.0), 448.0)
        tl.store(q_ptr + r[:, None] * COLS + tl.arange(0, COLS)[None, :],
                 ratio.to(tl.float8e4nv).to(tl.uint8, bitcast=True), mask=ok[:, None])
        tl.store(scale_ptr, scale, mask=tl.program_id(0) == 0)


# --- a small split attention (online softmax over KV tiles, e2m1 KV, partials merged) ---------------
# 16 heads. A KV row: NOPE e2m1 codes in pairs (the low nibble the even dim; NOPE a kernel constexpr, 128 or 512),
# then ROPE_DIMS more, then padding; an e8m0 scale per 32 dims in a scale row. The values are the NOPE dims. SCORES
# picks how the scores are formed, CONVERT how e2m1 codes become bf16, MERGE how a sequence's splits become its output.
HEADS = tl.constexpr(16)
ROPE_DIMS = tl.constexpr(32)
SCALED_K = tl.constexpr(128)  # the scaled MFMA's K: the rope dims are padded to it
MERGE_HEADS = tl.constexpr(4)  # heads the FUSED merge holds at once
SCALED, BF16_SCORES = tl.constexpr(0), tl.constexpr(1)   # SCORES: tl.dot_scaled e4m3 x e2m1 | bf16 tl.dot
CVT_ASM, CVT_PORTABLE = tl.constexpr(0), tl.constexpr(1)  # CONVERT: v_cvt_scalef32_pk_bf16_fp4 | integer/fp16 ops
PARTIALS, FUSED = tl.constexpr(0), tl.constexpr(1)        # MERGE: partials only | the last program merges too
# byte b of word $4 -> bf16 pair $b (low nibble in the low half) times the float32 scale $5
E2M1_PAIRS_ASM = tl.constexpr("""
        v_cvt_scalef32_pk_bf16_fp4 $0, $4, $5
        v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[1,0,0]
        v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]
        v_cvt_scalef32_pk_bf16_fp4 $3, $4, $5 op_sel:[1,1,0]
        """)


@triton.jit
def _split_rows(kv_indptr_ptr, total_kv, num_splits, BLOCK_N: tl.constexpr):
    """(seq, range_ok, lo, full_end, hi): this program's KV rows [lo, hi) (whole tiles per split, the last split short,
    none when the sequence's range is invalid: start < 0, start > end or end > total_kv) and where its full tiles end."""
    seq = tl.program_id(1)
    start = tl.load(kv_indptr_ptr + seq)
    end = tl.load(kv_indptr_ptr + seq + 1)
    range_ok = (start >= 0) & (start <= end) & (end <= total_kv)
    end = tl.where(range_ok, end, start)
    tiles_per_split = tl.cdiv(tl.cdiv(end - start, BLOCK_N), num_splits)
    lo = start + tl.program_id(0) * tiles_per_split * BLOCK_N
    hi = tl.minimum(lo + tiles_per_split * BLOCK_N, end)
    full_end = lo + tl.maximum(hi - lo, 0) // BLOCK_N * BLOCK_N
    return seq, range_ok, lo, full_end, hi


@triton.jit
def _pin(x, PIN: tl.constexpr):
    """x unchanged, through an opaque v_mov_b32 when PIN (so the compiler keeps one copy of it)."""
    if PIN:
        x = tl.inline_asm_elementwise("v_mov_b32 $0, $1", "=v,v", [x], dtype=x.dtype, is_pure=False, pack=1)
    return x


@triton.jit
def _bf16_bits(code, scale):
    """e2m1 codes (int32, 0..15) times scale as bf16 bit patterns (int32, high half 0): sxyz as the fp16
    s00xyz000000000 = value x 2^-14, times 2^14, then times scale (exact in float32 and bf16 where finite)."""
    half = (((code & 0x7) << 9) | ((code & 0x8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)
    return (half.to(tl.float32) * 16384.0 * scale).to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF


@triton.jit
def _e2m1_pair(words, BYTE: tl.constexpr, scale, PIN: tl.constexpr):
    """Byte BYTE of each word -> a bf16 pair (its low nibble's value in the low half) in an int32, portably."""
    low = _bf16_bits((words >> (8 * BYTE)) & 0xF, scale)
    high = _bf16_bits((words >> (8 * BYTE + 4)) & 0xF, scale)
    return _pin(low | (high << 16), PIN)


@triton.jit
def _halves(pair):
    """An int32 holding a bf16 pair -> (low, high) bf16."""
    return pair.to(tl.int16).to(tl.bfloat16, bitcast=True), (pair >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)


@triton.jit
def _e2m1_to_bf16(words, scale_bytes, ROWS: tl.constexpr, WORDS: tl.constexpr, CONVERT: tl.constexpr,
                  PIN: tl.constexpr):
    """words (ROWS, WORDS) int32 (code q of word j: dim 8j + q, bits 4q..4q+3), scale_bytes (ROWS, WORDS / 4) int32
    e8m0 -> (ROWS, 8 WORDS) bf16 values in dim order: code value x 2^(scale - 127) (scale 0: 2^-127; 255: NaN),
    exact. Byte b of a word becomes a bf16 pair p_b: CVT_ASM by v_cvt_scalef32_pk_bf16_fp4 (given the scale byte as a
    float32's exponent field, all the instruction reads), CVT_PORTABLE by integer and fp16 operations."""
    exponent_field = tl.reshape(tl.broadcast_to((scale_bytes << 23)[:, :, None], (ROWS, WORDS // 4, 4)), (ROWS, WORDS))
    if CONVERT == CVT_ASM:
        p0, p1, p2, p3 = tl.inline_asm_elementwise(
            asm=E2M1_PAIRS_ASM, constraints="=&v,=&v,=&v,=v,v,v",
            args=[words, exponent_field.to(tl.float32, bitcast=True)],
            dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)
    else:
        # 2^(byte - 127): byte 0 is the float32 denormal 2^-127, byte 255 NaN
        scale_bits = tl.where(exponent_field == 0, 0x00400000, exponent_field)
        scale = tl.where(exponent_field == 255 << 23, 0x7FC00000, scale_bits).to(tl.float32, bitcast=True)
        p0, p1 = _e2m1_pair(words, 0, scale, PIN), _e2m1_pair(words, 1, scale, PIN)
        p2, p3 = _e2m1_pair(words, 2, scale, PIN), _e2m1_pair(words, 3, scale, PIN)
    low0, high0 = _halves(p0)
    low1, high1 = _halves(p1)
    low2, high2 = _halves(p2)
    low3, high3 = _halves(p3)
    # nested joins put the outermost join's index last: (byte bit 1, byte bit 0, nibble) -> dim 8j + 2 byte + nibble
    lows = tl.join(tl.join(low0, low2), tl.join(low1, low3))
    highs = tl.join(tl.join(high0, high2), tl.join(high1, high3))
    return tl.reshape(tl.join(lows, highs), (ROWS, 8 * WORDS))


@triton.jit
def e2m1_to_bf16_kernel(words_ptr, scale_ptr, out_ptr, rows, WORDS: tl.constexpr, ROWS: tl.constexpr,
                        CONVERT: tl.constexpr, PIN: tl.constexpr = False):
    """words (rows, WORDS) int32 of e2m1 codes (code q of word j: element 8j + q), scale (rows, WORDS / 4) e8m0 ->
    out (rows, 8 WORDS) bf16 by _e2m1_to_bf16 (PIN: each pair through _pin); program p converts rows [p ROWS, + ROWS),
    masked past `rows`."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    ok = (r < rows)[:, None]
    words = tl.load(words_ptr + r[:, None] * WORDS + tl.arange(0, WORDS)[None, :], mask=ok, other=0)
    scales = tl.load(scale_ptr + r[:, None] * (WORDS // 4) + tl.arange(0, WORDS // 4)[None, :], mask=ok, other=127)
    values = _e2m1_to_bf16(words, scales.to(tl.int32), ROWS, WORDS, CONVERT, PIN)
    tl.store(out_ptr + r[:, None] * (8 * WORDS) + tl.arange(0, 8 * WORDS)[None, :], values, mask=ok)


@triton.jit
def _load_rows(base, cols, ok, other, MASKED: tl.constexpr):
    if MASKED:
        return tl.load(base + cols[None, :], mask=ok, other=other)
    return tl.load(base + cols[None, :])


@triton.jit
def _attention_tile(q_ops, kv_ptr, kv_words_ptr, scale_ptr, tile_start, hi, kv_row_bytes, scale_row_stride,
                    qk_scale_log2, m_i, l_i, acc, BLOCK_N: tl.constexpr, SCORES: tl.constexpr,
                    CONVERT: tl.constexpr, PIN: tl.constexpr, MASKED: tl.constexpr, NOPE: tl.constexpr):
    """One tile of online softmax: scores (16, BLOCK_N), m_i / l_i (16,) running max and sum, acc the values' running
    sum ((NOPE, 16) transposed for SCALED, (16, NOPE) for BF16_SCORES). MASKED: rows past hi read 0 and score -inf."""
    rows = tile_start + tl.arange(0, BLOCK_N)
    ok = (rows < hi)[:, None]
    kv_rows = kv_ptr + rows.to(tl.int64)[:, None] * kv_row_bytes
    word_rows = kv_words_ptr + rows[:, None] * (kv_row_bytes // 4)
    scale_rows = scale_ptr + rows.to(tl.int64)[:, None] * scale_row_stride
    words = _load_rows(word_rows, tl.arange(0, NOPE // 8), ok, 0, MASKED)
    scales = _load_rows(scale_rows, tl.arange(0, NOPE // 32), ok, 127, MASKED).to(tl.int32)
    if SCORES == SCALED:
        q8, qs, q8_rope, qs_rope = q_ops
        codes = _load_rows(kv_rows, tl.arange(0, NOPE // 2), ok, 0, MASKED)
        rope_bytes = tl.arange(0, SCALED_K // 2)
        rope_blocks = tl.arange(0, SCALED_K // 32)
        rope = tl.load(kv_rows + NOPE // 2 + rope_bytes[None, :], mask=ok & (rope_bytes < ROPE_DIMS // 2)[None, :],
                       other=0)
        rope_scales = tl.load(scale_rows + NOPE // 32 + rope_blocks[None, :],
                              mask=ok & (rope_blocks < ROPE_DIMS // 32)[None, :], other=127)
        scores = tl.dot_scaled(q8, qs, "e4m3", tl.trans(codes), scales.to(tl.uint8), "e2m1")
        scores = tl.dot_scaled(q8_rope, qs_rope, "e4m3", tl.trans(rope), rope_scales, "e2m1", scores)
    else:
        q_nope, q_rope = q_ops
        rope_words = _load_rows(word_rows + NOPE // 8, tl.arange(0, ROPE_DIMS // 8), ok, 0, MASKED)
        rope_scales = _load_rows(scale_rows + NOPE // 32, tl.arange(0, ROPE_DIMS // 32), ok, 127, MASKED)
        k = _e2m1_to_bf16(words, scales, BLOCK_N, NOPE // 8, CONVERT, PIN)
        k_rope = _e2m1_to_bf16(rope_words, rope_scales.to(tl.int32), BLOCK_N, ROPE_DIMS // 8, CONVERT, PIN)
        scores = tl.dot(q_rope, tl.trans(k_rope), tl.dot(q_nope, tl.trans(k)))
    if MASKED:
        scores = tl.where((rows < hi)[None, :], scores, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    alpha = tl.exp2((m_i - m_new) * qk_scale_log2)
    p = tl.exp2(scores * qk_scale_log2 - (m_new * qk_scale_log2)[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if SCORES == SCALED:
        v = _e2m1_to_bf16(words, scales, BLOCK_N, NOPE // 8, CONVERT, PIN)
        acc = tl.dot(tl.trans(v), tl.trans(p.to(tl.bfloat16)), acc * alpha[None, :])
    else:
        acc = tl.dot(p.to(tl.bfloat16), k, acc * alpha[:, None])
    return m_new, l_i, acc


@triton.jit
def _quantized_q(qb_ptr, q8_ptr, qs_ptr, seq, split, NOPE: tl.constexpr):
    """SCALED: the bf16 Q rows of `seq` -> (e4m3 nope (16, NOPE), its scales (16, NOPE / 32), e4m3 rope padded to 128
    with zeros, its scales (16, 4)) by _e4m3_blocks; split 0 writes them to q8 (batch, 16, NOPE + 32) / qs (batch, 16,
    NOPE / 32 + 1)."""
    heads = tl.arange(0, HEADS)[:, None]
    q_rows = qb_ptr + seq * (HEADS * (NOPE + ROPE_DIMS)) + heads * (NOPE + ROPE_DIMS)
    rope_dims = tl.arange(0, SCALED_K)[None, :]
    q_nope = tl.load(q_rows + tl.arange(0, NOPE)[None, :]).to(tl.float32)
    q_rope = tl.load(q_rows + NOPE + rope_dims, mask=rope_dims < ROPE_DIMS, other=0.0).to(tl.float32)
    q8, qs = _e4m3_blocks(q_nope, HEADS, NOPE // 32)
    q8_rope, qs_rope = _e4m3_blocks(q_rope, HEADS, SCALED_K // 32)
    if split == 0:
        q8_rows = q8_ptr + seq * (HEADS * (NOPE + ROPE_DIMS)) + heads * (NOPE + ROPE_DIMS)
        qs_rows = qs_ptr + seq * (HEADS * (NOPE // 32 + 1)) + heads * (NOPE // 32 + 1)
        rope_blocks = tl.arange(0, SCALED_K // 32)[None, :]
        tl.store(q8_rows + tl.arange(0, NOPE)[None, :], q8.to(tl.uint8, bitcast=True))
        tl.store(q8_rows + NOPE + rope_dims, q8_rope.to(tl.uint8, bitcast=True), mask=rope_dims < ROPE_DIMS)
        tl.store(qs_rows + tl.arange(0, NOPE // 32)[None, :], qs)
        tl.store(qs_rows + NOPE // 32 + rope_blocks, qs_rope, mask=rope_blocks < ROPE_DIMS // 32)
    return q8, qs, q8_rope, qs_rope


@triton.jit
def _acc_offsets(SCORES: tl.constexpr, NOPE: tl.constexpr):
    """Element offsets of a (16, NOPE) head x dim block in the accumulator's layout."""
    if SCORES == SCALED:
        offs = tl.arange(0, HEADS)[None, :] * NOPE + tl.arange(0, NOPE)[:, None]
    else:
        offs = tl.arange(0, HEADS)[:, None] * NOPE + tl.arange(0, NOPE)[None, :]
    return offs


@triton.jit(do_not_specialize=["total_kv", "num_splits"])
def split_attention_kernel(qb_ptr, q8_ptr, qs_ptr, kv_ptr, kv_words_ptr, scale_ptr, kv_indptr_ptr, part_acc_ptr,
                           part_ml_ptr, count_ptr, out_ptr, total_kv, num_splits, kv_row_bytes, scale_row_stride,
                           qk_scale_log2, BLOCK_N: tl.constexpr, SCORES: tl.constexpr, CONVERT: tl.constexpr,
                           MERGE: tl.constexpr, PIN: tl.constexpr = False, PEEL: tl.constexpr = False,
                           NOPE: tl.constexpr = 128, WAVE_WAITS: tl.constexpr = True):
    """Program (s, b) of grid (num_splits, batch): split s of sequence b's KV rows [kv_indptr[b], kv_indptr[b + 1]),
    in whole BLOCK_N tiles per split (_split_rows), unmasked full tiles then a masked tail (PEEL: the first tile
    masked before them).

    qb_ptr       (batch, 16, NOPE + 32) bf16 Q (NOPE nope dims, 32 rope dims); SCALED quantizes it (_quantized_q) and
                 split 0 writes q8_ptr (batch, 16, NOPE + 32) e4m3 bytes, qs_ptr (batch, 16, NOPE / 32 + 1) e8m0
    kv_ptr       (total_kv, kv_row_bytes) bytes: NOPE + 32 e2m1 codes in pairs; kv_words_ptr the same as int32
    scale_ptr    (total_kv, scale_row_stride) e8m0: byte j scales dims 32j..32j+31 (NOPE / 32 + 1 per row)
    kv_indptr    (batch + 1,) int32; an invalid range (start < 0, start > end, end > total_kv) reads no row and
                 its partials' m is NaN (FUSED: its output NaN)
    part_acc     (batch, num_splits, 16, NOPE) float32: sum over the split's rows of p v (p = 2^((s - m) qk_scale_log2)
                 rounded to bf16; v = the row's nope dims); part_ml (batch, num_splits, 2, 16): m (the split's largest
                 raw score, -inf if empty), l (sum of p)
    count_ptr    (batch,) int32 from 0 (FUSED): the program drawing ticket num_splits - 1 merges the sequence's splits
                 into out (batch, 16, NOPE) float32 = sum p v / sum p over the whole sequence (0 when empty)"""
    seq, range_ok, lo, full_end, hi = _split_rows(kv_indptr_ptr, total_kv, num_splits, BLOCK_N)
    heads = tl.arange(0, HEADS)
    if SCORES == SCALED:
        q_ops = _quantized_q(qb_ptr, q8_ptr, qs_ptr, seq, tl.program_id(0), NOPE)
        acc = tl.zeros([NOPE, HEADS], tl.float32)
    else:
        q_rows = qb_ptr + seq * (HEADS * (NOPE + ROPE_DIMS)) + heads[:, None] * (NOPE + ROPE_DIMS)
        q_ops = (tl.load(q_rows + tl.arange(0, NOPE)[None, :]),
                 tl.load(q_rows + NOPE + tl.arange(0, ROPE_DIMS)[None, :]))
        acc = tl.zeros([HEADS, NOPE], tl.float32)
    m_i = tl.full([HEADS], float("-inf"), tl.float32)
    l_i = tl.zeros([HEADS], tl.float32)
    first = lo
    if PEEL:  # the first tile on its own, masked (it may be the split's only tile), then the loop from the second
        if lo < hi:
            m_i, l_i, acc = _attention_tile(q_ops, kv_ptr, kv_words_ptr, scale_ptr, lo, hi, kv_row_bytes,
                                            scale_row_stride, qk_scale_log2, m_i, l_i, acc, BLOCK_N, SCORES, CONVERT,
                                            PIN, True, NOPE)
        first = lo + BLOCK_N
    for tile_start in range(first, full_end, BLOCK_N):
        m_i, l_i, acc = _attention_tile(q_ops, kv_ptr, kv_words_ptr, scale_ptr, tile_start, hi, kv_row_bytes,
                                        scale_row_stride, qk_scale_log2, m_i, l_i, acc, BLOCK_N, SCORES, CONVERT, PIN,
                                        False, NOPE)
    tail = tl.maximum(full_end, first)
    if tail < hi:
        m_i, l_i, acc = _attention_tile(q_ops, kv_ptr, kv_words_ptr, scale_ptr, tail, hi, kv_row_bytes,
                                        scale_row_stride, qk_scale_log2, m_i, l_i, acc, BLOCK_N, SCORES, CONVERT, PIN,
                                        True, NOPE)
    part = seq * num_splits + tl.program_id(0)
    tl.store(part_acc_ptr + part * (HEADS * NOPE) + _acc_offsets(SCORES, NOPE), acc)
    tl.store(part_ml_ptr + part * (2 * HEADS) + heads, tl.where(range_ok, m_i, float("nan")))
    tl.store(part_ml_ptr + part * (2 * HEADS) + HEADS + heads, l_i)
    if MERGE == FUSED:
        if WAVE_WAITS:  # every wave's stores done before the barrier: the atomic's release covers its wave only
            tl.inline_asm_elementwise("s_waitcnt vmcnt(0) ; $0", "=v", [], dtype=tl.int32, is_pure=False, pack=1)
        tl.debug_barrier()
        if tl.atomic_add(count_ptr + seq, 1, sem="acq_rel", scope="gpu") == num_splits - 1:
            _merge_sequence(out_ptr, part_acc_ptr, part_ml_ptr, seq, num_splits, qk_scale_log2, NOPE)


@triton.jit
def _merge_sequence(out_ptr, part_acc_ptr, part_ml_ptr, seq, num_splits, qk_scale_log2, V: tl.constexpr):
    """out[seq] (16, V) float32 from seq's partials (part_acc (batch, num_splits, 16, V), part_ml (batch, num_splits,
    2, 16)), MERGE_HEADS heads of every split a step, read past the L1 (.cg: they were written by other programs)."""
    for head0 in tl.static_range(0, HEADS, MERGE_HEADS):
        heads = head0 + tl.arange(0, MERGE_HEADS)
        dims = tl.arange(0, V)
        m_run = tl.full([MERGE_HEADS], float("-inf"), tl.float32)
        l_run = tl.zeros([MERGE_HEADS], tl.float32)
        acc_run = tl.zeros([MERGE_HEADS, V], tl.float32)
        invalid = tl.zeros([MERGE_HEADS], tl.int32)
        for split in range(0, num_splits):
            row = part_ml_ptr + (seq * num_splits + split) * (2 * HEADS) + heads[None, :]
            m = tl.load(row, cache_modifier=".cg")
            l = tl.load(row + HEADS, cache_modifier=".cg")
            part_acc = tl.load(part_acc_ptr + ((seq * num_splits + split) * HEADS + heads[None, :, None]) * V
                               + dims[None, None, :], cache_modifier=".cg")
            m_run, l_run, acc_run, invalid = _merge_step(m_run, l_run, acc_run, invalid, m, l, part_acc,
                                                         qk_scale_log2)
        norm = tl.where(invalid > 0, float("nan"), tl.where(l_run > 0, 1.0 / l_run, 0.0))
        tl.store(out_ptr + (seq * HEADS + heads[:, None]) * V + dims[None, :], acc_run * norm[:, None])


@triton.jit(do_not_specialize=["num_splits"])
def merge_sequence_kernel(out_ptr, part_acc_ptr, part_ml_ptr, num_splits, qk_scale_log2, V: tl.constexpr):
    """Program b: out[b] (16, V) float32 by _merge_sequence (split_attention_kernel's FUSED merge, alone)."""
    _merge_sequence(out_ptr, part_acc_ptr, part_ml_ptr, tl.program_id(0), num_splits, qk_scale_log2, V)


@triton.jit
def _merge_step(m_run, l_run, acc_run, invalid, m, l, acc, qk_scale_log2):
    """Splits' m, l (S, ...) and acc (S, ..., D) merged into the running (m_run, l_run (...), acc_run (..., D),
    invalid): a split weighs 2^((m_s - M) c) against the largest m, M; a NaN m marks its heads invalid; -inf
    (empty) weighs 0."""
    invalid = tl.maximum(invalid, tl.max((m != m).to(tl.int32), axis=0))
    m = tl.where(m != m, float("-inf"), m)
    m_new = tl.maximum(m_run, tl.max(m, axis=0))
    m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)
    run_weight = tl.exp2((m_run - m_ref) * qk_scale_log2)
    weight = tl.exp2((m - m_ref) * qk_scale_log2)
    acc_run = tl.expand_dims(run_weight, -1) * acc_run + tl.sum(tl.expand_dims(weight, -1) * acc, axis=0)
    l_run = run_weight * l_run + tl.sum(weight * l, axis=0)
    return m_new, l_run, acc_run, invalid


@triton.jit(do_not_specialize=["num_splits"])
def merge_partials_kernel(out_ptr, part_acc_ptr, part_ml_ptr, num_splits, qk_scale_log2, V: tl.constexpr,
                          CHUNK: tl.constexpr, DIMS: tl.constexpr):
    """Program (b, h, d) of grid (batch, 16, V / DIMS): out[b, h, d DIMS : + DIMS] (bf16) = sum_s 2^((m_s - M) c) acc_s
    / sum_s 2^((m_s - M) c) l_s over the splits s of sequence b (M their max, c = qk_scale_log2), CHUNK splits a
    step (_merge_step); NaN when a split's m is NaN (an invalid split), 0 when every split is empty. part_acc (batch,
    num_splits, 16, V) float32, part_ml (batch, num_splits, 2, 16) float32 (m then l)."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    dims = tl.program_id(2) * DIMS + tl.arange(0, DIMS)
    m_run = float("-inf")
    l_run = 0.0
    acc_run = tl.zeros([DIMS], tl.float32)
    invalid = 0
    for first in range(0, num_splits, CHUNK):
        splits = first + tl.arange(0, CHUNK)
        real = splits < num_splits
        part = seq * num_splits + splits
        m = tl.load(part_ml_ptr + part * (2 * HEADS) + head, mask=real, other=float("-inf"))
        l = tl.load(part_ml_ptr + part * (2 * HEADS) + HEADS + head, mask=real, other=0.0)
        acc = tl.load(part_acc_ptr + (part[:, None] * HEADS + head) * V + dims[None, :], mask=real[:, None], other=0.0)
        m_run, l_run, acc_run, invalid = _merge_step(m_run, l_run, acc_run, invalid, m, l, acc, qk_scale_log2)
    out = tl.where(invalid > 0, float("nan"), tl.where(l_run > 0, acc_run / l_run, 0.0))
    tl.store(out_ptr + (seq * HEADS + head) * V + dims, out.to(tl.bfloat16))
