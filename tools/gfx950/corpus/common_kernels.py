"""Standard-Triton kernels of the corpus in the forms most Triton code takes, beyond our own
kernels' (issue 42): 16-bit and fp8 conversions, tl.math, scans, int64, every atomic, the
dot shapes of each operand type, and a tiled matmul, a layer norm and a split-KV decode
written as Triton's tutorials and public kernels write them.

Self-contained (imports triton only), importable under the runner's Triton 3.6.0 and under
Triton 3.9.0 (the gfx950 builds) and in Triton's interpreter. Each kernel's docstring
gives its pointers' shapes and what one program computes; common_cases.py holds the numpy
answers.
"""
import triton
import triton.language as tl
from triton.language.extra import libdevice

# rows of half_kernel's outputs, in order (common_cases.py computes the same lists in numpy)
F16_OPS = ("from_f32", "from_f32_rtz", "from_bf16", "fma", "add", "mul", "max", "min", "where_lt", "pack_low",
           "pack_high")
BF16_OPS = ("from_f32_rtz", "from_f16", "add", "mul", "max", "pack_low", "pack_high")
F32_OPS = ("from_f16", "from_bf16", "f16_times_bf16")
NUM_F16_OPS = tl.constexpr(len(F16_OPS))
NUM_BF16_OPS = tl.constexpr(len(BF16_OPS))
NUM_F32_OPS = tl.constexpr(len(F32_OPS))


# --- 16-bit floats -------------------------------------------------------------------------------------
@triton.jit
def half_kernel(x_ptr, y_ptr, h_ptr, g_ptr, b_ptr, c_ptr, f16_ptr, bf16_ptr, f32_ptr, n, BLOCK: tl.constexpr):
    """x, y (n,) float32, h, g (n,) fp16, b, c (n,) bf16 -> f16 (NUM_F16_OPS, n) fp16 rows F16_OPS, bf16
    (NUM_BF16_OPS, n) rows BF16_OPS, f32 (NUM_F32_OPS, n) rows F32_OPS; elements [pid BLOCK, + BLOCK), masked
    past n. The round-toward-zero rows convert y (within fp16's range), the others x. pack_low / pack_high: (x, y)
    converted and joined into pairs (a (BLOCK, 2) tile), its two columns stored apart. bf16 add / mul / max: through fp32, as LLVM computes bf16 arithmetic on gfx950 (and as Triton's
    interpreter, which stores bf16 as raw bits, cannot)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    h = tl.load(h_ptr + offs, mask=ok, other=1.0)
    g = tl.load(g_ptr + offs, mask=ok, other=1.0)
    b = tl.load(b_ptr + offs, mask=ok, other=1.0)
    c = tl.load(c_ptr + offs, mask=ok, other=1.0)
    f16_pairs = tl.join(x.to(tl.float16), y.to(tl.float16))
    f16_low, f16_high = tl.split(f16_pairs * 2.0)
    f16_results = (
        x.to(tl.float16),
        y.to(tl.float16, fp_downcast_rounding="rtz"),
        b.to(tl.float16),
        tl.fma(h, g, h),
        h + g,
        h * g,
        tl.maximum(h, g),
        tl.minimum(h, g),
        tl.where(h < g, h, -g),
        f16_low,
        f16_high,
    )
    for k in tl.static_range(NUM_F16_OPS):
        tl.store(f16_ptr + k * n + offs, f16_results[k], mask=ok)
    bf16_pairs = tl.join(x.to(tl.bfloat16), y.to(tl.bfloat16))
    bf16_low, bf16_high = tl.split(bf16_pairs)
    bf16_results = (
        y.to(tl.bfloat16, fp_downcast_rounding="rtz"),
        h.to(tl.bfloat16),
        (b.to(tl.float32) + c.to(tl.float32)).to(tl.bfloat16),
        (b.to(tl.float32) * c.to(tl.float32)).to(tl.bfloat16),
        tl.maximum(b.to(tl.float32), c.to(tl.float32)).to(tl.bfloat16),
        bf16_low,
        bf16_high,
    )
    for k in tl.static_range(NUM_BF16_OPS):
        tl.store(bf16_ptr + k * n + offs, bf16_results[k], mask=ok)
    f32_results = (h.to(tl.float32), b.to(tl.float32), h.to(tl.float32) * b.to(tl.float32))
    for k in tl.static_range(NUM_F32_OPS):
        tl.store(f32_ptr + k * n + offs, f32_results[k], mask=ok)


# --- fp8 -------------------------------------------------------------------------------------------------
FP8_DOWN = ("e4m3_from_f32", "e5m2_from_f32", "e4m3_from_f16", "e5m2_from_f16", "e4m3_from_bf16", "e5m2_from_bf16")
FP8_UP = ("f32_from_e4m3", "f32_from_e5m2")
NUM_FP8_DOWN = tl.constexpr(len(FP8_DOWN))


@triton.jit
def fp8_kernel(x_ptr, h_ptr, b_ptr, e4_ptr, e5_ptr, down_ptr, f32_ptr, f16_ptr, bf16_ptr, n, BLOCK: tl.constexpr):
    """x (n,) float32, h (n,) fp16, b (n,) bf16 -> down (NUM_FP8_DOWN, n) bytes: rows FP8_DOWN (x.to(float8e4nv)
    ...: round to nearest even); e4, e5 (n,) bytes of e4m3fn / e5m2 codes -> f32 (2, n), f16 (2, n), bf16 (2, n):
    row 0 the e4m3 values, row 1 the e5m2 values (exact)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    h = tl.load(h_ptr + offs, mask=ok, other=1.0)
    b = tl.load(b_ptr + offs, mask=ok, other=1.0)
    down = (x.to(tl.float8e4nv), x.to(tl.float8e5), h.to(tl.float8e4nv), h.to(tl.float8e5), b.to(tl.float8e4nv),
            b.to(tl.float8e5))
    for k in tl.static_range(NUM_FP8_DOWN):
        tl.store(down_ptr + k * n + offs, down[k].to(tl.uint8, bitcast=True), mask=ok)
    e4 = tl.load(e4_ptr + offs, mask=ok, other=0).to(tl.float8e4nv, bitcast=True)
    e5 = tl.load(e5_ptr + offs, mask=ok, other=0).to(tl.float8e5, bitcast=True)
    tl.store(f32_ptr + offs, e4.to(tl.float32), mask=ok)
    tl.store(f32_ptr + n + offs, e5.to(tl.float32), mask=ok)
    tl.store(f16_ptr + offs, e4.to(tl.float16), mask=ok)
    tl.store(f16_ptr + n + offs, e5.to(tl.float16), mask=ok)
    tl.store(bf16_ptr + offs, e4.to(tl.bfloat16), mask=ok)
    tl.store(bf16_ptr + n + offs, e5.to(tl.bfloat16), mask=ok)


# --- tl.math -----------------------------------------------------------------------------------------------
MATH_OPS = ("exp", "log", "sqrt", "rsqrt", "erf", "exp2", "log2", "sqrt_rn", "div_rn", "abs", "floor",
            "ceil", "sin", "cos")
NUM_MATH_OPS = tl.constexpr(len(MATH_OPS))


@triton.jit
def math_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """x (n,) float32 (> 0 for log / sqrt / rsqrt), y (n,) float32 (any sign) -> out (NUM_MATH_OPS, n) float32: rows
    MATH_OPS of tl.math on x (exp, erf, exp2, abs, floor, ceil, sin, cos on y; div_rn(y, x))."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    x = tl.load(x_ptr + offs, mask=ok, other=1.0)
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    results = (
        tl.exp(y),
        tl.log(x),
        tl.sqrt(x),
        tl.rsqrt(x),
        tl.math.erf(y),
        tl.exp2(y),
        tl.log2(x),
        tl.sqrt_rn(x),
        tl.div_rn(y, x),
        tl.abs(y),
        tl.floor(y),
        tl.ceil(y),
        tl.sin(y),
        tl.cos(y),
    )
    for k in tl.static_range(NUM_MATH_OPS):
        tl.store(out_ptr + k * n + offs, results[k], mask=ok)


@triton.jit
def ldexp_kernel(y_ptr, e_ptr, a_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """y (n,) float32, e (n,) int32, a (n,) int64 -> out (2, n) float32: libdevice.ldexp(y, e) (ocml's, v_ldexp_f32),
    a.to(float32) (rounded to nearest even)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    y = tl.load(y_ptr + offs, mask=ok, other=1.0)
    e = tl.load(e_ptr + offs, mask=ok, other=0)
    a = tl.load(a_ptr + offs, mask=ok, other=0)
    tl.store(out_ptr + offs, libdevice.ldexp(y, e), mask=ok)
    tl.store(out_ptr + n + offs, a.to(tl.float32), mask=ok)


# --- scans ----------------------------------------------------------------------------------------------------
@triton.jit
def cumsum_kernel(x_ptr, i_ptr, out_ptr, out_i_ptr, rows, cols, ROWS: tl.constexpr, COLS: tl.constexpr):
    """x (rows, cols) float32, i (rows, cols) int32 -> out (rows, cols) = tl.cumsum(x, axis 1), out_i (2, rows, cols):
    tl.cumsum(i, axis 1) (wrapping), tl.cumsum(i, axis 0); program p takes rows [p ROWS, + ROWS) (axis 0 within the
    program's rows)."""
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, COLS)
    ok = (r[:, None] < rows) & (c[None, :] < cols)
    offs = r[:, None] * cols + c[None, :]
    x = tl.load(x_ptr + offs, mask=ok, other=0.0)
    i = tl.load(i_ptr + offs, mask=ok, other=0)
    tl.store(out_ptr + offs, tl.cumsum(x, axis=1), mask=ok)
    tl.store(out_i_ptr + offs, tl.cumsum(i, axis=1), mask=ok)
    tl.store(out_i_ptr + rows * cols + offs, tl.cumsum(i, axis=0), mask=ok)


# --- int64 --------------------------------------------------------------------------------------------------------
INT64_OPS = ("add", "sub", "mul", "div", "rem", "shl", "ashr", "lshr", "and_or_xor", "max", "min", "lt_select", "neg",
             "from_i32", "from_f64", "abs")
NUM_INT64_OPS = tl.constexpr(len(INT64_OPS))


@triton.jit
def int64_kernel(a_ptr, b_ptr, s_ptr, i_ptr, f_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """a, b (n,) int64 (b != 0, no INT64_MIN / -1), s (n,) int32 shift counts in [0, 63], i (n,) int32, f (n,)
    float64 (|f| < 2^62) -> out (NUM_INT64_OPS, n) int64: rows INT64_OPS (C semantics: / and % truncate)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    a = tl.load(a_ptr + offs, mask=ok, other=1)
    b = tl.load(b_ptr + offs, mask=ok, other=1)
    s = tl.load(s_ptr + offs, mask=ok, other=0).to(tl.int64)
    i = tl.load(i_ptr + offs, mask=ok, other=0)
    f = tl.load(f_ptr + offs, mask=ok, other=0.0)
    results = (
        a + b,
        a - b,
        a * b,
        a // b,
        a % b,
        a << s,
        a >> s,
        (a.to(tl.uint64, bitcast=True) >> s.to(tl.uint64)).to(tl.int64, bitcast=True),
        ((a & b) | (a ^ 0x0F0F0F0F0F0F0F0F)) ^ b,
        tl.maximum(a, b),
        tl.minimum(a, b),
        tl.where(a < b, a, b - 7),
        -a,
        i.to(tl.int64),
        f.to(tl.int64),
        tl.abs(a),
    )
    for k in tl.static_range(NUM_INT64_OPS):
        tl.store(out_ptr + k * n + offs, results[k], mask=ok)


@triton.jit
def int8_dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """One program: out (M, N) int32 = a (M, K) int8 @ b (K, N) int8 + c (M, N) int32 (tl.dot, out_dtype int32)."""
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    c = tl.load(c_ptr + m[:, None] * N + n[None, :])
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot(a, b, c, out_dtype=tl.int32))


@triton.jit
def upcast_dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """One program: out (M, N) float32 = a (M, K) bf16 @ b (K, N) fp8 (row-major: N contiguous) converted to bf16
    first (a weight-only-quantized product: the fp8 tile read from LDS and converted)."""
    m = tl.arange(0, M)
    n = tl.arange(0, N)
    k = tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot(a, b.to(tl.bfloat16)))


@triton.jit
def wide_reduce_kernel(a_ptr, f_ptr, out_ptr, out_f_ptr, n, BLOCK: tl.constexpr):
    """One program: a (n,) int64, f (n,) float64 -> out (3,) int64 = sum (wrapping), max, min of a; out_f (2,)
    float64 = max, min of f (n <= BLOCK; 64-bit values through LDS between warps)."""
    offs = tl.arange(0, BLOCK)
    ok = offs < n
    a = tl.load(a_ptr + offs, mask=ok, other=0)
    f = tl.load(f_ptr + offs, mask=ok, other=0.0)
    tl.store(out_ptr, tl.sum(a, axis=0))
    tl.store(out_ptr + 1, tl.max(tl.where(ok, a, -(2 ** 63)), axis=0))
    tl.store(out_ptr + 2, tl.min(tl.where(ok, a, 2 ** 63 - 1), axis=0))
    tl.store(out_f_ptr, tl.max(tl.where(ok, f, float("-inf")), axis=0))
    tl.store(out_f_ptr + 1, tl.min(tl.where(ok, f, float("inf")), axis=0))


# --- matrix products in the usual style --------------------------------------------------------------------------
@triton.jit
def _grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Program pid's (row tile, column tile) in the grouped order that keeps GROUP_M row tiles' B columns in the L2
    (the order of Triton's matmul tutorial)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows_here = min(tiles_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % rows_here, (pid % per_group) // rows_here


@triton.jit
def tiled_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                        LEAKY: tl.constexpr):
    """c (M, N) = a (M, K) @ b (K, N) in fp32, stored in c's type (fp16 / bf16 / fp32); LEAKY: leaky ReLU (0.01) on the
    fp32 sum first. One program per (BLOCK_M, BLOCK_N) tile in grouped order, K in BLOCK_K steps with masked edges."""
    tile_m, tile_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=ks[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if LEAKY:
        acc = tl.where(acc >= 0, acc, 0.01 * acc)
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N, eps, BLOCK: tl.constexpr):
    """Row r of x (rows, N) with row stride `stride`: y = (x - mean) rstd w + b (y in y's type), mean[r], rstd[r] =
    1 / sqrt(var + eps) (population variance), in BLOCK-column passes as Triton's layer-norm tutorial computes them."""
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    partial = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        partial += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(partial, axis=0) / N
    squares = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        centered = tl.where(cols < N, x - mean, 0.0)
        squares += centered * centered
    rstd = 1 / tl.sqrt(tl.sum(squares, axis=0) / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        ok = cols < N
        w = tl.load(w_ptr + cols, mask=ok)
        b = tl.load(b_ptr + cols, mask=ok)
        x = tl.load(x_row + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(y_row + cols, ((x - mean) * rstd * w + b).to(y_ptr.dtype.element_ty), mask=ok)


# --- atomics ---------------------------------------------------------------------------------------------------------
ATOMIC_SLOTS = tl.constexpr(8)


@triton.jit
def atomics_kernel(x_ptr, i_ptr, count_ptr, fsum_ptr, imax_ptr, umax_ptr, fmax_ptr, bits_ptr, cas_ptr, old_ptr, n,
                   BLOCK: tl.constexpr):
    """Element e of x (n,) float32 and i (n,) int32 (masked past n) goes to slot e % ATOMIC_SLOTS of every target:
    count += 1 (relaxed), fsum += x (acq_rel, gpu), imax[0] max / imax[1] min of i (acquire / release, cta), umax[0]
    max / umax[1] min of i as uint32 (sys), fmax[0] max / fmax[1] min of x, bits[0] &= i / bits[1] |= i / bits[2] ^= i,
    cas: e where it still holds -1. old (2, n) int32: the old values the cas and count's add (a ticket) returned.
    (tl.atomic_xchg: exchange_kernel, which Triton 3.6.0 cannot build.)"""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    slot = offs % ATOMIC_SLOTS
    x = tl.load(x_ptr + offs, mask=ok, other=0.0)
    i = tl.load(i_ptr + offs, mask=ok, other=0)
    ticket = tl.atomic_add(count_ptr + slot, 1, mask=ok, sem="relaxed")
    tl.atomic_add(fsum_ptr + slot, x, mask=ok, sem="acq_rel", scope="gpu")
    tl.atomic_max(imax_ptr + slot, i, mask=ok, sem="acquire", scope="cta")
    tl.atomic_min(imax_ptr + ATOMIC_SLOTS + slot, i, mask=ok, sem="release", scope="cta")
    iu = i.to(tl.uint32, bitcast=True)
    umax = umax_ptr.to(tl.pointer_type(tl.uint32))   # the target's type decides: unsigned max / min
    tl.atomic_max(umax + slot, iu, mask=ok, scope="sys")
    tl.atomic_min(umax + ATOMIC_SLOTS + slot, iu, mask=ok, scope="sys")
    tl.atomic_max(fmax_ptr + slot, x, mask=ok)
    tl.atomic_min(fmax_ptr + ATOMIC_SLOTS + slot, x, mask=ok)
    tl.atomic_and(bits_ptr + slot, i, mask=ok)
    tl.atomic_or(bits_ptr + ATOMIC_SLOTS + slot, i, mask=ok)
    tl.atomic_xor(bits_ptr + 2 * ATOMIC_SLOTS + slot, i, mask=ok)
    compared = tl.atomic_cas(cas_ptr + slot, tl.where(ok, -1, -2), offs)   # a masked lane compares with -2: no swap
    tl.store(old_ptr + offs, compared, mask=ok)
    tl.store(old_ptr + n + offs, ticket, mask=ok)


@triton.jit
def wide_atomics_kernel(a_ptr, f_ptr, h_ptr, sum_ptr, max_ptr, bits_ptr, cas_ptr, fsum_ptr, hsum_ptr, old_ptr, n,
                        BLOCK: tl.constexpr):
    """The 64- and 16-bit atomics: element e of a (n,) int64, f (n,) float64, h (n,) fp16 goes to slot
    e % ATOMIC_SLOTS: sum += a, max[0] max / max[1] min of a, bits[0] &= a / bits[1] |= a / bits[2] ^= a, cas: e where
    it still holds -1 (int64), fsum += f (float64), hsum += h (fp16); old (n,) int64: what the cas returned."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    slot = offs % ATOMIC_SLOTS
    a = tl.load(a_ptr + offs, mask=ok, other=0)
    tl.atomic_add(sum_ptr + slot, a, mask=ok)
    tl.atomic_max(max_ptr + slot, a, mask=ok)
    tl.atomic_min(max_ptr + ATOMIC_SLOTS + slot, a, mask=ok)
    tl.atomic_and(bits_ptr + slot, a, mask=ok)
    tl.atomic_or(bits_ptr + ATOMIC_SLOTS + slot, a, mask=ok)
    tl.atomic_xor(bits_ptr + 2 * ATOMIC_SLOTS + slot, a, mask=ok)
    compared = tl.atomic_cas(cas_ptr + slot, tl.where(ok, -1, -2).to(tl.int64), offs.to(tl.int64))
    tl.store(old_ptr + offs, compared, mask=ok)
    tl.atomic_add(fsum_ptr + slot, tl.load(f_ptr + offs, mask=ok, other=0.0), mask=ok)
    tl.atomic_add(hsum_ptr + slot, tl.load(h_ptr + offs, mask=ok, other=0.0), mask=ok)


@triton.jit
def exchange_kernel(xchg_ptr, wide_ptr, float_ptr, old_ptr, n, BLOCK: tl.constexpr):
    """tl.atomic_xchg of element index e into slot e % ATOMIC_SLOTS of xchg (int32, acq_rel), wide (int64, relaxed)
    and float (float32: e + 0.5); old (3, n): the old values returned (as int64; the float's truncated)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    slot = offs % ATOMIC_SLOTS
    tl.store(old_ptr + offs, tl.atomic_xchg(xchg_ptr + slot, offs, mask=ok).to(tl.int64), mask=ok)
    tl.store(old_ptr + n + offs, tl.atomic_xchg(wide_ptr + slot, offs.to(tl.int64), mask=ok, sem="relaxed"), mask=ok)
    swapped = tl.atomic_xchg(float_ptr + slot, offs.to(tl.float32) + 0.5, mask=ok)
    tl.store(old_ptr + 2 * n + offs, swapped.to(tl.int64), mask=ok)


@triton.jit
def bf16_atomic_kernel(b_ptr, bsum_ptr, n, BLOCK: tl.constexpr):
    """Element e of b (n,) bf16 added to bsum[e % ATOMIC_SLOTS] (bf16) by tl.atomic_add."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    tl.atomic_add(bsum_ptr + offs % ATOMIC_SLOTS, tl.load(b_ptr + offs, mask=ok, other=0.0), mask=ok)


# --- the scaled conversions, every op_sel, by inline asm (Triton emits only some of them) -------------------------
def _op_sels(count):
    """The op_sel suffixes selecting byte / word 0 .. count - 1 of a 3-operand conversion's source."""
    return ("", " op_sel:[1,0,0]", " op_sel:[0,1,0]", " op_sel:[1,1,0]")[:count]


# $0 = convert($1: packed source word, $2: the scale's float); results 32 bits (UP32) or a 64-bit pair (UP64)
UP32_ASM = tuple(f"v_cvt_scalef32_pk_{out}_{fmt} $0, $1, $2{sel}" for out in ("f16", "bf16")
                 for fmt, count in (("fp8", 2), ("bf8", 2), ("fp4", 4)) for sel in _op_sels(count))
UP64_ASM = tuple(f"v_cvt_scalef32_pk_f32_{fmt} $0, $1, $2{sel}" for fmt, count in (("fp8", 2), ("bf8", 2), ("fp4", 4))
                 for sel in _op_sels(count))
# $0 = $1 (the bits kept) with the pair ($2, $3) of float32 converted into the selected word / byte, scale $4
DOWN_ASM = tuple(f"v_mov_b32 $0, $1\n\tv_cvt_scalef32_pk_{fmt}_f32 $0, $2, $3, $4 op_sel:[0,0,{sel}]"
                 for fmt, sels in (("fp8", ("0,0", "0,1")), ("bf8", ("0,0", "0,1")),
                                   ("fp4", ("0,0", "1,0", "0,1", "1,1"))) for sel in sels)
# $0 = $1 with the packed 16-bit pair $2 converted into the selected word / byte, scale $3
DOWN16_ASM = tuple(f"v_mov_b32 $0, $1\n\tv_cvt_scalef32_pk_{fmt}_{src} $0, $2, $3 {sel}"
                   for src in ("f16", "bf16")
                   for fmt, sels in (("fp8", ("op_sel:[0,0,0]", "op_sel:[0,0,1]")),
                                     ("bf8", ("op_sel:[0,0,0]", "op_sel:[0,0,1]")),
                                     ("fp4", ("op_sel:[0,0,0,0]", "op_sel:[0,0,1,0]", "op_sel:[0,0,0,1]",
                                              "op_sel:[0,0,1,1]")))
                   for sel in sels)
NUM_UP32, NUM_UP64 = tl.constexpr(len(UP32_ASM)), tl.constexpr(len(UP64_ASM))
NUM_DOWN, NUM_DOWN16 = tl.constexpr(len(DOWN_ASM)), tl.constexpr(len(DOWN16_ASM))
UP32_ASM, UP64_ASM, DOWN_ASM, DOWN16_ASM = (tl.constexpr(t) for t in (UP32_ASM, UP64_ASM, DOWN_ASM, DOWN16_ASM))


@triton.jit
def scaled_convert_kernel(w_ptr, s_ptr, keep_ptr, a_ptr, b_ptr, hf_ptr, hb_ptr, up32_ptr, up64_ptr, down_ptr,
                          down16_ptr, n, BLOCK: tl.constexpr):
    """Every v_cvt_scalef32_pk_* conversion the emulator implements, with every op_sel, on n elements: w (n,) int32
    packed fp8 / fp4 codes, s (n,) float32 scales (powers of two), keep (n,) int32 the destination bits a narrowing
    conversion keeps, a, b (n,) float32 a narrowing pair, hf / hb (n,) int32 packed f16 / bf16 pairs ->
    up32 (NUM_UP32, n) int32, up64 (NUM_UP64, n) int64, down (NUM_DOWN, n) int32, down16 (NUM_DOWN16, n) int32:
    row k the result of instruction k of UP32_ASM, UP64_ASM, DOWN_ASM, DOWN16_ASM."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    w = tl.load(w_ptr + offs, mask=ok, other=0)
    s = tl.load(s_ptr + offs, mask=ok, other=1.0)
    keep = tl.load(keep_ptr + offs, mask=ok, other=0)
    a = tl.load(a_ptr + offs, mask=ok, other=0.0)
    b = tl.load(b_ptr + offs, mask=ok, other=0.0)
    hf = tl.load(hf_ptr + offs, mask=ok, other=0)
    hb = tl.load(hb_ptr + offs, mask=ok, other=0)
    for k in tl.static_range(NUM_UP32):
        tl.store(up32_ptr + k * n + offs, tl.inline_asm_elementwise(UP32_ASM[k], "=v,v,v", [w, s], dtype=tl.int32,
                                                                    is_pure=True, pack=1), mask=ok)
    for k in tl.static_range(NUM_UP64):
        tl.store(up64_ptr + k * n + offs, tl.inline_asm_elementwise(UP64_ASM[k], "=v,v,v", [w, s], dtype=tl.int64,
                                                                    is_pure=True, pack=1), mask=ok)
    for k in tl.static_range(NUM_DOWN):
        tl.store(down_ptr + k * n + offs, tl.inline_asm_elementwise(DOWN_ASM[k], "=&v,v,v,v,v", [keep, a, b, s],
                                                                    dtype=tl.int32, is_pure=True, pack=1), mask=ok)
    for k in tl.static_range(NUM_DOWN16):
        h = hf if k < NUM_DOWN16 // 2 else hb
        tl.store(down16_ptr + k * n + offs, tl.inline_asm_elementwise(DOWN16_ASM[k], "=&v,v,v,v", [keep, h, s],
                                                                      dtype=tl.int32, is_pure=True, pack=1), mask=ok)


# --- a split-KV decode in two stages (the form public decode-attention kernels take) ---------------------------------
@triton.jit
def decode_stage1_kernel(q_ptr, k_ptr, v_ptr, kv_indptr, kv_indices, partial_ptr, sm_scale, q_heads, kv_stride,
                         NUM_SPLITS: tl.constexpr, GROUP: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                         DV: tl.constexpr):
    """Program (b, g, s): split s of sequence b for the GROUP query heads of KV head g. q (batch, q_heads, D) bf16;
    k (tokens, kv_heads, D), v (tokens, kv_heads, DV) bf16 paged by kv_indices[kv_indptr[b] : kv_indptr[b + 1]]
    (row stride kv_stride elements a token); partial (batch, q_heads, NUM_SPLITS, DV + 1) float32: the split's
    softmax(q k^T sm_scale) v over its tokens and, last, its log-sum-exp (nothing stored for an empty split)."""
    seq = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    heads = kv_head * GROUP + tl.arange(0, GROUP)
    start = tl.load(kv_indptr + seq)
    length = tl.load(kv_indptr + seq + 1) - start
    per_split = tl.cdiv(length, NUM_SPLITS)
    lo = split * per_split
    hi = tl.minimum(lo + per_split, length)
    d = tl.arange(0, D)
    dv = tl.arange(0, DV)
    q = tl.load(q_ptr + (seq * q_heads + heads[:, None]) * D + d[None, :])
    e_max = tl.full([GROUP], float("-inf"), tl.float32)
    e_sum = tl.zeros([GROUP], tl.float32)
    acc = tl.zeros([GROUP, DV], tl.float32)
    if lo < hi:
        for first in range(lo, hi, BLOCK_N):
            n = first + tl.arange(0, BLOCK_N)
            ok = n < hi
            loc = tl.load(kv_indices + start + n, mask=ok, other=0)
            k = tl.load(k_ptr + loc[None, :] * kv_stride + kv_head * D + d[:, None], mask=ok[None, :], other=0.0)
            qk = tl.dot(q, k) * sm_scale
            qk = tl.where(ok[None, :], qk, float("-inf"))
            n_max = tl.maximum(tl.max(qk, 1), e_max)
            rescale = tl.exp(e_max - n_max)
            p = tl.exp(qk - n_max[:, None])
            v = tl.load(v_ptr + loc[:, None] * kv_stride + kv_head * DV + dv[None, :], mask=ok[:, None], other=0.0)
            acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v)
            e_sum = e_sum * rescale + tl.sum(p, 1)
            e_max = n_max
        rows = partial_ptr + ((seq * q_heads + heads) * NUM_SPLITS + split) * (DV + 1)
        tl.store(rows[:, None] + dv[None, :], acc / e_sum[:, None])
        tl.store(rows + DV, e_max + tl.log(e_sum))


@triton.jit
def decode_stage2_kernel(partial_ptr, kv_indptr, out_ptr, q_heads, NUM_SPLITS: tl.constexpr, DV: tl.constexpr):
    """Program (b, h): out[b, h] (DV,) bf16 = the splits' partial outputs of decode_stage1_kernel weighted by
    exp(lse - max lse), over the splits that held tokens (0 for an empty sequence)."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    length = tl.load(kv_indptr + seq + 1) - tl.load(kv_indptr + seq)
    per_split = tl.cdiv(length, NUM_SPLITS)
    dv = tl.arange(0, DV)
    e_max = float("-inf")
    e_sum = 0.0
    acc = tl.zeros([DV], tl.float32)
    for split in range(NUM_SPLITS):
        if split * per_split < length:
            row = partial_ptr + ((seq * q_heads + head) * NUM_SPLITS + split) * (DV + 1)
            part = tl.load(row + dv)
            lse = tl.load(row + DV)
            n_max = tl.maximum(lse, e_max)
            old_scale = tl.exp(e_max - n_max)
            weight = tl.exp(lse - n_max)
            acc = acc * old_scale + weight * part
            e_sum = e_sum * old_scale + weight
            e_max = n_max
    out = tl.where(e_sum > 0, acc / e_sum, 0.0)
    tl.store(out_ptr + (seq * q_heads + head) * DV + dv, out.to(tl.bfloat16))
