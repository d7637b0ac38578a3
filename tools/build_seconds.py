"""Seconds a cold runner spends building kernels during first-call tuning: every gfx950
binary the eight leaderboard cases' candidates launch (each candidate's first variant, and
the combine kernel where it merges through it), built ahead of time in the order tuning
meets them with an empty Triton cache, on this machine's CPU. These are the numbers behind
the per-case tuning budget (submission.TUNE_CASE_WALL_S): a binary built for one case is
in the cache for the next, as in the runner's one process.

    python tools/build_seconds.py [--json PATH] [--triton installed|DIR]

It builds with the runner's Triton unless --triton names another (tools/common.py,
run_with_triton), and names it in its first line.

The runner's host (AMD EPYC 9575F) is faster per core than a shared 2-core CI machine, so
these are upper bounds there; aiter's JIT builds (~220-245 s) are not Triton's and not here.
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
if __name__ == "__main__":  # before triton is imported
    from common import run_with_triton
    run_with_triton(__file__)
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="triton-cold-")  # before triton is imported

import compile_report as report  # noqa: E402
import torch  # noqa: E402
from common import add_triton_option  # noqa: E402
import triton  # noqa: E402

sub = report.sub


def binaries(launch, batch):
    """(key, build) of the binaries one Triton candidate's first variant launches: build() makes
    the compile report's row (the Gluon kernel's for the ONCE family's Gluon form)."""
    variant = sub.variants_for("gfx950", "hip", launch.block_n, launch.num_warps, launch.num_stages, launch.scores,
                               launch.merge)[0]
    if variant.gluon:
        found = [(("gluon", variant.merge), lambda: report.compile_gluon(variant.merge))]
    else:
        spec = (*report._build_spec(variant), variant.num_warps, variant.num_stages)
        found = [((spec[0].__name__, tuple(spec[2].items()), *spec[3:]), lambda: report.compile_one("gfx950", *spec))]
    if variant.merge == sub.MERGE_COMBINE:
        consts = {"CHUNK": min(launch.num_splits, sub.COMBINE_MAX_CHUNK), "DIMS": sub.combine_dims(batch, 256)}
        found.append((("combine", tuple(consts.items())), lambda: report.compile_one(
            "gfx950", sub._mla_combine_kernel, report.COMBINE_SIGNATURE, consts, 4, 1)))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the per-case seconds as JSON here")
    add_triton_option(parser)
    options = parser.parse_args()
    built, rows = set(), []
    with report._dispatching_as("gfx950"):
        for batch, kv_len in report.LEADERBOARD_CASES:
            seconds, count, longest = 0.0, 0, 0.0
            for choice in sub.ranked_candidates(batch, kv_len, torch.device("cpu")):
                if choice.path != "triton":
                    continue
                for key, build in binaries(choice, batch):
                    if key in built:
                        continue
                    built.add(key)
                    start = time.perf_counter()
                    row = build()
                    took = time.perf_counter() - start
                    if "error" in row:
                        print(f"build failed: {key}: {row['error'][-200:]}", file=sys.stderr)
                    seconds, count, longest = seconds + took, count + 1, max(longest, took)
            rows.append({"batch": batch, "kv_len": kv_len, "new_binaries": count, "build_s": round(seconds, 2),
                         "longest_s": round(longest, 2)})
            print(f"({batch}, {kv_len}): {count} new binaries, {seconds:.1f} s (longest {longest:.1f} s) "
                  f"of a {sub.TUNE_CASE_WALL_S:.0f} s share", flush=True)
    total = sum(r["build_s"] for r in rows)
    print(f"all cases: {sum(r['new_binaries'] for r in rows)} binaries, {total:.1f} s, triton {triton.__version__}, "
          f"{os.cpu_count()} CPUs")
    if options.json:
        Path(options.json).write_text(json.dumps({
            "what": "gfx950 builds of first-call tuning's candidates, cold Triton cache, this CPU",
            "command": "python " + " ".join(["tools/build_seconds.py", *sys.argv[1:]]),
            "triton": triton.__version__, "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
            "case_wall_share_s": sub.TUNE_CASE_WALL_S, "cases": rows, "total_build_s": round(total, 2)},
            indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
