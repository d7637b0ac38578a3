"""The corpus cases: inputs, the launch, and the answer from numpy (reference.py).

Each run(launch, rng) draws random inputs (never all zero; edge values where they matter),
launches as `kernel[grid](*args, **options)` would, and checks every output element. Rules
and tolerances, stated per case: integer and bit results exact; conversions exact bit
patterns under the stated rounding; fp32 arithmetic within 1-2 ulp of the float64 answer;
exp2 within 1e-6 relative; matrix products against float64 with rtol 1e-5 (fp32 accumulation
of exact products, in an order of the hardware's choosing).
"""
import numpy as np
import torch

from . import reference as ref
from . import gluon_kernels as gk
from . import triton_kernels as tk
from . import Case

GLUON = "a Gluon kernel: Gluon does not run in Triton's interpreter"

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def tensor(array):
    """A CPU torch tensor holding a copy of the numpy array."""
    return torch.from_numpy(np.ascontiguousarray(array).copy())


def bits_of(t, dtype=np.uint16):
    """A 16-bit torch tensor's bit patterns as numpy."""
    return t.view(torch.int16).numpy().view(dtype)


def triton_cdiv(a, b):
    """ceil(a / b) for integers, as triton.cdiv."""
    return -(-a // b)


def wrap32(values):
    """int64 numpy -> int32 with two's-complement wraparound."""
    return (np.asarray(values, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


# --- elementwise and bit operations -------------------------------------------------------------
def integer_ops_reference(a, b, c, n):
    """INT_OPS in numpy, int64 arithmetic wrapped to int32 (C semantics: / and % truncate toward zero,
    >> on int32 is arithmetic, on uint32 logical)."""
    a64, b64, c64 = (v.astype(np.int64) for v in (a, b, c))
    au, bu, cu = (v.view(np.uint32).astype(np.int64) for v in (a, b, c))

    def s16(v):
        return ((np.asarray(v, dtype=np.int64) + 2 ** 15) & 0xFFFF) - 2 ** 15

    def s24(v):
        return ((v.astype(np.int64) + 2 ** 23) & 0xFFFFFF) - 2 ** 23

    quotient = np.abs(a64) // np.abs(b64) * np.sign(a64) * np.sign(b64)
    rows = {
        "mul_add": a64 * b64 + 12345,
        "xor_ashr": a64 ^ (b64 >> 7),
        "lshr": au >> 5,
        "bfe_u": (a64 >> 3) & 0x3FF,
        "bfe_i": (wrap32(a64 << 20).astype(np.int64)) >> 26,
        "byte_perm": ((au & 0xFF) << 24) | (((au >> 8) & 0xFF) << 16) | (((bu >> 16) & 0xFF) << 8) | (bu >> 24),
        "max": np.maximum(a64, b64),
        "min": np.minimum(a64, b64),
        "med3": np.median(np.stack([a64, b64, c64]), axis=0).astype(np.int64),
        "div": quotient,
        "rem": a64 - quotient * b64,
        "bitsel": (a64 & b64) | (~a64 & c64),
        "xor3": a64 ^ b64 ^ c64,
        "and_xor": (a64 & b64) ^ c64,
        "int16_add": s16(s16(a64) + s16(b64)),
        "int16_shl": s16(s16(a64) << 3),
        "mad_u24": (a64 & 0xFFFF) * (b64 & 0xFFF) + c64,
        "mul_u24": (a64 & 0xFFFF) * (b64 & 0xFF),
        "mul_i24": s24(a64) * s24(b64),
        "add3": a64 + b64 + c64,
        "or3": a64 | b64 | c64,
        "xad": (a64 ^ b64) + c64,
        "and_or": (a64 & b64) | c64,
        "lshl_add": (a64 << 4) + b64,
        "add_lshl": (a64 + b64) << 3,
        "lshl_or": (a64 << 6) | (b64 & 63),
        "umulhi": (au * bu) >> 32,
        "mul64_shr": (a64 * b64) >> 17,
        "udiv": au // ((bu >> 16) | 1),
        "bfrev_not": ~(cu >> 1),
        "popc": ((au & 0xF0F0F0F0) >> 4) + (au & 0x0F0F0F0F),
        "int16_bitsel": s16((s16(a64) & s16(b64)) | (~s16(a64) & s16(c64))),
        "uint16_shr": (a64 & 0xFFFF) >> 5,
        "minus_n": a64 - n,
        "add64_low": (a64 << 20) + c64 + n,
    }
    return np.stack([wrap32(rows[name]) for name in tk.INT_OPS])


def run_integer_ops(launch, rng):
    """Every INT_OPS row over 1000 elements (4 programs, a masked tail), inputs spanning int32 with
    INT32_MIN / INT32_MAX / 0 / -1 among a."""
    n, block = 1000, 256
    a = rng.integers(INT32_MIN, INT32_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    a[:6] = [INT32_MIN, INT32_MAX, 0, -1, 1, -7]
    b = rng.integers(INT32_MIN, INT32_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    b[rng.random(n) < 0.3] = rng.integers(-300, 300, 1)[0]  # small divisors too
    b[b == 0] = 3
    b[:6] = [3, -2, 5, 7, INT32_MIN, 1]
    c = rng.integers(INT32_MIN, INT32_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    out = tensor(np.full((tk.NUM_INT_OPS, n), 0x5A5A5A5A, dtype=np.int32))
    launch(tk.integer_ops_kernel, (triton_cdiv(n, block),), tensor(a), tensor(b), tensor(c), out, n, BLOCK=block,
           num_warps=4)
    expected = integer_ops_reference(a, b, c, n)
    for row, name in enumerate(tk.INT_OPS):
        ref.check_equal("integer_ops", name, out.numpy()[row], expected[row])


def run_byte_ops(launch, rng):
    """Bytes and 16-bit halves packed in dwords (SDWA selects, 16-bit VALU, bitop3_b16): every byte value, int16
    wraparound, bf16 packing of fp32 (RNE), 100 rows over 2 programs (a masked tail)."""
    rows = 100
    b = rng.integers(0, 256, (rows, 16), dtype=np.uint8)
    b[:16] = np.arange(256, dtype=np.uint8).reshape(16, 16)
    h = rng.integers(-(2 ** 15), 2 ** 15, (rows, 8)).astype(np.int16)
    h[0, :4] = [-(2 ** 15), 2 ** 15 - 1, -1, 0x0100]
    f = (rng.standard_normal((rows, 8)) * 1000).astype(np.float32)
    shift = 11
    field = tensor(np.zeros((2, rows, 16), dtype=np.int32))
    half = tensor(np.zeros((tk.NUM_HALF_OPS, rows, 8), dtype=np.int16))
    pack = torch.zeros((rows, 8), dtype=torch.bfloat16)
    word = tensor(np.zeros((rows, 8), dtype=np.int32))
    launch(tk.byte_ops_kernel, (triton_cdiv(rows, 64),), tensor(b), tensor(h), tensor(f), field, half, pack, word, rows,
           shift, ROWS=64, num_warps=4)
    ref.check_equal("byte_ops", "byte << 23", field.numpy()[0], (b.astype(np.int64) << 23).astype(np.int32))
    ref.check_equal("byte_ops", "byte << shift", field.numpy()[1], (b.astype(np.int64) << shift).astype(np.int32))
    h64, low, high = h.astype(np.int64), b[:, :8].astype(np.int64), b[:, 8:].astype(np.int64)
    ref.check_equal("byte_ops", "uint16 << shift", word.numpy(), ((h64 & 0xFFFF) << shift).astype(np.int32))
    expected = {"add_hi": h64 + 0x7F00, "bitsel": (h64 & 0x0FF0) | (~h64 & low), "shr": (h64 & 0xFFFF) >> 3,
                "byte_shl": high << 8, "byte_shl_var": high << shift}
    for row, name in enumerate(tk.HALF_OPS):
        ref.check_equal("byte_ops", f"int16 {name}", half.numpy()[row], expected[name].astype(np.uint16).view(np.int16))
    ref.check_equal("byte_ops", "bf16 of f x 0.5", bits_of(pack), ref.bf16_bits(f * np.float32(0.5)))


def float_ops_reference(x, y, z, i):
    """FLOAT_OPS in float64 (rounded to float32 once by the check), IEEE semantics: max/min ignore a NaN
    operand (fmax), x.to(int32) truncates toward zero."""
    x64, y64, z64 = (v.astype(np.float64) for v in (x, y, z))
    with np.errstate(all="ignore"):
        rows = {
            "fma": x64 * y64 + z64,
            "fms": x64 * y64 - z64,
            "fnma": -x64 * y64 + z64,
            "div": x64 / y64,
            "exp2": np.exp2(z64),
            "max": np.fmax(x64, y64),
            "min": np.fmin(x64, y64),
            "clamp": np.fmin(np.fmax(x64, -1.5), 2.5),
            "abs_max": np.fmax(np.abs(x64), np.abs(y64)),
            "sub": x64 - y64,
            "where_lt": np.where(x64 < y64, x64, z64),
            "nan_to_zero": np.where(np.isnan(x64), 0.0, x64),
            "to_int": np.trunc((x * np.float32(100.0)).astype(np.float64)),
            "from_int": i.astype(np.float64),
            "from_uint": i.view(np.uint32).astype(np.float64),
            "mul_add_pair": x64 * 3.0 + (y * np.float32(0.25)).astype(np.float64),
            "rcp_scaled": 1.0 / (y * np.float32(8.0)).astype(np.float64),
            "eq_select": np.where(x64 == z64, y64, x64),
            "is_eq": (x64 == z64).astype(np.float64),
            "is_ne": (x64 != z64).astype(np.float64),
            "is_ge": (x64 >= y64).astype(np.float64),
            "not_lt": np.where(x64 < y64, 0.0, 1.0),
            "asm_mul": x64 * y64,  # inline asm v_mul_f32 (VOP3, no suffix: submission's FUSED merge products)
        }
    return rows


def run_float_ops(launch, rng):
    """fp32 arithmetic over 700 elements: results within 1 ulp of the exactly rounded answer (2 for the
    division and reciprocal sequences, 1e-6 relative for exp2); NaN, infinities, signed zeros and
    denormals among the inputs of the select, max/min and conversion rows."""
    n, block = 700, 256
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    y = (rng.standard_normal(n) * 4).astype(np.float32)
    y[np.abs(y) < 1e-3] = 0.5
    z = rng.uniform(-20, 20, n).astype(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, -0.0, 1e-40, -3e-39, 2.5, -1.5]
    z[8:12] = x[8:12] = [0.75, -2.0, 1e-3, 7.0]  # x == z rows
    i = rng.integers(INT32_MIN, INT32_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    i[:3] = [INT32_MIN, INT32_MAX, -1]
    out = tensor(np.full((tk.NUM_FLOAT_OPS, n), np.nan, dtype=np.float32))
    launch(tk.float_ops_kernel, (triton_cdiv(n, block),), tensor(x), tensor(y), tensor(z), tensor(i), out, n,
           BLOCK=block, num_warps=4)
    expected = float_ops_reference(x, y, z, i)
    got = out.numpy()
    big = np.abs(x * np.float32(100.0)) < 2.0 ** 31  # to_int: only where the conversion is defined
    for row, name in enumerate(tk.FLOAT_OPS):
        values, answer = got[row], expected[name]
        if name == "to_int":
            values, answer = values[big & np.isfinite(x)], answer[big & np.isfinite(x)]
        if name == "exp2":
            ref.check_close("float_ops", name, values, answer, rtol=1e-6)
        elif name == "mul_add_pair":  # contracted to one fma on gfx950 (fp fusion), two roundings elsewhere
            magnitude = np.abs(x.astype(np.float64) * 3.0) + np.abs(y.astype(np.float64) * 0.25)
            ref.check_ulps("float_ops", name, values, answer, ulps=1, magnitude=magnitude)
        else:
            ref.check_ulps("float_ops", name, values, answer, ulps=2 if name in ("div", "rcp_scaled") else 1)


def run_scalar_compare(launch, rng):
    """fp32 equality against a scalar argument (exact), a branch on a block's max (taken in programs 0 and 4, whose
    max is s, not in the others), and byte 3 of int32 words << 8 as int16 (wrapping) with their sum, over 8
    programs with a masked tail."""
    n, block, s = 900, 128, 7.25
    x = rng.uniform(-5, 5, n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    x[[3, 40, 300, 530, 599]] = s  # programs 0 and 4 reach s; program 2 has s below its max
    x[700] = 9.5
    x[257] = 8.0
    w = rng.integers(INT32_MIN, INT32_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    programs = triton_cdiv(n, block)
    out = tensor(np.full(n + programs, -1.0, dtype=np.float32))
    out_w = tensor(np.zeros(n + programs, dtype=np.int32))
    launch(tk.scalar_compare_kernel, (programs,), tensor(x), tensor(y), tensor(w), out, out_w, s, n,
           BLOCK=block, num_warps=4)
    got = out.numpy()
    ref.check_equal("scalar_compare", "where(x == s)", got[:n], np.where(x == np.float32(s), y, x))
    tops = np.array([x[i:i + block].max() for i in range(0, n, block)])
    ref.check_equal("scalar_compare", "branch on max == s", got[n:], np.where(tops == np.float32(s), tops, -1.0)
                    .astype(np.float32))
    shifted = (((w.astype(np.int64) >> 24) & 0xFF) << 8).astype(np.uint16).view(np.int16).astype(np.int64)
    ref.check_equal("scalar_compare", "byte 3 << 8 as int16, and their sum in each program", out_w.numpy(),
                    np.concatenate([shifted, np.full(programs, shifted.sum())]).astype(np.int32))


def run_masked_tail(launch, rng):
    """n = 1000 over 4 programs of 256: elements past n (the guard) keep their sentinel."""
    n, block, guard = 1000, 256, 100
    x = rng.integers(INT32_MIN, INT32_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    sentinel = np.int32(0x7B7B7B7B)
    out = tensor(np.full(n + guard, sentinel, dtype=np.int32))
    launch(tk.masked_tail_kernel, (triton_cdiv(n, block),), tensor(x), out, n, BLOCK=block, num_warps=2)
    expected = wrap32((x.astype(np.int64) * 1103515245 + 12345) ^ (x.astype(np.int64) >> 7))
    ref.check_equal("masked_tail", "values", out.numpy()[:n], expected)
    ref.check_equal("masked_tail", "guard past n", out.numpy()[n:], np.full(guard, sentinel))


# --- reductions ------------------------------------------------------------------------------------
def run_block_reduce(launch, rng):
    """Max, sum, max |x| of 1000 floats and max/min/sum of 1000 ints across all 8 warps of one program (BLOCK 1024:
    DPP row shifts and broadcasts, readlane, LDS between warps)."""
    n = 1000
    x = (rng.standard_normal(n) * 10).astype(np.float32)
    x[rng.integers(0, n)] = -123.5  # the largest magnitude is negative
    i = rng.integers(-10 ** 9, 10 ** 9, n).astype(np.int32)
    out = tensor(np.zeros(3, dtype=np.float32))
    out_i = tensor(np.array([0, 0, 0, 2], dtype=np.int32))
    launch(tk.block_reduce_kernel, (1,), tensor(x), tensor(i), out, out_i, n, BLOCK=1024, num_warps=8)
    got = out.numpy()
    ref.check_equal("block_reduce", "max", got[0], x.max())
    ref.check_close("block_reduce", "sum", got[1], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-3)
    ref.check_equal("block_reduce", "max |x|", got[2], np.abs(x).max())
    ref.check_equal("block_reduce", "int max, min, sum; count of x > 16 (its branch taken)", out_i.numpy(),
                    np.array([i.max(), i.min(), wrap32(i.astype(np.int64).sum()),
                              (x > 16).sum() if x.max() > 16 else 2], dtype=np.int32))


def run_tile_reduce(launch, rng):
    """Row and column max/sum of a (29, 100) tile in a (32, 128) block over 4 warps (reductions inside a lane
    group and across warps through LDS)."""
    rows, cols, stride = 29, 100, 104
    x = (rng.standard_normal((rows, stride)) * 3).astype(np.float32)
    outs = [tensor(np.full(size, np.nan, dtype=np.float32)) for size in (rows, rows, cols, cols)]
    launch(tk.tile_reduce_kernel, (1,), tensor(x), *outs, rows, cols, stride, ROWS=32, COLS=128, num_warps=4)
    tile = x[:, :cols].astype(np.float64)
    ref.check_equal("tile_reduce", "row max", outs[0].numpy(), x[:, :cols].max(axis=1))
    ref.check_close("tile_reduce", "row sum", outs[1].numpy(), tile.sum(axis=1), rtol=1e-5, atol=1e-4)
    ref.check_equal("tile_reduce", "column max", outs[2].numpy(), x[:, :cols].max(axis=0))
    ref.check_close("tile_reduce", "column sum", outs[3].numpy(), tile.sum(axis=0), rtol=1e-5, atol=1e-4)


def run_spill(launch, rng):
    """A 128 x 128 tile on one wave, two tiles live across two reductions: the build spills (scratch_store/load,
    AGPR moves). Each element within 1e-5 of the float64 answer's magnitude (fp32 sums of 128 terms in any order)."""
    rows = cols = 128
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = rng.standard_normal((rows, cols)).astype(np.float32)
    out = tensor(np.full((rows, cols), np.nan, dtype=np.float32))
    launch(tk.spill_kernel, (1,), tensor(x), tensor(y), out, ROWS=rows, COLS=cols, num_warps=1)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    z, w = (x64 * y64).sum(axis=1), (x64 + y64).sum(axis=0)
    expected = x64 * z[:, None] + y64 * w[None, :]
    magnitude = np.abs(x64) * np.abs(x64 * y64).sum(axis=1)[:, None] + np.abs(y64) * np.abs(x64 + y64).sum(axis=0)
    check_within("spill", "x z + y w", out.numpy(), expected, magnitude, 1e-5)


# --- conversions --------------------------------------------------------------------------------------
def run_to_fp8(launch, rng):
    """fp32 -> e4m3fn, exact bytes: round to nearest even, +-448 for finite overflow and +-inf, NaN -> a NaN code
    (0x7F / 0xFF: the sign is not checked). Inputs: every e4m3 value and every midpoint between neighbours
    (ties), one float32 step either side of each midpoint, denormals of both formats, -0, saturation."""
    finite = ref.e4m3_values(np.arange(0x7F))
    midpoints = (finite[:-1] + finite[1:]) / 2
    near = np.concatenate([np.nextafter(midpoints.astype(np.float32), np.float32(np.inf)),
                           np.nextafter(midpoints.astype(np.float32), np.float32(-np.inf))])
    special = np.array([0.0, -0.0, 1e-40, -1e-40, 2.0 ** -10, 2.0 ** -9 * 1.5, 449.0, 463.99, 464.0, 480.0, 1e6,
                        3e38, np.inf, -np.inf, np.nan], dtype=np.float32)
    random = (rng.standard_normal(300) * 30).astype(np.float32)
    magnitudes = np.concatenate([finite, midpoints, near, random]).astype(np.float32)
    x = np.concatenate([magnitudes, -magnitudes, special])
    n = x.size
    out = tensor(np.full(n + 3, 0xA5, dtype=np.uint8))
    launch(tk.to_fp8_kernel, (triton_cdiv(n, 512),), tensor(x), out, n, BLOCK=512, num_warps=4)
    got = out.numpy()[:n]
    expected = ref.e4m3_codes(x)
    nan = np.isnan(x)
    ref.check_equal("to_fp8", "bytes (at NaN inputs: 1 for a NaN code)", np.where(nan, (got & 0x7F) == 0x7F, got),
                    np.where(nan, True, expected))
    ref.check_equal("to_fp8", "guard past n", out.numpy()[n:], np.full(3, 0xA5, dtype=np.uint8))


def run_float_conversions(launch, rng):
    """fp32 -> bf16 (RNE bits, ties and carries into the exponent, denormals kept, NaN stays NaN), fp16 -> fp32 and
    bf16 -> fp32 (exact, every denormal class, +-inf, NaN, -0)."""
    n = 900
    x = (rng.standard_normal(n) * 100).astype(np.float32)
    ties = np.array([0x3F808000, 0x3F818000, 0x3F7FFFFF, 0x3FFF8000, 0x00008000, 0x80018000, 0x7F7FFFFF,
                     0x00000001, 0x807FFFFF], dtype=np.uint32).view(np.float32)
    x[:ties.size] = ties
    x[ties.size:ties.size + 5] = [np.inf, -np.inf, np.nan, -0.0, 1e-45]
    h_bits = rng.integers(0, 65536, n).astype(np.uint16)
    h_bits[:6] = [0x0001, 0x83FF, 0x7C00, 0xFC00, 0x8000, 0x7E00]
    b_bits = rng.integers(0, 65536, n).astype(np.uint16)
    b_bits[:5] = [0x0001, 0x807F, 0x7F80, 0xFF80, 0x8000]
    bf16_out = torch.zeros(n, dtype=torch.bfloat16)
    f32_from_fp16 = torch.zeros(n, dtype=torch.float32)
    f32_from_bf16 = torch.zeros(n, dtype=torch.float32)
    launch(tk.float_conversions_kernel, (triton_cdiv(n, 256),), tensor(x),
           tensor(h_bits).view(torch.float16), tensor(b_bits).view(torch.bfloat16), bf16_out, f32_from_fp16,
           f32_from_bf16, n, BLOCK=256, num_warps=4)
    got = bits_of(bf16_out)
    expected = ref.bf16_bits(x)
    nan = np.isnan(x)
    ref.check_equal("float_conversions", "fp32 -> bf16 bits (at NaN inputs: 1 for a NaN)",
                    np.where(nan, (got & 0x7FFF) > 0x7F80, got),
                    np.where(nan, True, expected))
    ref.check_close("float_conversions", "fp16 -> fp32", f32_from_fp16.numpy(), ref.fp16_values(h_bits), rtol=0)
    ref.check_close("float_conversions", "bf16 -> fp32", f32_from_bf16.numpy(), ref.bf16_values(b_bits), rtol=0)


# --- matrix products ----------------------------------------------------------------------------------
def _dot_case(name, m, n, k, num_warps, trans_b=False):
    def run(launch, rng):
        a_bits, a = ref.bf16_random(rng, (m, k))
        b_bits, b = ref.bf16_random(rng, (k, n))
        c = rng.standard_normal((m, n)).astype(np.float32)
        out = tensor(np.full((m, n), np.nan, dtype=np.float32))
        b_t = tensor(b_bits).view(torch.bfloat16)
        launch(tk.dot_kernel, (1,), tensor(a_bits).view(torch.bfloat16), b_t, tensor(c), out, k, 1, n, 1,
               M=m, N=n, K=k, TRANS_B=trans_b, num_warps=num_warps)
        ref.check_product(name, out.numpy(), a, b, c)
    return run


def run_dot_fp8(launch, rng):
    """tl.dot of e4m3fn operands (32, 128) @ (128, 64) + c, B row-major (N contiguous: a transposing LDS read)."""
    m, n, k = 32, 64, 128
    a_codes, b_codes = ref.random_e4m3(rng, (m, k)), ref.random_e4m3(rng, (k, n))
    c = rng.standard_normal((m, n)).astype(np.float32)
    out = tensor(np.full((m, n), np.nan, dtype=np.float32))
    launch(tk.dot_kernel, (1,), tensor(a_codes).view(torch.float8_e4m3fn), tensor(b_codes).view(torch.float8_e4m3fn),
           tensor(c), out, k, 1, n, 1, M=m, N=n, K=k, TRANS_B=False, num_warps=4)
    ref.check_product("dot_fp8", out.numpy(), ref.e4m3_values(a_codes), ref.e4m3_values(b_codes), c)


def _scaled_operand(rng, fmt, rows, k):
    """(stored bytes, scale bytes, float64 values x scale) of a (rows, k) MX operand in `fmt`."""
    scales = ref.random_scales(rng, (rows, k // 32))
    if fmt == "e2m1":
        stored = ref.random_e2m1_packed(rng, (rows, k // 2))
        values = ref.unpack_e2m1(stored, axis=1)
    else:
        stored = ref.random_e4m3(rng, (rows, k))
        values = ref.e4m3_values(stored)
    return stored, scales, values * np.repeat(ref.e8m0_values(scales), 32, axis=1)


def _dot_scaled_case(name, m, n, k, a_format, b_format, num_warps):
    def run(launch, rng):
        a, a_scale, a_values = _scaled_operand(rng, a_format, m, k)
        b, b_scale, b_values = _scaled_operand(rng, b_format, n, k)
        out = tensor(np.full((m, n), np.nan, dtype=np.float32))
        launch(tk.dot_scaled_kernel, (1,), tensor(a), tensor(a_scale), tensor(b), tensor(b_scale), out,
               M=m, N=n, K=k, A_FORMAT=a_format, B_FORMAT=b_format, num_warps=num_warps)
        ref.check_product(name, out.numpy(), a_values, b_values.T)
    return run


def run_dot_scaled_bf16(launch, rng):
    """tl.dot_scaled(e2m1 a, scales, "e2m1", bf16 b, None, "bf16"): a (32, 128) upcast through
    v_cvt_scalef32_pk_bf16_fp4, scales differing per 32-block, then bf16 MFMA."""
    m, n, k = 32, 32, 128
    a, a_scale, a_values = _scaled_operand(rng, "e2m1", m, k)
    b_bits, b = ref.bf16_random(rng, (k, n))
    out = tensor(np.full((m, n), np.nan, dtype=np.float32))
    launch(tk.dot_scaled_bf16_kernel, (1,), tensor(a), tensor(a_scale), tensor(b_bits).view(torch.bfloat16), out,
           M=m, N=n, K=k, num_warps=4)
    ref.check_product("dot_scaled_e2m1_bf16", out.numpy(), a_values, b)


# --- atomics --------------------------------------------------------------------------------------------
def run_ticket(launch, rng):
    """37 programs each take a ticket with tl.atomic_add (the counter's old value): the tickets are a permutation
    of 0..36, the counter ends at 37, and the last program's total is the sum of every partial."""
    programs, block = 37, 64
    x = rng.standard_normal(programs * block).astype(np.float32)
    partial = tensor(np.zeros(programs, dtype=np.float32))
    tickets = tensor(np.full(programs, -1, dtype=np.int32))
    counter = tensor(np.zeros(1, dtype=np.int32))
    total = tensor(np.zeros(1, dtype=np.float32))
    launch(tk.ticket_kernel, (programs,), tensor(x), partial, tickets, counter, total, BLOCK=block, num_warps=2)
    ref.check_equal("ticket", "sorted tickets", np.sort(tickets.numpy()), np.arange(programs, dtype=np.int32))
    ref.check_equal("ticket", "counter", counter.numpy(), np.array([programs], dtype=np.int32))
    sums = x.reshape(programs, block).astype(np.float64).sum(axis=1)
    ref.check_close("ticket", "partials", partial.numpy(), sums, rtol=1e-5, atol=1e-5)
    ref.check_close("ticket", "total", total.numpy(), np.array([sums.sum()]), rtol=1e-5, atol=1e-4)


# --- quantization ----------------------------------------------------------------------------------------
def e4m3_blocks_reference(x):
    """(codes, scale bytes) of triton_kernels._e4m3_blocks' rule from its definition: per 32-block the least e in
    [-126, 127] with max |x| / 2^e <= 448 (amax = f 2^E, f in [1, 2): e = E - 8, + 1 if f > 1.75; amax 0 or an fp32
    denormal: -126), codes = e4m3(x / 2^e), nearest even."""
    rows, cols = x.shape
    blocks = x.astype(np.float64).reshape(rows, cols // 32, 32)
    amax = np.abs(blocks).max(axis=2)
    fraction, exponent = np.frexp(amax)  # amax = fraction 2^exponent, fraction in [0.5, 1)
    e = np.where(amax > 0, exponent - 1 - 8 + (2 * fraction > 1.75), -126)
    e = np.clip(e, -126, 127)
    codes = ref.e4m3_codes(blocks * np.ldexp(1.0, -e)[:, :, None])
    return codes.reshape(rows, cols), (e + 127).astype(np.uint8)


def run_quantize_blocks(launch, rng):
    """Per-32-block e4m3 quantization over 3 programs of 16 rows (a masked tail of 13): exact codes and scale bytes;
    blocks of zeros, fp32 denormals, huge values, an amax of exactly 1.75 x 2^E and one just above, negative zeros."""
    rows, cols = 45, 128
    x = (rng.standard_normal((rows, cols)) * np.exp2(rng.integers(-20, 20, (rows, 1)))).astype(np.float32)
    x[0, :32] = 0.0
    x[0, 32:64] = -0.0
    x[1, :32] = np.float32(1e-39) * rng.standard_normal(32).astype(np.float32)
    x[1, 32:64] *= np.float32(1e30)
    x[2, :32] = np.float32(1.75 * 2 ** 5) * rng.uniform(-1, 1, 32).astype(np.float32)
    x[2, 5] = np.float32(1.75 * 2 ** 5)
    x[2, 32:64] = np.float32(0.5) * rng.uniform(-1, 1, 32).astype(np.float32)
    x[2, 40] = np.nextafter(np.float32(1.75), np.float32(2))
    q = tensor(np.zeros((rows + 3, cols), dtype=np.uint8))
    scale = tensor(np.zeros((rows + 3, cols // 32), dtype=np.uint8))
    launch(tk.quantize_blocks_kernel, (triton_cdiv(rows, 16),), tensor(x), q, scale, rows, COLS=cols, ROWS=16,
           num_warps=4)
    codes, scale_bytes = e4m3_blocks_reference(x)
    ref.check_equal("quantize_blocks", "scale bytes", scale.numpy()[:rows], scale_bytes)
    ref.check_equal("quantize_blocks", "e4m3 codes", q.numpy()[:rows], codes)
    ref.check_equal("quantize_blocks", "rows past the end", q.numpy()[rows:], np.zeros((3, cols), dtype=np.uint8))


def quantize_tensor_reference(x_bits):
    """(codes, scale) of quantize_tensor_kernel in float32 numpy, each step rounded as the kernel rounds it."""
    x = ref.bf16_values(x_bits)
    amax = np.abs(x).max()
    scale = ref.bf16_values(ref.bf16_bits(np.float32(max(amax, np.float32(2.0 ** -40))) / np.float32(448.0)))
    inverse = np.float32(1.0) / scale
    ratio = np.clip(ref.bf16_values(ref.bf16_bits(x * inverse)), -448.0, 448.0)
    return ref.e4m3_codes(ratio), scale


def _quantize_tensor_case(name, tokens, rows_per_program, num_warps, two_pass):
    def run(launch, rng):
        heads, cols = 16, 128
        bits = ref.bf16_bits((rng.standard_normal((tokens, heads, cols)) * 3).astype(np.float32))
        bits[0, 0, :4] = [0x8000, 0x0001, 0x3F80, 0xC2F6]  # -0, a bf16 denormal, 1, -123
        x = np.zeros((tokens, heads + 1, cols + 32), dtype=np.uint16)  # padded strides
        x[:, :heads, :cols] = bits
        x_t = tensor(x).view(torch.bfloat16)
        programs = triton_cdiv(tokens * heads, rows_per_program)
        partials = tensor(np.full(programs, -1.0, dtype=np.float32))
        q = tensor(np.zeros((tokens, heads, cols), dtype=np.uint8))
        scale = tensor(np.zeros(1, dtype=np.float32))
        args = (x_t, partials, q, scale, tokens, programs, (heads + 1) * (cols + 32), cols + 32)
        options = dict(HEADS=heads, COLS=cols, ROWS=rows_per_program, num_warps=num_warps)
        if two_pass:
            launch(tk.quantize_tensor_kernel, (programs,), *args, PASS=tk.AMAX_PASS.value, **options)
            launch(tk.quantize_tensor_kernel, (programs,), *args, PASS=tk.QUANTIZE_PASS.value, **options)
        else:
            launch(tk.quantize_tensor_kernel, (1,), *args, PASS=tk.ONE_PASS.value, **options)
        codes, expected_scale = quantize_tensor_reference(bits)
        ref.check_equal(name, "scale", scale.numpy(), np.array([expected_scale], dtype=np.float32))
        ref.check_equal(name, "e4m3 codes", q.numpy(), codes)
        if two_pass:
            amax = np.abs(ref.bf16_values(bits)).reshape(programs, -1).max(axis=1)
            ref.check_equal(name, "partial amax", partials.numpy(), amax)
    return run


# --- a small split attention ------------------------------------------------------------------------------
ATTENTION_LOG2 = 0.1 * np.log2(np.e)  # qk_scale_log2: scores x this are base-2 exponents
ROPE_DIMS = 32


class KvGeometry:
    """A KV row of `nope` + 32 e2m1 dims: its bytes padded by 16, its scale bytes (one per 32 dims) padded by 1."""

    def __init__(self, nope):
        self.nope, self.dims = nope, nope + ROPE_DIMS
        self.row_bytes, self.scale_bytes = self.dims // 2 + 16, self.dims // 32 + 1


def exact_q(rng, batch, dims):
    """(bf16 bits, float64 values) of a (batch, 16, dims) Q whose values are e4m3 values times 2^-1 or 1 with exponent
    fields 5..9 (2^-3 .. 7.5, multiples of 2^-6): with exact_kv's K every product and every partial sum of them is
    exact in float32 (below 2^15 in steps of 2^-9), so the scores do not depend on the order of accumulation, and the
    kernel's own block quantization of Q loses nothing."""
    shape = (batch, 16, dims)
    codes = (rng.integers(0, 2, shape) << 7) | (rng.integers(5, 10, shape) << 3) | rng.integers(0, 8, shape)
    values = ref.e4m3_values(codes) * np.exp2(-rng.integers(0, 2, shape))
    return ref.bf16_bits(values.astype(np.float32)), values


def exact_kv(rng, total_kv, geometry):
    """(codes (total_kv, row_bytes) uint8: e2m1 pairs then padding, scales (total_kv, scale_bytes) e8m0, float64 values
    (total_kv, dims)). Scales 2^-2..2^1 (2^-2..2^0 at 512 nope dims: |products| <= 45, so sums of 544 stay below
    2^15), different per 32-dim block; the padding random."""
    codes = rng.integers(0, 256, (total_kv, geometry.row_bytes), dtype=np.uint8)
    scales = rng.integers(0, 256, (total_kv, geometry.scale_bytes), dtype=np.uint8)
    blocks = geometry.dims // 32
    scales[:, :blocks] = rng.integers(125, 129 if geometry.nope <= 128 else 128, (total_kv, blocks))
    values = ref.unpack_e2m1(codes[:, :geometry.dims // 2], axis=1) * np.repeat(ref.e8m0_values(scales[:, :blocks]),
                                                                                 32, axis=1)
    return codes, scales, values


def split_bounds(start, end, num_splits, block_n):
    """[(lo, hi)] of each split of rows [start, end): whole tiles per split, the last short (or empty)."""
    tiles_per_split = triton_cdiv(triton_cdiv(end - start, block_n), num_splits)
    return [(start + split * tiles_per_split * block_n, min(start + (split + 1) * tiles_per_split * block_n, end))
            for split in range(num_splits)]


def attention_reference(q_values, k_values, indptr, num_splits, block_n, nope):
    """float64 answers: per split m, l, acc, acc's error scale (p @ |v|), and per sequence out and its scale; a
    sequence whose range is invalid has m and out NaN, l and acc 0."""
    batch = q_values.shape[0]
    m = np.full((batch, num_splits, 16), -np.inf)
    l = np.zeros((batch, num_splits, 16))
    acc = np.zeros((batch, num_splits, 16, nope))
    acc_scale = np.zeros_like(acc)
    out = np.zeros((batch, 16, nope))
    out_scale = np.zeros_like(out)
    v_values = k_values[:, :nope]
    for seq in range(batch):
        start, end = indptr[seq], indptr[seq + 1]
        if not 0 <= start <= end <= k_values.shape[0]:  # an invalid range: no row read, m NaN, output NaN
            m[seq], out[seq] = np.nan, np.nan
            continue
        ranges = [(split, lo, hi) for split, (lo, hi) in enumerate(split_bounds(start, end, num_splits, block_n))]
        for split, lo, hi in ranges + [(None, start, end)]:
            if lo >= hi:
                continue
            scores = q_values[seq] @ k_values[lo:hi].T
            top = scores.max(axis=1)
            p = np.exp2((scores - top[:, None]) * ATTENTION_LOG2)
            if split is None:
                out[seq] = p @ v_values[lo:hi] / p.sum(axis=1)[:, None]
                out_scale[seq] = p @ np.abs(v_values[lo:hi]) / p.sum(axis=1)[:, None]
            else:
                m[seq, split], l[seq, split] = top, p.sum(axis=1)
                acc[seq, split], acc_scale[seq, split] = p @ v_values[lo:hi], p @ np.abs(v_values[lo:hi])
    return m, l, acc, acc_scale, out, out_scale


# p is rounded to bf16 before the values' product: each term of acc is off by up to 2^-9 of itself
P_BF16_BOUND = 2.0 ** -8


def check_within(case, what, got, expected, scale, relative):
    """|got - expected| <= relative x scale + 1e-30 elementwise (NaN where NaN expected)."""
    with np.errstate(invalid="ignore"):
        close = np.abs(got - expected) <= relative * scale + 1e-30
    ref.check_close(case, what, np.where(close, expected, got), expected, rtol=0)


def _attention_case(name, block_n, num_warps, num_stages, scores, convert, merge, merge_chunk=2, merge_dims=64,
                    pin=False, peel=False, nope=128):
    geometry = KvGeometry(nope)

    def run(launch, rng):
        lengths = [2 * block_n + block_n // 3 + 1, 0, block_n + block_n // 5 + 1]
        indptr = np.concatenate([[0], np.cumsum(lengths), [3]]).astype(np.int32)  # sequence 3: start > end, invalid
        batch, num_splits, total_kv = len(lengths) + 1, 2, int(indptr[-2]) + 5
        q_bits, q_values = exact_q(rng, batch, geometry.dims)
        codes, scales, k_values = exact_kv(rng, total_kv, geometry)
        q8 = tensor(np.zeros((batch, 16, geometry.dims), dtype=np.uint8))
        qs = tensor(np.zeros((batch, 16, geometry.dims // 32), dtype=np.uint8))
        part_acc = tensor(np.full((batch, num_splits, 16, nope), np.nan, dtype=np.float32))
        part_ml = tensor(np.full((batch, num_splits, 2, 16), np.nan, dtype=np.float32))
        count = tensor(np.zeros(batch, dtype=np.int32))
        out = tensor(np.full((batch, 16, nope), np.nan, dtype=np.float32))
        kv = tensor(codes)
        launch(tk.split_attention_kernel, (num_splits, batch), tensor(q_bits).view(torch.bfloat16), q8, qs, kv,
               kv.view(torch.int32), tensor(scales), tensor(indptr), part_acc, part_ml, count, out, total_kv,
               num_splits, geometry.row_bytes, geometry.scale_bytes, ATTENTION_LOG2, BLOCK_N=block_n, SCORES=scores,
               CONVERT=convert, MERGE=merge, PIN=pin, PEEL=peel, NOPE=nope, num_warps=num_warps,
               num_stages=num_stages)
        merged = None
        if merge == tk.PARTIALS.value:
            # an invalid split (m NaN) must make its sequence's head NaN in the merge
            part_ml_values = part_ml.numpy()
            kept = part_ml_values[0, 1, 0, 5]
            part_ml_values[0, 1, 0, 5] = np.nan
            merged = torch.zeros((batch, 16, nope), dtype=torch.bfloat16)
            launch(tk.merge_partials_kernel, (batch, 16, nope // merge_dims), merged, part_acc, part_ml,
                   num_splits, ATTENTION_LOG2, V=nope, CHUNK=merge_chunk, DIMS=merge_dims, num_warps=4)
            part_ml_values[0, 1, 0, 5] = kept
        if scores == tk.SCALED.value:
            nope_codes, nope_scales = e4m3_blocks_reference(q_values[:, :, :nope].reshape(-1, nope))
            padded = np.zeros((batch * 16, 128))
            padded[:, :ROPE_DIMS] = q_values[:, :, nope:].reshape(-1, ROPE_DIMS)
            rope_codes, rope_scales = e4m3_blocks_reference(padded)
            ref.check_equal(name, "quantized Q codes", q8.numpy().reshape(batch * 16, geometry.dims),
                            np.concatenate([nope_codes, rope_codes[:, :ROPE_DIMS]], axis=1))
            ref.check_equal(name, "quantized Q scales", qs.numpy().reshape(batch * 16, geometry.dims // 32),
                            np.concatenate([nope_scales, rope_scales[:, :1]], axis=1))
        m, l, acc, acc_scale, expected_out, out_scale = attention_reference(q_values, k_values, indptr, num_splits,
                                                                            block_n, nope)
        got_m = part_ml.numpy()[:, :, 0]
        ref.check_equal(name, "split max m (exact scores; NaN: invalid range)", np.where(np.isnan(got_m), 1e30, got_m),
                        np.where(np.isnan(m), 1e30, m).astype(np.float32))
        ref.check_close(name, "split sum l", part_ml.numpy()[:, :, 1], l, rtol=1e-4)
        check_within(name, "split values acc", part_acc.numpy(), acc, acc_scale, P_BF16_BOUND)
        if merge == tk.FUSED.value:
            ref.check_equal(name, "count", count.numpy(), np.full(batch, num_splits, dtype=np.int32))
            check_within(name, "fused merge out", out.numpy(), expected_out, out_scale, P_BF16_BOUND)
        else:
            expected_out[0, 5] = np.nan
            got = ref.bf16_values(bits_of(merged)).astype(np.float64)
            check_within(name, "merged out (bf16)", got, expected_out, out_scale, P_BF16_BOUND + 2.0 ** -8)
    return run


def run_e2m1_to_bf16(launch, rng, convert):
    """Every e2m1 code (both nibbles of every byte value) under e8m0 bytes 1..252, plus bytes 0 (2^-127: the results
    are bf16 denormals, exact) and 255 (NaN): exact bf16 bits (no rounding: 2 significant bits; no overflow)."""
    words_per_row, rows = 8, 70
    bytes_ = rng.integers(0, 256, (rows, 4 * words_per_row), dtype=np.uint8)
    bytes_[:8] = np.arange(256, dtype=np.uint8).reshape(8, 32)  # every byte: every (low, high) code pair
    scales = rng.integers(1, 253, (rows, words_per_row // 4)).astype(np.uint8)
    scales[:8, 0] = np.arange(8) * 35 + 1
    scales[8:11, 1] = [0, 255, 252]
    out = torch.zeros((rows + 2, 8 * words_per_row), dtype=torch.bfloat16)
    launch(tk.e2m1_to_bf16_kernel, (triton_cdiv(rows, 16),), tensor(bytes_).view(torch.int32), tensor(scales), out,
           rows, WORDS=words_per_row, ROWS=16, CONVERT=convert, PIN=convert == tk.CVT_PORTABLE.value, num_warps=4)
    values = ref.unpack_e2m1(bytes_, axis=1) * np.repeat(ref.e8m0_values(scales), 32, axis=1)
    expected = ref.bf16_bits(values.astype(np.float32))
    got = bits_of(out)
    nan = np.isnan(values)
    name = "e2m1_to_bf16_" + ("asm" if convert == tk.CVT_ASM.value else "portable")
    ref.check_equal(name, "bf16 bits (at NaN values: 1 for a NaN)", np.where(nan, (got[:rows] & 0x7FFF) > 0x7F80, got[:rows]),
                    np.where(nan, True, expected))
    ref.check_equal(name, "rows past the end", got[rows:], np.zeros((2, 8 * words_per_row), dtype=np.uint16))


def run_async_copy(launch, rng):
    """Gluon: 150 rows (5 tiles of 32, the last masked) through the async-copy ring: every element exact."""
    rows = 150
    x = rng.integers(-(2 ** 28), 2 ** 28, (rows, 32)).astype(np.int32)
    s = rng.integers(-(2 ** 28), 2 ** 28, (rows, 4)).astype(np.int32)
    out_x = tensor(np.full((rows + 2, 32), 7, dtype=np.int32))
    out_s = tensor(np.full((rows + 2, 4), 7, dtype=np.int32))
    launch(gk.async_copy_kernel, (1,), tensor(x), tensor(s), out_x, out_s, rows, num_warps=4)
    ref.check_equal("async_copy", "3 x + row", out_x.numpy()[:rows], wrap32(3 * x.astype(np.int64) + np.arange(rows)[:, None]))
    ref.check_equal("async_copy", "5 s - 1", out_s.numpy()[:rows], wrap32(5 * s.astype(np.int64) - 1))
    ref.check_equal("async_copy", "rows past the end", np.concatenate([out_x.numpy()[rows:].ravel(),
                                                                        out_s.numpy()[rows:].ravel()]),
                    np.full(2 * 36, 7, dtype=np.int32))


def run_fp4_upcast(launch, rng):
    """Gluon: gl.fp4_to_fp (Triton's own e2m1 -> bf16) of every byte value, 3 programs (a masked tail), and their
    tickets from a buffer atomic (a permutation of 0..2; the counter ends at 3)."""
    rows, programs = 150, 3
    packed = rng.integers(0, 256, (rows, 16), dtype=np.uint8)
    packed[:16] = np.arange(256, dtype=np.uint8).reshape(16, 16)
    out = torch.zeros((rows + 1, 32), dtype=torch.bfloat16)
    counter = tensor(np.zeros(1, dtype=np.int32))
    tickets = tensor(np.full(programs, -1, dtype=np.int32))
    launch(gk.fp4_upcast_kernel, (programs,), tensor(packed), out, counter, tickets, rows, num_warps=4)
    expected = ref.bf16_bits(ref.unpack_e2m1(packed, axis=1).astype(np.float32))
    ref.check_equal("fp4_upcast", "bf16 bits", bits_of(out)[:rows], expected)
    ref.check_equal("fp4_upcast", "row past the end", bits_of(out)[rows:], np.zeros((1, 32), dtype=np.uint16))
    ref.check_equal("fp4_upcast", "sorted tickets", np.sort(tickets.numpy()), np.arange(programs, dtype=np.int32))
    ref.check_equal("fp4_upcast", "counter", counter.numpy(), np.array([programs], dtype=np.int32))


def run_gluon_attention(launch, rng):
    """Gluon: 3 sequences of 200 (two 128-row tiles, the second masked), 0 (empty) and 128 rows. Q (bf16) quantized
    in the kernel: codes and scales exact; scores exact (Q: e4m3 values with exponent fields 5..8 times 2^-1 or 1,
    which the quantization keeps; K multiples of 2^-3: sums of 384 products below 2^15 in steps of 2^-9); the
    softmax-weighted values within the bf16 rounding of P."""
    lengths = [200, 0, 128]
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    batch, total = len(lengths), int(indptr[-1])
    shape = (batch, 16, 384)
    codes_q = (rng.integers(0, 2, shape) << 7) | (rng.integers(5, 9, shape) << 3) | rng.integers(0, 8, shape)
    q_values = ref.e4m3_values(codes_q) * np.exp2(-rng.integers(0, 2, shape))
    q8_nope, qs_nope = e4m3_blocks_reference(q_values[:, :, :256].reshape(-1, 256).astype(np.float32))
    q8_rope, qs_rope = e4m3_blocks_reference(q_values[:, :, 256:].reshape(-1, 128).astype(np.float32))
    codes = rng.integers(0, 256, (total, 192), dtype=np.uint8)
    scales = rng.integers(125, 129, (total + 1, 12)).astype(np.uint8)  # a row of slack: whole words are copied
    k_values = ref.unpack_e2m1(codes, axis=1) * np.repeat(ref.e8m0_values(scales[:total]), 32, axis=1)
    q8, qs = tensor(np.zeros(shape, dtype=np.uint8)), tensor(np.zeros((batch, 16, 12), dtype=np.uint8))
    scores = tensor(np.full((batch, 16, 256), np.nan, dtype=np.float32))
    m = tensor(np.zeros((batch, 16), dtype=np.float32))
    out = tensor(np.full((batch, 16, 128), np.nan, dtype=np.float32))
    launch(gk.gluon_attention_kernel, (batch,), tensor(ref.bf16_bits(q_values.astype(np.float32))).view(torch.bfloat16),
           q8, qs, tensor(codes), tensor(scales), tensor(indptr), scores, m, out, ATTENTION_LOG2, num_warps=4)
    name = "gluon_attention"
    ref.check_equal(name, "quantized Q scales", qs.numpy().reshape(-1, 12), np.concatenate([qs_nope, qs_rope], axis=1))
    ref.check_equal(name, "quantized Q codes", q8.numpy().reshape(-1, 384), np.concatenate([q8_nope, q8_rope], axis=1))
    for seq, (start, end) in enumerate(zip(indptr[:-1], indptr[1:])):
        tiles = triton_cdiv(end - start, 128)
        expected = np.full((16, 256), np.nan)
        expected[:, :128 * min(tiles, 2)] = -np.inf
        expected[:, :end - start] = q_values[seq] @ k_values[start:end].T
        ref.check_equal(name, f"sequence {seq} scores (exact; -inf past the rows)", scores.numpy()[seq],
                        expected.astype(np.float32))
        if start == end:
            ref.check_equal(name, "empty sequence: m -inf, out 0", np.concatenate([m.numpy()[seq], out.numpy()[seq].ravel()]),
                            np.concatenate([np.full(16, -np.inf), np.zeros(16 * 128)]).astype(np.float32))
            continue
        all_scores = q_values[seq] @ k_values[start:end].T
        ref.check_equal(name, f"sequence {seq} m", m.numpy()[seq], all_scores.max(axis=1).astype(np.float32))
        p = np.exp2((all_scores - all_scores.max(axis=1, keepdims=True)) * ATTENTION_LOG2)
        v = k_values[start:end, :128]
        check_within(name, f"sequence {seq} softmax(scores) @ V", out.numpy()[seq], p @ v / p.sum(axis=1, keepdims=True),
                     p @ np.abs(v) / p.sum(axis=1, keepdims=True), P_BF16_BOUND)


def run_gluon_quantize(launch, rng):
    """Gluon: per-32-block e4m3 quantization of 3 x (16, 512) bf16 in the scaled MFMA's operand layout: exact codes
    and scale bytes; blocks of zeros, negative zeros, bf16 denormals, huge values."""
    batch = 3
    x = (rng.standard_normal((batch, 16, 512)) * np.exp2(rng.integers(-30, 30, (batch, 16, 1)))).astype(np.float32)
    x[0, 0, :32], x[0, 0, 32:64] = 0.0, -0.0
    x[0, 1, :32] = np.float32(2.0 ** -130) * rng.integers(-3, 4, 32)
    x[0, 2, :32] = rng.standard_normal(32).astype(np.float32) * np.float32(2.0 ** 100)
    bits = ref.bf16_bits(x)
    q8 = tensor(np.zeros((batch, 16, 512), dtype=np.uint8))
    qs = tensor(np.zeros((batch, 16, 16), dtype=np.uint8))
    launch(gk.gluon_quantize_kernel, (batch,), tensor(bits).view(torch.bfloat16), q8, qs, num_warps=4)
    codes, scales = e4m3_blocks_reference(ref.bf16_values(bits).reshape(-1, 512))
    ref.check_equal("gluon_quantize", "scale bytes", qs.numpy().reshape(-1, 16), scales)
    ref.check_equal("gluon_quantize", "e4m3 codes", q8.numpy().reshape(-1, 512), codes)


def random_partials(rng, batch, num_splits, dims):
    """(part_acc (batch, num_splits, 16, dims), part_ml (batch, num_splits, 2, 16)) float32 with an empty split (m
    -inf, l 0) in sequence 0, a NaN m (an invalid split) at sequence 1 head 2, sequence 2 all empty; and the merged
    answer (batch, 16, dims) float64 with its error scale (the weighted sum of |acc|)."""
    m = rng.uniform(-30, 30, (batch, num_splits, 16)).astype(np.float32)
    l = rng.uniform(0.5, 40, (batch, num_splits, 16)).astype(np.float32)
    acc = rng.standard_normal((batch, num_splits, 16, dims)).astype(np.float32) * l[..., None]
    m[0, 3], l[0, 3], acc[0, 3] = -np.inf, 0.0, 0.0
    m[1, num_splits - 2, 2] = np.nan
    m[2], l[2], acc[2] = -np.inf, 0.0, 0.0
    m64 = np.nan_to_num(m.astype(np.float64), nan=-np.inf)
    top = m64.max(axis=1, keepdims=True)
    weight = np.where(np.isfinite(m64), np.exp2((m64 - np.where(np.isfinite(top), top, 0)) * ATTENTION_LOG2), 0.0)
    total = (weight * l).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = np.where(total[..., None] > 0, (weight[..., None] * acc).sum(axis=1) / total[..., None], 0.0)
        scale = (weight[..., None] * np.abs(acc)).sum(axis=1) / np.where(total > 0, total, 1)[..., None]
    expected[1, 2] = np.nan
    return acc, np.stack([m, l], axis=2), expected, scale


def run_gluon_merge(launch, rng):
    """Gluon: the merge of 3 sequences' 10 split partials at 512 dims, 4 splits a step (the last step half masked)."""
    acc, part_ml, expected, scale = random_partials(rng, 3, 10, 512)
    out = torch.zeros((3, 16, 512), dtype=torch.bfloat16)
    launch(gk.gluon_merge_kernel, (3,), out, tensor(acc), tensor(part_ml), 10, ATTENTION_LOG2, num_warps=4)
    check_within("gluon_merge", "out (bf16)", ref.bf16_values(bits_of(out)).astype(np.float64), expected, scale,
                 2.0 ** -8 + 1e-5)


def run_merge_partials(launch, rng):
    """The merge of split partials at 512 dims over 12 splits, by merge_partials_kernel (chunks of 8: a masked second
    chunk; bf16 out) and by merge_sequence_kernel (the FUSED merge alone; 4 heads a step): random partials with an
    empty split (m -inf, l 0), an invalid one (m NaN: its sequence's head is NaN), a sequence with no token."""
    batch, num_splits, dims = 3, 12, 512
    acc, part_ml, expected, scale = random_partials(rng, batch, num_splits, dims)
    out = torch.zeros((batch, 16, dims), dtype=torch.bfloat16)
    out_by_sequence = tensor(np.full((batch, 16, dims), 7.0, dtype=np.float32))
    launch(tk.merge_partials_kernel, (batch, 16, 1), out, tensor(acc), tensor(part_ml), num_splits, ATTENTION_LOG2,
           V=dims, CHUNK=8, DIMS=dims, num_warps=4)
    launch(tk.merge_sequence_kernel, (batch,), out_by_sequence, tensor(acc), tensor(part_ml), num_splits, ATTENTION_LOG2,
           V=dims, num_warps=4)
    got = ref.bf16_values(bits_of(out)).astype(np.float64)
    check_within("merge_partials", "merge_partials_kernel out (bf16)", got, expected, scale, 2.0 ** -8 + 1e-5)
    check_within("merge_partials", "merge_sequence_kernel out", out_by_sequence.numpy(), expected, scale, 1e-5)


CASES = [
    Case("integer_ops", run_integer_ops, "int32/int16 VALU: mul_lo/hi, 24-bit mad/mul, 64-bit mad, shifts, bfe, "
         "perm, bitop3, add3/or3/xad/and_or/lshl_*, min/max/med3, integer division (rcp_iflag, cvt u32/f32)"),
    Case("byte_ops", run_byte_ops, "packed bytes and halves: SDWA byte/word selects, 16-bit add/shift/bitop3, "
         "bf16 packing"),
    Case("float_ops", run_float_ops, "fp32 VALU: fma with neg modifiers, fmac, div_scale/fmas/fixup + rcp, exp, "
         "max/min/med3, |abs| modifiers, compares (o/u/lg/eq/lt), cvt i32/u32 <-> f32, packed fp32, "
         "v_mul_f32 from inline asm"),
    Case("scalar_compare", run_scalar_compare, "fp32 == a scalar argument (v_cmp_eq_f32_e32 vcc), a uniform branch on "
         "vcc (s_cbranch_vccz), an int16 shift by an SDWA byte-3 select (v_lshlrev_b16_sdwa)"),
    Case("masked_tail", run_masked_tail, "exec masking and bounds: a masked tail, stores past n dropped"),
    Case("block_reduce", run_block_reduce, "whole-block reductions over 8 warps: DPP row_shr/row_bcast with "
         "bound_ctrl, v_readlane, LDS between warps, int max/min/sum (v_add_u32_dpp), a uniform branch around a loop"),
    Case("tile_reduce", run_tile_reduce, "2-D reductions along each axis over 4 warps: DPP quad_perm/row_shl/row_shr "
         "with bank masks, LDS"),
    Case("spill", run_spill, "register spills: scratch_store/load (private memory per lane), AGPR moves, on one "
         "wave with 512 values a lane live"),
    Case("to_fp8", run_to_fp8, "fp32 -> e4m3fn: v_cvt_scalef32_pk_fp8_f32 (op_sel), s_setreg (the clamp mode), RNE, "
         "saturation, NaN"),
    Case("float_conversions", run_float_conversions, "fp32 -> bf16 (v_cvt_pk_bf16_f32), fp16 -> fp32 "
         "(v_cvt_f32_f16), bf16 -> fp32 (shifts)"),
    Case("dot_bf16_16x16", _dot_case("dot_bf16_16x16", 16, 16, 64, 4), "v_mfma_f32_16x16x32_bf16 (a 16 x 16 tile, K 64)"),
    Case("dot_bf16_16x16x16", _dot_case("dot_bf16_16x16x16", 16, 32, 16, 4), "v_mfma_f32_16x16x16_bf16 (K 16)"),
    Case("dot_bf16_32x32", _dot_case("dot_bf16_32x32", 64, 64, 64, 4), "v_mfma_f32_32x32x16_bf16 (M, N >= 32)"),
    Case("dot_bf16_trans_b", _dot_case("dot_bf16_trans_b", 32, 64, 64, 4, trans_b=True),
         "transposed LDS read of B (ds_read_b64_tr_b16)"),
    Case("dot_fp8", run_dot_fp8, "tl.dot on e4m3fn operands (fp8 MFMA), B read transposed from LDS (ds_read_b64_tr_b8)"),
    Case("dot_scaled_e4m3_e2m1_16", _dot_scaled_case("dot_scaled_e4m3_e2m1_16", 16, 64, 512, "e4m3", "e2m1", 4),
         "v_mfma_scale_f32_16x16x128_f8f6f4 (cbsz/blgp, scale operands, op_sel), e4m3 x e2m1"),
    Case("dot_scaled_e2m1_e2m1_16", _dot_scaled_case("dot_scaled_e2m1_e2m1_16", 16, 64, 512, "e2m1", "e2m1", 4),
         "v_mfma_scale_f32_16x16x128_f8f6f4, e2m1 x e2m1"),
    Case("dot_scaled_e4m3_e2m1_32", _dot_scaled_case("dot_scaled_e4m3_e2m1_32", 64, 64, 128, "e4m3", "e2m1", 4),
         "v_mfma_scale_f32_32x32x64_f8f6f4, e4m3 x e2m1"),
    Case("dot_scaled_e2m1_e2m1_32", _dot_scaled_case("dot_scaled_e2m1_e2m1_32", 64, 64, 128, "e2m1", "e2m1", 4),
         "v_mfma_scale_f32_32x32x64_f8f6f4, e2m1 x e2m1"),
    Case("dot_scaled_e2m1_bf16", run_dot_scaled_bf16, "fp4 -> bf16 by Triton's own decomposition: "
         "v_cvt_scalef32_pk_bf16_fp4 (every op_sel) + bf16 MFMA (32x32x16)"),
    Case("attention_scaled_64", _attention_case("attention_scaled_64", 64, 4, 1, tk.SCALED.value, tk.CVT_ASM.value,
                                                tk.PARTIALS.value, peel=True),
         "split attention: dot_scaled e4m3 x e2m1 scores, online softmax (exp, max/sum across lanes), inline-asm "
         "fp4 -> bf16 values, transposed bf16 dot, scalar split arithmetic, partials; then the merge kernel"),
    Case("attention_scaled_64_pipelined", _attention_case("attention_scaled_64_pipelined", 64, 4, 2, tk.SCALED.value,
                                                          tk.CVT_ASM.value, tk.FUSED.value, peel=True),
         "the same, software-pipelined (num_stages 2), the last program of a sequence merging (acq_rel atomic)"),
    Case("attention_scaled_128", _attention_case("attention_scaled_128", 128, 8, 2, tk.SCALED.value, tk.CVT_ASM.value,
                                                 tk.PARTIALS.value, merge_chunk=4, merge_dims=32),
         "the same with 128-token tiles over 8 warps (AGPR accumulators, permlane swaps)"),
    Case("attention_bf16_32", _attention_case("attention_bf16_32", 32, 4, 1, tk.BF16_SCORES.value, tk.CVT_ASM.value,
                                              tk.FUSED.value, nope=512),
         "split attention at 512 value dims with both products in bf16 from one converted tile, the last program "
         "of a sequence merging (acq_rel atomic; ds_write2 / ds_write2st64 through LDS)"),
    Case("attention_bf16_portable_16", _attention_case("attention_bf16_portable_16", 16, 4, 1, tk.BF16_SCORES.value,
                                                       tk.CVT_PORTABLE.value, tk.PARTIALS.value, merge_chunk=4,
                                                       merge_dims=128, nope=512),
         "the bf16 form at 512 value dims with the e2m1 decode in integer and fp16 ops (v_cvt_f32_f16, 16-bit "
         "compares, SDWA; AGPR accumulators)"),
    Case("e2m1_to_bf16_asm", lambda launch, rng: run_e2m1_to_bf16(launch, rng, tk.CVT_ASM.value),
         "fp4 -> bf16 by inline v_cvt_scalef32_pk_bf16_fp4 (op_sel bytes 0..3) over every code and scale, 2^-127 and "
         "NaN scales; its join/reshape into dim order"),
    Case("e2m1_to_bf16_portable", lambda launch, rng: run_e2m1_to_bf16(launch, rng, tk.CVT_PORTABLE.value),
         "fp4 -> bf16 in integer and fp16 ops: 16-bit shifts and compares, v_cvt_f32_f16, bf16 packing, each pair "
         "through an inline-asm v_mov_b32 (a register pin)"),
    Case("merge_partials", run_merge_partials, "a log-sum-exp merge of split partials at 512 dims: reductions over "
         "the split axis (DPP row_shl/row_shr with bank masks, ds_swizzle, LDS), exp, division, NaN/-inf handling"),
    Case("quantize_blocks", run_quantize_blocks, "per-32-block e4m3 quantization: max |x| (v_max3 with |abs|), "
         "exponent bit arithmetic, v_cvt_scalef32_pk_fp8_f32, byte stores"),
    Case("quantize_tensor_one_pass", _quantize_tensor_case("quantize_tensor_one_pass", 4, 64, 8, False),
         "per-tensor bf16 -> e4m3 over 8 warps: whole-block max (DPP row_bcast, readlane), div_rn, bf16 rounding, "
         "clamp (v_med3_f32), fp8 conversion"),
    Case("quantize_tensor_two_pass", _quantize_tensor_case("quantize_tensor_two_pass", 9, 16, 4, True),
         "the same in two launches: partial maxima, then a loop over them (scalar control flow)"),
    Case("async_copy", run_async_copy, "Gluon buffer_load_to_shared (buffer_load_dword/dwordx4 ... lds through M0), "
         "commit_group / wait_group (s_waitcnt vmcnt), a 3-slot LDS ring, masked rows, buffer stores", GLUON),
    Case("fp4_upcast", run_fp4_upcast, "Gluon gl.fp4_to_fp (Triton's e2m1 -> bf16), buffer loads/stores, a buffer "
         "atomic add returning the old value, an int sum across 4 warps (DPP v_add_u32)", GLUON),
    Case("gluon_attention", run_gluon_attention, "Gluon online softmax over 128-row KV tiles through a 3-slot LDS ring "
         "(buffer_load_to_shared, wait_group(1)): Q quantized in-kernel, mfma_scaled e4m3 x e2m1 (nope + rope, K and "
         "its scales from LDS, op_sel scale bytes), inline-asm fp4 -> bf16 of LDS words, the bf16 MFMA", GLUON),
    Case("gluon_quantize", run_gluon_quantize, "Gluon per-block e4m3 quantization in the MFMA operand layout: "
         "|abs| max3, exponent bit arithmetic, fp8 conversion, packed scale bytes (16-bit SDWA adds, byte shifts)",
         GLUON),
    Case("gluon_merge", run_gluon_merge, "Gluon merge of split partials: masked buffer loads of a (4, 16, 512) tile, "
         "reductions over the split axis, exp, packed fp32 FMA, bf16 stores", GLUON),
    Case("ticket", run_ticket, "atomics across programs: global_atomic_add returning the old value (v_mbcnt, "
         "s_bcnt1), acq_rel fences (buffer_wbl2, buffer_inv), .cg loads"),
]
