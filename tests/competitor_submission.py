"""A competitor's own submission, as a new user writes one (tests/test_gfx950_verdicts.py runs it
under `MLA_EMULATE=gfx950 python eval.py test`): bf16 attention over the whole KV sequence in one
Triton program per sequence (the 16 heads together: Q (16, 576) against BLOCK_N tokens of the bf16
cache, online softmax, values the cache's first 512 dims).

PLANTED_BUG (an environment variable: `KV_LEN=BUG,...`) plants a bug a checker must report in the
cases whose sequences have KV_LEN tokens, so that one run of eval.py holds a right case and each bug
(the kernel's text stays the same, so its builds are cached):
    read_past_end       the KV loads lose their mask: the last tile reads past the cache's end
    unsupported_opcode  the output goes through inline asm the emulator does not implement
    spin                the kernel first waits for a flag nobody sets
    caught              read_past_end, and the failed launch is caught: the answer comes from torch
"""
import os

import torch
import triton
import triton.language as tl

from task import input_t, output_t

PLANTED_BUGS = {int(kv_len): bug for kv_len, bug in
                (item.split("=") for item in os.environ.get("PLANTED_BUG", "").split(",") if item)}
NUM_HEADS, QK_DIM, V_DIM, ROPE_DIM = 16, 576, 512, 64
BLOCK_N = 16


@triton.jit
def _decode_kernel(q_ptr, kv_ptr, out_ptr, kv_indptr_ptr, flag_ptr, sm_scale,
                   HEADS: tl.constexpr, QK: tl.constexpr, V: tl.constexpr, ROPE: tl.constexpr,
                   BLOCK: tl.constexpr, MASK_LOADS: tl.constexpr, ASM_OUT: tl.constexpr, WAIT_FLAG: tl.constexpr):
    """q (batch, HEADS, QK) bf16, kv (total_kv, 1, QK) bf16, out (batch, HEADS, V) bf16,
    kv_indptr (batch + 1,) int32, flag (1,) int32; one program per sequence."""
    seq = tl.program_id(0)
    if WAIT_FLAG:  # wait until another program says go (none does)
        while tl.atomic_add(flag_ptr, 0, sem="acquire") == 0:
            pass
    start = tl.load(kv_indptr_ptr + seq)
    end = tl.load(kv_indptr_ptr + seq + 1)
    heads = tl.arange(0, HEADS)
    dims = tl.arange(0, V)
    rope = tl.arange(0, ROPE)
    q_row = q_ptr + seq * HEADS * QK + heads[:, None] * QK
    q_nope = tl.load(q_row + dims[None, :])
    q_pe = tl.load(q_row + V + rope[None, :])
    m_i = tl.full((HEADS,), float("-inf"), tl.float32)
    l_i = tl.zeros((HEADS,), tl.float32)
    acc = tl.zeros((HEADS, V), tl.float32)
    for first in range(start, end, BLOCK):
        tokens = first + tl.arange(0, BLOCK)
        inside = tokens < end
        row = kv_ptr + tokens[:, None] * QK
        if MASK_LOADS:
            kv = tl.load(row + dims[None, :], mask=inside[:, None], other=0.0)
            k_pe = tl.load(row + V + rope[None, :], mask=inside[:, None], other=0.0)
        else:
            kv = tl.load(row + dims[None, :])
            k_pe = tl.load(row + V + rope[None, :])
        scores = tl.dot(q_nope, tl.trans(kv)) + tl.dot(q_pe, tl.trans(k_pe))
        scores = tl.where(inside[None, :], scores * sm_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, 1))
        p = tl.exp(scores - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.bfloat16), kv)
        m_i = m_new
    out = acc / l_i[:, None]
    if ASM_OUT:
        out = tl.inline_asm_elementwise("v_cubeid_f32 $0, $1, $1, $1", "=v,v", [out], dtype=tl.float32,
                                        is_pure=True, pack=1)
    tl.store(out_ptr + seq * HEADS * V + heads[:, None] * V + dims[None, :], out.to(tl.bfloat16))


def custom_kernel(data: input_t) -> output_t:
    q, kv_data, qo_indptr, kv_indptr, config = data
    bug = PLANTED_BUGS.get(config["kv_seq_len"], "")
    kv = kv_data["bf16"]
    batch = q.shape[0]
    out = torch.empty((batch, NUM_HEADS, V_DIM), dtype=torch.bfloat16, device=q.device)
    flag = torch.zeros(1, dtype=torch.int32, device=q.device)
    try:
        _decode_kernel[(batch,)](q, kv, out, kv_indptr, flag, config["sm_scale"], HEADS=NUM_HEADS, QK=QK_DIM,
                                 V=V_DIM, ROPE=ROPE_DIM, BLOCK=BLOCK_N,
                                 MASK_LOADS=bug not in ("read_past_end", "caught"),
                                 ASM_OUT=bug == "unsupported_opcode", WAIT_FLAG=bug == "spin", num_warps=4)
    except Exception:
        if bug != "caught":
            raise
        return _torch_attention(q, kv, kv_indptr, config["sm_scale"])
    return out


def _torch_attention(q, kv, kv_indptr, sm_scale):
    """The same attention in torch (float32)."""
    out = []
    for seq in range(q.shape[0]):
        keys = kv[kv_indptr[seq]:kv_indptr[seq + 1], 0].float()
        weights = torch.softmax(q[seq].float() @ keys.t() * sm_scale, dim=-1)
        out.append(weights @ keys[:, :V_DIM])
    return torch.stack(out).to(torch.bfloat16)
