"""Is the binary the self-check checked the binary that runs? Count the compiled binaries.

    python tools/count_binaries.py [--family dispatched|bf16|scaled] [--cases 4x1024,...] [--json PATH]

For each case (default the 8 leaderboard cases), a fresh Python process with an EMPTY Triton
cache (its own TRITON_CACHE_DIR) makes one call of submission.custom_kernel on the case's
input (first-call tuning off) and a second, steady-state call (the timed call's replay of the
checked launches), then lists the binaries in the cache per kernel: name,
specialization and constexprs (from each binary's metadata). Triton compiles one binary per
specialization of a kernel's arguments (an integer equal to 1, a multiple of 16, a pointer
aligned to 16 bytes...) and per constexpr values, so a self-check that ran on a synthetic
input of another class compiled -- and checked -- ANOTHER binary than the call that counts.
The property: exactly one binary per kernel the plan launches. --family scaled forces the
SCALED family's launch (scaled_launch) through the measured table, bf16 the BF16 family's
default launch.
"""
import argparse
import json
from concurrent.futures import ThreadPoolExecutor
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from common import parse_cases  # noqa: E402

CHILD = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
import torch
from common import use_interpreter_without_gpu
use_interpreter_without_gpu()
import reference, submission as sub
batch, kv_len, seed, family = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if family != "dispatched":
    launch = (sub.scaled_launch if family == "scaled" else sub.default_launch)(batch, kv_len, sub._num_sms(device))
    sub.MEASURED_DISPATCH.setdefault(sub._arch(device), {})[(batch, kv_len)] = str(launch)
data = reference.generate_input(batch, 1, kv_len, seed)
sub.custom_kernel(data)  # the key's first call: planned, checked
out = sub.custom_kernel(data)  # a timed call: the plan's recorded launches replayed
plan = sub.STATE.plans[sub.input_key(*data)]
ok, message = reference.check_implementation(data, out)
print(json.dumps({"choice": str(sub.choose(batch, kv_len, device)), "ok": ok,
                  "variant": getattr(getattr(plan, "variant", None), "describe", lambda: None)()}))
"""


def binaries(cache_dir):
    """[{kernel, constants, signature}] of every compiled kernel in a Triton cache directory."""
    found = []
    for meta_path in sorted(Path(cache_dir).rglob("*.json")):
        if meta_path.name.startswith("__grp__"):
            continue
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            continue
        if "name" not in meta:
            continue
        found.append({"kernel": meta["name"], "hash": meta.get("hash", meta_path.parent.name)[:16],
                      "num_warps": meta.get("num_warps"), "num_stages": meta.get("num_stages")})
    return found


def count_case(batch, kv_len, seed, family):
    with tempfile.TemporaryDirectory(prefix="triton-cache-") as cache_dir:
        env = dict(os.environ, TRITON_CACHE_DIR=cache_dir, MLA_TUNE="0")
        if family == "dispatched":
            env.pop("MLA_TABLE", None)
        run = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(batch), str(kv_len), str(seed), family],
                             env=env, capture_output=True, text=True)
        if run.returncode != 0:
            return {"batch": batch, "kv_len": kv_len, "family": family, "error": run.stderr[-2000:]}
        result = json.loads(run.stdout.strip().splitlines()[-1])
        found = binaries(cache_dir)
    per_kernel = {}
    for entry in found:
        per_kernel.setdefault(entry["kernel"], []).append(entry["hash"])
    return {"batch": batch, "kv_len": kv_len, "family": family, **result, "binaries": per_kernel,
            "one_per_kernel": all(len(hashes) == 1 for hashes in per_kernel.values())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=("dispatched", "bf16", "scaled"), default="dispatched")
    parser.add_argument("--cases", help="BATCHxKV_LEN,... (default: the 8 leaderboard cases)")
    parser.add_argument("--json", help="write the records here")
    parser.add_argument("--jobs", type=int, default=1, help="cases counted at once (each its own process and cache)")
    options = parser.parse_args(argv)
    cases = parse_cases(options.cases)
    with ThreadPoolExecutor(options.jobs) as pool:
        records = list(pool.map(lambda case: count_case(*case, options.family), cases))
    for (batch, kv_len, _), record in zip(cases, records):
        if "error" in record:
            print(f"({batch}, {kv_len}) {options.family}: FAILED\n{record['error']}")
            continue
        counts = ", ".join(f"{name} x{len(hashes)}" for name, hashes in record["binaries"].items())
        verdict = "one binary per kernel" if record["one_per_kernel"] else "MORE THAN ONE BINARY"
        print(f"({batch}, {kv_len}) {options.family} {record['choice']} check {'ok' if record['ok'] else 'FAIL'}: "
              f"{counts} -> {verdict}", flush=True)
    if options.json:
        Path(options.json).write_text(json.dumps(records, indent=1) + "\n")
    return 0 if all(r.get("one_per_kernel") and r.get("ok") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
