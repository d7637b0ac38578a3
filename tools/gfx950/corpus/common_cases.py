"""Corpus cases in the forms most Triton code takes (common_kernels.py, gluon_common.py): inputs, the launch
and the numpy answer. Rules as in cases.py: integer and bit results exact, conversions exact bit patterns
under the stated rounding, fp32 arithmetic within the stated ulps of the float64 answer, transcendentals
within the stated relative error, products and sums within rtol of the sum of their terms' magnitudes.
"""
import numpy as np
import torch

from . import Case
from . import common_kernels as ck
from . import gluon_common as gc
from . import reference as ref
from . import triton_kernels as tk
from .cases import _dot_scaled_case, bits_of, check_within, tensor, triton_cdiv, wrap32

INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1
GLUON = "a Gluon kernel: Gluon does not run in Triton's interpreter"


def f16_bits(values):
    """float64 values -> fp16 bit patterns, rounded once to nearest even (numpy's double -> half)."""
    return np.asarray(values, dtype=np.float64).astype(np.float16).view(np.uint16)


def f16_rtz_bits(values):
    """float values (finite, within fp16's range) -> fp16 bit patterns rounded toward zero."""
    values = np.asarray(values, dtype=np.float64)
    nearest = values.astype(np.float16)
    away = np.abs(nearest.astype(np.float64)) > np.abs(values)
    toward = np.where(away, np.nextafter(nearest, np.float16(0)), nearest).astype(np.float16)
    return toward.view(np.uint16)


def bf16_rtz_bits(values):
    """float32 values -> bf16 bit patterns, truncated (toward zero)."""
    return (np.asarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _f16_nan(bits):
    return ((bits & 0x7C00) == 0x7C00) & ((bits & 0x3FF) != 0)


def _bf16_nan(bits):
    return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)


def check_bits(case, what, got, expected, is_nan):
    """16-bit patterns equal; where the answer is a NaN (is_nan of its bits), a NaN (sign and payload not checked)."""
    got, expected = np.asarray(got), np.asarray(expected)
    nan = is_nan(expected)
    ref.check_equal(case, what, np.where(nan, 0, got), np.where(nan, 0, expected))
    ref.check_equal(case, f"{what} (NaN where NaN)", is_nan(got)[nan], np.ones(int(nan.sum()), dtype=bool))


# --- 16-bit floats ---------------------------------------------------------------------------------------
def run_half(launch, rng):
    """fp32 -> fp16 (nearest even and toward zero: ties, overflow, denormals), fp16 / bf16 arithmetic (each op
    rounded once from the exact value; bf16 ops through fp32 as LLVM promotes them), 16-bit pairs joined and
    split, bf16 <-> fp16 through fp32. 900 elements over 4 programs (a masked tail)."""
    n, block = 900, 256
    x = (rng.standard_normal(n) * 50).astype(np.float32)
    edges = np.array([65504.0, 65519.99, 65520.0, -70000.0, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, -2.0 ** -20,
                      1.0 + 2.0 ** -11, 1.0 + 3 * 2.0 ** -11, np.inf, -np.inf, np.nan, -0.0, 1e-30, 3e38],
                     dtype=np.float32)
    x[:edges.size] = edges
    y = (rng.standard_normal(n) * 3).astype(np.float32)
    y[:9] = [65504.0, 65519.0, -65505.0, 1.0 + 2.0 ** -11, -(1.0 + 3 * 2.0 ** -11), 2.0 ** -25, -3 * 2.0 ** -26,
             2.0 ** -24 * 1.99, 1.0 - 2.0 ** -24]
    h = (rng.standard_normal(n) * 4).astype(np.float16)
    g = (rng.standard_normal(n) * 4).astype(np.float16)
    h[:4] = [np.float16(2.0 ** -20), np.float16(60000), np.float16(-1.5), np.float16(0.0)]
    g[:4] = [np.float16(3.0), np.float16(2.0), np.float16(-1.5), np.float16(-2.0)]   # 60000 x 2 overflows to inf
    b_bits, b = ref.bf16_random(rng, n, scale=100.0)
    c_bits, c = ref.bf16_random(rng, n, scale=0.01)
    f16 = torch.zeros((ck.NUM_F16_OPS.value, n), dtype=torch.float16)
    bf16 = torch.zeros((ck.NUM_BF16_OPS.value, n), dtype=torch.bfloat16)
    f32 = torch.zeros((ck.NUM_F32_OPS.value, n), dtype=torch.float32)
    launch(ck.half_kernel, (triton_cdiv(n, block),), tensor(x), tensor(y), tensor(h), tensor(g),
           tensor(b_bits).view(torch.bfloat16), tensor(c_bits).view(torch.bfloat16), f16, bf16, f32, n, BLOCK=block,
           num_warps=4)
    x64, y64, h64, g64 = (v.astype(np.float64) for v in (x, y, h, g))
    with np.errstate(over="ignore", invalid="ignore"):
        f16_expected = {
            "from_f32": f16_bits(x64), "from_f32_rtz": f16_rtz_bits(y64), "from_bf16": f16_bits(b),
            "fma": f16_bits(h64 * g64 + h64), "add": f16_bits(h64 + g64), "mul": f16_bits(h64 * g64),
            "max": f16_bits(np.fmax(h64, g64)), "min": f16_bits(np.fmin(h64, g64)),
            "where_lt": f16_bits(np.where(h64 < g64, h64, -g64)),
            "pack_low": f16_bits(f16_bits(x64).view(np.float16).astype(np.float64) * 2),
            "pack_high": f16_bits(f16_bits(y64).view(np.float16).astype(np.float64) * 2)}
        bf16_expected = {
            "from_f32_rtz": bf16_rtz_bits(y), "from_f16": ref.bf16_bits(h.astype(np.float32)),
            "add": ref.bf16_bits(b + c), "mul": ref.bf16_bits(b * c), "max": ref.bf16_bits(np.fmax(b, c)),
            "pack_low": ref.bf16_bits(x), "pack_high": ref.bf16_bits(y)}
    got16 = bits_of(f16)
    for row, name in enumerate(ck.F16_OPS):
        check_bits("half", f"fp16 {name}", got16[row], f16_expected[name], _f16_nan)
    got_bf16 = bits_of(bf16)
    for row, name in enumerate(ck.BF16_OPS):
        check_bits("half", f"bf16 {name}", got_bf16[row], bf16_expected[name], _bf16_nan)
    f32_expected = {"from_f16": h.astype(np.float32), "from_bf16": b, "f16_times_bf16": h.astype(np.float32) * b}
    for row, name in enumerate(ck.F32_OPS):
        ref.check_equal("half", f"fp32 {name}", f32.numpy()[row], f32_expected[name])


# --- fp8 ----------------------------------------------------------------------------------------------------
def fp8_inputs(rng, n, top):
    """n float64 values within +-top: every e4m3 / e5m2 value and midpoint below top among them, random ones."""
    e4 = ref.e4m3_values(np.arange(0x7F))
    e5 = ref.e5m2_values(np.arange(0x7C))
    grid = np.unique(np.concatenate([e4, e5, (e4[:-1] + e4[1:]) / 2, (e5[:-1] + e5[1:]) / 2]))
    grid = grid[grid <= top]
    values = np.concatenate([grid, -grid, rng.standard_normal(n) * 20])[:n]
    return np.concatenate([values, rng.standard_normal(max(0, n - values.size)) * 20])


def run_fp8(launch, rng):
    _fp8_case(launch, rng, special=False)


def run_fp8_special_codes(launch, rng):
    _fp8_case(launch, rng, special=True)


def _fp8_case(launch, rng, special):
    """fp32 / fp16 / bf16 -> e4m3fn and e5m2 (round to nearest even, every code's value and every midpoint between
    neighbours within range, so ties go both ways), and every code of each back to fp32, fp16 and bf16 (exact; the
    special codes -- NaN, e5m2's infinities and denormals -- in a launch of their own)."""
    n, block = 1024, 256
    x = fp8_inputs(rng, n, 448.0).astype(np.float32)
    x[-3:] = [np.nan, -np.nan, 0.0]
    h = fp8_inputs(rng, n, 448.0).astype(np.float16)     # fp16 holds every e4m3 / e5m2 midpoint below 448 exactly
    b_bits = ref.bf16_bits(fp8_inputs(rng, n, 448.0).astype(np.float32))
    b = ref.bf16_values(b_bits)
    codes = np.arange(n) % 256
    e4, e5 = codes.astype(np.uint8), ((codes + 77) % 256).astype(np.uint8)
    # NaN; e5m2's infinities, NaNs and denormals
    e4_special, e5_special = (e4 & 0x7F) == 0x7F, ((e5 & 0x7F) >= 0x7C) | ((e5 & 0x7F) - 1 < 3)
    if special:   # those codes only (Triton 3.9's interpreter decodes e4m3 0x7F as 480, e5m2 0x7C as 65536, and
        # flushes e5m2 denormals to zero in fp16)
        e4 = np.where(codes % 2, 0x7F, 0xFF).astype(np.uint8)
        e5 = np.array([0x01, 0x02, 0x03, 0x7C, 0x7D, 0x7E, 0x7F], dtype=np.uint8)[codes % 7] | (0x80 * (codes // 7 % 2))
        e5 = e5.astype(np.uint8)
    else:
        e4, e5 = np.where(e4_special, 0x00, e4).astype(np.uint8), np.where(e5_special, 0x04, e5).astype(np.uint8)
    down = tensor(np.zeros((ck.NUM_FP8_DOWN.value, n), dtype=np.uint8))
    f32 = torch.zeros((2, n), dtype=torch.float32)
    f16 = torch.zeros((2, n), dtype=torch.float16)
    bf16 = torch.zeros((2, n), dtype=torch.bfloat16)
    launch(ck.fp8_kernel, (triton_cdiv(n, block),), tensor(x), tensor(h), tensor(b_bits).view(torch.bfloat16),
           tensor(e4), tensor(e5), down, f32, f16, bf16, n, BLOCK=block, num_warps=4)
    sources = {"f32": x.astype(np.float64), "f16": h.astype(np.float64), "bf16": b.astype(np.float64)}
    for row, name in enumerate(ck.FP8_DOWN):
        fmt, source = name.split("_from_")
        encode, is_nan = (ref.e4m3_codes, lambda c: (c & 0x7F) == 0x7F) if fmt == "e4m3" else (
            ref.e5m2_codes, lambda c: (c & 0x7F) > 0x7C)
        got, nan = down.numpy()[row], np.isnan(sources[source])
        ref.check_equal("fp8", f"{name} (at NaN inputs: 1 for a NaN code)", np.where(nan, is_nan(got), got),
                        np.where(nan, 1, encode(sources[source])))
    for row, (codes_in, decode) in enumerate(((e4, ref.e4m3_values), (e5, ref.e5m2_values))):
        expected = decode(codes_in)
        what = ("e4m3", "e5m2")[row]
        ref.check_equal("fp8", f"{what} -> fp32", f32.numpy()[row], expected.astype(np.float32))
        check_bits("fp8", f"{what} -> fp16", bits_of(f16)[row], f16_bits(expected), _f16_nan)
        check_bits("fp8", f"{what} -> bf16", bits_of(bf16)[row], ref.bf16_bits(expected.astype(np.float32)),
                   _bf16_nan)


# --- the scaled conversions by inline asm ----------------------------------------------------------------------
E2M1_GRID = ref.E2M1_VALUES[:8]


def _codes_of(word, selected, bits):
    """The two codes of `bits` bits in byte / word `selected` of each int32 word (the low one first)."""
    field = (word.view(np.uint32).astype(np.int64) >> (selected * 2 * bits)) & ((1 << (2 * bits)) - 1)
    return field & ((1 << bits) - 1), field >> bits


def _up_values(fmt, codes):
    return {"fp8": ref.e4m3_values, "bf8": ref.e5m2_values, "fp4": ref.e2m1_values}[fmt](codes)


def _encode(fmt, values):
    return {"fp8": ref.e4m3_codes, "bf8": ref.e5m2_codes, "fp4": ref.e2m1_codes}[fmt](values).astype(np.int64)


def _f16_pair_bits(low, high):
    return (f16_bits(low).astype(np.int64) | (f16_bits(high).astype(np.int64) << 16)).astype(np.uint32).view(np.int32)


def _bf16_pair_bits(low, high):
    return (ref.bf16_bits(low.astype(np.float32)).astype(np.int64)
            | (ref.bf16_bits(high.astype(np.float32)).astype(np.int64) << 16)).astype(np.uint32).view(np.int32)


def scaled_convert_reference(w, s, keep, a, b, hf, hb):
    """{(row set, row): expected int bits} of scaled_convert_kernel from the formats' definitions: up-conversions
    decode x 2^k (exact, then rounded to the target: f16 / bf16 nearest even), down-conversions encode x / 2^k
    (nearest even) into the selected byte / word of `keep`."""
    k = np.log2(s).astype(np.int64)
    expected = {}
    row = 0
    for out in ("f16", "bf16"):
        for fmt, count in (("fp8", 2), ("bf8", 2), ("fp4", 4)):
            bits = 4 if fmt == "fp4" else 8
            for sel in range(count):
                low, high = (np.ldexp(_up_values(fmt, c), k) for c in _codes_of(w, sel, bits))
                expected["up32", row] = (_f16_pair_bits if out == "f16" else _bf16_pair_bits)(low, high)
                row += 1
    row = 0
    for fmt, count in (("fp8", 2), ("bf8", 2), ("fp4", 4)):
        bits = 4 if fmt == "fp4" else 8
        for sel in range(count):
            low, high = (np.ldexp(_up_values(fmt, c), k).astype(np.float32) for c in _codes_of(w, sel, bits))
            expected["up64", row] = (low.view(np.uint32).astype(np.uint64)
                                     | (high.view(np.uint32).astype(np.uint64) << np.uint64(32))).view(np.int64)
            row += 1

    def placed(low, high, bits, sel):
        field = ((1 << (2 * bits)) - 1) << (sel * 2 * bits)
        value = (low | (high << bits)) << (sel * 2 * bits)
        return ((keep.view(np.uint32).astype(np.int64) & ~field) | (value & field)).astype(np.uint32).view(np.int32)
    row = 0
    for fmt, count in (("fp8", 2), ("bf8", 2), ("fp4", 4)):
        bits = 4 if fmt == "fp4" else 8
        for sel in range(count):
            expected["down", row] = placed(_encode(fmt, np.ldexp(a.astype(np.float64), -k)),
                                           _encode(fmt, np.ldexp(b.astype(np.float64), -k)), bits, sel)
            row += 1
    row = 0
    for pair, decode in ((hf, lambda h: h.astype(np.uint16).view(np.float16).astype(np.float64)),
                         (hb, lambda h: ref.bf16_values(h).astype(np.float64))):
        halves = [decode((pair.view(np.uint32) >> shift) & 0xFFFF) for shift in (0, 16)]
        for fmt, count in (("fp8", 2), ("bf8", 2), ("fp4", 4)):
            bits = 4 if fmt == "fp4" else 8
            for sel in range(count):
                expected["down16", row] = placed(_encode(fmt, np.ldexp(halves[0], -k)),
                                                 _encode(fmt, np.ldexp(halves[1], -k)), bits, sel)
                row += 1
    return expected


def run_scaled_convert(launch, rng):
    """Every v_cvt_scalef32_pk_* with every op_sel by inline asm over 700 elements, scales 2^-2 .. 2^0: fp8 / bf8 /
    fp4 codes (every code, NaN and infinities among them) up to f32 / f16 / bf16 exactly, f32 / f16 / bf16 pairs down
    to fp8 / bf8 / fp4 (every code's value and every midpoint between neighbours: ties both ways) into the selected
    byte or word, the other bits kept."""
    n, block = 700, 256
    w = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    w[:256] = (np.arange(256) * 0x01010101).astype(np.uint32).view(np.int32)   # every byte value in every byte
    s = np.exp2(rng.integers(-2, 1, n)).astype(np.float32)   # e5m2's largest x 2^0 still fits fp16
    keep = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    fp4_grid = np.unique(np.concatenate([E2M1_GRID, (E2M1_GRID[:-1] + E2M1_GRID[1:]) / 2]))
    small = np.concatenate([fp4_grid, -fp4_grid])   # within every format's range
    fp8 = fp8_inputs(rng, n, 448.0)
    pick = rng.random(n) < 0.5
    # fp4 rows need |x / 2^k| <= 6: draw from the fp4 grid there, fp8 values elsewhere (the fp4 rows of those are
    # checked separately below)
    a = (np.where(pick, rng.choice(small, n), fp8) * s).astype(np.float32)
    b = (np.where(pick, rng.choice(small, n), fp8[::-1]) * s).astype(np.float32)
    low = np.where(pick, rng.choice(small, n), fp8) * s
    high = np.where(pick, rng.choice(small, n), fp8[::-1]) * s
    hf = _f16_pair_bits(low, high)
    hb = _bf16_pair_bits(low, high)
    outputs = {"up32": tensor(np.zeros((ck.NUM_UP32.value, n), dtype=np.int32)),
               "up64": tensor(np.zeros((ck.NUM_UP64.value, n), dtype=np.int64)),
               "down": tensor(np.zeros((ck.NUM_DOWN.value, n), dtype=np.int32)),
               "down16": tensor(np.zeros((ck.NUM_DOWN16.value, n), dtype=np.int32))}
    launch(ck.scaled_convert_kernel, (triton_cdiv(n, block),), tensor(w), tensor(s), tensor(keep), tensor(a), tensor(b),
           tensor(hf), tensor(hb), outputs["up32"], outputs["up64"], outputs["down"], outputs["down16"], n, BLOCK=block,
           num_warps=4)
    expected = scaled_convert_reference(w, s, keep, a, b, hf, hb)
    asm = {"up32": ck.UP32_ASM.value, "up64": ck.UP64_ASM.value, "down": ck.DOWN_ASM.value, "down16": ck.DOWN16_ASM.value}
    for (rows, row), answer in expected.items():
        text = asm[rows][row].split("\n")[-1].strip()
        got = outputs[rows].numpy()[row]
        fp4_down = rows.startswith("down") and "fp4" in text
        where = pick if fp4_down else np.ones(n, dtype=bool)
        if rows.startswith("up"):   # NaN codes: any NaN of the target
            check_up(text, got, answer, rows)
        else:
            ref.check_equal("scaled_convert", text, got[where], answer[where])


def check_up(text, got, answer, rows):
    """Up-conversion results equal, except that a NaN half (or float) may be any NaN."""
    if rows == "up64":
        got32, answer32 = got.view(np.uint32).reshape(-1, 2), answer.view(np.uint32).reshape(-1, 2)
        nan = nx_nan32(answer32)
        ref.check_equal("scaled_convert", text, np.where(nan, 0, got32), np.where(nan, 0, answer32))
        ref.check_equal("scaled_convert", f"{text} (NaN where NaN)", nx_nan32(got32)[nan], np.ones(int(nan.sum()), bool))
        return
    halves_got = np.stack([got.view(np.uint32) & 0xFFFF, got.view(np.uint32) >> 16])
    halves_answer = np.stack([answer.view(np.uint32) & 0xFFFF, answer.view(np.uint32) >> 16])
    is_nan = _f16_nan if "_f16_" in text else _bf16_nan
    for half in range(2):
        check_bits("scaled_convert", f"{text} (half {half})", halves_got[half], halves_answer[half], is_nan)


def nx_nan32(bits):
    bits = np.asarray(bits, dtype=np.uint32)
    return ((bits & 0x7F800000) == 0x7F800000) & ((bits & 0x7FFFFF) != 0)


# --- tl.math ----------------------------------------------------------------------------------------------
def _erf(values):
    from math import erf
    return np.array([erf(v) for v in values])


def run_math(launch, rng):
    """tl.math over 700 elements: exp within |y| 2^-24 + 2^-22 relative (Triton computes exp2(y log2(e))); log,
    exp2, log2, erf, sin, cos within 4e-7 relative (plus 1e-7 absolute near
    zero crossings); sqrt within 1 ulp, rsqrt 2, sqrt_rn and div_rn correctly rounded; abs, floor, ceil exact."""
    n, block = 700, 256
    x = np.exp(rng.uniform(-40, 40, n)).astype(np.float32)
    x[:6] = [1.0, 2.0, 0.5, 1e-38, 3e38, 7.0]
    y = rng.uniform(-20, 20, n).astype(np.float32)
    y[:6] = [0.0, -0.0, 1.0, -3.5, 2.5, 1e-6]
    out = tensor(np.full((ck.NUM_MATH_OPS.value, n), np.nan, dtype=np.float32))
    launch(ck.math_kernel, (triton_cdiv(n, block),), tensor(x), tensor(y), out, n, BLOCK=block, num_warps=4)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    expected = {"exp": np.exp(y64), "log": np.log(x64), "sqrt": np.sqrt(x64), "rsqrt": 1 / np.sqrt(x64),
                "erf": _erf(y64), "exp2": np.exp2(y64), "log2": np.log2(x64),
                "sqrt_rn": np.sqrt(x64), "div_rn": y64 / x64, "abs": np.abs(y64), "floor": np.floor(y64),
                "ceil": np.ceil(y64), "sin": np.sin(y64), "cos": np.cos(y64)}
    got = out.numpy()
    for row, name in enumerate(ck.MATH_OPS):
        if name in ("sqrt_rn", "div_rn"):
            ref.check_ulps("math", name, got[row], expected[name], ulps=0.5)
        elif name in ("sqrt", "rsqrt"):   # v_sqrt / v_rsq: 1 ulp; Triton's interpreter, 1 / sqrt in fp32: 2
            ref.check_ulps("math", name, got[row], expected[name], ulps=1 if name == "sqrt" else 2)
        elif name in ("abs", "floor", "ceil"):
            ref.check_equal("math", name, got[row], expected[name].astype(np.float32))
        elif name == "exp":   # Triton's exp(y) is exp2(y log2(e)): the product's rounding, |y| 2^-24 relative
            check_within("math", name, got[row], expected[name], np.abs(expected[name]),
                         np.abs(y64) * 2.0 ** -24 + 2.0 ** -22)
        else:
            ref.check_close("math", name, got[row], expected[name], rtol=4e-7, atol=1e-7)


def run_ldexp(launch, rng):
    """libdevice.ldexp(y, e) exact into denormals and infinities, and int64 -> fp32 rounded to nearest even (ties,
    2^63 - 1, negative values), over 500 elements."""
    n, block = 500, 256
    y = (rng.standard_normal(n) * 8).astype(np.float32)
    e = rng.integers(-160, 160, n).astype(np.int32)
    y[:4], e[:4] = [1.5, -1.0, 3.0, 1.0], [-149, -150, 127, 128]
    a = rng.integers(INT64_MIN, INT64_MAX, n, dtype=np.int64) >> rng.integers(0, 63, n)
    a[:5] = [INT64_MAX, INT64_MIN, (1 << 40) + (1 << 16), (1 << 40) + (3 << 16), -(1 << 24) - 1]   # ties both ways
    out = tensor(np.full((2, n), np.nan, dtype=np.float32))
    launch(ck.ldexp_kernel, (triton_cdiv(n, block),), tensor(y), tensor(e), tensor(a), out, n, BLOCK=block,
           num_warps=4)
    with np.errstate(over="ignore"):
        ref.check_equal("ldexp", "ldexp(y, e)", out.numpy()[0], np.ldexp(y, e))
    ref.check_equal("ldexp", "int64 -> fp32", out.numpy()[1], a.astype(np.float32))


# --- scans ------------------------------------------------------------------------------------------------------
def run_cumsum(launch, rng):
    """tl.cumsum along each axis of (37, 100) tiles in (16, 128) blocks over 3 programs: fp32 within 1e-6 of the
    running sum of magnitudes, int32 exact (wrapping)."""
    rows, cols = 37, 100
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    i = rng.integers(-2 ** 31, 2 ** 31, (rows, cols), dtype=np.int64).astype(np.int32)
    out = tensor(np.full((rows, cols), np.nan, dtype=np.float32))
    out_i = tensor(np.zeros((2, rows, cols), dtype=np.int32))
    launch(ck.cumsum_kernel, (triton_cdiv(rows, 16),), tensor(x), tensor(i), out, out_i, rows, cols, ROWS=16,
           COLS=128, num_warps=4)
    x64 = x.astype(np.float64)
    check_within("cumsum", "fp32 cumsum along axis 1", out.numpy(), np.cumsum(x64, axis=1),
                 np.cumsum(np.abs(x64), axis=1), 1e-6)
    ref.check_equal("cumsum", "int32 cumsum along axis 1", out_i.numpy()[0], wrap32(np.cumsum(i.astype(np.int64), 1)))
    per_program = [wrap32(np.cumsum(i[p:p + 16].astype(np.int64), axis=0)) for p in range(0, rows, 16)]
    ref.check_equal("cumsum", "int32 cumsum along axis 0 (within each program's 16 rows)", out_i.numpy()[1],
                    np.concatenate(per_program))


# --- int64 ----------------------------------------------------------------------------------------------------------
def int64_reference(a, b, s, i, f):
    """INT64_OPS in numpy (wrapping two's complement; / and % truncate toward zero)."""
    au, bu, su = a.view(np.uint64), b.view(np.uint64), s.astype(np.uint64)
    quotient = (np.abs(a) // np.abs(b)) * np.sign(a) * np.sign(b)
    with np.errstate(over="ignore"):
        rows = {"add": (au + bu).view(np.int64), "sub": (au - bu).view(np.int64), "mul": (au * bu).view(np.int64),
                "div": quotient, "rem": a - quotient * b, "shl": (au << su).view(np.int64), "ashr": a >> s,
                "lshr": (au >> su).view(np.int64), "and_or_xor": ((a & b) | (a ^ 0x0F0F0F0F0F0F0F0F)) ^ b,
                "max": np.maximum(a, b), "min": np.minimum(a, b), "lt_select": np.where(a < b, a, b - 7), "neg": -a,
                "from_i32": i.astype(np.int64),
                "from_f64": np.trunc(f).astype(np.int64), "abs": np.abs(a)}
    return rows


def run_int64(launch, rng):
    """int64 arithmetic, shifts, compares and conversions over 600 elements: values across the whole range (and
    small ones, 0 and +-1), divisions by large and small divisors, every shift count."""
    n, block = 600, 256
    a = rng.integers(INT64_MIN + 1, INT64_MAX, n, dtype=np.int64)
    a[::3] >>= rng.integers(0, 60, a[::3].size)
    a[:6] = [0, 1, -1, INT64_MAX, INT64_MIN + 1, 2 ** 32]
    b = rng.integers(INT64_MIN + 1, INT64_MAX, n, dtype=np.int64) >> rng.integers(0, 62, n)
    b[b == 0] = 5
    b[:6] = [3, -2, 7, -1, 2 ** 32 + 1, 2 ** 31]
    s = (np.arange(n) % 64).astype(np.int32)
    i = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    f = rng.uniform(-2.0 ** 62, 2.0 ** 62, n) / np.exp2(rng.integers(0, 60, n))
    out = tensor(np.zeros((ck.NUM_INT64_OPS.value, n), dtype=np.int64))
    launch(ck.int64_kernel, (triton_cdiv(n, block),), tensor(a), tensor(b), tensor(s), tensor(i), tensor(f), out, n,
           BLOCK=block, num_warps=4)
    expected = int64_reference(a, b, s, i, f)
    for row, name in enumerate(ck.INT64_OPS):
        ref.check_equal("int64", name, out.numpy()[row], expected[name])


def run_wide_reduce(launch, rng):
    """int64 sum / max / min and float64 max / min of 1000 values over 8 warps (64-bit values through LDS)."""
    n = 1000
    a = rng.integers(INT64_MIN, INT64_MAX, n, dtype=np.int64)
    f = rng.standard_normal(n) * 1e100
    out = tensor(np.zeros(3, dtype=np.int64))
    out_f = tensor(np.zeros(2, dtype=np.float64))
    launch(ck.wide_reduce_kernel, (1,), tensor(a), tensor(f), out, out_f, n, BLOCK=1024, num_warps=8)
    total = int(a.view(np.uint64).sum(dtype=np.uint64).view(np.int64))
    ref.check_equal("wide_reduce", "int64 sum, max, min", out.numpy(), np.array([total, a.max(), a.min()]))
    ref.check_equal("wide_reduce", "float64 max, min", out_f.numpy(), np.array([f.max(), f.min()]))


def run_lds_pairs(launch, rng):
    """Gluon: a (32, 64) fp32 tile through shared memory, read back 2 rows x 2 columns a lane: out = 3 x - 1."""
    x = rng.standard_normal((32, 64)).astype(np.float32)
    out = tensor(np.full((32, 64), np.nan, dtype=np.float32))
    launch(gc.lds_pairs_kernel, (1,), tensor(x), out, num_warps=4)
    ref.check_ulps("lds_pairs", "3 x - 1", out.numpy(), x.astype(np.float64) * 3 - 1, ulps=1,
                   magnitude=np.abs(x.astype(np.float64) * 3) + 1)


def run_pipelined_matmul(launch, rng):
    """Gluon: sum over K steps of (a * row scales) @ b, a (100, 80) bf16, b (80, 96) bf16, in 64 x 64 tiles (2 x 2
    programs), K in 3 steps of 32 through a 3-slot ring of masked async copies (rows, columns and k past the edges
    masked, the last K step half empty, the copies past the last step masked whole; K and N multiples of 16, as a
    direct-to-LDS copy of 16 bytes a lane needs them proven); scales powers of two: fp32 within 1e-5 of the
    magnitudes; c's guard row past the edge untouched."""
    m, n, k = 100, 96, 80
    steps = triton_cdiv(k, 32)
    a, a_values = dot_operand(rng, "bf16", (m, k))
    b, b_values = dot_operand(rng, "bf16", (k, n))
    scales = np.exp2(rng.integers(-3, 4, (m, steps))).astype(np.float32)
    c = tensor(np.full((m + 1, n), np.nan, dtype=np.float32))   # a guard row past m
    launch(gc.pipelined_matmul_kernel, (triton_cdiv(m, 64), triton_cdiv(n, 64)), a, b, tensor(scales), c, m, n, k,
           STAGES=3, num_warps=4)
    scaled = a_values * np.repeat(scales, 32, axis=1)[:, :k]
    ref.check_product("pipelined_matmul", c.numpy()[:m], scaled, b_values)
    ref.check_equal("pipelined_matmul", "guard row past m (NaN)", np.isnan(c.numpy()[m]), np.ones(n, dtype=bool))


# --- matrix products ----------------------------------------------------------------------------------------------
def dot_operand(rng, dtype, shape):
    """(torch tensor, float64 values) of a random (shape) operand of `dtype`: "f16", "bf16", "e4m3", "e5m2", "i8"
    (every finite code possible for the fp8 formats, the whole int8 range)."""
    if dtype == "f16":
        values = (rng.standard_normal(shape) * 2).astype(np.float16)
        return tensor(values), values.astype(np.float64)
    if dtype == "bf16":
        bits, values = ref.bf16_random(rng, shape, scale=2.0)
        return tensor(bits).view(torch.bfloat16), values.astype(np.float64)
    if dtype == "e4m3":
        codes = ref.random_e4m3(rng, shape)
        return tensor(codes).view(torch.float8_e4m3fn), ref.e4m3_values(codes)
    if dtype == "e5m2":
        codes = rng.integers(0, 256, shape, dtype=np.uint8)
        codes = np.where((codes & 0x7F) >= 0x7C, codes & 0xF3, codes).astype(np.uint8)   # no inf / NaN codes
        return tensor(codes).view(torch.float8_e5m2), ref.e5m2_values(codes)
    values = rng.integers(-128, 128, shape, dtype=np.int64).astype(np.int8)
    return tensor(values), values.astype(np.float64)


def _typed_dot_case(name, dtype, m, n, k, trans_b=False):
    """tl.dot of two `dtype` operands (m, k) @ (k, n) + c through triton_kernels.dot_kernel (int8: int8_dot_kernel,
    an int32 accumulator), 4 warps: fp32 within 1e-5 of the sum of the terms' magnitudes, int32 exact."""
    def run(launch, rng):
        a, a_values = dot_operand(rng, dtype, (m, k))
        b, b_values = dot_operand(rng, dtype, (k, n))
        if dtype == "i8":
            c = rng.integers(-2 ** 20, 2 ** 20, (m, n)).astype(np.int32)
            out = tensor(np.full((m, n), -1, dtype=np.int32))
        else:
            c = rng.standard_normal((m, n)).astype(np.float32)
            out = tensor(np.full((m, n), np.nan, dtype=np.float32))
        if dtype == "i8":
            launch(ck.int8_dot_kernel, (1,), a, b, tensor(c), out, M=m, N=n, K=k, num_warps=4)
        else:
            launch(tk.dot_kernel, (1,), a, b, tensor(c), out, k, 1, n, 1, M=m, N=n, K=k, TRANS_B=trans_b, num_warps=4)
        if dtype == "i8":
            ref.check_equal(name, "int8 product + c", out.numpy(), (a_values @ b_values).astype(np.int64) + c)
        else:
            ref.check_product(name, out.numpy(), a_values, b_values, c)
    return run


def _upcast_dot_case(name, fp8, m, n, k):
    """upcast_dot_kernel: bf16 (m, k) @ fp8 (k, n) converted to bf16 (exact), fp32 within 1e-5 of the magnitudes."""
    def run(launch, rng):
        a, a_values = dot_operand(rng, "bf16", (m, k))
        b, b_values = dot_operand(rng, fp8, (k, n))
        out = tensor(np.full((m, n), np.nan, dtype=np.float32))
        launch(ck.upcast_dot_kernel, (1,), a, b, out, M=m, N=n, K=k, num_warps=4)
        ref.check_product(name, out.numpy(), a_values, b_values)
    return run


def _matmul_case(name, m, n, k, dtype, out_dtype, blocks, group, num_stages, leaky=False):
    """tiled_matmul_kernel (Triton's tutorial style) on (m, k) @ (k, n), none a multiple of the blocks: the output in
    `out_dtype` within its rounding (half an ulp of the fp32 sum) plus 1e-5 of the sum of the terms' magnitudes."""
    def run(launch, rng):
        a, a_values = dot_operand(rng, dtype, (m, k))
        b, b_values = dot_operand(rng, dtype, (k, n))
        torch_dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[out_dtype]
        c = torch.full((m, n), float("nan"), dtype=torch_dtype)
        block_m, block_n, block_k = blocks
        grid = (triton_cdiv(m, block_m) * triton_cdiv(n, block_n),)
        launch(ck.tiled_matmul_kernel, grid, a, b, c, m, n, k, k, 1, n, 1, n, 1, BLOCK_M=block_m, BLOCK_N=block_n,
               BLOCK_K=block_k, GROUP_M=group, LEAKY=leaky, num_warps=4, num_stages=num_stages)
        exact = a_values @ b_values
        magnitude = np.abs(a_values) @ np.abs(b_values)
        if leaky:
            exact, magnitude = np.where(exact >= 0, exact, 0.01 * exact), np.where(exact >= 0, magnitude,
                                                                                   0.01 * magnitude)
        unit = {"f16": 2.0 ** -11, "bf16": 2.0 ** -8, "f32": 2.0 ** -24}[out_dtype]
        check_within(name, f"c ({out_dtype})", c.float().numpy().astype(np.float64), exact,
                     np.abs(exact) * unit / 1e-5 + magnitude, 1e-5)
    return run


def run_layer_norm(launch, rng):
    """layer_norm_kernel (Triton's tutorial style) on 7 rows of 700 fp16 values (3 passes of 256 columns, a masked
    tail) with fp32 weight and bias: mean and rstd within 1e-5, y (fp16) within its rounding."""
    rows, cols, block = 7, 700, 256
    x = (rng.standard_normal((rows, cols)) * 3 + rng.uniform(-5, 5, (rows, 1))).astype(np.float16)
    w = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    y = torch.full((rows, cols), float("nan"), dtype=torch.float16)
    mean, rstd = torch.zeros(rows), torch.zeros(rows)
    eps = 1e-5
    launch(ck.layer_norm_kernel, (rows,), tensor(x), y, tensor(w), tensor(b), mean, rstd, cols, cols, eps,
           BLOCK=block, num_warps=4)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1)
    inv = 1 / np.sqrt(((x64 - mu[:, None]) ** 2).mean(axis=1) + eps)
    ref.check_close("layer_norm", "mean", mean.numpy(), mu, rtol=1e-5, atol=1e-5)
    ref.check_close("layer_norm", "rstd", rstd.numpy(), inv, rtol=1e-5)
    expected = (x64 - mu[:, None]) * inv[:, None] * w + b
    check_within("layer_norm", "y (fp16)", y.float().numpy().astype(np.float64), expected,
                 np.abs(expected) * 2.0 ** -11 + 1e-4 * (np.abs(x64 - mu[:, None]) * inv[:, None] * w + np.abs(b)), 1.0)


# --- a split-KV decode in two stages ---------------------------------------------------------------------------
def run_decode(launch, rng):
    """A split-KV decode (GQA: 16 query heads on 2 KV heads, head dim 64, paged KV in shuffled pages) in two launches:
    4 splits of each sequence's tokens (lengths 37, 0, 150, 3: an empty sequence, empty splits), then their merge by
    log-sum-exp. Output (bf16) within its rounding plus 2^-8 of softmax(s) |v| (P rounded to bf16 for the PV dot)."""
    lengths, q_heads, kv_heads, d, splits = [37, 0, 150, 3], 16, 2, 64, 4
    tokens = sum(lengths) + 11
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = rng.permutation(tokens)[:sum(lengths)].astype(np.int32)
    q_bits, q = ref.bf16_random(rng, (len(lengths), q_heads, d))
    k_bits, k = ref.bf16_random(rng, (tokens, kv_heads, d))
    v_bits, v = ref.bf16_random(rng, (tokens, kv_heads, d))
    sm_scale = 1 / np.sqrt(d)
    partial = tensor(np.full((len(lengths), q_heads, splits, d + 1), np.nan, dtype=np.float32))
    out = torch.full((len(lengths), q_heads, d), float("nan"), dtype=torch.bfloat16)
    group = q_heads // kv_heads
    launch(ck.decode_stage1_kernel, (len(lengths), kv_heads, splits), tensor(q_bits).view(torch.bfloat16),
           tensor(k_bits).view(torch.bfloat16), tensor(v_bits).view(torch.bfloat16), tensor(indptr), tensor(indices),
           partial, sm_scale, q_heads, kv_heads * d, NUM_SPLITS=splits, GROUP=group, BLOCK_N=32, D=d, DV=d,
           num_warps=4)
    launch(ck.decode_stage2_kernel, (len(lengths), q_heads), partial, tensor(indptr), out, q_heads, NUM_SPLITS=splits,
           DV=d, num_warps=4)
    got = out.float().numpy().astype(np.float64)
    for seq, length in enumerate(lengths):
        if length == 0:
            ref.check_equal("decode", "empty sequence: 0", got[seq], np.zeros((q_heads, d)))
            continue
        rows = indices[indptr[seq]:indptr[seq + 1]]
        kv_of_head = np.arange(q_heads) // group
        scores = np.einsum("hd,thd->ht", q[seq].astype(np.float64), k[rows][:, kv_of_head].astype(np.float64)) * sm_scale
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        values = v[rows][:, kv_of_head].astype(np.float64)          # (t, h, d)
        expected = np.einsum("ht,thd->hd", p, values) / p.sum(axis=1, keepdims=True)
        scale = np.einsum("ht,thd->hd", p, np.abs(values)) / p.sum(axis=1, keepdims=True)
        check_within("decode", f"sequence {seq} output (bf16)", got[seq], expected,
                     np.abs(expected) * 2.0 ** -8 / (2.0 ** -8 + 1e-5) + scale, 2.0 ** -8 + 1e-5)


# --- atomics ---------------------------------------------------------------------------------------------------------
def check_exchanges(case, what, old, final, initial, slots):
    """Exchanges e -> slot e % slots from `initial`: per slot, the old values returned plus the final value are the
    initial value plus the indices exchanged in (each value leaves the slot exactly once)."""
    n = old.size
    for slot in range(slots):
        mine = np.arange(slot, n, slots)
        ref.check_equal(case, f"{what}: slot {slot}'s old values and final value",
                        np.sort(np.append(old[mine], final[slot])), np.sort(np.append(mine, initial)))


def check_compare_swaps(case, what, old, final, slots):
    """Compare-and-swap of e into slot e % slots where it holds -1: one element per slot sees -1 and its index is
    the slot's final value; every other sees that index."""
    for slot in range(slots):
        mine = np.arange(slot, old.size, slots)
        winners = mine[old[mine] == -1]
        ref.check_equal(case, f"{what}: slot {slot}: one swap, the final value its index", np.append(winners, final[slot]),
                        np.array([final[slot], final[slot]]))
        ref.check_equal(case, f"{what}: slot {slot}: the others saw the winner", old[mine][old[mine] != -1],
                        np.full(mine.size - 1, final[slot]))


def run_atomics(launch, rng):
    """Every 32-bit atomic but the exchange over 3 programs of 256 (a masked tail of 700 elements) into 8 slots: int
    add returning tickets (each slot's a permutation), fp32 add of multiples of 2^-6 (sums exact in any order), int /
    uint / fp32 max and min (negative floats too), and / or / xor, compare-and-swap (its old values)."""
    n, block, slots = 700, 256, ck.ATOMIC_SLOTS.value
    x = (rng.integers(-512, 512, n) / 64.0).astype(np.float32)
    x[:3] = [-0.0, -8.0, 7.984375]
    i = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
    count = tensor(np.zeros(slots, dtype=np.int32))
    fsum = tensor(np.zeros(slots, dtype=np.float32))
    imax = tensor(np.array([-2 ** 31] * slots + [2 ** 31 - 1] * slots, dtype=np.int32))
    umax = tensor(np.array([0] * slots + [-1] * slots, dtype=np.int32))
    fmax = tensor(np.array([-np.inf] * slots + [np.inf] * slots, dtype=np.float32))
    bits = tensor(np.array([-1] * slots + [0] * slots * 2, dtype=np.int32))
    cas = tensor(np.full(slots, -1, dtype=np.int32))
    old = tensor(np.full((2, n), -7, dtype=np.int32))
    launch(ck.atomics_kernel, (triton_cdiv(n, block),), tensor(x), tensor(i), count, fsum, imax, umax, fmax, bits,
           cas, old, n, BLOCK=block, num_warps=4)
    per_slot = [np.arange(s, n, slots) for s in range(slots)]
    iu = i.view(np.uint32)
    ref.check_equal("atomics", "int add", count.numpy(), np.array([m.size for m in per_slot], dtype=np.int32))
    for s, mine in enumerate(per_slot):
        ref.check_equal("atomics", f"slot {s}'s tickets", np.sort(old.numpy()[1][mine]), np.arange(mine.size))
    ref.check_equal("atomics", "fp32 add", fsum.numpy(), np.array([x[m].astype(np.float64).sum() for m in per_slot],
                                                                   dtype=np.float32))
    ref.check_equal("atomics", "int max, min", imax.numpy(), np.array([i[m].max() for m in per_slot] +
                                                                       [i[m].min() for m in per_slot], dtype=np.int32))
    ref.check_equal("atomics", "uint max, min", umax.numpy().view(np.uint32),
                    np.array([iu[m].max() for m in per_slot] + [iu[m].min() for m in per_slot], dtype=np.uint32))
    ref.check_equal("atomics", "fp32 max, min", fmax.numpy(), np.array([x[m].max() for m in per_slot] +
                                                                        [x[m].min() for m in per_slot], dtype=np.float32))
    ref.check_equal("atomics", "and, or, xor", bits.numpy(), np.array(
        [np.bitwise_and.reduce(i[m]) for m in per_slot] + [np.bitwise_or.reduce(i[m]) for m in per_slot] +
        [np.bitwise_xor.reduce(i[m]) for m in per_slot], dtype=np.int32))
    check_compare_swaps("atomics", "compare-and-swap", old.numpy()[0], cas.numpy(), slots)


def run_wide_atomics(launch, rng):
    """The 64- and 16-bit atomics over 2 programs of 256 (a masked tail of 300 elements) into 8 slots: int64 add
    (wrapping), max, min, and / or / xor, compare-and-swap; float64 add of multiples of 2^-20, fp16 add of multiples
    of 1/4 (every sum exact in any order)."""
    n, block, slots = 300, 256, ck.ATOMIC_SLOTS.value
    a = rng.integers(INT64_MIN, INT64_MAX, n, dtype=np.int64)
    f = rng.integers(-2 ** 40, 2 ** 40, n) / 2.0 ** 20
    h = (rng.integers(-16, 17, n) / 4.0).astype(np.float16)
    total = tensor(np.zeros(slots, dtype=np.int64))
    extremes = tensor(np.array([INT64_MIN] * slots + [INT64_MAX] * slots, dtype=np.int64))
    bits = tensor(np.array([-1] * slots + [0] * slots * 2, dtype=np.int64))
    cas = tensor(np.full(slots, -1, dtype=np.int64))
    fsum = tensor(np.zeros(slots, dtype=np.float64))
    hsum = torch.zeros(slots, dtype=torch.float16)
    old = tensor(np.full(n, -7, dtype=np.int64))
    launch(ck.wide_atomics_kernel, (triton_cdiv(n, block),), tensor(a), tensor(f), tensor(h), total, extremes, bits,
           cas, fsum, hsum, old, n, BLOCK=block, num_warps=4)
    per_slot = [np.arange(s, n, slots) for s in range(slots)]
    ref.check_equal("wide_atomics", "int64 add", total.numpy(),
                    np.array([a[m].view(np.uint64).sum(dtype=np.uint64) for m in per_slot]).view(np.int64))
    ref.check_equal("wide_atomics", "int64 max, min", extremes.numpy(),
                    np.array([a[m].max() for m in per_slot] + [a[m].min() for m in per_slot]))
    ref.check_equal("wide_atomics", "int64 and, or, xor", bits.numpy(), np.array(
        [np.bitwise_and.reduce(a[m]) for m in per_slot] + [np.bitwise_or.reduce(a[m]) for m in per_slot] +
        [np.bitwise_xor.reduce(a[m]) for m in per_slot]))
    check_compare_swaps("wide_atomics", "int64 compare-and-swap", old.numpy(), cas.numpy(), slots)
    ref.check_equal("wide_atomics", "float64 add", fsum.numpy(), np.array([f[m].sum() for m in per_slot]))
    ref.check_equal("wide_atomics", "fp16 add", hsum.numpy(),
                    np.array([h[m].astype(np.float64).sum() for m in per_slot], dtype=np.float16))


def run_exchange(launch, rng):
    """tl.atomic_xchg of int32, int64 and float32 over 2 programs of 256 (a masked tail of 300) into 8 slots: each
    slot's old values and final value are its initial value and the values exchanged in."""
    n, block, slots = 300, 256, ck.ATOMIC_SLOTS.value
    xchg = tensor(np.full(slots, -1, dtype=np.int32))
    wide = tensor(np.full(slots, -1, dtype=np.int64))
    floats = tensor(np.full(slots, -1.0, dtype=np.float32))
    old = tensor(np.full((3, n), -7, dtype=np.int64))
    launch(ck.exchange_kernel, (triton_cdiv(n, block),), xchg, wide, floats, old, n, BLOCK=block, num_warps=4)
    check_exchanges("atomic_xchg", "int32", old.numpy()[0], xchg.numpy(), -1, slots)
    check_exchanges("atomic_xchg", "int64", old.numpy()[1], wide.numpy(), -1, slots)
    check_exchanges("atomic_xchg", "float32 (e + 0.5, truncated)", old.numpy()[2], np.trunc(floats.numpy()), -1, slots)


def run_bf16_atomic(launch, rng):
    """bf16 tl.atomic_add of 300 multiples of 1/2 into 8 slots (sums exact in any order), 2 programs (a masked tail)."""
    n, block, slots = 300, 256, ck.ATOMIC_SLOTS.value
    b_values = (rng.integers(-4, 5, n) / 2.0).astype(np.float32)
    bsum = torch.zeros(slots, dtype=torch.bfloat16)
    launch(ck.bf16_atomic_kernel, (triton_cdiv(n, block),), tensor(ref.bf16_bits(b_values)).view(torch.bfloat16), bsum,
           n, BLOCK=block, num_warps=4)
    ref.check_equal("atomic_add_bf16", "bf16 add", bsum.float().numpy(),
                    np.array([b_values[s::slots].astype(np.float64).sum() for s in range(slots)], dtype=np.float32))


# tl.dot of each operand type at the 16 x 16 and 32 x 32 MFMA shapes: (case, type, M, N, K, what it exercises)
TYPED_DOTS = (
    ("dot_f16_16x16", "f16", 16, 16, 64, "tl.dot fp16, a 16 x 16 tile (v_mfma_f32_16x16x32_f16)"),
    ("dot_f16_32x32", "f16", 32, 64, 64, "tl.dot fp16, 32 x 32 MFMAs (v_mfma_f32_32x32x16_f16)"),
    ("dot_bf16_32x32_k32", "bf16", 32, 32, 32, "tl.dot bf16, one 32 x 32 tile, K 32"),
    ("dot_e4m3_16x16", "e4m3", 16, 16, 128, "tl.dot fp8 e4m3, a 16 x 16 tile (the f8f6f4 16x16x128 MFMA)"),
    ("dot_e4m3_32x32", "e4m3", 32, 32, 64, "tl.dot fp8 e4m3, 32 x 32 (the f8f6f4 32x32x64 MFMA)"),
    ("dot_e5m2_16x16", "e5m2", 16, 16, 128, "tl.dot fp8 e5m2 (cbsz/blgp 1), 16 x 16"),
    ("dot_e5m2_32x32", "e5m2", 32, 32, 64, "tl.dot fp8 e5m2, 32 x 32"),
    ("dot_i8_16x16", "i8", 16, 16, 128, "tl.dot int8 -> int32 (v_mfma_i32_16x16x64_i8)"),
    ("dot_i8_32x32", "i8", 32, 32, 64, "tl.dot int8 -> int32 (v_mfma_i32_32x32x32_i8)"),
)
# bf16 x fp8 converted to bf16: (case, fp8 type, M, N, K, what it exercises)
UPCAST_DOTS = (
    ("upcast_dot_e4m3", "e4m3", 32, 32, 64, "bf16 x fp8 e4m3 converted to bf16 after its transposing LDS read "
     "(ds_read_b64_tr_b8 into v_cvt_scalef32_pk_bf16_fp8, both words)"),
    ("upcast_dot_e5m2", "e5m2", 16, 64, 64, "bf16 x fp8 e5m2 converted to bf16 (v_cvt_scalef32_pk_bf16_bf8)"),
)


CASES = [
    Case("half", run_half, "fp16 / bf16: conversions from fp32 (RNE, RTZ: v_cvt_pk_f16_f32, v_cvt_pkrtz), 16-bit "
         "arithmetic (packed and scalar f16), bf16 ops through fp32, pairs joined and split (packs)"),
    Case("fp8", run_fp8, "fp8 e4m3fn / e5m2 from fp32, fp16 and bf16 and back: the gfx950 scaled converts "
         "(v_cvt_scalef32_*), every code"),
    Case("fp8_special", run_fp8_special_codes, "fp8_kernel on e4m3fn's NaN codes and e5m2's infinities, NaNs and denormals -> "
         "fp32 / fp16 / bf16", "Triton 3.9's interpreter decodes e4m3fn 0x7F as 480 and e5m2 0x7C as 65536, and flushes "
         "e5m2 denormals in fp16"),
    Case("scaled_convert", run_scaled_convert, "every v_cvt_scalef32_pk_* conversion (fp8 / bf8 / fp4 <-> f32 / f16 / "
         "bf16) with every op_sel (source byte or word, destination byte or word), by inline asm",
         "inline asm does not run in Triton's interpreter"),
    Case("ldexp", run_ldexp, "libdevice.ldexp (v_ldexp_f32), int64 -> fp32 (v_ffbh, 64-bit shifts, v_ldexp_f32)",
         "libdevice functions do not run in Triton's interpreter"),
    Case("math", run_math, "tl.math: exp, log, sqrt, rsqrt, erf, exp2, log2 (v_log_f32), "
         "correctly rounded sqrt and division, sin, cos, floor, ceil"),
    Case("cumsum", run_cumsum, "tl.cumsum along each axis: scans across lanes (DPP, permutes) and warps (LDS)"),
    *(Case(name, _typed_dot_case(name, dtype, m, n, k), what) for name, dtype, m, n, k, what in TYPED_DOTS),
    *(Case(name, _upcast_dot_case(name, fp8, m, n, k), what) for name, fp8, m, n, k, what in UPCAST_DOTS),
    Case("dot_scaled_e4m3_e4m3_16", _dot_scaled_case("dot_scaled_e4m3_e4m3_16", 16, 64, 256, "e4m3", "e4m3", 4),
         "tl.dot_scaled e4m3 x e4m3, v_mfma_scale_f32_16x16x128_f8f6f4"),
    Case("dot_scaled_e4m3_e4m3_32", _dot_scaled_case("dot_scaled_e4m3_e4m3_32", 64, 64, 128, "e4m3", "e4m3", 4),
         "tl.dot_scaled e4m3 x e4m3, v_mfma_scale_f32_32x32x64_f8f6f4"),
    Case("matmul_f16", _matmul_case("matmul_f16", 200, 136, 100, "f16", "f16", (64, 64, 32), 4, 2, leaky=True),
         "a tiled matmul in Triton's tutorial style: grouped tile order, masked K edges, software pipelining "
         "(num_stages 2), fp16 out (v_cvt_pk_f16_f32), leaky ReLU"),
    Case("matmul_bf16_32", _matmul_case("matmul_bf16_32", 96, 80, 72, "bf16", "bf16", (32, 32, 32), 2, 2),
         "the tutorial-style matmul with 32 x 32 tiles, bf16 in and out"),
    Case("matmul_e4m3", _matmul_case("matmul_e4m3", 64, 64, 200, "e4m3", "f32", (32, 32, 64), 1, 2),
         "the tutorial-style matmul on fp8 e4m3 operands, fp32 out"),
    Case("decode", run_decode, "a split-KV decode in two stages as public decode-attention kernels write it: paged KV "
         "through an index table, GQA heads in one tl.dot, online softmax with tl.exp / tl.log, empty splits and an "
         "empty sequence, then the log-sum-exp merge of the splits, bf16 out"),
    Case("layer_norm", run_layer_norm, "a layer norm in Triton's tutorial style: row mean and variance in column "
         "passes, rsqrt / division, fp16 in and out"),
    Case("wide_reduce", run_wide_reduce, "int64 and float64 reductions across 8 warps (64-bit LDS reads and "
         "writes, 64-bit compares and adds)"),
    Case("lds_pairs", run_lds_pairs, "Gluon shared memory read back in another layout: two 8-byte reads one row "
         "pitch apart (ds_read2_b64)", GLUON),
    Case("atomics", run_atomics, "every 32-bit tl.atomic_* but xchg: add (tickets), fp32 add, int / uint / fp32 max "
         "and min, and / or / xor, cas; relaxed, acquire, release, acq_rel at cta, gpu and sys scope; masked lanes"),
    Case("wide_atomics", run_wide_atomics, "64- and 16-bit atomics: int64 add / max / min / and / or / xor / cas, "
         "float64 add, fp16 add"),
    Case("atomic_xchg", run_exchange, "tl.atomic_xchg of int32, int64 and float32 (returning)",
         "Triton 3.9's interpreter has no float32 atomic_xchg", runner="Triton 3.6.0 cannot build tl.atomic_xchg for gfx950 ('failed to translate module to LLVM IR')"),
    Case("atomic_add_bf16", run_bf16_atomic, "bf16 tl.atomic_add", "Triton 3.9's interpreter has no bf16 atomic add"),
    Case("pipelined_matmul", run_pipelined_matmul, "Gluon software pipeline: a 3-slot ring of masked async copies "
         "(buffer_load_dwordx4 ... lds; Triton 3.8+ masks whole copies by an out-of-range M0, s_cselect_b32 m0, ..., "
         "0x7fffffff), wait_group, bf16 MFMA, masked buffer stores", GLUON),
    Case("int64", run_int64, "int64: 64-bit add/sub/mul/div/rem, shifts (v_lshrrev_b64, v_ashrrev_i64), compares, "
         "conversions to and from fp32 / fp64"),
]
