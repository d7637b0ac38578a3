"""Vector ALU instructions (VOP1, VOP2, VOP3, VOPC, VOP3P) with their encodings' modifiers:
VOP3 source neg/abs, clamp and output scaling, 16-bit op_sel, SDWA selects, DPP lane
permutes with row/bank masks. Semantics follow AMD's CDNA4 ISA pseudocode; each lane's
value is computed with numpy over the wave's 64 lanes and written only where EXEC is set.

An elementwise instruction is a row of ELEMENTWISE: the types of its sources and result
and a numpy function. Types: f32, f16, f64, u32, i32, b32, u16, i16, b16, u24, i24, u64,
i64, b64, and 'mask' (a lane mask in VCC or an SGPR pair).
"""
import numpy as np

from . import numerics as nx
from .numerics import U32
from .registry import Unsupported, refuse_modifiers, semantics
from .wave import (EXEC_LO, LANE_IDS, LANES, MASK32, VCC_LO, sgpr_index, vector_getter,
                   vgpr_row)

ENCODINGS = ("_e32", "_e64", "_dpp", "_sdwa")
F32, F16, F64 = np.float32, np.float16, np.float64
WIDTH = {"f32": 32, "u32": 32, "i32": 32, "b32": 32, "u24": 32, "i24": 32, "f16": 16, "u16": 16, "i16": 16,
         "b16": 16, "f64": 64, "u64": 64, "i64": 64, "b64": 64, "mask": 64}


def split_encoding(mnemonic):
    for suffix in ENCODINGS:
        if mnemonic.endswith(suffix):
            return mnemonic[: -len(suffix)], suffix[1:]
    return mnemonic, "e64" if mnemonic.startswith("v_") else ""


# --- decode / encode ---------------------------------------------------------------------

def decode(bits, kind):
    if kind == "f32":
        return nx.f32(bits)
    if kind in ("u32", "b32"):
        return np.asarray(bits, dtype=U32)
    if kind == "i32":
        return np.asarray(bits, dtype=U32).view(np.int32)
    if kind == "u24":
        return np.asarray(bits, dtype=U32) & U32(0xFFFFFF)
    if kind == "i24":
        value = (np.asarray(bits, dtype=U32) & U32(0xFFFFFF)).astype(np.int64)
        return value - ((value & 0x800000) << 1)
    if kind == "f16":
        return (np.asarray(bits, dtype=U32) & U32(0xFFFF)).astype(np.uint16).view(F16).astype(F32)
    if kind in ("u16", "b16"):
        return np.asarray(bits, dtype=U32) & U32(0xFFFF)
    if kind == "i16":
        return (np.asarray(bits, dtype=U32) & U32(0xFFFF)).astype(np.uint16).view(np.int16).astype(np.int32)
    if kind in ("u64", "b64"):
        return np.asarray(bits, dtype=np.uint64)
    if kind == "i64":
        return np.asarray(bits, dtype=np.uint64).view(np.int64)
    if kind == "f64":
        return np.asarray(bits, dtype=np.uint64).view(F64)
    raise Unsupported(f"operand type {kind}")


def encode(values, kind):
    """-> uint32 bits (uint64 for 64-bit kinds)."""
    if kind == "f32":
        return np.asarray(values, dtype=F32).view(U32)
    if kind in ("u32", "i32", "b32", "u24", "i24"):
        return np.asarray(values).astype(np.int64).astype(U32) if np.asarray(values).dtype.kind == "i" \
            else np.asarray(values).astype(U32)
    if kind == "f16":
        return np.asarray(values, dtype=F16).view(np.uint16).astype(U32)
    if kind in ("u16", "i16", "b16"):
        return np.asarray(values).astype(np.int64).astype(U32) & U32(0xFFFF)
    if kind in ("u64", "b64"):
        return np.asarray(values).astype(np.uint64)
    if kind == "i64":
        return np.asarray(values).astype(np.int64).view(np.uint64)
    if kind == "f64":
        return np.asarray(values, dtype=F64).view(np.uint64)
    raise Unsupported(f"result type {kind}")


# --- float helpers with the ISA's NaN and signed-zero rules ------------------------------

def _is_snan(x):
    bits = np.asarray(x, dtype=F32).view(U32)
    return nx.is_nan32(bits) & ((bits & U32(0x00400000)) == 0)


def _quiet(x):
    return nx.f32(nx.quiet32(np.asarray(x, dtype=F32).view(U32)))


def fmax(a, b):
    """v_max_f32 in IEEE mode: a signaling NaN gives a quiet NaN, one quiet NaN gives the
    other operand, max(+0, -0) = +0."""
    a, b = np.asarray(a, dtype=F32), np.asarray(b, dtype=F32)
    result = np.where(a >= b, a, b)
    result = np.where(np.isnan(a), b, np.where(np.isnan(b), a, result))
    both_zero = (a == 0) & (b == 0)
    result = np.where(both_zero, np.where(np.signbit(a) & np.signbit(b), F32(-0.0), F32(0.0)), result)
    result = np.where(_is_snan(a), _quiet(a), np.where(_is_snan(b), _quiet(b), result))
    return result.astype(F32)


def fmin(a, b):
    a, b = np.asarray(a, dtype=F32), np.asarray(b, dtype=F32)
    result = np.where(a < b, a, b)
    result = np.where(np.isnan(a), b, np.where(np.isnan(b), a, result))
    both_zero = (a == 0) & (b == 0)
    result = np.where(both_zero, np.where(np.signbit(a) | np.signbit(b), F32(-0.0), F32(0.0)), result)
    result = np.where(_is_snan(a), _quiet(a), np.where(_is_snan(b), _quiet(b), result))
    return result.astype(F32)


def _fminmax64(a, b, pick_max):
    """v_max_f64 / v_min_f64 in IEEE mode: a signaling NaN gives a quiet NaN, one quiet NaN the other operand;
    max(+0, -0) = +0, min(+0, -0) = -0."""
    a, b = np.asarray(a, dtype=F64), np.asarray(b, dtype=F64)
    bits_a, bits_b = a.view(np.uint64), b.view(np.uint64)
    quiet = np.uint64(1 << 51)
    result = np.where(a >= b, a, b) if pick_max else np.where(a < b, a, b)
    result = np.where(np.isnan(a), b, np.where(np.isnan(b), a, result))
    zeros = (a == 0) & (b == 0)
    signed = (np.signbit(a) & np.signbit(b)) if pick_max else (np.signbit(a) | np.signbit(b))
    result = np.where(zeros, np.where(signed, -0.0, 0.0), result)
    snan_a, snan_b = np.isnan(a) & ((bits_a & quiet) == 0), np.isnan(b) & ((bits_b & quiet) == 0)
    result = np.where(snan_a, (bits_a | quiet).view(F64), np.where(snan_b, (bits_b | quiet).view(F64), result))
    return result.astype(F64)


def fmed3(a, b, c):
    a, b, c = np.broadcast_arrays(*(np.asarray(x, dtype=F32) for x in (a, b, c)))
    any_nan = np.isnan(a) | np.isnan(b) | np.isnan(c)
    biggest = fmax(fmax(a, b), c)
    median = np.where(biggest == a, fmax(b, c), np.where(biggest == b, fmax(a, c), fmax(a, b)))
    return np.where(any_nan, fmin(fmin(a, b), c), median).astype(F32)


def fused(a, b, c, dtype=F32):
    """fma rounded once to float32 (the product is exact in float64; the sum rounds once in
    float64 first: within an ulp of the fused result, equal in all but double-rounding ties)."""
    return (np.asarray(a, dtype=F64) * np.asarray(b, dtype=F64) + np.asarray(c, dtype=F64)).astype(dtype)


def unary64(function):
    """A transcendental computed in float64 and rounded to float32 (within 1 ulp of the ISA)."""
    def run(a):
        return function(np.asarray(a, dtype=F64)).astype(F32)
    return run


def cvt_f32_to_int(values, signed):
    """f32_to_i32 / f32_to_u32: truncate, saturate, NaN -> 0."""
    v = np.nan_to_num(np.trunc(np.asarray(values, dtype=F64)), nan=0.0)
    low, high = (-2.0 ** 31, 2.0 ** 31 - 1) if signed else (0.0, 2.0 ** 32 - 1)
    return np.clip(v, low, high).astype(np.int64)


def _lshl_add_u64(a, b, c):
    return (a << (np.asarray(b, dtype=np.uint64) & np.uint64(7))) + c


def _perm(s0, s1, sel):
    """v_perm_b32: each byte of the result chosen by a selector byte of S2 from the bytes of
    {S0, S1} (S1 the low word): 0-7 a byte, 8-11 the sign of byte 1/3/5/7 replicated, 12
    zero, 13 and above 0xFF."""
    shape = np.broadcast(s0, s1, sel).shape or (LANES,)             # (64,), or (waves, 64) in lockstep
    words = np.empty(shape + (2,), dtype=U32)
    words[..., 0], words[..., 1] = s1, s0
    data = words.view(np.uint8)                                    # (..., 8): S1's bytes, then S0's
    table = np.empty(shape + (16,), dtype=np.uint8)
    table[..., :8] = data
    table[..., 8:12] = (data[..., 1::2] >> 7) * np.uint8(0xFF)
    table[..., 12] = 0
    table[..., 13:] = 0xFF
    selectors = np.minimum(np.ascontiguousarray(np.broadcast_to(np.asarray(sel, dtype=U32), shape))
                           .reshape(shape + (1,)).view(np.uint8), 15)
    return np.take_along_axis(table, selectors.astype(np.int64), axis=-1).view(U32).reshape(shape)


def _bfe(a, b, c, signed):
    offset = np.asarray(b, dtype=U32) & U32(31)
    width = np.asarray(c, dtype=U32) & U32(31)
    value = (np.asarray(a, dtype=U32) >> offset) & ((U32(1) << width) - U32(1))
    if signed:
        value = value.astype(np.int64)
        top = np.where(width > 0, (value >> np.maximum(width.astype(np.int64) - 1, 0)) & 1, 0)
        value = np.where(top == 1, value - (np.int64(1) << width.astype(np.int64)), value)
    return value


def _mul_hi(a, b, signed):
    if signed:
        return (np.asarray(a, dtype=np.int64) * np.asarray(b, dtype=np.int64)) >> 32
    return ((np.asarray(a, dtype=np.uint64) * np.asarray(b, dtype=np.uint64)) >> np.uint64(32)).astype(U32)


def _u32(x):
    return np.asarray(x, dtype=U32)


def _shift(x, width):
    return np.asarray(x, dtype=U32) & U32(width - 1)


def _clz(x):
    x = np.asarray(x, dtype=U32)
    n = np.full(np.shape(x), 32, dtype=np.int64)
    nonzero = x != 0
    n[nonzero] = 31 - np.floor(np.log2(x[nonzero].astype(np.float64))).astype(np.int64)
    return np.where(nonzero, n, -1)


def _dot2c(kind):
    """V_DOT2C_F32_BF16 / _F16: D += S0.lo x S1.lo, then += S0.hi x S1.hi (CDNA4 ISA: two f32 additions, each
    rounded; the products of 16-bit values are exact in f32)."""
    widen = nx.bf16_to_f32 if kind == "bf16" else nx.f16_to_f32

    def run(a, b, d):
        a, b = np.asarray(a, dtype=U32), np.asarray(b, dtype=U32)
        with np.errstate(all="ignore"):
            low = nx.f32(widen(a & U32(0xFFFF))) * nx.f32(widen(b & U32(0xFFFF)))
            high = nx.f32(widen(a >> U32(16))) * nx.f32(widen(b >> U32(16)))
            return ((d + low).astype(F32) + high).astype(F32)
    return run


def _leading_sign_bits(x):
    """v_ffbh_i32: the position, from bit 31, of the first bit that differs from the sign bit (1..31); -1 for 0
    and -1."""
    x = np.asarray(x, dtype=np.int64)
    return np.where((x == 0) | (x == -1), -1, _clz(np.where(x < 0, ~x, x).astype(U32)))


def _ctz(x):
    x = np.asarray(x, dtype=U32).astype(np.int64)
    low = x & -x
    return np.where(x != 0, np.log2(np.maximum(low, 1)).astype(np.int64), -1)


def _popcount(x):
    x = np.asarray(x, dtype=U32)
    return np.unpackbits(x.view(np.uint8)).reshape(*np.shape(x), 32).sum(-1) if np.ndim(x) else bin(int(x)).count("1")


ELEMENTWISE = {
    # f32 arithmetic
    "v_add_f32": (("f32", "f32"), "f32", lambda a, b: a + b),
    "v_sub_f32": (("f32", "f32"), "f32", lambda a, b: a - b),
    "v_subrev_f32": (("f32", "f32"), "f32", lambda a, b: b - a),
    "v_mul_f32": (("f32", "f32"), "f32", lambda a, b: a * b),
    "v_max_f32": (("f32", "f32"), "f32", fmax),
    "v_min_f32": (("f32", "f32"), "f32", fmin),
    "v_max3_f32": (("f32", "f32", "f32"), "f32", lambda a, b, c: fmax(fmax(a, b), c)),
    "v_min3_f32": (("f32", "f32", "f32"), "f32", lambda a, b, c: fmin(fmin(a, b), c)),
    "v_med3_f32": (("f32", "f32", "f32"), "f32", fmed3),
    "v_fma_f32": (("f32", "f32", "f32"), "f32", fused),
    "v_fmac_f32": (("f32", "f32", "dst:f32"), "f32", fused),
    "v_mac_f32": (("f32", "f32", "dst:f32"), "f32", lambda a, b, c: (a * b).astype(F32) + c),
    "v_mad_f32": (("f32", "f32", "f32"), "f32", lambda a, b, c: (a * b).astype(F32) + c),
    "v_fmaak_f32": (("f32", "f32", "f32"), "f32", fused),
    "v_dot2c_f32_bf16": (("b32", "b32", "dst:f32"), "f32", _dot2c("bf16")),
    "v_dot2c_f32_f16": (("b32", "b32", "dst:f32"), "f32", _dot2c("f16")),
    "v_fmamk_f32": (("f32", "f32", "f32"), "f32", lambda a, k, b: fused(a, k, b)),
    "v_exp_f32": (("f32",), "f32", unary64(np.exp2)),
    "v_log_f32": (("f32",), "f32", unary64(np.log2)),
    "v_rcp_f32": (("f32",), "f32", unary64(lambda a: 1.0 / a)),
    "v_rcp_iflag_f32": (("f32",), "f32", unary64(lambda a: 1.0 / a)),
    "v_rsq_f32": (("f32",), "f32", unary64(lambda a: 1.0 / np.sqrt(a))),
    "v_sqrt_f32": (("f32",), "f32", unary64(np.sqrt)),
    "v_sin_f32": (("f32",), "f32", unary64(lambda a: np.sin(2 * np.pi * a))),
    "v_cos_f32": (("f32",), "f32", unary64(lambda a: np.cos(2 * np.pi * a))),
    "v_floor_f32": (("f32",), "f32", np.floor),
    "v_ceil_f32": (("f32",), "f32", np.ceil),
    "v_trunc_f32": (("f32",), "f32", np.trunc),
    "v_rndne_f32": (("f32",), "f32", np.rint),
    "v_fract_f32": (("f32",), "f32", lambda a: np.where(np.isinf(a), F32(0), a - np.floor(a))),
    "v_ldexp_f32": (("f32", "i32"), "f32", lambda a, b: np.ldexp(a.astype(F64), np.clip(b, -400, 400)).astype(F32)),
    "v_mov_b32": (("b32",), "b32", lambda a: a),
    "v_mov_b64": (("b64",), "b64", lambda a: a),
    "v_not_b32": (("b32",), "b32", lambda a: ~_u32(a)),
    "v_bfrev_b32": (("b32",), "b32", lambda a: np.asarray(
        np.unpackbits(np.atleast_1d(_u32(a)).view(np.uint8), bitorder="little").reshape(-1, 32)[:, ::-1],
        dtype=np.uint64).dot(np.uint64(1) << np.arange(32, dtype=np.uint64)).astype(U32).reshape(np.shape(a))),
    "v_ffbh_u32": (("u32",), "u32", _clz),
    "v_ffbh_i32": (("i32",), "i32", _leading_sign_bits),
    "v_ffbl_b32": (("b32",), "u32", _ctz),
    "v_bcnt_u32_b32": (("b32", "u32"), "u32", lambda a, b: _popcount(a) + b),
    # conversions
    "v_cvt_f32_u32": (("u32",), "f32", lambda a: a.astype(F32)),
    **{f"v_cvt_f32_ubyte{k}": (("u32",), "f32", (lambda k: lambda a: ((a >> U32(8 * k)) & U32(0xFF)).astype(F32))(k))
       for k in range(4)},
    "v_cvt_f32_i32": (("i32",), "f32", lambda a: a.astype(F32)),
    "v_cvt_u32_f32": (("f32",), "u32", lambda a: cvt_f32_to_int(a, False)),
    "v_cvt_i32_f32": (("f32",), "i32", lambda a: cvt_f32_to_int(a, True)),
    "v_cvt_f32_f16": (("f16",), "f32", lambda a: a),
    "v_cvt_f16_f32": (("f32",), "f16", lambda a: a),
    "v_cvt_f32_bf16": (("b32",), "f32", lambda a: nx.f32(nx.bf16_to_f32(a))),
    "v_cvt_f64_f32": (("f32",), "f64", lambda a: a.astype(F64)),
    "v_cvt_f32_f64": (("f64",), "f32", lambda a: a.astype(F32)),
    "v_cvt_pk_f16_f32": (("f32", "f32"), "b32", lambda a, b: nx.f32_to_f16(np.asarray(a, dtype=F32).view(U32)) |
                         (nx.f32_to_f16(np.asarray(b, dtype=F32).view(U32)) << U32(16))),
    "v_cvt_pkrtz_f16_f32": (("f32", "f32"), "b32", lambda a, b: nx.f32_to_f16_rtz(np.asarray(a, dtype=F32).view(U32))
                            | (nx.f32_to_f16_rtz(np.asarray(b, dtype=F32).view(U32)) << U32(16))),
    "v_cvt_u32_f64": (("f64",), "u32", lambda a: cvt_f32_to_int(a, False)),
    "v_cvt_i32_f64": (("f64",), "i32", lambda a: cvt_f32_to_int(a, True)),
    "v_cvt_f64_i32": (("i32",), "f64", lambda a: a.astype(F64)),
    "v_cvt_f64_u32": (("u32",), "f64", lambda a: a.astype(F64)),
    "v_cvt_pk_bf16_f32": (("f32", "f32"), "b32", lambda a, b: nx.f32_to_bf16(a.view(U32)) |
                          (nx.f32_to_bf16(np.asarray(b, dtype=F32).view(U32)) << U32(16))),
    # 32-bit integer
    "v_add_u32": (("u32", "u32"), "u32", lambda a, b: a + b),
    "v_sub_u32": (("u32", "u32"), "u32", lambda a, b: a - b),
    "v_subrev_u32": (("u32", "u32"), "u32", lambda a, b: b - a),
    "v_add_i32": (("i32", "i32"), "i32", lambda a, b: a.astype(np.int64) + b),
    "v_sub_i32": (("i32", "i32"), "i32", lambda a, b: a.astype(np.int64) - b),
    "v_mul_lo_u32": (("u32", "u32"), "u32", lambda a, b: (a.astype(np.uint64) * b) & np.uint64(MASK32)),
    "v_mul_hi_u32": (("u32", "u32"), "u32", lambda a, b: _mul_hi(a, b, False)),
    "v_mul_hi_i32": (("i32", "i32"), "i32", lambda a, b: _mul_hi(a, b, True)),
    "v_mul_u32_u24": (("u24", "u24"), "u32", lambda a, b: a.astype(np.uint64) * b),
    "v_mul_i32_i24": (("i24", "i24"), "i32", lambda a, b: a * b),
    "v_mul_hi_u32_u24": (("u24", "u24"), "u32", lambda a, b: (a.astype(np.uint64) * b) >> np.uint64(32)),
    "v_mul_hi_i32_i24": (("i24", "i24"), "i32", lambda a, b: (a * b) >> 32),
    "v_mad_u32_u24": (("u24", "u24", "u32"), "u32", lambda a, b, c: a.astype(np.uint64) * b + c),
    "v_mad_i32_i24": (("i24", "i24", "i32"), "i32", lambda a, b, c: a * b + c),
    "v_lshlrev_b32": (("u32", "b32"), "b32", lambda a, b: b << _shift(a, 32)),
    "v_lshrrev_b32": (("u32", "b32"), "b32", lambda a, b: b >> _shift(a, 32)),
    "v_ashrrev_i32": (("u32", "i32"), "i32", lambda a, b: b >> _shift(a, 32).astype(np.int32)),
    "v_and_b32": (("b32", "b32"), "b32", lambda a, b: a & b),
    "v_or_b32": (("b32", "b32"), "b32", lambda a, b: a | b),
    "v_xor_b32": (("b32", "b32"), "b32", lambda a, b: a ^ b),
    "v_max_i32": (("i32", "i32"), "i32", np.maximum),
    "v_min_i32": (("i32", "i32"), "i32", np.minimum),
    "v_max_u32": (("u32", "u32"), "u32", np.maximum),
    "v_min_u32": (("u32", "u32"), "u32", np.minimum),
    "v_max3_i32": (("i32", "i32", "i32"), "i32", lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_i32": (("i32", "i32", "i32"), "i32", lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_max3_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_med3_i32": (("i32", "i32", "i32"), "i32", lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))),
    "v_med3_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))),
    "v_bfe_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: _bfe(a, b, c, False)),
    "v_bfe_i32": (("u32", "u32", "u32"), "i32", lambda a, b, c: _bfe(a, b, c, True)),
    "v_bfi_b32": (("b32", "b32", "b32"), "b32", lambda a, b, c: (a & b) | (~_u32(a) & c)),
    "v_bfm_b32": (("u32", "u32"), "b32", lambda a, b: ((U32(1) << _shift(a, 32)) - U32(1)) << _shift(b, 32)),
    "v_alignbit_b32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (((a.astype(np.uint64) << np.uint64(32)) | b)
                                                                    >> (_shift(c, 32).astype(np.uint64))) & np.uint64(MASK32)),
    "v_alignbyte_b32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (((a.astype(np.uint64) << np.uint64(32)) | b)
                                                                     >> ((_u32(c) & U32(3)).astype(np.uint64) * np.uint64(8))) & np.uint64(MASK32)),
    "v_lshl_add_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (a << _shift(b, 32)) + c),
    "v_add_lshl_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (a + b) << _shift(c, 32)),
    "v_lshl_or_b32": (("b32", "u32", "b32"), "b32", lambda a, b, c: (a << _shift(b, 32)) | c),
    "v_and_or_b32": (("b32", "b32", "b32"), "b32", lambda a, b, c: (a & b) | c),
    "v_or3_b32": (("b32", "b32", "b32"), "b32", lambda a, b, c: a | b | c),
    "v_xor3_b32": (("b32", "b32", "b32"), "b32", lambda a, b, c: a ^ b ^ c),
    "v_add3_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: a + b + c),
    "v_xad_u32": (("u32", "u32", "u32"), "u32", lambda a, b, c: (a ^ b) + c),
    "v_perm_b32": (("b32", "b32", "b32"), "b32", _perm),
    # 16-bit integer (the result's upper half is zero)
    "v_add_u16": (("u16", "u16"), "u16", lambda a, b: a + b),
    "v_sub_u16": (("u16", "u16"), "u16", lambda a, b: a - b),
    "v_subrev_u16": (("u16", "u16"), "u16", lambda a, b: b - a),
    "v_mul_lo_u16": (("u16", "u16"), "u16", lambda a, b: a * b),
    "v_lshlrev_b16": (("u16", "b16"), "b16", lambda a, b: b << (a & U32(15))),
    "v_lshrrev_b16": (("u16", "b16"), "b16", lambda a, b: b >> (a & U32(15))),
    "v_ashrrev_i16": (("u16", "i16"), "i16", lambda a, b: b >> (a & U32(15)).astype(np.int32)),
    "v_max_u16": (("u16", "u16"), "u16", np.maximum),
    "v_min_u16": (("u16", "u16"), "u16", np.minimum),
    "v_max_i16": (("i16", "i16"), "i16", np.maximum),
    "v_min_i16": (("i16", "i16"), "i16", np.minimum),
    # f16
    "v_add_f16": (("f16", "f16"), "f16", lambda a, b: a + b),
    "v_sub_f16": (("f16", "f16"), "f16", lambda a, b: a - b),
    "v_mul_f16": (("f16", "f16"), "f16", lambda a, b: a * b),
    "v_fma_f16": (("f16", "f16", "f16"), "f16", lambda a, b, c: fused(a, b, c)),
    "v_max_f16": (("f16", "f16"), "f16", fmax),
    "v_min_f16": (("f16", "f16"), "f16", fmin),
    # 64-bit
    "v_lshlrev_b64": (("u32", "b64"), "b64", lambda a, b: b << (_u32(a) & U32(63)).astype(np.uint64)),
    "v_lshrrev_b64": (("u32", "b64"), "b64", lambda a, b: b >> (_u32(a) & U32(63)).astype(np.uint64)),
    "v_ashrrev_i64": (("u32", "i64"), "i64", lambda a, b: b >> (_u32(a) & U32(63)).astype(np.int64)),
    "v_lshl_add_u64": (("u64", "u32", "u64"), "u64", _lshl_add_u64),
    "v_add_f64": (("f64", "f64"), "f64", lambda a, b: a + b),
    "v_mul_f64": (("f64", "f64"), "f64", lambda a, b: a * b),
    "v_fma_f64": (("f64", "f64", "f64"), "f64", nx.fma64),
    "v_fmac_f64": (("f64", "f64", "dst:f64"), "f64", nx.fma64),
    "v_max_f64": (("f64", "f64"), "f64", lambda a, b: _fminmax64(a, b, True)),
    "v_min_f64": (("f64", "f64"), "f64", lambda a, b: _fminmax64(a, b, False)),
    "v_trunc_f64": (("f64",), "f64", np.trunc),
    "v_floor_f64": (("f64",), "f64", np.floor),
    "v_ceil_f64": (("f64",), "f64", np.ceil),
    "v_rndne_f64": (("f64",), "f64", np.rint),
    "v_ldexp_f64": (("f64", "i32"), "f64", lambda a, b: np.ldexp(a, np.clip(b, -3000, 3000))),
}

FLOAT_KINDS = ("f32", "f16", "f64")
SIGN_BIT = {"f32": U32(0x80000000), "f16": U32(0x8000), "f64": np.uint64(1 << 63)}


def _source_modifier(op, kind):
    """neg/abs of a VOP3 source, applied to its bits."""
    if not (op.neg or op.abs):
        return None
    if kind not in FLOAT_KINDS:
        raise Unsupported(f"neg/abs on the {kind} operand {op.text}")
    sign = SIGN_BIT[kind]

    def apply(bits):
        if op.abs:
            bits = bits & ~sign
        if op.neg:
            bits = bits ^ sign
        return bits
    return apply


SDWA_SELECT = {"BYTE_0": (0, 8), "BYTE_1": (8, 8), "BYTE_2": (16, 8), "BYTE_3": (24, 8), "WORD_0": (0, 16),
               "WORD_1": (16, 16), "DWORD": (0, 32)}


def _sdwa_source(select, sign_extend):
    shift, width = SDWA_SELECT[select]
    if width == 32:
        return None
    mask = U32((1 << width) - 1)

    def apply(bits):
        value = (np.asarray(bits, dtype=U32) >> U32(shift)) & mask
        if sign_extend:
            value = (value.astype(np.int64) - ((value.astype(np.int64) >> (width - 1) & 1) << width)).astype(U32)
        return value
    return apply


# --- DPP ---------------------------------------------------------------------------------

def dpp_sources(modifiers):
    """-> (source lane per lane (64,) int, valid (64,) bool) of a DPP control."""
    lane = np.arange(LANES)
    row_lane, row_base = lane % 16, lane - lane % 16
    if "quad_perm" in modifiers:
        perm = np.array(modifiers["quad_perm"])
        return lane - lane % 4 + perm[lane % 4], np.ones(LANES, dtype=bool)
    if "row_shl" in modifiers:
        n = modifiers["row_shl"]
        return row_base + row_lane + n, row_lane + n < 16
    if "row_shr" in modifiers:
        n = modifiers["row_shr"]
        return row_base + row_lane - n, row_lane - n >= 0
    if "row_ror" in modifiers:
        n = modifiers["row_ror"]
        return row_base + (row_lane - n) % 16, np.ones(LANES, dtype=bool)
    if "row_mirror" in modifiers:
        return row_base + 15 - row_lane, np.ones(LANES, dtype=bool)
    if "row_half_mirror" in modifiers:
        return lane - lane % 8 + 7 - lane % 8, np.ones(LANES, dtype=bool)
    if "wave_shl" in modifiers:
        return lane + 1, lane + 1 < LANES
    if "wave_shr" in modifiers:
        return lane - 1, lane - 1 >= 0
    if "wave_rol" in modifiers:
        return (lane + 1) % LANES, np.ones(LANES, dtype=bool)
    if "wave_ror" in modifiers:
        return (lane - 1) % LANES, np.ones(LANES, dtype=bool)
    if "row_bcast" in modifiers:
        n = modifiers["row_bcast"]
        row = lane // 16
        if n == 15:
            return 16 * row - 1, row >= 1
        if n == 31:
            return np.full(LANES, 31), row >= 2
    if "row_newbcast" in modifiers:   # gfx90a+: lane n of each row to every lane of that row
        return row_base + modifiers["row_newbcast"], np.ones(LANES, dtype=bool)
    raise Unsupported(f"DPP control {sorted(modifiers)} not implemented")


DPP_MODIFIERS = ("quad_perm", "row_shl", "row_shr", "row_ror", "row_mirror", "row_half_mirror", "wave_shl",
                 "wave_shr", "wave_rol", "wave_ror", "row_bcast", "row_newbcast", "row_mask", "bank_mask", "bound_ctrl", "fi")


def _dpp(ins):
    """-> (permute(bits, exec_mask) -> bits for src0, the write mask (64,) bool) of a DPP
    instruction. An invalid source lane (out of the row, or not in EXEC) reads 0 with
    bound_ctrl set; without it the lane is not written."""
    source, valid = dpp_sources(ins.modifiers)
    source = np.clip(source, 0, LANES - 1)
    row_mask, bank_mask = ins.modifiers.get("row_mask", 0xF), ins.modifiers.get("bank_mask", 0xF)
    lane = np.arange(LANES)
    enabled = (((row_mask >> (lane // 16)) & 1) == 1) & (((bank_mask >> ((lane % 16) // 4)) & 1) == 1)
    bound_ctrl = "bound_ctrl" in ins.modifiers

    def permute(bits, exec_mask):
        ok = valid & exec_mask[..., source]
        out = np.broadcast_to(np.asarray(bits), exec_mask.shape)[..., source]
        return np.where(ok, out, U32(0)).astype(out.dtype), (enabled if bound_ctrl else enabled & ok)
    return permute


# --- the generic elementwise compiler ----------------------------------------------------

def _getter(op, kind):
    if kind == "mask":
        index = sgpr_index(op)
        if index is None:
            raise Unsupported(f"lane-mask operand {op.text}")
        return lambda w: w.read_mask(index)
    if kind == "f64" and op.kind == "int" and not -16 <= op.value <= 64:
        # a 32-bit literal in a 64-bit float operand is the value's high half (the low half zero)
        constant = np.uint64((op.value & MASK32) << 32)
        return lambda w: constant
    return vector_getter(op, WIDTH[kind], "f" if kind in FLOAT_KINDS else "i")


def _fetcher(op, kind, modifier, sdwa, high_half, dest_row=None):
    """A closure reading one source already decoded to its type (modifiers, SDWA select and
    the 16-bit op_sel half applied to its bits first); constants are decoded once."""
    if kind == "mask":
        return _getter(op, kind)
    if dest_row is not None:
        get = (lambda w: w.read_v64(dest_row)) if WIDTH[kind] == 64 else (lambda w: w.v[dest_row])
    else:
        get = _getter(op, kind)
    steps = [step for step in (sdwa, (lambda b: np.asarray(b, dtype=U32) >> U32(16)) if high_half else None, modifier)
             if step is not None]
    if op.kind in ("int", "float") and dest_row is None:
        bits = get(None)
        for step in steps:
            bits = step(bits)
        value = decode(bits, kind)
        return lambda w: value
    if not steps:
        if kind in ("u32", "b32", "u64", "b64"):
            return get
        if kind == "f32":
            return lambda w: get(w).view(F32)
        return lambda w: decode(get(w), kind)

    def fetch(w):
        bits = get(w)
        for step in steps:
            bits = step(bits)
        return decode(bits, kind)
    return fetch


def compile_elementwise(ins, spec, encoding):
    kinds, result_kind, function = spec
    dest = ins.operands[0]
    sources = list(ins.operands[1:])
    row = vgpr_row(dest) if dest.kind in ("v", "a") else None
    if row is None:
        raise Unsupported(f"{ins.text}: destination {dest.text} is not a VGPR")
    source_kinds = [k[4:] if k.startswith("dst:") else k for k in kinds]
    if len([k for k in kinds if not k.startswith("dst:")]) > len(sources):
        raise Unsupported(f"{ins.text}: expected {len(kinds)} sources")
    allowed = {"clamp", "mul", "div", "op_sel"}
    permute = None
    if encoding == "dpp":
        permute = _dpp(ins)
        allowed |= set(DPP_MODIFIERS)
    dst_sel = dst_unused = None
    sdwa = [None] * len(kinds)
    if encoding == "sdwa":
        allowed |= {"dst_sel", "dst_unused", "src0_sel", "src1_sel"}
        for position in range(min(2, len(kinds))):
            sdwa[position] = _sdwa_source(ins.modifiers.get(f"src{position}_sel", "DWORD"), sources[position].sext)
        dst_sel = ins.modifiers.get("dst_sel", "DWORD")
        dst_unused = ins.modifiers.get("dst_unused", "UNUSED_PAD")
    refuse_modifiers(ins, allowed)
    op_sel = ins.modifiers.get("op_sel")
    high = [False] * len(kinds)
    write_high = False
    if op_sel:
        for position, kind in enumerate(source_kinds):
            if position < len(op_sel) - 1 and op_sel[position]:
                if WIDTH[kind] != 16:
                    raise Unsupported(f"{ins.text}: op_sel on a {kind} operand")
                high[position] = True
        write_high = bool(op_sel[-1]) and WIDTH[result_kind] == 16 and len(op_sel) == len(kinds) + 1
        if op_sel[-1] and not write_high:
            raise Unsupported(f"{ins.text}: op_sel destination select")
    fetchers = []
    for position, kind in enumerate(kinds):
        if kind.startswith("dst:"):
            fetchers.append(_fetcher(dest, kind[4:], None, None, False, dest_row=row))
            continue
        op = sources[position]
        fetchers.append(_fetcher(op, kind, _source_modifier(op, kind), sdwa[position], high[position]))
    if permute is not None:   # DPP permutes src0's bits: fetch it raw, permute, then decode
        raw0 = _getter(sources[0], source_kinds[0])
        mod0 = _source_modifier(sources[0], source_kinds[0])
        kind0 = source_kinds[0]
    clamp = "clamp" in ins.modifiers
    scale = 2.0 ** (ins.modifiers["mul"].bit_length() - 1) if "mul" in ins.modifiers else (
        0.5 if ins.modifiers.get("div") == 2 else 1.0)
    if (clamp or scale != 1.0) and result_kind not in FLOAT_KINDS:
        if not (clamp and ins.mnemonic.startswith(("v_add_u32", "v_sub_u32", "v_add_i32", "v_sub_i32"))):
            raise Unsupported(f"{ins.text}: clamp/omod on an integer result")
    wide = WIDTH[result_kind] == 64
    plain = not (clamp or scale != 1.0 or wide or write_high or dst_sel not in (None, "DWORD") or permute)
    signed_clamp = result_kind.startswith("i")

    if plain:
        def run_plain(w):
            w.write_v(row, encode(function(*[f(w) for f in fetchers]), result_kind))
        return run_plain

    def run(w):
        values = [f(w) for f in fetchers]
        if permute is not None:
            bits, write_mask = permute(raw0(w), w.exec_mask)
            values[0] = decode(mod0(bits) if mod0 else bits, kind0)
        result = function(*values)
        if scale != 1.0:
            result = np.asarray(result) * scale
        if clamp:
            if result_kind in FLOAT_KINDS:
                result = np.where(np.isnan(result), 0.0, np.clip(result, 0.0, 1.0))
            else:
                result = np.clip(np.asarray(result, dtype=np.int64), -2 ** 31 if signed_clamp else 0,
                                 2 ** 31 - 1 if signed_clamp else MASK32)
        bits = np.broadcast_to(encode(result, result_kind), w.shape)
        if wide:
            w.write_v64(row, bits)
            return
        if write_high:
            bits = (w.v[row] & U32(0xFFFF)) | (bits << U32(16))
        if dst_sel not in (None, "DWORD"):
            shift, width = SDWA_SELECT[dst_sel]
            field = U32(((1 << width) - 1) << shift)
            placed = (bits << U32(shift)) & field
            if dst_unused == "UNUSED_PRESERVE":
                bits = (w.v[row] & ~field) | placed
            elif dst_unused == "UNUSED_SEXT":
                top = (placed >> U32(shift + width - 1)) & U32(1)
                above = U32(MASK32 ^ ((1 << (shift + width)) - 1))
                bits = placed | np.where(top == 1, above, U32(0))
            else:
                bits = placed
        if permute is not None:
            w.write_v_where(row, bits, write_mask & w.exec_mask)
        else:
            w.write_v(row, bits)
    return run


def _elementwise_names():
    names = []
    for base in ELEMENTWISE:
        names += [base, *(base + suffix for suffix in ENCODINGS)]
    return names


@semantics(*_elementwise_names())
def compile_valu(ins, ctx):
    base, encoding = split_encoding(ins.mnemonic)
    return compile_elementwise(ins, ELEMENTWISE[base], encoding)


# --- compares: a lane mask into VCC or an SGPR pair (v_cmpx_ also into EXEC) --------------
FLOAT_COMPARE = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, dtype=bool), "lt": lambda a, b: a < b,
    "eq": lambda a, b: a == b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b,
    "lg": lambda a, b: (a < b) | (a > b), "ge": lambda a, b: a >= b,
    "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)), "u": lambda a, b: np.isnan(a) | np.isnan(b),
    "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)), "ngt": lambda a, b: ~(a > b),
    "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
    "tru": lambda a, b: np.ones(np.broadcast(a, b).shape, dtype=bool),
}
INT_COMPARE = {
    "f": FLOAT_COMPARE["f"], "lt": lambda a, b: a < b, "eq": lambda a, b: a == b, "le": lambda a, b: a <= b,
    "gt": lambda a, b: a > b, "ne": lambda a, b: a != b, "lg": lambda a, b: a != b, "ge": lambda a, b: a >= b,
    "t": FLOAT_COMPARE["tru"],
}
COMPARE_TYPES = ("f16", "f32", "f64", "i16", "u16", "i32", "u32", "i64", "u64")


def _class_test(value_bits, classes):
    """v_cmp_class_f32: is each value in one of the classes of the mask (bit 0 sNaN, 1 qNaN,
    2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf)."""
    bits, classes = np.broadcast_arrays(np.asarray(value_bits, dtype=U32), np.asarray(classes, dtype=U32))
    exponent, mantissa, negative = (bits >> U32(23)) & U32(0xFF), bits & U32(0x7FFFFF), (bits >> U32(31)) == 1
    kind = np.where(exponent == 255, np.where(mantissa == 0, np.where(negative, 2, 9),
                                              np.where(mantissa & U32(0x400000), 1, 0)),
                    np.where(exponent > 0, np.where(negative, 3, 8),
                             np.where(mantissa > 0, np.where(negative, 4, 7), np.where(negative, 5, 6))))
    return ((classes >> kind.astype(U32)) & U32(1)) == 1


def _compare_names():
    names = []
    for prefix in ("v_cmp_", "v_cmpx_"):
        for kind in COMPARE_TYPES:
            table = FLOAT_COMPARE if kind.startswith("f") else INT_COMPARE
            for name in table:
                names += [f"{prefix}{name}_{kind}{suffix}" for suffix in ("", "_e32", "_e64", "_sdwa")]
        names += [f"{prefix}class_f32{suffix}" for suffix in ("", "_e32", "_e64")]
    return names


@semantics(*_compare_names())
def compile_compare(ins, ctx):
    base, encoding = split_encoding(ins.mnemonic)
    refuse_modifiers(ins, ("clamp", "src0_sel", "src1_sel") if encoding == "sdwa" else ("clamp",))
    writes_exec = base.startswith("v_cmpx_")
    name, kind = base.split("_", 2)[2].rsplit("_", 1)
    dest = sgpr_index(ins.operands[0])
    if dest is None:
        raise Unsupported(f"{ins.text}: compare destination")
    first, second = ins.operands[1], ins.operands[2]
    if name == "class":
        get_value, get_classes = vector_getter(first, 32, "f"), vector_getter(second)
        modifier = _source_modifier(first, "f32")

        def test(w):
            bits = get_value(w)
            return _class_test(modifier(bits) if modifier else bits, get_classes(w))
    else:
        table = FLOAT_COMPARE if kind.startswith("f") else INT_COMPARE
        function = table[name]
        get_a, get_b = _getter(first, kind), _getter(second, kind)
        mod_a, mod_b = _source_modifier(first, kind), _source_modifier(second, kind)
        if encoding == "sdwa":
            select_a = _sdwa_source(ins.modifiers.get("src0_sel", "DWORD"), first.sext)
            select_b = _sdwa_source(ins.modifiers.get("src1_sel", "DWORD"), second.sext)
            get_a = (lambda g, s: (lambda w: s(g(w))))(get_a, select_a) if select_a else get_a
            get_b = (lambda g, s: (lambda w: s(g(w))))(get_b, select_b) if select_b else get_b

        def test(w):
            a, b = get_a(w), get_b(w)
            a, b = (mod_a(a) if mod_a else a), (mod_b(b) if mod_b else b)
            return np.broadcast_to(function(decode(a, kind), decode(b, kind)), w.shape)

    def run(w):
        result = test(w) & w.exec_mask
        w.put_mask(dest, result)
        if writes_exec:
            w.put_mask(EXEC_LO, result)
    return run


# --- select, carries, lane moves ---------------------------------------------------------

@semantics("v_cndmask_b32", "v_cndmask_b32_e32", "v_cndmask_b32_e64", "v_cndmask_b32_sdwa", "v_cndmask_b32_dpp")
def compile_cndmask(ins, ctx):
    base, encoding = split_encoding(ins.mnemonic)
    refuse_modifiers(ins, ())
    row = vgpr_row(ins.operands[0])
    get0, get1 = vector_getter(ins.operands[1], 32, "f"), vector_getter(ins.operands[2], 32, "f")
    mod0, mod1 = _source_modifier(ins.operands[1], "f32"), _source_modifier(ins.operands[2], "f32")
    mask = sgpr_index(ins.operands[3]) if len(ins.operands) > 3 else VCC_LO
    if mask is None:
        raise Unsupported(f"{ins.text}: condition operand")

    def run(w):
        a, b = get0(w), get1(w)
        a, b = (mod0(a) if mod0 else a), (mod1(b) if mod1 else b)
        w.write_v(row, np.where(w.read_mask(mask), b, a).astype(U32))
    return run


CARRY = {  # name: (function(a, b, carry_in) -> (result, carry_out), takes carry in)
    "v_add_co_u32": (lambda a, b, c: a + b, False),
    "v_sub_co_u32": (lambda a, b, c: a - b, False),
    "v_subrev_co_u32": (lambda a, b, c: b - a, False),
    "v_addc_co_u32": (lambda a, b, c: a + b + c, True),
    "v_subb_co_u32": (lambda a, b, c: a - b - c, True),
    "v_subbrev_co_u32": (lambda a, b, c: b - a - c, True),
}


@semantics(*(name + suffix for name in CARRY for suffix in ("", "_e32", "_e64")))
def compile_carry(ins, ctx):
    base, _ = split_encoding(ins.mnemonic)
    refuse_modifiers(ins, ("clamp",))
    function, takes_carry = CARRY[base]
    row, carry_out = vgpr_row(ins.operands[0]), sgpr_index(ins.operands[1])
    get_a, get_b = vector_getter(ins.operands[2]), vector_getter(ins.operands[3])
    carry_in = sgpr_index(ins.operands[4]) if takes_carry else None

    def run(w):
        a = np.asarray(get_a(w), dtype=np.int64)
        b = np.asarray(get_b(w), dtype=np.int64)
        c = w.read_mask(carry_in).astype(np.int64) if takes_carry else 0
        wide = np.broadcast_to(function(a, b, c), w.shape)
        mask = (wide > MASK32) | (wide < 0)
        w.write_v(row, (wide & MASK32).astype(U32))
        w.write_mask(carry_out, mask)
    return run


@semantics("v_mad_u64_u32", "v_mad_i64_i32")
def compile_mad64(ins, ctx):
    refuse_modifiers(ins, ("clamp",))
    signed = ins.mnemonic == "v_mad_i64_i32"
    row, carry = vgpr_row(ins.operands[0]), sgpr_index(ins.operands[1])
    get_a, get_b = vector_getter(ins.operands[2]), vector_getter(ins.operands[3])
    get_c = vector_getter(ins.operands[4], 64)

    def run(w):
        a, b = np.asarray(get_a(w), dtype=U32), np.asarray(get_b(w), dtype=U32)
        c = np.asarray(get_c(w), dtype=np.uint64)
        if signed:
            a64 = np.broadcast_to(a.view(np.int32), (LANES,)).astype(object)
            b64 = np.broadcast_to(b.view(np.int32), (LANES,)).astype(object)
            c64 = np.broadcast_to(c.view(np.int64), (LANES,)).astype(object)
            exact = a64 * b64 + c64
            overflow = np.array([not (-2**63 <= x < 2**63) for x in exact])
            total = np.array([x & (2**64 - 1) for x in exact], dtype=np.uint64)
        else:
            product = a.astype(np.uint64) * b.astype(np.uint64)
            total = np.broadcast_to(product + c, (LANES,))
            overflow = np.broadcast_to(total < c, (LANES,))
        w.write_v64(row, total)
        if carry is not None:
            w.write_mask(carry, overflow)
    return run


def _lane_selector(operand):
    """The lane a v_readlane / v_writelane names: a constant or an SGPR's low 6 bits."""
    if operand.kind == "int":
        return lambda w: operand.value & 63
    return lambda w: w.s[sgpr_index(operand)] & 63


@semantics("v_readlane_b32")
def compile_readlane(ins, ctx):
    dest = sgpr_index(ins.operands[0])
    source = vgpr_row(ins.operands[1])
    lane_of = _lane_selector(ins.operands[2])

    def run(w):
        w.s[dest] = int(w.v[source, lane_of(w)])
        if dest in (EXEC_LO, EXEC_LO + 1):
            w.sync_exec()
    return run


@semantics("v_writelane_b32")
def compile_writelane(ins, ctx):
    row = vgpr_row(ins.operands[0])
    get_value = vector_getter(ins.operands[1])
    lane_of = _lane_selector(ins.operands[2])

    def run(w):
        w.v[row, lane_of(w)] = np.broadcast_to(get_value(w), (LANES,))[0]
    return run


@semantics("v_readfirstlane_b32")
def compile_readfirstlane(ins, ctx):
    dest = sgpr_index(ins.operands[0])
    source = vgpr_row(ins.operands[1])

    def run(w):
        active = np.nonzero(w.exec_mask)[0]
        w.s[dest] = int(w.v[source, active[0] if len(active) else 0])
    return run


@semantics("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32")
def compile_mbcnt(ins, ctx):
    row = vgpr_row(ins.operands[0])
    get_mask, get_add = vector_getter(ins.operands[1]), vector_getter(ins.operands[2])
    high = ins.mnemonic.startswith("v_mbcnt_hi")
    lane = LANE_IDS.astype(np.int64) - (32 if high else 0)
    below = np.clip(lane, 0, 32)
    prefix = ((np.uint64(1) << below.astype(np.uint64)) - np.uint64(1)).astype(np.uint64)

    def run(w):
        mask = np.asarray(get_mask(w), dtype=np.uint64) & prefix
        counts = np.unpackbits(np.ascontiguousarray(np.broadcast_to(mask, (LANES,))).view(np.uint8)).reshape(
            LANES, 64).sum(1).astype(U32)
        w.write_v(row, counts + np.asarray(get_add(w), dtype=U32))
    return run


@semantics("v_permlane16_swap_b32", "v_permlane16_swap_b32_e32", "v_permlane32_swap_b32",
           "v_permlane32_swap_b32_e32")
def compile_permlane_swap(ins, ctx):
    refuse_modifiers(ins, ())
    vdst, src0 = vgpr_row(ins.operands[0]), vgpr_row(ins.operands[1])
    if "permlane32" in ins.mnemonic:
        lower = np.arange(32)
        upper = lower + 32
    else:
        lower = np.concatenate([np.arange(16), np.arange(32, 48)])
        upper = lower + 16

    def run(w):
        held = w.v[src0, lower].copy()
        w.v[src0, lower] = w.v[vdst, upper]
        w.v[vdst, upper] = held
    return run


# --- bitop3: a 3-input truth table ---------------------------------------------------------

@semantics("v_bitop3_b32", "v_bitop3_b16")
def compile_bitop3(ins, ctx):
    refuse_modifiers(ins, ("bitop3", "op_sel"))
    if ins.modifiers.get("op_sel"):
        raise Unsupported(f"{ins.text}: op_sel")
    table = ins.modifiers.get("bitop3", 0)
    row = vgpr_row(ins.operands[0])
    getters = [vector_getter(op) for op in ins.operands[1:4]]
    width_mask = U32(0xFFFF) if ins.mnemonic.endswith("b16") else U32(MASK32)

    def run(w):
        a, b, c = (np.asarray(g(w), dtype=U32) for g in getters)
        out = np.zeros(np.broadcast(a, b, c).shape, dtype=U32)
        for index in range(8):
            if table >> index & 1:
                term = (a if index & 4 else ~a) & (b if index & 2 else ~b) & (c if index & 1 else ~c)
                out |= term
        w.write_v(row, np.broadcast_to(out & width_mask, w.shape))
    return run


# --- packed f32 (VOP3P) --------------------------------------------------------------------
PACKED_F32 = {"v_pk_add_f32": (2, lambda a, b: a + b), "v_pk_mul_f32": (2, lambda a, b: a * b),
              "v_pk_fma_f32": (3, fused), "v_pk_mov_b32": (2, None)}


@semantics(*PACKED_F32)
def compile_packed_f32(ins, ctx):
    refuse_modifiers(ins, ("op_sel", "op_sel_hi", "neg_lo", "neg_hi", "clamp"))
    count, function = PACKED_F32[ins.mnemonic]
    row = vgpr_row(ins.operands[0])
    sources = ins.operands[1:1 + count]
    getters = [vector_getter(op, 64, "i") if op.kind in ("v", "a") or (op.kind == "s" and op.count == 2)
               else None for op in sources]
    scalar32 = [vector_getter(op, 32, "f") if g is None else None for op, g in zip(sources, getters)]
    is_mov = function is None
    op_sel = ins.modifiers.get("op_sel", (0,) * count)
    op_sel_hi = ins.modifiers.get("op_sel_hi", (0,) * count if is_mov else (1,) * count)
    neg_lo = ins.modifiers.get("neg_lo", (0,) * count)
    neg_hi = ins.modifiers.get("neg_hi", (0,) * count)
    clamp = "clamp" in ins.modifiers

    def halves(w, position):
        """(low-lane value, high-lane value) of a source as op_sel/op_sel_hi pick its words."""
        if getters[position] is not None:
            both = np.asarray(getters[position](w), dtype=np.uint64)
            words = ((both & np.uint64(MASK32)).astype(U32), (both >> np.uint64(32)).astype(U32))
        else:
            value = np.asarray(scalar32[position](w), dtype=U32)
            words = (value, value)
        lo, hi = words[op_sel[position]], words[op_sel_hi[position]]
        if neg_lo[position]:
            lo = lo ^ U32(0x80000000)
        if neg_hi[position]:
            hi = hi ^ U32(0x80000000)
        return lo, hi

    def run(w):
        parts = [halves(w, p) for p in range(count)]
        if is_mov:  # D.lo = S0's word op_sel[0], D.hi = S1's word op_sel[1]
            w.write_v(row, np.broadcast_to(parts[0][0], w.shape))
            w.write_v(row + 1, np.broadcast_to(parts[1][0], w.shape))
            return
        with np.errstate(all="ignore"):
            lo = function(*(nx.f32(p[0]) for p in parts))
            hi = function(*(nx.f32(p[1]) for p in parts))
            if clamp:
                lo, hi = (np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0)).astype(F32) for x in (lo, hi))
        w.write_v(row, np.broadcast_to(np.asarray(lo, dtype=F32).view(U32), w.shape))
        w.write_v(row + 1, np.broadcast_to(np.asarray(hi, dtype=F32).view(U32), w.shape))
    return run


# --- packed 16-bit (VOP3P) ------------------------------------------------------------------
PACKED_16 = {  # name: (element kind, sources, function)
    "v_pk_add_u16": ("u16", 2, lambda a, b: a + b), "v_pk_sub_u16": ("u16", 2, lambda a, b: a - b),
    "v_pk_add_i16": ("i16", 2, lambda a, b: a + b), "v_pk_sub_i16": ("i16", 2, lambda a, b: a - b),
    "v_pk_mul_lo_u16": ("u16", 2, lambda a, b: a * b),
    "v_pk_lshlrev_b16": ("u16", 2, lambda a, b: b << (a & U32(15))),
    "v_pk_lshrrev_b16": ("u16", 2, lambda a, b: b >> (a & U32(15))),
    "v_pk_ashrrev_i16": ("i16", 2, lambda a, b: b >> (a & 15)),
    "v_pk_max_u16": ("u16", 2, np.maximum), "v_pk_min_u16": ("u16", 2, np.minimum),
    "v_pk_max_i16": ("i16", 2, np.maximum), "v_pk_min_i16": ("i16", 2, np.minimum),
    "v_pk_mad_u16": ("u16", 3, lambda a, b, c: a * b + c), "v_pk_mad_i16": ("i16", 3, lambda a, b, c: a * b + c),
    "v_pk_add_f16": ("f16", 2, lambda a, b: a + b), "v_pk_mul_f16": ("f16", 2, lambda a, b: a * b),
    "v_pk_fma_f16": ("f16", 3, lambda a, b, c: fused(a, b, c)),
    "v_pk_max_f16": ("f16", 2, fmax), "v_pk_min_f16": ("f16", 2, fmin),
}


@semantics(*PACKED_16)
def compile_packed_16(ins, ctx):
    """Two 16-bit lanes per register: source i's half op_sel[i] feeds the low result, its
    half op_sel_hi[i] (default high) the high one; neg_lo/neg_hi negate float halves; an
    inline constant sits in the low half (the high half 0)."""
    refuse_modifiers(ins, ("op_sel", "op_sel_hi", "neg_lo", "neg_hi", "clamp"))
    kind, count, function = PACKED_16[ins.mnemonic]
    row = vgpr_row(ins.operands[0])
    getters = [vector_getter(op, 16 if op.kind in ("int", "float") else 32, "f" if kind == "f16" else "i")
               for op in ins.operands[1:1 + count]]
    op_sel = ins.modifiers.get("op_sel", (0,) * count)
    op_sel_hi = ins.modifiers.get("op_sel_hi", (1,) * count)
    neg_lo = ins.modifiers.get("neg_lo", (0,) * count)
    neg_hi = ins.modifiers.get("neg_hi", (0,) * count)
    if "clamp" in ins.modifiers:
        raise Unsupported(f"{ins.text}: clamp on a packed 16-bit operation")

    def half(bits, high, negate):
        value = (np.asarray(bits, dtype=U32) >> U32(16 * high)) & U32(0xFFFF)
        if negate:
            value = value ^ U32(0x8000)
        return decode(value, kind)

    def run(w):
        sources = [g(w) for g in getters]
        low = function(*(half(b, op_sel[i], neg_lo[i]) for i, b in enumerate(sources)))
        high = function(*(half(b, op_sel_hi[i], neg_hi[i]) for i, b in enumerate(sources)))
        w.write_v(row, np.broadcast_to(encode(low, kind) | (encode(high, kind) << U32(16)), w.shape))
    return run


# --- mixed-precision FMA (VOP3P) ------------------------------------------------------------

@semantics("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16", "v_mad_mix_f32", "v_mad_mixlo_f16",
           "v_mad_mixhi_f16")
def compile_fma_mix(ins, ctx):
    """in[i] = S[i] as f32 where op_sel_hi[i] is 0, else the f16 in its half op_sel[i] (CDNA4 ISA, V_MAD_MIX*);
    neg_lo (an operand's neg mark) negates and neg_hi (its |abs| mark) takes the absolute value of in[i]; the f32
    fma of in[0] x in[1] + in[2] is the result (mix_f32), or converted to f16 into the low (mixlo) or high (mixhi)
    half, the other half kept."""
    refuse_modifiers(ins, ("op_sel", "op_sel_hi", "neg_lo", "neg_hi", "clamp"))
    if "clamp" in ins.modifiers:
        raise Unsupported(f"{ins.text}: clamp")
    row = vgpr_row(ins.operands[0])
    op_sel = ins.modifiers.get("op_sel", (0, 0, 0))
    op_sel_hi = ins.modifiers.get("op_sel_hi", (0, 0, 0))
    # an f16 source (op_sel_hi set) takes an inline float constant in its f16 encoding
    getters = [vector_getter(op, 16 if op_sel_hi[i] else 32, "f") for i, op in enumerate(ins.operands[1:4])]
    # the assembler writes the mix forms' NEG_LO / NEG_HI bits as the operands' neg(..) / |..| (abs) marks
    neg_lo = [int(bool(ins.modifiers.get("neg_lo", (0, 0, 0))[i] or op.neg)) for i, op in enumerate(ins.operands[1:4])]
    neg_hi = [int(bool(ins.modifiers.get("neg_hi", (0, 0, 0))[i] or op.abs)) for i, op in enumerate(ins.operands[1:4])]
    target = "f32" if ins.mnemonic.endswith("_f32") else ("lo" if "mixlo" in ins.mnemonic else "hi")

    def value(bits, i):
        bits = np.asarray(bits, dtype=U32)
        if op_sel_hi[i]:
            bits = nx.f16_to_f32((bits >> U32(16)) if op_sel[i] else bits)
        x = nx.f32(bits).astype(F64)
        if neg_hi[i]:
            x = np.abs(x)
        return -x if neg_lo[i] else x

    def run(w):
        with np.errstate(all="ignore"):
            result = (value(getters[0](w), 0) * value(getters[1](w), 1) + value(getters[2](w), 2)).astype(F32)
        result = np.broadcast_to(result.view(U32), w.shape)
        if target == "f32":
            w.write_v(row, result)
        elif target == "lo":
            w.write_v(row, (w.v[row] & U32(0xFFFF0000)) | nx.f32_to_f16(result))
        else:
            w.write_v(row, (w.v[row] & U32(0xFFFF)) | (nx.f32_to_f16(result) << U32(16)))
    return run


# --- division helpers ----------------------------------------------------------------------

@semantics("v_div_scale_f32")
def compile_div_scale(ins, ctx):
    """The pre-scaling of the f32 division sequence (CDNA4 ISA, V_DIV_SCALE_F32): S0 the value to scale (the
    denominator S1 or the numerator S2). 0 in S1 or S2 gives NaN (v_div_fixup makes the IEEE result); a quotient near
    the top of the range (exponent(S2) - exponent(S1) >= 96) scales the denominator by 2^64 and sets VCC; a
    denormal denominator scales S0 by 2^64; a denormal quotient sets VCC and scales the numerator by 2^64; a tiny
    numerator (exponent <= 23) scales S0 by 2^64. VCC asks v_div_fmas to post-scale the quotient."""
    refuse_modifiers(ins, ())
    row, flag = vgpr_row(ins.operands[0]), sgpr_index(ins.operands[1])
    g0, g1, g2 = (vector_getter(op, 32, "f") for op in ins.operands[2:5])
    mods = [_source_modifier(op, "f32") for op in ins.operands[2:5]]

    def run(w):
        bits = [np.broadcast_to(np.asarray(m(g(w)) if m else g(w), dtype=U32), w.shape) for g, m in zip((g0, g1, g2),
                                                                                                      mods)]
        s0, s1, s2 = (nx.f32(b).astype(F64) for b in bits)
        e1, e2 = (nx.exponent32(b).astype(np.int64) for b in bits[1:])
        with np.errstate(all="ignore"):
            quotient = np.abs(s2 / s1)
        zero = (s1 == 0) | (s2 == 0)
        near_max = ~zero & (e2 - e1 >= 96)
        denorm_den = ~zero & ~near_max & (e1 == 0)
        denorm_quotient = ~zero & ~near_max & ~denorm_den & (quotient < 2.0 ** -126)
        tiny_num = ~zero & ~near_max & ~denorm_den & ~denorm_quotient & (e2 <= 23)
        scale = (denorm_den | tiny_num | (near_max & (s0 == s1)) | (denorm_quotient & (s0 == s2)))
        result = np.where(scale, s0 * 2.0 ** 64, s0)
        result = np.where(zero, np.nan, result)
        with np.errstate(all="ignore"):
            w.write_v(row, result.astype(F32).view(U32))
        w.write_mask(flag, near_max | denorm_quotient)
    return run


@semantics("v_div_fmas_f32")
def compile_div_fmas(ins, ctx):
    """fma(S0, S1, S2), post-scaled where VCC is set: by 2^64 when S2 (the scaled quotient) has an exponent above
    127 (the denominator was scaled up), else by 2^-64 (the numerator was). The ISA text's fixed 2^32 cannot undo
    v_div_scale's 2^64 either way; the direction by S2's exponent is what the sequence needs."""
    refuse_modifiers(ins, ())
    row = vgpr_row(ins.operands[0])
    getters = [vector_getter(op, 32, "f") for op in ins.operands[1:4]]
    mods = [_source_modifier(op, "f32") for op in ins.operands[1:4]]

    def run(w):
        a, b, c = (np.broadcast_to(np.asarray(m(g(w)) if m else g(w), dtype=U32), w.shape)
                   for g, m in zip(getters, mods))
        result = fused(nx.f32(a), nx.f32(b), nx.f32(c), F64)
        up = nx.exponent32(c) > 127
        result = np.where(w.read_mask(VCC_LO), result * np.where(up, 2.0 ** 64, 2.0 ** -64), result)
        with np.errstate(all="ignore"):
            w.write_v(row, result.astype(F32).view(U32))
    return run


@semantics("v_div_fixup_f32")
def compile_div_fixup(ins, ctx):
    refuse_modifiers(ins, ())
    row = vgpr_row(ins.operands[0])
    getters = [vector_getter(op, 32, "f") for op in ins.operands[1:4]]
    mods = [_source_modifier(op, "f32") for op in ins.operands[1:4]]

    def run(w):
        s0, s1, s2 = (np.broadcast_to(nx.f32(m(g(w)) if m else g(w)), w.shape).astype(F64)
                      for g, m in zip(getters, mods))
        sign = np.signbit(s1) ^ np.signbit(s2)
        signed_inf = np.where(sign, -np.inf, np.inf)
        signed_zero = np.where(sign, -0.0, 0.0)
        result = np.where(sign, -np.abs(s0), np.abs(s0))
        result = np.where((np.abs(s1) == np.inf) | (s2 == 0), signed_zero, result)
        result = np.where((s1 == 0) | (np.abs(s2) == np.inf), signed_inf, result)
        result = np.where(((s1 == 0) & (s2 == 0)) | ((np.abs(s1) == np.inf) & (np.abs(s2) == np.inf)), np.nan, result)
        result = np.where(np.isnan(s1), s1, result)
        result = np.where(np.isnan(s2), s2, result)
        with np.errstate(all="ignore"):
            w.write_v(row, result.astype(F32).view(U32))
    return run


# --- gfx950 conversions (scaled and packed) ------------------------------------------------

def _op_sel_field(ins):
    """The OPSEL bits of the instruction: op_sel:[a,b,c(,d)] -> a | b<<1 | c<<2 | d<<3
    (a 3-element op_sel of the conversions names bits 0, 1 and 3)."""
    sel = ins.modifiers.get("op_sel", ())
    if len(sel) == 3:
        return sel[0] | sel[1] << 1 | sel[2] << 3
    return sum(bit << i for i, bit in enumerate(sel))


CONVERT_TO_WIDE = {  # name: (source format, bits per element, result: bf16 pair / f32 pair / f16 pair)
    "v_cvt_scalef32_pk_bf16_fp4": ("e2m1", 4, "bf16"),
    "v_cvt_scalef32_pk_f16_fp4": ("e2m1", 4, "f16"),
    "v_cvt_scalef32_pk_f32_fp4": ("e2m1", 4, "f32"),
    "v_cvt_scalef32_pk_bf16_fp8": ("e4m3", 8, "bf16"),
    "v_cvt_scalef32_pk_bf16_bf8": ("e5m2", 8, "bf16"),
    "v_cvt_scalef32_pk_f32_fp8": ("e4m3", 8, "f32"),
    "v_cvt_scalef32_pk_f32_bf8": ("e5m2", 8, "f32"),
    "v_cvt_scalef32_pk_f16_fp8": ("e4m3", 8, "f16"),
    "v_cvt_scalef32_pk_f16_bf8": ("e5m2", 8, "f16"),
}


def _to_bf16_bits(values):
    return nx.f32_to_bf16(nx.f64_to_f32_bits(values))


@semantics(*CONVERT_TO_WIDE)
def compile_cvt_scaled_up(ins, ctx):
    """Two narrow elements of the source (the byte of op_sel for fp4, the 16-bit word for
    fp8) times the scale's power of two -> a packed pair. bf16 results round to nearest
    even from the exact value."""
    refuse_modifiers(ins, ("op_sel",))
    if ins.operands[1].neg or ins.operands[1].abs:
        raise Unsupported(f"{ins.text}: neg/abs of the packed source {ins.operands[1].text}")
    fmt, bits, result = CONVERT_TO_WIDE[ins.mnemonic]
    row = vgpr_row(ins.operands[0])
    get_src, get_scale = vector_getter(ins.operands[1]), vector_getter(ins.operands[2], 32, "f")
    sel = _op_sel_field(ins)
    shift = U32((sel & 3) * 8) if bits == 4 else U32((sel & 1) * 16)
    mask = U32((1 << bits) - 1)

    def run(w):
        packed = np.asarray(get_src(w), dtype=U32) >> shift
        scale = nx.scale_of_f32(get_scale(w))
        low = nx.decode(packed & mask, fmt) * scale
        high = nx.decode((packed >> U32(bits)) & mask, fmt) * scale
        low, high = np.broadcast_to(low, w.shape), np.broadcast_to(high, w.shape)
        if result == "bf16":
            w.write_v(row, _to_bf16_bits(low) | (_to_bf16_bits(high) << U32(16)))
        elif result == "f16":
            w.write_v(row, nx.f32_to_f16(nx.f64_to_f32_bits(low)) | (nx.f32_to_f16(nx.f64_to_f32_bits(high)) << U32(16)))
        else:
            w.write_v(row, nx.f64_to_f32_bits(low))
            w.write_v(row + 1, nx.f64_to_f32_bits(high))
    return run


CONVERT_TO_NARROW = {  # name: (format, bits per element, sources' type)
    "v_cvt_scalef32_pk_fp8_f32": ("e4m3", 8, "f32"),
    "v_cvt_scalef32_pk_bf8_f32": ("e5m2", 8, "f32"),
    "v_cvt_scalef32_pk_fp4_f32": ("e2m1", 4, "f32"),
    "v_cvt_pk_fp8_f32": ("e4m3", 8, "f32"),
    "v_cvt_pk_bf8_f32": ("e5m2", 8, "f32"),
}


@semantics(*CONVERT_TO_NARROW)
def compile_cvt_scaled_down(ins, ctx):
    """Two f32 sources divided by the scale's power of two, rounded to nearest even into
    the narrow format (saturating to the largest finite value when MODE.FP16_OVFL is set),
    written into one half (fp8) or one byte (fp4) of the destination; the rest is kept."""
    refuse_modifiers(ins, ("op_sel", "clamp"))
    fmt, bits, _ = CONVERT_TO_NARROW[ins.mnemonic]
    row = vgpr_row(ins.operands[0])
    get_a, get_b = vector_getter(ins.operands[1], 32, "f"), vector_getter(ins.operands[2], 32, "f")
    mod_a, mod_b = _source_modifier(ins.operands[1], "f32"), _source_modifier(ins.operands[2], "f32")
    scaled = ins.mnemonic.startswith("v_cvt_scalef32")
    get_scale = vector_getter(ins.operands[3], 32, "f") if scaled else None
    sel = _op_sel_field(ins)
    shift = (sel >> 2 & 3) * 8 if bits == 4 else (sel >> 3 & 1) * 16
    field = U32(((1 << (2 * bits)) - 1) << shift)
    from .ops_scalar import MODE_FP16_OVFL

    def run(w):
        a, b = get_a(w), get_b(w)
        a, b = (mod_a(a) if mod_a else a), (mod_b(b) if mod_b else b)
        values = [np.broadcast_to(nx.f32(x), w.shape).astype(F64) for x in (a, b)]
        if scaled:
            scale = np.broadcast_to(nx.scale_of_f32(get_scale(w)), w.shape)
            with np.errstate(all="ignore"):
                values = [v / scale for v in values]
        saturate = bool(w.mode & MODE_FP16_OVFL) or "clamp" in ins.modifiers
        codes = [nx.encode(v, fmt, saturate) for v in values]
        packed = (codes[0] | (codes[1] << U32(bits))) << U32(shift)
        w.write_v(row, (w.v[row] & ~field) | (packed.astype(U32) & field))
    return run


CONVERT_16_TO_NARROW = {  # name: (format, bits per element, the packed source's element type)
    "v_cvt_scalef32_pk_fp8_f16": ("e4m3", 8, "f16"), "v_cvt_scalef32_pk_bf8_f16": ("e5m2", 8, "f16"),
    "v_cvt_scalef32_pk_fp8_bf16": ("e4m3", 8, "bf16"), "v_cvt_scalef32_pk_bf8_bf16": ("e5m2", 8, "bf16"),
    "v_cvt_scalef32_pk_fp4_f16": ("e2m1", 4, "f16"), "v_cvt_scalef32_pk_fp4_bf16": ("e2m1", 4, "bf16"),
}


@semantics(*CONVERT_16_TO_NARROW)
def compile_cvt_scaled_down_16(ins, ctx):
    """The two 16-bit elements of S0 (low, high) divided by the scale's power of two, rounded to nearest even into
    the narrow format (saturating as compile_cvt_scaled_down), into the destination's word OPSEL[3] (fp8: op_sel:
    [0,0,1]) or byte OPSEL[3:2] (fp4: op_sel:[0,0,b2,b3]), low element first; the rest is kept (CDNA4 ISA,
    V_CVT_SCALEF32_PK_FP8_F16 ...). neg / abs of the packed source are not emulated."""
    refuse_modifiers(ins, ("op_sel",))
    fmt, bits, source = CONVERT_16_TO_NARROW[ins.mnemonic]
    for op in ins.operands[1:3]:
        if op.neg or op.abs:
            raise Unsupported(f"{ins.text}: neg/abs of {op.text}")
    sel = _op_sel_field(ins)
    if sel & (0b0111 if bits == 8 else 0b0011):
        raise Unsupported(f"{ins.text}: op_sel bits other than the destination select")
    row = vgpr_row(ins.operands[0])
    get_src, get_scale = vector_getter(ins.operands[1]), vector_getter(ins.operands[2], 32, "f")
    shift = U32((sel >> 3 & 1) * 16) if bits == 8 else U32((sel >> 2 & 3) * 8)
    field = U32((1 << (2 * bits)) - 1) << shift
    to_f32 = nx.f16_to_f32 if source == "f16" else nx.bf16_to_f32
    from .ops_scalar import MODE_FP16_OVFL

    def run(w):
        packed = np.broadcast_to(np.asarray(get_src(w), dtype=U32), w.shape)
        scale = np.broadcast_to(nx.scale_of_f32(get_scale(w)), w.shape)
        saturate = bool(w.mode & MODE_FP16_OVFL)
        with np.errstate(all="ignore"):
            codes = [nx.encode(nx.f32(to_f32(half)).astype(F64) / scale, fmt, saturate)
                     for half in (packed & U32(0xFFFF), packed >> U32(16))]
        w.write_v(row, (w.v[row] & ~field) | (((codes[0] | (codes[1] << U32(bits))) << shift) & field))
    return run


@semantics("v_cvt_f32_fp8", "v_cvt_f32_fp8_e32", "v_cvt_f32_fp8_sdwa", "v_cvt_f32_bf8", "v_cvt_f32_bf8_e32",
           "v_cvt_f32_bf8_sdwa", "v_cvt_pk_f32_fp8", "v_cvt_pk_f32_fp8_e32", "v_cvt_pk_f32_fp8_sdwa",
           "v_cvt_pk_f32_bf8", "v_cvt_pk_f32_bf8_e32", "v_cvt_pk_f32_bf8_sdwa")
def compile_cvt_from_fp8(ins, ctx):
    """fp8 (bf8) -> f32: one byte chosen by SDWA src0_sel, or a pair from the word chosen."""
    refuse_modifiers(ins, ("src0_sel", "dst_sel", "dst_unused", "op_sel"))
    base, _ = split_encoding(ins.mnemonic)
    fmt = "e5m2" if base.endswith("bf8") else "e4m3"
    pair = base.startswith("v_cvt_pk")
    row = vgpr_row(ins.operands[0])
    get = vector_getter(ins.operands[1])
    select = ins.modifiers.get("src0_sel", "BYTE_0" if not pair else "WORD_0")
    if ins.modifiers.get("op_sel"):
        select = {(1,): "WORD_1", (0, 1): "BYTE_2", (1, 0): "BYTE_1", (1, 1): "BYTE_3"}.get(ins.modifiers["op_sel"][:2],
                                                                                             select)
    shift = U32(SDWA_SELECT[select][0])

    def run(w):
        source = np.asarray(get(w), dtype=U32) >> shift
        w.write_v(row, np.broadcast_to(nx.f64_to_f32_bits(nx.decode(source & U32(0xFF), fmt)), w.shape))
        if pair:
            high = nx.decode((source >> U32(8)) & U32(0xFF), fmt)
            w.write_v(row + 1, np.broadcast_to(nx.f64_to_f32_bits(high), w.shape))
    return run


@semantics("v_accvgpr_read_b32", "v_accvgpr_write_b32", "v_accvgpr_mov_b32", "v_accvgpr_read",
           "v_accvgpr_write")
def compile_accvgpr(ins, ctx):
    refuse_modifiers(ins, ())
    row = vgpr_row(ins.operands[0])
    get = vector_getter(ins.operands[1])

    def run(w):
        w.write_v(row, np.broadcast_to(get(w), w.shape))
    return run
