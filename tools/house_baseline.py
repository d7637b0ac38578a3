"""The gfx950 figures a restructure of submission.py must leave as they are (issue 31): every
gfx950 variant's registers, spills, loop VALU and LDS per element, bytes in flight, and each
leaderboard case's bound and launches (from a compile report), and the first-call tuning
candidates per case (from submission.py as it is), in one JSON file.

    python tools/house_baseline.py --report results/compile_report_triton3.6.0.json --json PATH

tests/test_compile_targets.py holds the committed report (which it holds to a fresh build) to the
committed baseline (results/gfx950_house_baseline.json) with variant_figures / case_figures, and
candidate_lists of the current submission.py to the baseline's.
"""
import argparse
import contextlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

VARIANT_KEY = ("kernel_role", "family", "convert", "BLOCK_N", "num_warps", "num_stages", "MERGE")


def _role(row):
    return {"_mla_combine_kernel": "combine", "_q_fp8_kernel": "q8", "_gluon_split_kernel": "gluon"}.get(
        row["kernel"], "split")


def variant_figures(rows):
    """{key: figures} of every gfx950 build of a report (split kernels of either family and
    Gluon, the combine and the aiter Q kernel by their constexprs)."""
    found = {}
    for row in rows:
        if row["row"] not in ("variant", "gluon") or row["target"] != "gfx950" or "error" in row:
            continue
        role = _role(row)
        if role == "split" or role == "gluon":
            key = "|".join(str(row.get(k, role)) if k != "kernel_role" else role for k in VARIANT_KEY)
        elif role == "combine":
            key = f"combine|CHUNK={row.get('CHUNK')}|DIMS={row.get('DIMS')}"
        else:
            key = f"q8|ROWS={row.get('ROWS')}|PHASE={row.get('PHASE')}"
        figures = {"regs_total": row.get("regs_total"), "spills": row.get("spills")}
        if "loop_valu_per_element" in row:
            figures.update(valu=row["loop_valu_per_element"], lds_bytes=row["loop_lds_bytes_per_element"],
                           in_flight=row["latency"]["bytes_in_flight_per_unit"])
        found.setdefault(key, figures)
    return found


def case_figures(rows):
    """{"(batch, kv_len) role": {bound_us, launches, variant}} of a report's gfx950 case rows."""
    return {f"{(r['batch'], r['kv_len'])} {r['role']}": {
        "bound_us": r.get("bound_us"), "launches": r["launches"],
        "variant": "|".join(str(r.get(k)) for k in ("family", "convert", "BLOCK_N", "num_warps", "num_stages",
                                                    "num_splits", "MERGE"))}
        for r in rows if r["row"] == "case" and r["target"] == "gfx950"}


def candidate_lists():
    """{case: [described choices in ranked order]} of first-call tuning on gfx950 with Gluon
    (aiter absent: its candidate is the same one entry either way)."""
    import compile_report
    sub = compile_report.sub
    with compile_report._dispatching_as("gfx950"), contextlib.ExitStack() as stack:
        saved = sub.gluon_capable, sub.STATE.aiter
        sub.gluon_capable, sub.STATE.aiter = (lambda arch: arch == "gfx950"), None
        stack.callback(lambda: setattr(sub, "gluon_capable", saved[0]) or setattr(sub.STATE, "aiter", saved[1]))
        device = sub.torch.device("cpu")
        return {str(case): [str(c) for c in sub.ranked_candidates(*case, device)]
                for case in compile_report.LEADERBOARD_CASES}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", default=str(ROOT / "results" / "compile_report_triton3.6.0.json"))
    parser.add_argument("--json", required=True)
    options = parser.parse_args()
    rows = json.loads(Path(options.report).read_text())
    baseline = {"report": options.report, "variants": variant_figures(rows), "cases": case_figures(rows),
                "candidates": candidate_lists()}
    Path(options.json).write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
