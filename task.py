"""Types of the amd-mixed-mla task, with the leaderboard's names and meaning.

input_t  = (q, kv_data, qo_indptr, kv_indptr, config)
  q          (total_q, 16, 576) bfloat16, total_q = batch_size * q_seq_len (q_seq_len = 1)
  kv_data    {"bf16":  Tensor (total_kv, 1, 576) bfloat16,
              "fp8":   (Tensor (total_kv, 1, 576) fp8, Tensor (1,) float32 scale),
              "mxfp4": (Tensor (total_kv, 1, 288) float4_e2m1fn_x2 or uint8,
                        Tensor (rows >= total_kv, cols >= 18) float8_e8m0fnu or uint8)}
  qo_indptr  (batch_size + 1,) int32
  kv_indptr  (batch_size + 1,) int32
  config     dict: batch_size, num_heads, num_kv_heads, qk_head_dim, kv_lora_rank,
             qk_rope_head_dim, v_head_dim, q_seq_len, kv_seq_len, sm_scale
output_t = Tensor (total_q, 16, 512) bfloat16
"""
from typing import TypedDict, TypeVar

import torch

input_t = TypeVar("input_t", bound=tuple[torch.Tensor, dict, torch.Tensor, torch.Tensor, dict])
output_t = TypeVar("output_t", bound=torch.Tensor)


class TestSpec(TypedDict):
    batchsize: int
    qseqlen: int
    kvseqlen: int
    seed: int
