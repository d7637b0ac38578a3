"""aiter's reduce of the decode's partial tiles, in Python, following aiter f3be04a's public sources.

* `mla_reduce_v1` (csrc/kernels/mla/reduce.cu, kn_mla_reduce_v1): for every reduce tile with more
  than one partial (reduce_indptr), the partials' log-sum-exps are combined (max, sum of exp,
  global lse = log(sum) + max), each partial output weighted by exp(lse_i - global lse) and summed
  into the final rows reduce_final_map names. A tile of one partial is left alone (the decode wrote
  its output itself: partial row -1).
* `stage2` (aiter/mla.py, _fwd_kernel_stage2_asm): the non-persistent decode's merge of its
  num_kv_splits rows per token, over min(splits, cdiv(kv_len, 64)) splits, as an online softmax.
Both in float32, as the kernels compute.
"""
import torch

HEADS, V_DIM = 16, 512


def mla_reduce_v1(partial_output, partial_lse, reduce_indptr, reduce_final_map, reduce_partial_map, max_seqlen_q,
                  final_output, final_lse=None):
    """partial_output (rows, 1, 16, 512) float32, partial_lse (rows, 1, 16, 1) float32 -> final_output
    (tokens, 16, 512) in place (its dtype)."""
    partials = partial_output.reshape(-1, HEADS, V_DIM)
    lses = partial_lse.reshape(-1, HEADS)
    indptr = reduce_indptr.tolist()
    for tile in range(len(indptr) - 1):
        start, end = indptr[tile], indptr[tile + 1]
        if end - start <= 1:
            continue
        rows = reduce_partial_map[start:end].long()
        lse = lses[rows]                                   # (splits, 16)
        top = lse.max(dim=0).values
        total = torch.exp(lse - top).sum(dim=0)
        global_lse = torch.where((total == 0) | torch.isnan(total), torch.full_like(total, float("inf")),
                                 torch.log(total) + top)
        weights = torch.exp(lse - global_lse)              # (splits, 16)
        out = (weights[:, :, None] * partials[rows]).sum(dim=0)
        q_start, q_end = reduce_final_map[tile].tolist()
        final_output[q_start:q_end] = out.to(final_output.dtype)
        if final_lse is not None:
            final_lse[q_start:q_end] = global_lse


def stage2(logits, attn_lse, output, kv_indptr, num_kv_splits_indptr, mgc=64):
    """logits (tokens, splits, 16, 512) float32, attn_lse (tokens, splits, 16, 1) -> output in place."""
    lengths = (kv_indptr[1:] - kv_indptr[:-1]).tolist()
    splits_ptr = num_kv_splits_indptr.tolist()
    for token, length in enumerate(lengths):
        valid = min(splits_ptr[token + 1] - splits_ptr[token], -(-length // mgc))
        e_max = torch.full((HEADS,), float("-inf"))
        e_sum = torch.zeros(HEADS)
        acc = torch.zeros(HEADS, V_DIM)
        for split in range(valid):
            lse = attn_lse[token, split, :, 0]
            new_max = torch.maximum(lse, e_max)
            old_scale = torch.exp(e_max - new_max)
            weight = torch.exp(lse - new_max)
            acc = acc * old_scale[:, None] + weight[:, None] * logits[token, split]
            e_sum = e_sum * old_scale + weight
            e_max = new_max
        output[token] = (acc / e_sum[:, None]).to(output.dtype)
