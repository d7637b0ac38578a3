"""The corpus's answers, in numpy, written from the number formats' definitions (not from
torch's or Triton's implementation of the same operation), and the checks that compare.

Formats (OCP Microscaling Formats v1.0 for e2m1 / e8m0, OCP 8-bit Floating Point v1.0 for
e4m3fn, IEEE 754 for bf16 / fp16 / fp32):
  e2m1   sign, 2 exponent bits (bias 1), 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and negatives
  e8m0   an exponent byte k: 2^(k - 127); 255 is NaN
  e4m3fn sign, 4 exponent bits (bias 7), 3 mantissa bits; no inf; S.1111.111 is NaN; largest 448
  bf16   the high 16 bits of an fp32
Every check raises AssertionError naming the case, what was compared, the first bad element's
index, the value found and the value expected, and how many elements are wrong.
"""
import numpy as np

E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
E4M3_MAX = 448.0


# --- decoding ------------------------------------------------------------------------------
def e2m1_values(codes):
    """4-bit codes (any integer array, 0..15) -> float64 values."""
    return E2M1_VALUES[np.asarray(codes) & 0xF]


def unpack_e2m1(packed, axis):
    """uint8 pairs -> float64 values, twice as long along `axis`: the low nibble is the even element."""
    packed = np.asarray(packed)
    low, high = e2m1_values(packed & 0xF), e2m1_values(packed >> 4)
    both = np.stack([low, high], axis=axis + 1 if axis >= 0 else axis)
    shape = list(packed.shape)
    shape[axis] *= 2
    return both.reshape(shape)


def e8m0_values(codes):
    """Scale bytes -> 2^(byte - 127) float64 (255: NaN)."""
    codes = np.asarray(codes).astype(np.int64)
    return np.where(codes == 255, np.nan, np.ldexp(1.0, codes - 127))


def e4m3_values(codes):
    """e4m3fn bytes -> float64 values (S.1111.111: NaN)."""
    codes = np.asarray(codes).astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 0x7
    magnitude = np.where(exponent == 0, np.ldexp(mantissa / 8.0, -6), np.ldexp(1.0 + mantissa / 8.0, exponent - 7))
    return np.where((codes & 0x7F) == 0x7F, np.nan, sign * magnitude)


def e5m2_values(codes):
    """e5m2 bytes -> float64 (sign, 5 exponent bits (bias 15), 2 mantissa bits; exponent 31: inf / NaN)."""
    codes = np.asarray(codes).astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 2) & 0x1F, codes & 0x3
    magnitude = np.where(exponent == 0, np.ldexp(mantissa / 4.0, -14), np.ldexp(1.0 + mantissa / 4.0, exponent - 15))
    magnitude = np.where(exponent == 31, np.where(mantissa == 0, np.inf, np.nan), magnitude)
    return sign * magnitude


def bf16_values(bits):
    """bf16 bit patterns (uint16 or int16) -> float32."""
    return ((np.asarray(bits).astype(np.uint32) & 0xFFFF) << 16).view(np.float32)


def fp16_values(bits):
    """fp16 bit patterns -> float64, from the fields (denormals 2^-14 m/1024)."""
    bits = np.asarray(bits).astype(np.int64) & 0xFFFF
    sign = np.where(bits & 0x8000, -1.0, 1.0)
    exponent, mantissa = (bits >> 10) & 0x1F, bits & 0x3FF
    magnitude = np.where(exponent == 0, np.ldexp(mantissa / 1024.0, -14),
                         np.ldexp(1.0 + mantissa / 1024.0, exponent - 15))
    magnitude = np.where(exponent == 31, np.where(mantissa == 0, np.inf, np.nan), magnitude)
    return sign * magnitude


# --- encoding ------------------------------------------------------------------------------
def bf16_bits(values):
    """float32 values -> bf16 bits (uint16), round to nearest even on the bit pattern; NaN stays a
    NaN (quiet bit set), inf stays inf, denormals are kept (a 16-bit truncation of a denormal is a
    bf16 denormal)."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def _nearest_even_code(values, codes, code_values):
    """The code of `code_values` (sorted ascending, >= 0) nearest each |value|; on a tie the one with
    an even code (an even last mantissa bit)."""
    magnitude = np.abs(values)
    above = np.clip(np.searchsorted(code_values, magnitude), 1, len(code_values) - 1)
    below = above - 1
    low_gap, high_gap = magnitude - code_values[below], code_values[above] - magnitude
    pick_high = (high_gap < low_gap) | ((high_gap == low_gap) & (codes[above] % 2 == 0))
    return np.where(pick_high, codes[above], codes[below])


def e4m3_codes(values):
    """float values -> e4m3fn bytes: round to nearest even, saturating (Triton's fp32 -> float8e4nv
    on gfx950: finite overflow and +-inf give +-448, as NVIDIA's satfinite; triton-lang/triton PR
    7337 and its test_typeconvert_downcast_clamping), NaN -> 0x7F with the sign bit of the input."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.arange(0x7F)  # 0x00 .. 0x7E: every finite non-negative e4m3fn value, ascending
    magnitude_code = _nearest_even_code(np.minimum(np.abs(np.nan_to_num(values, posinf=1e300, neginf=-1e300)),
                                                   E4M3_MAX), codes, e4m3_values(codes))
    sign = np.where(np.signbit(values), 0x80, 0)
    return np.where(np.isnan(values), 0x7F | sign, magnitude_code | sign).astype(np.uint8)


def e5m2_codes(values):
    """float values within +-57344 -> e5m2 bytes, round to nearest even; NaN -> 0x7E (a NaN code) with the sign."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.arange(0x7C)   # every finite non-negative e5m2 value, ascending
    magnitude = _nearest_even_code(np.nan_to_num(values), codes, e5m2_values(codes))
    sign = np.where(np.signbit(values), 0x80, 0)
    return np.where(np.isnan(values), 0x7E | sign, magnitude | sign).astype(np.uint8)


def e2m1_codes(values):
    """float values (already within +-6, no NaN) -> e2m1 codes, round to nearest even."""
    values = np.asarray(values, dtype=np.float64)
    codes = np.arange(8)
    return (_nearest_even_code(values, codes, E2M1_VALUES[:8]) | np.where(np.signbit(values), 8, 0)).astype(np.uint8)


# --- random inputs -------------------------------------------------------------------------
def random_e2m1_packed(rng, shape):
    """uint8 pairs of e2m1 codes, every code (negative zero too) possible."""
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def random_scales(rng, shape, low=120, high=134):
    """e8m0 bytes drawn from [low, high): 2^-7 .. 2^6, different per block."""
    return rng.integers(low, high, size=shape, dtype=np.uint8)


def random_e4m3(rng, shape):
    """e4m3fn bytes of finite values (no NaN code), every other code possible."""
    codes = rng.integers(0, 256, size=shape, dtype=np.uint8)
    return np.where((codes & 0x7F) == 0x7F, codes ^ 0x01, codes).astype(np.uint8)


def bf16_random(rng, shape, scale=1.0):
    """(bits uint16, values float32) of random bf16 numbers."""
    bits = bf16_bits((rng.standard_normal(shape) * scale).astype(np.float32))
    return bits, bf16_values(bits)


# --- checks ----------------------------------------------------------------------------------
def _report(case, what, bad, got, expected):
    flat_index = int(np.flatnonzero(bad)[0])
    index = np.unravel_index(flat_index, bad.shape)
    index = index[0] if len(index) == 1 else tuple(int(i) for i in index)
    raise AssertionError(f"{case}: {what}: {int(bad.sum())} of {bad.size} elements wrong, first at index {index}: "
                         f"got {got.reshape(-1)[flat_index]!r}, expected {expected.reshape(-1)[flat_index]!r}")


def check_equal(case, what, got, expected):
    """Exact equality (integers, bit patterns; floats equal, NaN where NaN)."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.shape != expected.shape:
        raise AssertionError(f"{case}: {what}: shape {got.shape}, expected {expected.shape}")
    bad = got != expected
    if expected.dtype.kind == "f":
        bad &= ~(np.isnan(expected) & np.isnan(got.astype(expected.dtype)))
    if bad.any():
        _report(case, what, bad, got, expected)


def check_close(case, what, got, expected, rtol, atol=0.0):
    """|got - expected| <= atol + rtol |expected|, NaN where expected NaN, infinities equal."""
    with np.errstate(invalid="ignore"):  # a signaling NaN widened to float64 raises the invalid flag
        got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        raise AssertionError(f"{case}: {what}: shape {got.shape}, expected {expected.shape}")
    finite = np.isfinite(expected)
    with np.errstate(invalid="ignore"):
        off = np.abs(got - expected) > atol + rtol * np.abs(expected)
    bad = np.where(finite, off | ~np.isfinite(got),
                   np.where(np.isnan(expected), ~np.isnan(got), got != expected))
    if bad.any():
        _report(case, what, bad, got, expected)


def check_ulps(case, what, got, expected, ulps, magnitude=None):
    """float32 results within `ulps` units in the last place of the float32 nearest to expected
    (computed in float64), or of `magnitude` where given and larger (a sum's error scales with its
    terms); NaN where NaN, infinities and signed zeros equal."""
    got = np.asarray(got, dtype=np.float32)
    with np.errstate(over="ignore"):   # an answer past float32's range is an infinity there
        expected32 = np.asarray(expected, dtype=np.float64).astype(np.float32)
    scale = np.abs(expected32) if magnitude is None else np.maximum(np.abs(expected32), np.abs(magnitude))
    spacing = np.spacing(scale.astype(np.float32)).astype(np.float64)
    finite = np.isfinite(expected32)
    with np.errstate(invalid="ignore"):
        off = np.abs(got.astype(np.float64) - np.asarray(expected, dtype=np.float64)) > ulps * spacing
    bad = np.where(finite, off | ~np.isfinite(got),
                   np.where(np.isnan(expected32), ~np.isnan(got), got != expected32))
    if bad.any():
        _report(case, what, bad, got, expected32)


def check_product(case, got, a, b, c=None, rtol=1e-5):
    """A matrix product a @ b (+ c) against float64: each element within rtol x (sum of |a_ik b_kj| + |c_ij|)
    + 1e-30, the error bound of fp32 accumulation of exact products in any order."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    c = np.zeros((a.shape[0], b.shape[1])) if c is None else np.asarray(c, dtype=np.float64)
    expected = a @ b + c
    bound = rtol * (np.abs(a) @ np.abs(b) + np.abs(c)) + 1e-30
    got = np.asarray(got, dtype=np.float64)
    bad = ~(np.abs(got - expected) <= bound)
    if bad.any():
        _report(case, f"matrix product (bound {rtol:g} x sum of |terms|)", bad, got, expected)
