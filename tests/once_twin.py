"""The ONCE family's standard-Triton twin of the Gluon kernel (submission._gluon_split_kernel).

The Gluon kernel runs on gfx950 only; this twin computes its data flow in standard Triton, so
that the interpreter (CPU) and the H200 can check that data flow against float32 attention:
the tokens of each 128-token tile in 4 groups (the Gluon kernel's warps: group w owns tokens
16w + j and 64 + 16w + j, j < 16), each with its own m, l and 16 x 512 accumulator; p taken
against the group's first valid tile maximum, never rescaled in the loop; a second pass over
the program's tiles from the true maximum when a later score exceeds that reference by more
than 2^ONCE_OVERFLOW_LOG2 in p; the groups merged after the loop, then the same partials and
outputs as every split kernel (_write_result: DIRECT, COMBINE, FUSED), so the combine kernel
and the FUSED merge of submission.py finish it. Q is quantized as the SCALED family does
(_quantize_q), whose bytes the checks compare with quantize_q_reference.

What it does not twin: the Gluon kernel's LDS ring; here each tile's bytes are loaded once into
registers (_once_tile_loads) and read as K and, as int32 words, V. Launched at its variant's
one stage (Triton's default of 3 on NVIDIA needs 237568 bytes of shared memory on the H200,
over its 232448).

It lives in tests/ because no dispatch runs it: on gfx950 the ONCE family is the Gluon kernel
(then the SCALED family), elsewhere the SCALED family (variants_for). It is built from
submission.py's @triton.jit helpers, which a change there must keep working for it.

twin_variant(convert, merge) is its form as a submission.Variant; launch() has
submission._launch_gluon's signature (a plan's or a self-check's Gluon variant runs the twin
with submission._launch_gluon monkeypatched to it); attention() has submission._attention's
role (the split kernel, then the combine kernel for COMBINE); run() takes a
reference.generate_input case.
"""
import torch
import triton
import triton.language as tl

import submission
from submission import (NUM_HEADS_C, ONCE_GROUPS_C, ONCE_OVERFLOW_LOG2_C, ROPE_C, ROPE_PAD_BYTES_C, V_DIM_C,
                        _load_q_padded, _quantize_q, _split_range, _tile_rows, _words_to_bf16, _write_result)


@triton.jit
def _once_tile_loads(kv_ptr, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride, BLOCK_N: tl.constexpr):
    """The raw tile loaded once, as the Gluon kernel copies it: the value codes (BLOCK_N, 256)
    bytes, the rope codes padded to 64 bytes with zeros, their scales (byte 127 in the
    padding), rows at or past hi zeros; and the same value bytes as little-endian int32 words
    for the values' conversion (the byte shifts are disjoint: the sum is an OR). One load of
    the codes, not two: the H200 has no room for both tiles beside the batched dot."""
    kv_rows, scale_rows = _tile_rows(kv_ptr, scale_ptr, tile_start, kv_row_stride, scale_row_stride, BLOCK_N)
    rows_ok = (tile_start + tl.arange(0, BLOCK_N) < hi)[:, None]
    rope_bytes = tl.arange(0, ROPE_PAD_BYTES_C)[None, :]
    rope_blocks = tl.arange(0, ROPE_PAD_BYTES_C // 16)[None, :]
    codes = tl.load(kv_rows + tl.arange(0, V_DIM_C // 2)[None, :], mask=rows_ok, other=0)
    rope = tl.load(kv_rows + V_DIM_C // 2 + rope_bytes, mask=rows_ok & (rope_bytes < ROPE_C // 2), other=0)
    scales = tl.load(scale_rows + tl.arange(0, V_DIM_C // 32)[None, :], mask=rows_ok, other=0)
    rope_scales = tl.load(scale_rows + V_DIM_C // 32 + rope_blocks, mask=rows_ok & (rope_blocks < ROPE_C // 32),
                          other=0)
    rope_scales = tl.where(rope_blocks < ROPE_C // 32, rope_scales, 127)
    words = tl.sum(tl.reshape(codes, (BLOCK_N, V_DIM_C // 8, 4)).to(tl.int32) << (8 * tl.arange(0, 4))[None, None, :],
                   axis=2)
    return codes, scales, words, rope, rope_scales


@triton.jit
def _once_tile(q_ops, kv_ptr, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride, qk_scale_log2,
               m_ref, m_true, l_g, acc_g, BLOCK_N: tl.constexpr, CONVERT: tl.constexpr):
    """One tile in the groups: the scores on dot_scaled (rows at or past hi -inf), regrouped
    (head, 64h + 16w + j) -> (w, head, 16h + j); per group and head m_ref (its first valid
    tile's maximum; -inf before one), m_true (the largest score), l_g (4, 16) += sum p and
    acc_g (4, 16, 512) += p @ v, p against m_ref (times 2^-LOG2_SHIFT[CONVERT])."""
    q8_nope, qs_nope, q8_rope, qs_rope = q_ops
    k, k_scales, words, k_rope, k_rope_scales = _once_tile_loads(kv_ptr, scale_ptr, tile_start, hi, kv_row_stride,
                                                                 scale_row_stride, BLOCK_N)
    scores = tl.dot_scaled(q8_nope, qs_nope, "e4m3", tl.trans(k), k_scales, "e2m1")
    scores = tl.dot_scaled(q8_rope, qs_rope, "e4m3", tl.trans(k_rope), k_rope_scales, "e2m1", scores)
    scores = tl.where((tile_start + tl.arange(0, BLOCK_N) < hi)[None, :], scores, float("-inf"))
    scores = tl.reshape(tl.permute(tl.reshape(scores, (NUM_HEADS_C, BLOCK_N // 64, ONCE_GROUPS_C, 16)), (2, 0, 1, 3)),
                        (ONCE_GROUPS_C, NUM_HEADS_C, BLOCK_N // ONCE_GROUPS_C))
    m_tile = tl.max(scores, axis=2)
    m_true = tl.maximum(m_true, m_tile)
    m_ref = tl.where(m_ref == float("-inf"), m_tile, m_ref)
    m_use = tl.where(m_ref == float("-inf"), 0.0, m_ref) * qk_scale_log2
    p = tl.exp2(scores * qk_scale_log2 - m_use[:, :, None])
    l_g = l_g + tl.sum(p, axis=2)
    values = _words_to_bf16(words, k_scales, BLOCK_N, V_DIM_C // 8, CONVERT, 0, True)
    values = tl.reshape(tl.permute(tl.reshape(values, (BLOCK_N // 64, ONCE_GROUPS_C, 16, V_DIM_C)), (1, 0, 2, 3)),
                        (ONCE_GROUPS_C, BLOCK_N // ONCE_GROUPS_C, V_DIM_C))
    acc_g = tl.dot(p.to(tl.bfloat16), values, acc_g)
    return m_ref, m_true, l_g, acc_g


@triton.jit
def _once_tiles(m_ref, q_ops, kv_ptr, scale_ptr, lo, hi, kv_row_stride, scale_row_stride, qk_scale_log2,
                BLOCK_N: tl.constexpr, CONVERT: tl.constexpr):
    """One pass over tiles [lo, hi) from the references m_ref (4, 16) -> (m_ref, m_true, l_g, acc_g)."""
    m_true = tl.full([ONCE_GROUPS_C, NUM_HEADS_C], float("-inf"), tl.float32)
    l_g = tl.zeros([ONCE_GROUPS_C, NUM_HEADS_C], tl.float32)
    acc_g = tl.zeros([ONCE_GROUPS_C, NUM_HEADS_C, V_DIM_C], tl.float32)
    for tile_start in range(lo, hi, BLOCK_N):
        m_ref, m_true, l_g, acc_g = _once_tile(q_ops, kv_ptr, scale_ptr, tile_start, hi, kv_row_stride,
                                               scale_row_stride, qk_scale_log2, m_ref, m_true, l_g, acc_g, BLOCK_N,
                                               CONVERT)
    return m_ref, m_true, l_g, acc_g


@triton.jit(do_not_specialize=["total_kv", "num_splits", "q_bytes_split"])
def once_twin_split_kernel(
    q_ptr, kv_ptr, scale_ptr, qo_indptr_ptr, kv_indptr_ptr, out_ptr, part_acc_ptr, part_ml_ptr, count_ptr,
    q8_ptr, qs_ptr, q_bytes_split,
    total_kv, num_splits, q_row_stride, q_head_stride, kv_row_stride, scale_row_stride, qk_scale_log2, value_scale,
    BLOCK_N: tl.constexpr, CONVERT: tl.constexpr, MERGE: tl.constexpr, WAVE_FENCES: tl.constexpr,
    MERGE_HEADS: tl.constexpr, MERGE_SPLITS: tl.constexpr,
):
    """One program (split program_id(0), sequence program_id(1)): _scaled_split_kernel's
    arguments less the int32 view, its range, Q and results; the tiles in the Gluon kernel's
    groups (one pass, then the second one when a group's p would pass 2^ONCE_OVERFLOW_LOG2)."""
    tl.static_assert(BLOCK_N % 64 == 0, "the groups are the Gluon kernel's: 64-token halves of the tile")
    q_rows = q_ptr + tl.program_id(1) * q_row_stride + tl.arange(0, NUM_HEADS_C)[:, None] * q_head_stride
    seq, split, range_ok, lo, _, hi = _split_range(qo_indptr_ptr, kv_indptr_ptr, total_kv, num_splits, BLOCK_N)
    q_nope, q_rope = _load_q_padded(q_rows)
    q_ops = _quantize_q(q_nope, q_rope, q8_ptr, qs_ptr, seq, split, q_bytes_split)
    m_ref, m_true, l_g, acc_g = _once_tiles(tl.full([ONCE_GROUPS_C, NUM_HEADS_C], float("-inf"), tl.float32), q_ops,
                                            kv_ptr, scale_ptr, lo, hi, kv_row_stride, scale_row_stride,
                                            qk_scale_log2, BLOCK_N, CONVERT)
    known = m_ref != float("-inf")
    gap = tl.where(known, (m_true - tl.where(known, m_ref, 0.0)) * qk_scale_log2, 0.0)
    if tl.max(tl.max(gap, axis=1), axis=0) > ONCE_OVERFLOW_LOG2_C:  # again, from the true maximum
        m_ref, m_true, l_g, acc_g = _once_tiles(m_true, q_ops, kv_ptr, scale_ptr, lo, hi, kv_row_stride,
                                                scale_row_stride, qk_scale_log2, BLOCK_N, CONVERT)
    m_all = tl.max(m_ref, axis=0)  # the groups merged
    weight = tl.exp2((m_ref - tl.where(m_all == float("-inf"), 0.0, m_all)[None, :]) * qk_scale_log2)
    _write_result(tl.sum(acc_g * weight[:, :, None], axis=0), m_all, tl.sum(l_g * weight, axis=0), range_ok, seq,
                  split, num_splits, out_ptr, part_acc_ptr, part_ml_ptr, count_ptr, qk_scale_log2, value_scale,
                  False, MERGE, WAVE_FENCES, MERGE_HEADS, MERGE_SPLITS)


def twin_variant(convert, merge=submission.MERGE_COMBINE):
    """The twin's form as a submission.Variant of the ONCE family: the Gluon kernel's
    128-token tiles and 4 warps, `convert` for the values (PORTABLE or GFX950)."""
    return submission.Variant(convert, 0, submission.GL_BLOCK_N, submission.GL_NUM_WARPS, 1, False,
                              submission.ONCE_SCORES, merge)


def launch(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, qk_scale_log2,
           q_bytes_split=submission.Q_BYTES_CHECKED):
    """The twin's split kernel, with submission._launch_gluon's signature and results
    (packed / scales: the uint8 views)."""
    submission._launch_kernel(
        once_twin_split_kernel, (num_splits, out.shape[0]),
        (q, packed, scales, qo_indptr, kv_indptr, out, scratch.part_acc, scratch.part_ml, scratch.count, scratch.q8,
         scratch.qs, q_bytes_split, packed.shape[0], num_splits, q.stride(0), q.stride(1), packed.stride(0),
         scales.stride(0),
         qk_scale_log2, 2.0 ** submission.LOG2_SHIFT[variant.convert]),
        dict(BLOCK_N=variant.block_n, CONVERT=variant.convert, MERGE=variant.merge, WAVE_FENCES=variant.wave_fences,
             **submission.fused_merge_constants(variant), num_warps=variant.num_warps, num_stages=variant.num_stages),
        "ONCE twin: " + variant.describe())


def attention(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, sm_scale, dims,
              q_bytes_split=submission.Q_BYTES_CHECKED):
    """One call of the twin, as submission._attention makes one: the split kernel, then for
    COMBINE the combine kernel (grid batch x 16 x 512 / dims)."""
    qk_scale_log2 = sm_scale * submission.LOG2E  # dot_scaled's scores are exact: no shift
    launch(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, qk_scale_log2, q_bytes_split)
    if variant.merge == submission.MERGE_COMBINE:
        submission._launch_kernel(
            submission._mla_combine_kernel, (out.shape[0], submission.NUM_HEADS, submission.V_HEAD_DIM // dims),
            (out, scratch.part_acc, scratch.part_ml, num_splits, qk_scale_log2,
             2.0 ** submission.LOG2_SHIFT[variant.convert]),
            dict(CHUNK=min(num_splits, submission.COMBINE_MAX_CHUNK), DIMS=dims, num_warps=4), variant.describe())


def run(data, variant, num_splits, scratch=None):
    """The twin on a reference.generate_input case -> (out (batch, 16, 512) bf16, the scratch
    it used: its q8 / qs hold the Q bytes split 0 wrote, its count the FUSED counters). A
    scratch from an earlier run carries those counters over calls, as a plan's does."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    packed, scales = (t.view(torch.uint8) for t in kv_data["mxfp4"])
    batch = q.shape[0]
    if scratch is None:
        scratch = submission.make_scratch(batch, num_splits, q.device, [variant])
    out = torch.empty((batch, submission.NUM_HEADS, submission.V_HEAD_DIM), dtype=torch.bfloat16, device=q.device)
    attention(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, config["sm_scale"],
              submission.combine_dims(batch, submission._num_sms(q.device)))
    return out, scratch
