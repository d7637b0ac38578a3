"""Number formats of the gfx950 instruction set, on numpy arrays of bit patterns.

Every function takes and returns unsigned bit patterns (uint32 for 32-bit values, small
unsigned ints for the narrow formats) or float64 values, vectorized over lanes. Rounding
and saturation follow AMD's CDNA4 ISA pseudocode: conversions to bf16 and fp8 round to
nearest even; fp32 -> fp8 (e4m3fn) saturates to +-448 when the MODE register's FP16_OVFL
bit is set (Triton sets it on gfx950) and gives NaN past the range otherwise; e8m0 scales
are 2^(byte - 127) with byte 255 NaN.
"""
import numpy as np

U32 = np.uint32
F32_SIGN = 0x80000000
F32_EXP = 0x7F800000
F32_MANT = 0x007FFFFF


def f32(bits):
    """uint32 bit patterns -> float32 values (a view; scalars too)."""
    return np.asarray(bits, dtype=U32).view(np.float32)


def bits32(values):
    """float32 (or float64, rounded to float32 to nearest even) values -> uint32 patterns."""
    return np.asarray(values, dtype=np.float32).view(U32)


def is_nan32(bits):
    bits = np.asarray(bits, dtype=U32)
    return ((bits & F32_EXP) == F32_EXP) & ((bits & F32_MANT) != 0)


def quiet32(bits):
    """NaNs made quiet (the quiet bit set), other values unchanged."""
    bits = np.asarray(bits, dtype=U32)
    return np.where(is_nan32(bits), bits | U32(0x00400000), bits).astype(U32)


def exponent32(bits):
    """The biased exponent field of float32 bit patterns."""
    return (np.asarray(bits, dtype=U32) >> 23) & 0xFF


# --- bf16 / f16 ----------------------------------------------------------------------

def f32_to_bf16(bits):
    """float32 patterns -> bf16 patterns (uint32 holding 16 bits), round to nearest even,
    NaN kept quiet."""
    bits = np.asarray(bits, dtype=U32)
    rounded = (bits.astype(np.uint64) + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return np.where(is_nan32(bits), (bits >> 16) | 0x40, rounded & 0xFFFF).astype(U32)


def bf16_to_f32(bits16):
    return (np.asarray(bits16, dtype=U32) & 0xFFFF) << 16


def f16_to_f32(bits16):
    return bits32((np.asarray(bits16, dtype=U32) & 0xFFFF).astype(np.uint16).view(np.float16).astype(np.float32))


def f32_to_f16(bits):
    """float32 patterns -> f16 patterns (uint32 holding 16 bits), round to nearest even (overflow: inf)."""
    with np.errstate(over="ignore"):
        return np.asarray(f32(bits).astype(np.float16).view(np.uint16), dtype=U32)


def f32_to_f16_rtz(bits):
    """float32 patterns -> f16 patterns rounded toward zero: a finite value past the largest f16 gives +-65504,
    infinities and NaN (made quiet) stay."""
    bits = np.asarray(bits, dtype=U32)
    values = f32(bits).astype(np.float64)
    nearest = f32_to_f16(bits)
    wide = f16_to_f32(nearest).view(np.float32).astype(np.float64)
    finite = np.isfinite(values)
    away = finite & (np.abs(wide) > np.abs(values))
    # one f16 step toward zero: the magnitude's pattern minus 1 (an infinity from rounding steps to 65504)
    toward = np.where(away, nearest - U32(1), nearest)
    return np.where(is_nan32(bits), U32(0x7E00) | ((bits >> U32(16)) & U32(0x8000)), toward).astype(U32)


def fma64(a, b, c):
    """a x b + c in float64 rounded once (IEEE fusedMultiplyAdd, nearest even): exact with Python's Fraction where
    all three are finite, numpy's a * b + c (the same special value) elsewhere."""
    from fractions import Fraction
    a, b, c = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (a, b, c)))
    with np.errstate(all="ignore"):
        out = a * b + c
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    out = np.array(out, dtype=np.float64)
    for index in zip(*np.nonzero(finite)):
        exact = Fraction(float(a[index])) * Fraction(float(b[index])) + Fraction(float(c[index]))
        try:
            value = float(exact)
        except OverflowError:
            value = np.inf if exact > 0 else -np.inf
        if value == 0 and exact == 0:   # an exact zero sum: -0 only when both terms are -0 (IEEE 754, 6.3)
            value = out[index]
        out[index] = value
    return out


# --- minifloats: e4m3fn, e5m2, e2m3, e3m2, e2m1 ----------------------------------------
# (exponent bits, mantissa bits, bias, has_inf_nan_like_ieee, max finite value)
FORMATS = {
    "e4m3": (4, 3, 7, False, 448.0),      # fp8 e4m3fn: S.1111.111 is NaN, no infinity
    "e5m2": (5, 2, 15, True, 57344.0),    # bf8: IEEE-like
    "e2m3": (2, 3, 1, False, 7.5),        # fp6
    "e3m2": (3, 2, 3, False, 28.0),       # bf6
    "e2m1": (2, 1, 1, False, 6.0),        # fp4
}


def _decode_table(fmt):
    ebits, mbits, bias, ieee, _ = FORMATS[fmt]
    width = 1 + ebits + mbits
    codes = np.arange(1 << width)
    sign = np.where(codes >> (width - 1), -1.0, 1.0)
    exp = (codes >> mbits) & ((1 << ebits) - 1)
    mant = codes & ((1 << mbits) - 1)
    value = np.where(exp == 0, mant / (1 << mbits) * 2.0 ** (1 - bias),
                     (1 + mant / (1 << mbits)) * 2.0 ** (exp - bias.__int__()))
    value = sign * value
    if fmt == "e4m3":
        value[(codes & 0x7F) == 0x7F] = np.nan
    if ieee:
        top = exp == (1 << ebits) - 1
        value[top & (mant == 0)] = sign[top & (mant == 0)] * np.inf
        value[top & (mant != 0)] = np.nan
    return value


DECODE = {fmt: _decode_table(fmt) for fmt in FORMATS}


def decode(codes, fmt):
    """Minifloat codes -> float64 values."""
    return DECODE[fmt][np.asarray(codes, dtype=np.int64)]


def encode(values, fmt, saturate):
    """float64 values -> minifloat codes, round to nearest even. saturate: values past the
    largest finite value (and infinities) become +-max; else NaN (e4m3, fp6, fp4 have no
    infinity: e4m3 gives its NaN code; e5m2 gives infinity)."""
    ebits, mbits, bias, ieee, max_value = FORMATS[fmt]
    width = 1 + ebits + mbits
    values = np.asarray(values, dtype=np.float64)
    table = DECODE[fmt]
    positive = np.arange(1 << (width - 1))
    finite = positive[np.isfinite(table[positive])]
    grid = table[finite]                       # ascending non-negative finite values
    magnitude = np.abs(values)
    # nearest even: the candidate codes below and above, ties to the even code
    upper = np.clip(np.searchsorted(grid, magnitude, side="left"), 0, len(grid) - 1)
    lower = np.clip(upper - 1, 0, len(grid) - 1)
    d_low = magnitude - grid[lower]
    d_up = grid[upper] - magnitude
    pick_up = (d_up < d_low) | ((d_up == d_low) & (finite[upper] % 2 == 0))
    code = np.where(pick_up, finite[upper], finite[lower])
    code = np.where(magnitude <= grid[0], finite[0], code)
    # past the top: rounding beyond max + half an ulp overflows
    top_ulp = grid[-1] - grid[-2]
    overflow = magnitude >= grid[-1] + top_ulp / 2 if not ieee else magnitude >= grid[-1] + top_ulp / 2
    overflow |= np.isinf(magnitude)
    if saturate:
        code = np.where(overflow | (magnitude > grid[-1]), finite[-1], code)
    else:
        if ieee:
            inf_code = ((1 << ebits) - 1) << mbits
            code = np.where(overflow, inf_code, code)
        else:
            nan_code = (1 << (width - 1)) - 1
            code = np.where(overflow, nan_code, code)
    sign = np.signbit(values).astype(np.int64) << (width - 1)
    code = code | sign
    nan = np.isnan(values)
    if nan.any():
        nan_code = ((1 << (width - 1)) - 1) if not ieee else (((1 << ebits) - 1) << mbits) | 1 << (mbits - 1)
        code = np.where(nan, nan_code | sign, code)
    return code.astype(np.uint32)


def e8m0_scale(byte):
    """e8m0 bytes -> float64 2^(byte - 127), NaN for 255."""
    byte = np.asarray(byte, dtype=np.int64)
    return np.where(byte == 255, np.nan, np.ldexp(1.0, byte - 127))


def scale_of_f32(bits):
    """The scale a `v_cvt_scalef32_*` instruction takes from its float32 scale operand: only
    the exponent field counts (2^(exponent - 127); field 255 is NaN)."""
    return e8m0_scale(exponent32(bits))


def f64_to_f32_bits(values):
    """float64 values rounded to float32 (nearest even) -> bit patterns."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bits32(np.asarray(values, dtype=np.float64).astype(np.float32))
