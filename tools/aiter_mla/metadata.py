"""aiter's persistent-decode work partition, in Python, following aiter f3be04a's public sources:
`get_mla_metadata_info_v1` (aiter/ops/attention.py: the buffers' shapes) and
`get_mla_metadata_v1` in intra-batch mode (csrc/kernels/mla/metadata/v1_0_device.cuh,
kn_get_mla_metadata_v1_0: each sequence cut into splits of whole 16-token blocks, the splits
dealt to the CUs in order), the mode our glue asks for (fast_mode=False, intra_batch_mode=True).

Work info rows (8 int32): batch index, partial row (-1: no split), q start, q end, kv start,
kv end, kv offset (tokens left after kv end), pad.

Two facts of those sources for short sequences:
* a sequence under 196 tokens gets 0 splits (`seqlen_kv / 196`), and the next line divides by
  it (`integer_divide_ceil(num_blocks, 0)`, v1_0_device.cuh:70 at f3be04a and a722aff38). C++
  leaves that undefined; a GPU has no integer divide: LLVM's AMDGPU backend expands a 32-bit
  division into a float reciprocal and two refinement steps (AMDGPUCodeGenPrepare.cpp,
  expandDivRem32), which does not trap. With a divisor of 0 the reciprocal is +inf, converted
  to 0xFFFFFFFF, and x / 0 comes out x + 1 (0 / 0: 2). `sdiv32_gfx950` is that expansion; the
  payload becomes the sequence's block count (2 for one block) and the sequence one split
  over all its tokens. tests/test_aiter_emulated.py checks the expansion against a gfx950 build
  of the same arithmetic run on the emulator (AITER_ASM_DIR-gated: it builds a kernel).
* an empty sequence is taken as one token (`kv_end = max(kv_end, kv_begin + 1)`): the kernel
  would read the next sequence's first token (or past the cache). The stand-in stops there
  (MetadataEmptySequence).
"""
import numpy as np
import torch

from .launch import AiterEmulationError

CU_COUNT = 256          # the MI355X's compute units (hipDeviceProp_t.multiProcessorCount)
SPLIT_TOKENS = 196      # v1_0_device.cuh get_local_splits: "196 per splits"
WORK_INFO_WORDS = 8
_RCP_SCALE = np.frombuffer(np.uint32(0x4F7FFFFE).tobytes(), dtype=np.float32)[0]   # 4294966784.0: 2^32 - 512


class MetadataEmptySequence(AiterEmulationError):
    """aiter's v1_0 metadata takes an empty sequence as one token, one past its range."""


def get_mla_metadata_info_v1(batch_size, max_seqlen_qo, num_head_qo, q_dtype, kv_dtype, is_sparse,
                             fast_mode=True, num_kv_splits=32, intra_batch_mode=False):
    """aiter's buffer shapes: [(shape, dtype)] of work_metadata_ptrs, work_indptr, work_info_set,
    reduce_indptr, reduce_final_map, reduce_partial_map."""
    if num_head_qo % 16:
        raise ValueError(f"get_mla_metadata_info_v1: num_head_qo {num_head_qo} is not a multiple of 16")
    fp8 = torch.float8_e4m3fn
    wide = num_head_qo == 16 or (num_head_qo == 128 and kv_dtype == fp8 and q_dtype == fp8)
    tiles_per_batch = -(-max_seqlen_qo * num_head_qo // (128 if wide else 16))
    batch_size = batch_size * max_seqlen_qo if is_sparse else batch_size
    tile_count = batch_size * tiles_per_batch
    if fast_mode:
        max_work = (batch_size + CU_COUNT - 1) * tiles_per_batch
        max_split_tiles = min(batch_size + CU_COUNT - 1, (CU_COUNT - 1) * 2) * tiles_per_batch
    else:
        max_work = max_split_tiles = tile_count * CU_COUNT
    if intra_batch_mode:
        max_work = max_split_tiles = tile_count * num_kv_splits
    return [((2,), torch.uint64), ((CU_COUNT + 1,), torch.int32), ((max_work, WORK_INFO_WORDS), torch.int32),
            ((tile_count + 1,), torch.int32), ((tile_count, 2), torch.int32), ((max_split_tiles,), torch.int32)]


def _cdiv(a, b):
    return -(-a // b)


def _umulhi32(a, b):
    return (a * b) >> 32


def sdiv32_gfx950(x, y):
    """C's int32 `x / y` as LLVM's AMDGPU backend computes it (AMDGPUCodeGenPrepare.cpp
    expandDivRem32, signed): |x| and |y|, z = u32(rcp(f32 |y|) * 0x4F7FFFFE as float) saturating,
    one Newton step, q = umulhi(|x|, z), two refinements, the sign put back. The quotient
    truncated toward zero for y != 0; for y == 0 rcp gives +inf, z = 0xFFFFFFFF and the result is
    |x| + 1 (|x| >= 1) or 2 (x == 0), signed."""
    mask = 0xFFFFFFFF
    if not (-2 ** 31 <= x < 2 ** 31 and -2 ** 31 <= y < 2 ** 31):
        raise ValueError(f"sdiv32_gfx950: {x} / {y}: operands must be int32")
    sign = (-1 if x < 0 else 0) ^ (-1 if y < 0 else 0)
    ux, uy = abs(x) & mask, abs(y) & mask
    if uy == 0:
        z = mask   # v_rcp_iflag_f32(0) = +inf; v_cvt_u32_f32(+inf) saturates
    else:
        scaled = float(np.float32(np.float32(1.0) / np.float32(uy)) * np.float32(_RCP_SCALE))
        z = min(int(np.float32(scaled)), mask)
    z = (z + _umulhi32(z, ((-uy) & mask) * z & mask)) & mask
    q = _umulhi32(ux, z)
    r = (ux - q * uy) & mask
    for _ in range(2):
        if r >= uy:
            q, r = (q + 1) & mask, (r - uy) & mask
    q = ((q ^ (sign & mask)) - (sign & mask)) & mask
    return q - 2 ** 32 if q >= 2 ** 31 else q


def integer_divide_ceil(x, y):
    """ck_tile::integer_divide_ceil on int32, (x + y - 1) / y, divided as gfx950 code divides."""
    return sdiv32_gfx950(x + y - 1, y)


def partition(kv_indptr, num_splits, kv_granularity=16, uni_seqlen_qo=1, num_cu=CU_COUNT):
    """kn_get_mla_metadata_v1_0 (16 heads, one KV head) on a list of kv_indptr values ->
    (work_info [[8 ints]], work_indptr, reduce_indptr, reduce_final_map [[start, end]],
    reduce_partial_map)."""
    batches = len(kv_indptr) - 1
    splits_per_cu = _cdiv(num_cu, batches)
    works, reduce_indptr, final_map, partial_map = [], [0], [], []
    for b in range(batches):
        begin = kv_indptr[b]
        if kv_indptr[b + 1] <= begin:
            raise MetadataEmptySequence(
                f"get_mla_metadata_v1: sequence {b} has {kv_indptr[b + 1] - begin} tokens: aiter f3be04a's intra-batch "
                "metadata (v1_0_device.cuh) takes it as one token (kv_end = max(kv_end, kv_begin + 1)), one past its "
                "range; not modelled")
        end = kv_indptr[b + 1]
        seqlen = end - begin
        # get_local_splits: 0 under 196 tokens, and payload divides by it as gfx950 code does (module docstring)
        local = min(seqlen // SPLIT_TOKENS, splits_per_cu, num_splits)
        blocks = _cdiv(seqlen, kv_granularity)
        payload = integer_divide_ceil(blocks, local)
        split_local = integer_divide_ceil(blocks, payload)
        tail = seqlen % (payload * kv_granularity)
        if 0 < tail <= 4 and split_local > 1:
            split_local -= 1
        start = len(works)
        for sid in range(split_local):
            kv_start = begin + sid * payload * kv_granularity
            kv_end = min(kv_start + payload * kv_granularity, end)
            offset = end - kv_end
            if offset <= 4 and split_local > 1:
                kv_end, offset = end, 0
            partial = -1 if split_local == 1 else (start + sid) * uni_seqlen_qo
            works.append([b, partial, b * uni_seqlen_qo, (b + 1) * uni_seqlen_qo, kv_start, kv_end, offset, 0])
            partial_map.append(partial)
        reduce_indptr.append(start + split_local)
        final_map.append([b * uni_seqlen_qo, (b + 1) * uni_seqlen_qo])
    work_end = len(works)
    per_cu, rest = divmod(work_end, num_cu)
    work_indptr = [0] + [min(i * (per_cu + 1), work_end) for i in range(1, rest)]
    stage = rest * (per_cu + 1)
    work_indptr += [stage + (i - rest) * per_cu for i in range(max(rest, 1), num_cu + 1)]
    return works, work_indptr, reduce_indptr, final_map, partial_map


def get_mla_metadata_v1(qo_indptr, kv_indptr, kv_last_page_len, num_heads_per_head_k, num_heads_k, is_causal,
                        work_metadata, work_info_set, work_indptr, reduce_indptr, reduce_final_map,
                        reduce_partial_map, page_size=1, kv_granularity=16, max_seqlen_qo=-1, uni_seqlen_qo=-1,
                        fast_mode=True, topk=-1, max_split_per_batch=-1, intra_batch_mode=False, dtype_q=None,
                        dtype_kv=None):
    """aiter's get_mla_metadata_v1 (its signature at f3be04a), intra-batch mode, 16 heads and one
    KV head: fills the buffers in place, work_metadata with the addresses of work_indptr and
    work_info_set (as aiter's kernel writes the device pointers)."""
    if fast_mode or not intra_batch_mode:
        raise AiterEmulationError("get_mla_metadata_v1: only intra_batch_mode=True, fast_mode=False (v1_0, the "
                                  "mode our glue uses) is modelled")
    if (num_heads_per_head_k, num_heads_k, page_size, uni_seqlen_qo) != (16, 1, 1, 1) or topk != -1:
        raise AiterEmulationError("get_mla_metadata_v1: 16 heads, one KV head, page size 1, one query token only")
    if kv_granularity & (kv_granularity - 1):
        raise ValueError(f"get_mla_metadata_v1: kv_granularity {kv_granularity} must be a power of 2")
    for name, t in (("seqlens_qo_indptr", qo_indptr), ("seqlens_kv_indptr", kv_indptr),
                    ("kv_last_page_lens", kv_last_page_len)):
        if t.dtype != torch.int32 or t.stride(0) != 1:
            raise TypeError(f"get_mla_metadata_v1: {name} must be contiguous int32")
    works, indptr, reduce_ptr, final_map, partial_map = partition(kv_indptr.tolist(), max_split_per_batch,
                                                                  kv_granularity, uni_seqlen_qo)
    if len(works) > work_info_set.shape[0] or len(indptr) > work_indptr.shape[0]:
        raise AiterEmulationError("get_mla_metadata_v1: the work does not fit the buffers get_mla_metadata_info_v1 "
                                  "sized")
    work_info_set[:len(works)] = torch.tensor(works, dtype=torch.int32).reshape(-1, WORK_INFO_WORDS)
    work_indptr[:len(indptr)] = torch.tensor(indptr, dtype=torch.int32)
    reduce_indptr[:len(reduce_ptr)] = torch.tensor(reduce_ptr, dtype=torch.int32)
    reduce_indptr[len(reduce_ptr):] = reduce_ptr[-1]
    reduce_final_map[:len(final_map)] = torch.tensor(final_map, dtype=torch.int32)
    reduce_partial_map[:len(partial_map)] = torch.tensor(partial_map, dtype=torch.int32)
    work_metadata.view(torch.int64)[:2] = torch.tensor([work_indptr.data_ptr(), work_info_set.data_ptr()],
                                                       dtype=torch.int64)
