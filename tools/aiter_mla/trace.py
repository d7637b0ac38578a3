"""The per-workgroup trace of aiter's persistent FP8 MLA decode at a leaderboard shape: issue 43's
launch record (Dispatch.record: wave instructions by class, global bytes read and written, the
longest wave, per workgroup) of `mla_a8w8_qh16_qseqlen1_gqaratio16_ps.co` on the gfx950 emulator,
with the work partition our glue asks aiter for (intra-batch metadata, 32 splits at most), the
answer checked against float64 attention on the same fp8 data, and beside it the public MI355X
times of the same binary (../shared/notes/leaderboard.md).

    AITER_ASM_DIR=.../aiter/hsa nice python tools/aiter_mla/trace.py 4 1024 [--seed N]

writes results/aiter_mla_trace_b<batch>_kv<kv_len>.json (--out-dir: elsewhere); --table prints the
rows of docs/aiter_mla_emulated.md's table of the traces in results/. Run it in the background: (4, 1024) takes
about half a minute on one CPU core, (32, 1024) a few minutes (the file records the seconds).
"""
import argparse
import collections
import datetime
import json
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from aiter_mla import findings as findings_module  # noqa: E402
from aiter_mla.launch import AITER_COMMIT, HOW_TO_GET, OBJECTS, asm_dir, object_path, sha256  # noqa: E402
from aiter_mla.run import _version, check, run_persistent  # noqa: E402

# Public MI355X times (us) of aiter's persistent asm decode, tuned per case, the best legitimate public
# entries (participants' logs): ../shared/notes/leaderboard.md, "Best legitimate public results".
PUBLIC_US = {(4, 1024): "17-19", (4, 8192): "35", (32, 1024): "30", (32, 8192): "80", (64, 1024): "37",
             (64, 8192): "130", (256, 1024): "89", (256, 8192): "310"}
PUBLIC_SOURCE = ("../shared/notes/leaderboard.md, 'Best legitimate public results' (full KV, aiter asm tuned per "
                 "case, participants' logs; whole custom_kernel call: Q quantization, metadata, decode, reduce)")


def summarize(record):
    """Totals over the workgroups that had work and over the idle ones."""
    busy = [row for row in record["workgroups"] if row["bytes_written"]]
    idle = [row for row in record["workgroups"] if not row["bytes_written"]]
    by_class = collections.Counter()
    for row in busy:
        by_class.update(row["wave_instructions"])
    longest = [row["longest_wave"] for row in busy]
    return {"workgroups_with_work": len(busy), "workgroups_idle": len(idle),
            "busy_wave_instructions_by_class": dict(by_class),
            "busy_longest_wave_min_max": [min(longest), max(longest)] if longest else None,
            "bytes_read": sum(row["bytes_read"] for row in record["workgroups"]),
            "bytes_written": sum(row["bytes_written"] for row in record["workgroups"]),
            "idle_wave_instructions_each": sorted({sum(row["wave_instructions"].values()) for row in idle})}


def table_rows(paths):
    """docs/aiter_mla_emulated.md's trace table rows, by shape."""
    rows = []
    for path in paths:
        trace = json.loads(path.read_text())
        summary, shape, part = trace["summary"], trace["shape"], trace["partition"]
        rows.append(((shape["batch"], shape["kv_len"]),
                     f"| ({shape['batch']}, {shape['kv_len']}) | {part['work_items']} "
                     f"({'/'.join(map(str, sorted(set(part['splits_per_sequence']))))} a sequence) | "
                     f"{summary['workgroups_with_work']} / {summary['workgroups_idle']} | "
                     f"{trace['launch_record']['wave_instructions']:,} | {trace['emulation_seconds']:.0f} s | "
                     f"{trace['public_mi355x_us']} us |"))
    return "\n".join(row for _, row in sorted(rows))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("batch", type=int, nargs="?")
    parser.add_argument("kv_len", type=int, nargs="?")
    parser.add_argument("--table", action="store_true", help="print the docs' table rows of the traces in results/")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, default=ROOT / "results", help="where the JSON goes (default results/)")
    options = parser.parse_args()
    if options.table:
        print(table_rows(sorted((ROOT / "results").glob("aiter_mla_trace_b*_kv*.json"))))
        return 0
    if options.batch is None or options.kv_len is None:
        parser.error("give BATCH and KV_LEN (or --table)")
    if asm_dir() is None:
        print(HOW_TO_GET)
        return 2
    if options.batch < 1 or options.kv_len < 1:
        raise ValueError(f"batch {options.batch} and kv_len {options.kv_len} must be positive")
    findings = findings_module.Findings()
    started = time.time()
    launch, out, data, splits = run_persistent([options.kv_len] * options.batch, options.seed, findings)
    seconds = time.time() - started
    worst, ratio = check(out, *data)
    kinds = collections.Counter()
    for row in findings.rows():
        kinds[row["kind"]] += row["count"]
    shape = (options.batch, options.kv_len)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"AITER_ASM_DIR=<aiter>/hsa nice python tools/aiter_mla/trace.py {options.batch} {options.kv_len} "
                   f"--seed {options.seed}",
        "device": f"CPU ({platform.machine()}, {platform.processor() or 'unknown'}), the gfx950 emulator (one core)",
        "versions": {"python": platform.python_version(), "torch": torch.__version__, "aiter": AITER_COMMIT,
                     "rocm-llvm-python": _version("rocm-llvm-python")},
        "object": OBJECTS[True], "object_sha256": sha256(object_path(True)),
        "shape": {"batch": options.batch, "kv_len": options.kv_len, "heads": 16, "q_seq_len": 1},
        "partition": {"splits_per_sequence": splits, "work_items": sum(splits),
                      "metadata": "intra-batch (v1_0), max_split_per_batch 32, kv_granularity 16, as our glue asks"},
        "right": ratio <= 1.0, "max_abs_error": worst, "error_over_fp8_bound": ratio,
        "accepted_findings": dict(kinds),
        "assumptions": {"LOCKSTEP": findings_module.ASSUMPTION_LOCKSTEP,
                        "LDS_LATENCY": findings_module.ASSUMPTION_LDS_LATENCY},
        "emulation_seconds": round(seconds, 1),
        "wave_instructions_per_second": round(launch.instructions / seconds),
        "public_mi355x_us": PUBLIC_US.get(shape), "public_source": PUBLIC_SOURCE,
        "not_time": "wave instructions and bytes per workgroup, not cycles: the emulator does not time anything",
        "summary": summarize(launch.record),
        "launch_record": launch.record,
    }
    options.out_dir.mkdir(parents=True, exist_ok=True)
    path = options.out_dir / f"aiter_mla_trace_b{options.batch}_kv{options.kv_len}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{path.name}: {launch.instructions:,} wave instructions in {seconds:.0f} s, right {result['right']} "
          f"({ratio:.2f} of the fp8 bound), {result['summary']['workgroups_with_work']} busy workgroups")
    return 0 if result["right"] else 1


if __name__ == "__main__":
    sys.exit(main())
