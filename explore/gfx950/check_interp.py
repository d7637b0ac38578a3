"""Interpreter check (CPU, triton 3.9) of the candidate split kernels in kernels.py.

    python explore/gfx950/check_interp.py [--quick]          # CPU interpreter (triton 3.9)
    python explore/gfx950/check_interp.py --gpu              # compiled, on a CUDA/ROCm GPU

Per candidate (CONVERT=0: the portable convert; the inline-asm one cannot run here) and per
case (batch 2, kv_len 17 / 70 / 300, several split counts, padded and trimmed scale
buffers):
 (1) against a float32 torch emulation of the kernel's own quantization (Q -> e4m3 with one
     e8m0 scale per 32 dims per head; exact MXFP4 KV; float32 softmax): every element must lie
     within 8e-3 + 2e-2 |ref|  -> PASS/FAIL
 (2) against exact float32 attention on the same MXFP4 data (unquantized Q): max error and the
     share of elements outside 8e-3 + 2e-2 |ref|, next to the same numbers for the runner's
     a8w8 math (reference.emulated_a8w8) on the same inputs.
The kernel's output is rounded to bf16 before comparing (as the combine kernel writes it).
"""
import os
import sys
from pathlib import Path

GPU = "--gpu" in sys.argv  # compiled run on a GPU (e.g. the H200): no interpreter, no shim
if not GPU:
    os.environ["TRITON_INTERPRET"] = "1"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

if not GPU:
    import interpreter_shim  # noqa: E402

    interpreter_shim.install()
DEVICE = torch.device("cuda" if GPU else "cpu")
import kernels as K  # noqa: E402
import reference as R  # noqa: E402

LOG2E = 1.4426950408889634
ATOL, RTOL = 8e-3, 2e-2

CANDIDATES = [  # (BLOCK_N, ROPE, VALUES, CONVERT); CONVERT 1 = the asm's pair words emulated
    (64, 0, 2, 0), (128, 0, 2, 0), (32, 0, 2, 0), (64, 2, 2, 0), (64, 1, 2, 0), (64, 0, 0, 0),
    (64, 0, 1, 0), (128, 0, 2, 1), (64, 2, 2, 1), (32, 0, 0, 1),
]
GPU_CANDIDATES = [  # + (num_warps, num_stages): the shapes the AOT report ranks, CONVERT 0 and 1
    (bn, rope, values, cvt, w, st) for (bn, w, st) in ((64, 4, 1), (128, 4, 1), (128, 8, 1), (128, 8, 2), (64, 2, 1))
    for rope in (0, 2) for values in (2,) for cvt in (0, 1)] + [(64, 0, 0, 1, 4, 1), (32, 0, 2, 1, 4, 1)]
CASES = [  # (batch, kv_len, num_splits, scale layout, seed)
    (2, 17, 1, "padded", 11), (2, 17, 2, "trimmed", 12), (2, 70, 2, "padded", 13),
    (2, 70, 3, "trimmed", 14), (2, 300, 1, "trimmed", 15), (2, 300, 4, "padded", 16),
]


def run_kernel(data, block_n, rope, values, convert, num_splits, warps=4, stages=1):
    q, kv_data, qo_indptr, kv_indptr, config = data
    batch = q.shape[0]
    packed, scales = kv_data["mxfp4"]
    packed = packed.view(torch.uint8).reshape(packed.shape[0], -1)
    scales = scales.view(torch.uint8)
    q8, qs, q_deq = K.quantize_q_torch(q)
    if GPU:  # the one-launch Triton prologue must agree with its torch twin bit for bit
        q8k = torch.empty_like(q8)
        qsk = torch.empty_like(qs)
        K._quantize_q_kernel[(batch,)](q, q8k, qsk, q.stride(0), q.stride(1), num_warps=4)
        assert torch.equal(q8k, q8) and torch.equal(qsk, qs), "_quantize_q_kernel != quantize_q_torch"
    q_bf16 = q_deq.to(torch.bfloat16)
    part_acc = torch.empty(batch * num_splits * 16 * 512, dtype=torch.float32, device=q.device)
    part_ml = torch.empty(batch * num_splits * 2 * 16, dtype=torch.float32, device=q.device)
    qk_scale_log2 = config["sm_scale"] * LOG2E
    K.mla_split_scaled[(num_splits, batch)](
        q8, qs, packed, scales, qo_indptr, kv_indptr, part_acc, part_ml, q_bf16,
        packed.shape[0], num_splits, packed.stride(0), scales.stride(0), qk_scale_log2,
        BLOCK_N=block_n, ROPE=rope, VALUES=values, CONVERT=convert,
        num_warps=warps, num_stages=stages)
    out = K.combine_torch(part_acc, part_ml, batch, num_splits, qk_scale_log2)
    return out.to(torch.bfloat16).to(torch.float32), q_deq


def stats(out, ref):
    err = (out - ref).abs()
    outside = err > ATOL + RTOL * ref.abs()
    return err.max().item(), outside.float().mean().item()


def main():
    quick = "--quick" in sys.argv
    cands = CANDIDATES[:2] + CANDIDATES[-3:] if quick else CANDIDATES
    cands = [c + (4, 1) for c in cands] if not GPU else GPU_CANDIDATES
    if GPU:
        cases = CASES + [(4, 1024, 8, "padded", 4217), (32, 1024, 4, "trimmed", 5412), (8, 8192, 16, "padded", 1360)]
    cases = CASES[:3] if quick else CASES
    all_ok = True
    print(f"{'BN':>4} {'rope':>4} {'val':>3} {'cvt':>3} w/s {'case':<24} {'(1) max':>8} {'(1)':>4} "
          f"{'(2) max':>8} {'(2) out%':>8} {'a8w8 max':>8} {'a8w8 out%':>9}")
    for batch, kv_len, splits, layout, seed in cases:
        data = R.generate_input(batch, 1, kv_len, seed, scale_layout=layout, device=DEVICE)
        q, kv_data, qo_indptr, kv_indptr, config = data
        kv = R.dequantize_kv(kv_data, "mxfp4")
        exact = R.exact_attention(data)
        a8w8 = R.emulated_a8w8(data).to(torch.float32)
        a_max, a_out = stats(a8w8, exact)
        for block_n, rope, values, convert, warps, stages in cands:
            try:
                out, q_deq = run_kernel(data, block_n, rope, values, convert, splits, warps, stages)
            except Exception as exc:  # noqa: BLE001
                print(f"{block_n:>4} {rope:>4} {values:>3} {convert:>3} {warps}/{stages} {str((batch, kv_len, splits, layout)):<24} "
                      f"ERROR {type(exc).__name__}: {str(exc)[:200]}")
                all_ok = False
                continue
            emu = R.attention_fp32(q_deq, kv, qo_indptr, kv_indptr, config["sm_scale"])
            e_max, e_out = stats(out, emu)
            ok = e_out == 0 and torch.isfinite(out).all().item()
            all_ok &= ok
            x_max, x_out = stats(out, exact)
            print(f"{block_n:>4} {rope:>4} {values:>3} {convert:>3} {warps}/{stages} {str((batch, kv_len, splits, layout)):<24} "
                  f"{e_max:>8.2e} {'PASS' if ok else 'FAIL':>4} {x_max:>8.2e} {100 * x_out:>7.2f}% "
                  f"{a_max:>8.2e} {100 * a_out:>8.2f}%", flush=True)
    print("ALL PASS" if all_ok else "SOME FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
