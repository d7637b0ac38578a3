"""GPU sweep of the Triton path: every launch variant on every leaderboard case, checked, then timed.

    python tools/gpu_bench.py [--variants default,bn64,...] [--runs 40] [--json PATH]

For each variant (a change to submission._triton_launch_config) and case:
  1. one call, checked against exact float32 attention on the same MXFP4 data (every element
     within 8e-3 + 2e-2*|ref|) and with the runner's rule (reference.check_implementation);
     a variant that fails is reported and never timed or ranked;
  2. `runs` timed calls as the runner times them (cache flush, events around custom_kernel);
  3. the same number of calls timed on the host alone (no sync inside: the launch cost).
Also measured once: the call floor and copy rate (eval._measure_floors) and the event
floor of torch.empty and of a Python no-op. Variant "graphs" runs with MLA_GRAPHS=1,
"nopin" without the dequant pin.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import eval as harness  # noqa: E402
import reference  # noqa: E402
import submission as sub  # noqa: E402

BENCH_CASES = [(4, 1024, 4217), (4, 8192, 4220), (32, 1024, 5412), (32, 8192, 5415),
               (64, 1024, 1357), (64, 8192, 1360), (256, 1024, 9823), (256, 8192, 9826)]
DEFAULT_CONFIG = sub._triton_launch_config


def _scaled_splits(factor):
    def change(config):
        return config._replace(num_splits=max(1, min(256, int(config.num_splits * factor))))
    return change


VARIANTS = {  # name -> change to the launch config (see submission.LaunchConfig)
    "default": lambda c: c,
    "bn16": lambda c: c._replace(block_n=16, num_warps=4),
    "bn32": lambda c: c._replace(block_n=32, num_warps=4),
    "bn64": lambda c: c._replace(block_n=64, num_warps=4),
    "bn64w8": lambda c: c._replace(block_n=64, num_warps=8),
    "stages3": lambda c: c._replace(num_stages=3),
    "stages1": lambda c: c._replace(num_stages=1),
    "splits_x2": _scaled_splits(2),
    "splits_half": _scaled_splits(0.5),
    "dot_scaled": lambda c: c._replace(scores_dot_scaled=True),
    "nopin": lambda c: c,  # and PIN off (see use_variant)
    "graphs": lambda c: c,  # and MLA_GRAPHS=1 (see use_variant)
}
DEFAULT_PIN = dict(sub.PIN_BY_PLATFORM)


def use_variant(name):
    change = VARIANTS[name]
    sub._triton_launch_config = lambda *args: change(DEFAULT_CONFIG(*args))
    sub.PIN_BY_PLATFORM.update(DEFAULT_PIN if name != "nopin" else {k: 0 for k in DEFAULT_PIN})
    os.environ["MLA_GRAPHS"] = "1" if name == "graphs" else "0"
    sub._PLANS.clear()


def exact_check(out, expected):
    err = (out.float() - expected).abs()
    bad = err > 8e-3 + 2e-2 * expected.abs()
    return {"max_err": float(err.max()), "exact_ok": not bool(bad.any()) and bool(torch.isfinite(out).all()),
            "exact_bad_ratio": float(bad.float().mean())}


def time_calls(data, runs):
    return [harness._timed_call(sub.custom_kernel, data)[1] / 1e3 for _ in range(runs)]


def time_host(data, runs):
    """Host time of the call alone (no sync inside): what launches cost on the CPU side."""
    times = []
    for _ in range(runs):
        torch.cuda.synchronize()
        start = time.perf_counter_ns()
        sub.custom_kernel(data)
        times.append((time.perf_counter_ns() - start) / 1e3)
    torch.cuda.synchronize()
    return times


def summarize(values):
    return {"median_us": statistics.median(values), "mean_us": statistics.fmean(values),
            "min_us": min(values)} if values else None


def run_case(batch, kv_len, seed, runs):
    data = reference.generate_input(batch, 1, kv_len, seed)
    expected = reference.exact_attention(data)
    out = sub.custom_kernel(data)
    torch.cuda.synchronize()
    row = {"batch": batch, "kv_len": kv_len, **exact_check(out, expected)}
    row["runner_ok"], row["runner_msg"] = reference.check_implementation(data, out)
    plan = next(reversed(sub._PLANS.values()))
    row["config"] = plan.config._asdict()
    if not (row["exact_ok"] and row["runner_ok"]):
        return row
    second = sub.custom_kernel(data)  # graph replay path, checked too
    torch.cuda.synchronize()
    row["replay_ok"] = exact_check(second, expected)["exact_ok"]
    row["call"] = summarize(time_calls(data, runs))
    row["host"] = summarize(time_host(data, runs))
    return row


def probes(runs):
    out_shape = (256, 16, 512)
    return {"torch_empty": summarize([harness._timed_call(
        lambda _: torch.empty(out_shape, dtype=torch.bfloat16, device="cuda"), None)[1] / 1e3
        for _ in range(runs)]),
        "python_noop": summarize([harness._timed_call(lambda _: None, None)[1] / 1e3 for _ in range(runs)])}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = {**harness._environment(), "floors": harness._measure_floors(), "probes": probes(args.runs),
              "variants": {}}
    print(json.dumps({k: result[k] for k in ("device", "torch", "triton", "floors", "probes")}), flush=True)
    for name in args.variants.split(","):
        use_variant(name)
        rows = []
        for batch, kv_len, seed in BENCH_CASES:
            try:
                row = run_case(batch, kv_len, seed, args.runs)
            except Exception as exc:  # noqa: BLE001 - a variant that fails to build is reported
                row = {"batch": batch, "kv_len": kv_len, "error": repr(exc)[:300]}
            rows.append(row)
            call = row.get("call") or {}
            host = row.get("host") or {}
            print(f"{name:<12} {batch:>4} {kv_len:>5} exact_ok={row.get('exact_ok')} runner_ok={row.get('runner_ok')} "
                  f"max_err={row.get('max_err', float('nan')):.4f} call={call.get('median_us', float('nan')):8.1f} "
                  f"host={host.get('median_us', float('nan')):6.1f} {row.get('error', '')}", flush=True)
        result["variants"][name] = rows
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
