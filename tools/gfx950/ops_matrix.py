"""Matrix instructions (v_mfma_*): D = A x B + C over one wave, with gfx950's scaled
f8f6f4 forms (block scales of 32 elements along K, e8m0 bytes).

Register layouts (AMD's matrix instruction calculator for CDNA3; CDNA4's K-doubled forms
keep the pattern, and the f8f6f4 element order is held by the corpus kernels):
  A (M x K): lane l holds row l % M; the lanes of group g = l // M hold K / (64 / M)
             elements of that row, packed low bits first, register by register
  B (K x N): the same with column l % N
  D, C (M x N, f32): 16x16: register r of lane l = D[4 (l // 16) + r][l % 16]
                     32x32: register r of lane l = D[8 (r // 4) + 4 (l // 32) + r % 4][l % 32]
Which K indices a lane's elements are (ELEMENT_ORDER) matters only where scales differ
along K; it is one table below.
"""
import re

import numpy as np

from . import numerics as nx
from .registry import Unsupported, refuse_modifiers, semantics
from .wave import LANES, register_rows, vector_getter, vgpr_row

F64 = np.float64
# cbsz / blgp codes of the f8f6f4 forms: (format, bits per element)
F8F6F4_FORMATS = {0: ("e4m3", 8), 1: ("e5m2", 8), 2: ("e2m3", 6), 3: ("e3m2", 6), 4: ("e2m1", 4)}
NAMED_FORMATS = {"bf16": ("bf16", 16), "f16": ("f16", 16), "fp8": ("e4m3", 8), "bf8": ("e5m2", 8),
                 "i8": ("i8", 8), "f32": ("f32", 32)}


def element_k(M, K, bits, lane, element):
    """The K index of element `element` of `lane`'s A (or B) registers. 8-bit elements of the
    K=128 (16x16) and K=64 (32x32) forms come in chunks of 16 spread over the lane groups;
    every other form holds a contiguous run of K per lane group."""
    groups = LANES // M
    per_lane = K // groups
    group = lane // M
    if bits == 8 and per_lane == 32:
        return (element // 16) * (16 * groups) + group * 16 + element % 16
    return group * per_lane + element


def unpack(words, fmt, bits, count):
    """uint32 (registers, [waves,] 64) -> float64 ([waves,] 64, count) element values, low bits first."""
    words = np.asarray(words, dtype=np.uint32)
    if bits == 32:
        return np.moveaxis(nx.f32(words), 0, -1).astype(F64)[..., :count]
    stream = np.ascontiguousarray(np.moveaxis(words, 0, -1)).view(np.uint8)   # ([waves,] 64, 4 * registers) bytes
    if bits == 16:
        halves = stream.view(np.uint16)[..., :count].astype(np.uint32)
        return nx.f32(nx.bf16_to_f32(halves)).astype(F64) if fmt == "bf16" else nx.f32(nx.f16_to_f32(halves)).astype(F64)
    if bits == 8:
        codes = stream[..., :count]
        return codes.view(np.int8).astype(F64) if fmt == "i8" else nx.decode(codes, fmt)
    bit_stream = np.unpackbits(stream, axis=-1, bitorder="little")[..., :bits * count].reshape(
        stream.shape[:-1] + (count, bits))
    codes = (bit_stream.astype(np.int64) << np.arange(bits)).sum(-1)
    return nx.decode(codes, fmt)


def gather(values, M, K, bits):
    """([waves,] 64, per lane) element values -> the ([waves,] M, K) matrix they hold."""
    groups = LANES // M
    per_lane = K // groups
    matrix = np.zeros(values.shape[:-2] + (M, K), dtype=F64)
    lanes = np.arange(LANES)[:, None]
    elements = np.arange(per_lane)[None, :]
    matrix[..., np.broadcast_to(lanes % M, (LANES, per_lane)), element_k(M, K, bits, lanes, elements)] = values
    return matrix


def d_position(M, register, lane):
    """(row, column) of register `register` of `lane` in the f32 D/C matrix."""
    if M == 16:
        return 4 * (lane // 16) + register, lane % 16
    return 8 * (register // 4) + 4 * (lane // 32) + register % 4, lane % 32


def _layout(M):
    registers = M * M // LANES
    lanes = np.arange(LANES)
    rows, cols = zip(*(d_position(M, r, lanes) for r in range(registers)))
    return np.array(rows), np.array(cols)     # (registers, 64) each


MFMA_NAME = re.compile(r"^v_mfma(_scale)?_(f32|i32)_(\d+)x(\d+)x(\d+)_?(\w+)$")


def _formats(ins, suffix, scaled):
    if suffix == "f8f6f4":
        a_code, b_code = ins.modifiers.get("cbsz", 0), ins.modifiers.get("blgp", 0)
        if a_code not in F8F6F4_FORMATS or b_code not in F8F6F4_FORMATS:
            raise Unsupported(f"{ins.text}: cbsz/blgp format codes {a_code}/{b_code}")
        return F8F6F4_FORMATS[a_code], F8F6F4_FORMATS[b_code]
    if ins.modifiers.get("cbsz", 0) or ins.modifiers.get("abid", 0) or ins.modifiers.get("blgp", 0):
        raise Unsupported(f"{ins.text}: cbsz/abid/blgp broadcasts are not emulated")
    parts = suffix.split("_")
    names = parts if len(parts) == 2 else parts * 2
    try:
        return NAMED_FORMATS[names[0]], NAMED_FORMATS[names[1]]
    except KeyError:
        raise Unsupported(f"{ins.mnemonic}: element type {suffix}") from None


def _scale_byte(modifiers, position):
    """Byte of the 32-bit scale register a scaled MFMA reads for source `position` (0 = A,
    1 = B): op_sel[position] + 2 op_sel_hi[position]."""
    sel = modifiers.get("op_sel", (0, 0, 0))
    hi = modifiers.get("op_sel_hi", (0, 0, 0))
    return sel[position] | hi[position] << 1


def _mfma_names():
    names = []
    for m, k in ((16, 16), (16, 32), (32, 8), (32, 16)):
        names += [f"v_mfma_f32_{m}x{m}x{k}_bf16", f"v_mfma_f32_{m}x{m}x{k}_f16"]
    for m, k in ((16, 32), (32, 16)):
        names += [f"v_mfma_f32_{m}x{m}x{k}_{a}_{b}" for a in ("fp8", "bf8") for b in ("fp8", "bf8")]
    names += ["v_mfma_f32_16x16x128_f8f6f4", "v_mfma_f32_32x32x64_f8f6f4", "v_mfma_scale_f32_16x16x128_f8f6f4",
              "v_mfma_scale_f32_32x32x64_f8f6f4", "v_mfma_f32_16x16x4_f32", "v_mfma_f32_32x32x2_f32",
              "v_mfma_i32_16x16x64_i8", "v_mfma_i32_32x32x32_i8"]
    return names


@semantics(*_mfma_names())
def compile_mfma(ins, ctx):
    m = MFMA_NAME.match(ins.mnemonic)
    scaled, out_type, M, N, K, suffix = m[1] is not None, m[2], int(m[3]), int(m[4]), int(m[5]), m[6]
    refuse_modifiers(ins, ("op_sel", "op_sel_hi", "cbsz", "abid", "blgp"))
    (a_fmt, a_bits), (b_fmt, b_bits) = _formats(ins, suffix, scaled)
    if not scaled and (ins.modifiers.get("op_sel") or ins.modifiers.get("op_sel_hi")) and any(
            ins.modifiers.get("op_sel", ())) and suffix != "f8f6f4":
        raise Unsupported(f"{ins.text}: op_sel on an unscaled MFMA")
    groups = LANES // M
    per_lane = K // groups
    a_rows, b_rows = register_rows(ins.operands[1]), register_rows(ins.operands[2])
    need_a, need_b = -(-per_lane * a_bits // 32), -(-per_lane * b_bits // 32)
    if len(a_rows) < need_a or len(b_rows) < need_b:
        raise Unsupported(f"{ins.text}: {len(a_rows)}/{len(b_rows)} source registers, {need_a}/{need_b} needed")
    a_rows, b_rows = a_rows[:need_a], b_rows[:need_b]
    dest = vgpr_row(ins.operands[0])
    registers = M * N // LANES
    c_op = ins.operands[3]
    c_rows = register_rows(c_op) if c_op.kind in ("v", "a") else None
    c_constant = vector_getter(c_op, 32, "f") if c_rows is None else None
    d_rows, d_cols = _layout(M)
    integer = out_type == "i32"
    scale_getters = None
    if scaled:
        scale_getters = (vector_getter(ins.operands[4]), vector_getter(ins.operands[5]))
        scale_bytes = (_scale_byte(ins.modifiers, 0), _scale_byte(ins.modifiers, 1))
    lanes = np.arange(LANES)
    blocks = K // 32 if scaled else 0

    def run(w):
        """One wave, or (GroupWave) every wave of a lockstep group at once: a leading waves axis."""
        a = gather(unpack(w.v[a_rows], a_fmt, a_bits, per_lane), M, K, a_bits)
        b = gather(unpack(w.v[b_rows], b_fmt, b_bits, per_lane), N, K, b_bits)   # ([waves,] N, K)
        if scaled:
            scales = []
            for getter, byte in zip(scale_getters, scale_bytes):
                codes = (np.broadcast_to(np.asarray(getter(w), dtype=np.uint32), w.shape) >> np.uint32(8 * byte)) & 0xFF
                table = np.zeros(codes.shape[:-1] + (M, blocks))
                table[..., lanes % M, lanes // M] = nx.e8m0_scale(codes)   # lane l: row l % M, K block l // M
                scales.append(np.repeat(table, 32, axis=-1))
            a = a * scales[0]
            b = b * scales[1]
        with np.errstate(all="ignore"):
            product = np.moveaxis((a @ np.swapaxes(b, -1, -2))[..., d_rows, d_cols], -2, 0)   # (registers, [waves,] 64)
            if c_rows is not None:
                c_words = w.v[c_rows]
                c = c_words.view(np.int32).astype(F64) if integer else nx.f32(c_words).astype(F64)
                result = product + c
            else:
                c = np.asarray(c_constant(w))
                result = product + (c.view(np.int32) if integer else nx.f32(c)).astype(F64)
            out = result.astype(np.int64).astype(np.uint32) if integer else result.astype(np.float32).view(np.uint32)
        w.v[dest:dest + registers] = out
    return run
