"""How often the runner's rule fails exact attention on short KV sequences: per KV length, the
share of inputs where float32 attention on the MXFP4 cache (reference.exact_attention, rounded
to bf16: no kernel error at all) fails reference.check_implementation against the a8w8
reference, and the largest share of elements not torch.isclose (the rule allows 5%). These are
the numbers behind reference.SHORT_KV_LEN and docs/harness.md's "The correctness rule". Then,
at a few longer lengths (batch 4, seed 7), the share of elements of that exact attention outside
the task README's rtol 2e-2 / atol 8e-3 against the same reference (reported, not checked).

    python tools/short_kv_rule.py [--max-kv-len 16] [--seeds 32] [--json PATH]

Inputs: batch 1 and batch 4, seeds 0..N-1, on the CPU (a few seconds for the defaults).
"""
import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import reference  # noqa: E402

BATCHES = (1, 4)
README_LENGTHS = (17, 300, 1024, 8192)  # batch 4, seed 7


def measure(kv_len: int, seeds: int) -> dict:
    """One KV length: inputs tried, how many exact attention fails, the worst not-isclose share."""
    failed, worst_share = 0, 0.0
    for seed in range(seeds):
        for batch in BATCHES:
            data = reference.generate_input(batch, 1, kv_len, seed=seed, device=torch.device("cpu"))
            output = reference.exact_attention(data).to(torch.bfloat16)
            good, _ = reference.check_implementation(data, output)
            expected = reference.ref_kernel(data)
            share = (~torch.isclose(output, expected, rtol=reference.CHECK_RTOL, atol=reference.CHECK_ATOL)).float()
            failed += not good
            worst_share = max(worst_share, share.mean().item())
    inputs = seeds * len(BATCHES)
    return {"kv_len": kv_len, "inputs": inputs, "failed": failed, "failed_share": failed / inputs,
            "worst_not_isclose_share": worst_share}


def readme_share(kv_len: int) -> float:
    """The share of elements of exact attention (bf16) outside the task README's tolerance."""
    data = reference.generate_input(4, 1, kv_len, seed=7, device=torch.device("cpu"))
    output = reference.exact_attention(data).to(torch.bfloat16).float()
    expected = reference.ref_kernel(data).float()
    tolerance = reference.README_ATOL + reference.README_RTOL * expected.abs()
    return ((output - expected).abs() > tolerance).float().mean().item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-kv-len", type=int, default=reference.SHORT_KV_LEN)
    parser.add_argument("--seeds", type=int, default=32)
    parser.add_argument("--json")
    options = parser.parse_args()
    rows = []
    print(f"{'kv_len':>6} {'inputs':>6} {'failed':>6} {'worst not-isclose':>17}")
    for kv_len in range(1, options.max_kv_len + 1):
        row = measure(kv_len, options.seeds)
        rows.append(row)
        print(f"{kv_len:>6} {row['inputs']:>6} {row['failed']:>6} {row['worst_not_isclose_share']:>17.2%}", flush=True)
    readme = [{"kv_len": kv_len, "outside_share": readme_share(kv_len)} for kv_len in README_LENGTHS]
    print("outside the task README's rtol 2e-2 / atol 8e-3 (batch 4, seed 7): "
          + ", ".join(f"{row['outside_share']:.2%} at {row['kv_len']}" for row in readme))
    if options.json:
        Path(options.json).write_text(json.dumps({
            "what": "exact float32 attention on the MXFP4 cache against the runner's rule (a8w8 reference), "
                    "per KV length",
            "command": "python tools/short_kv_rule.py " + " ".join(sys.argv[1:]),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": f"CPU ({platform.processor() or platform.machine()})", "torch": torch.__version__,
            "batches": list(BATCHES), "seeds": options.seeds, "rows": rows,
            "readme_tolerance": readme}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
