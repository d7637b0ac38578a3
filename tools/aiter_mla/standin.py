"""An `aiter` for a CPU: the three names submission.py uses, with aiter f3be04a's signatures,
whose decode runs AMD's gfx950 code objects on the emulator.

    aiter.get_mla_metadata_info_v1(...)   -> metadata.get_mla_metadata_info_v1
    aiter.get_mla_metadata_v1(...)        -> metadata.get_mla_metadata_v1 (the v1_0 partition)
    aiter.mla.mla_decode_fwd(...)         -> mla_decode_fwd below (aiter/mla.py's two branches)

Every launch is appended to LAUNCHES and every accepted detector finding to FINDINGS (run.py
writes them to results/).
"""
import torch

from . import reduce
from .findings import Findings
from .launch import AiterEmulationError, mla_decode_stage1
from .metadata import CU_COUNT, get_mla_metadata_info_v1, get_mla_metadata_v1

LAUNCHES = []
FINDINGS = Findings()
FP8 = torch.float8_e4m3fn
# aiter/mla.py get_meta_param: the fp8 decode's smallest KV tile per workgroup, by heads x query tokens
FP8_MIN_BLOCK_N = {16: 128, 32: 128, 48: 64, 64: 64, 128: 32, 256: 32, 384: 32, 512: 32}


def get_meta_param(num_kv_splits, bs, total_kv, nhead, max_seqlen_q):
    """aiter/mla.py get_meta_param for fp8 (cu_num = the MI355X's 256) -> (splits, splits indptr)."""
    if num_kv_splits is None:
        avg_kv, overhead = total_kv / bs, 84.1
        rated = [(bs * i / ((bs * i + CU_COUNT - 1) // CU_COUNT * CU_COUNT) * avg_kv / (avg_kv + overhead * i), i)
                 for i in range(1, 17)]
        num_kv_splits = sorted(rated, key=lambda x: x[0], reverse=True)[0][1]
    block_n = FP8_MIN_BLOCK_N[int(nhead * max_seqlen_q)]
    num_kv_splits = min(num_kv_splits, int(total_kv / bs + block_n - 1) // block_n)
    return num_kv_splits, torch.arange(0, (bs + 1) * num_kv_splits, num_kv_splits, dtype=torch.int32)


def mla_decode_fwd(q, kv_buffer, o, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens, max_seqlen_q, page_size=1,
                   nhead_kv=1, sm_scale=None, logit_cap=0.0, num_kv_splits=None, num_kv_splits_indptr=None,
                   work_meta_data=None, work_indptr=None, work_info_set=None, reduce_indptr=None,
                   reduce_final_map=None, reduce_partial_map=None, q_scale=None, kv_scale=None,
                   intra_batch_mode=False, return_logits=False, return_lse=False):
    """aiter.mla.mla_decode_fwd (aiter f3be04a) for fp8 Q and KV, 16 heads, one query token."""
    if logit_cap > 0:
        raise AiterEmulationError(f"mla_decode_fwd: logit_cap={logit_cap} is not supported (as in aiter)")
    if sm_scale is None:
        sm_scale = 1.0 / (kv_buffer.shape[-1] ** 0.5)
    total_s, nhead, v_head_dim = o.shape
    bs = qo_indptr.shape[0] - 1
    common = dict(max_seqlen_q=max_seqlen_q, page_size=page_size, nhead_kv=nhead_kv, softmax_scale=sm_scale,
                  q_scale=q_scale, kv_scale=kv_scale, launches=LAUNCHES, findings=FINDINGS)
    if work_meta_data is None:
        num_kv_splits, num_kv_splits_indptr = get_meta_param(num_kv_splits, bs, kv_indices.shape[0], nhead,
                                                             max_seqlen_q)
        logits = torch.empty((total_s, num_kv_splits, nhead, v_head_dim), dtype=torch.float32)
        attn_lse = torch.empty((total_s, num_kv_splits, nhead, 1), dtype=torch.float32)
        mla_decode_stage1(q, kv_buffer, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens, num_kv_splits_indptr,
                          None, None, None, split_data=logits, split_lse=attn_lse, output=o, **common)
        reduce.stage2(logits, attn_lse, o, kv_indptr, num_kv_splits_indptr)
        return logits, attn_lse
    logits = torch.empty((reduce_partial_map.size(0) * max_seqlen_q, 1, nhead, v_head_dim), dtype=torch.float32)
    attn_lse = torch.empty((reduce_partial_map.size(0) * max_seqlen_q, 1, nhead, 1), dtype=torch.float32)
    final_lse = torch.empty((total_s, nhead), dtype=torch.float32) if return_lse else None
    mla_decode_stage1(q, kv_buffer, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens, None, work_meta_data,
                      work_indptr, work_info_set, split_data=logits, split_lse=attn_lse, output=o, **common)
    reduce.mla_reduce_v1(logits, attn_lse, reduce_indptr, reduce_final_map, reduce_partial_map, max_seqlen_q, o,
                         final_lse)
    return logits, final_lse


def api():
    """The dict submission.STATE.aiter holds (what its _import_aiter returns where aiter imports)."""
    return {"mla_decode_fwd": mla_decode_fwd, "metadata_info": get_mla_metadata_info_v1,
            "metadata_fill": get_mla_metadata_v1, "fp8": FP8}
