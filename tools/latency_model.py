"""The MI355X per-case time predicted from the compile report's static latency counts (a
prediction: nothing of ours has run on an MI355X). For each leaderboard case, the dispatched
gfx950 variant of a compile report (tools/compile_report.py --json) and its counts
(tools/isa_latency.py):

    python tools/latency_model.py --report results/compile_report_triton3.6.0.json \
        [--baseline OLD_REPORT.json] [--latency-us 1 2] [--launch-us 4] [--json PATH]

Model, per call (every constant is an argument or stated here):
  launches x launch_us (the split kernel, and the combine kernel when the splits merge through it;
      ~4 us per launch event-timed on AMD: ROCm TransferBench PR 297)
  + the split kernel: max(HBM time at 8 TB/s, the programs' chain), the chain being
      ceil(programs / 256 CUs) x (one workgroup per CU: every SCALED form holds >= 64 KB of LDS
      and >= 256 registers per wave)
      [ round_trips_to_first_mma x L + issue(tile) + (tiles per program - 1) x per_tile + L ]
      per_tile = max(round_trips_per_tile x L, issue(tile), and for a loop that prefetches
      (round_trips_per_tile <= 1) the tile's HBM bytes / (bytes_in_flight_per_unit / L): Little's law)
      issue(tile) = the report's issue clocks per element x tile elements / 2.4 GHz; the last L:
      the partials' or output's stores
  + the combine kernel, when there is one: 2 L + 1 us (its loads of the partials, its stores).
L: the latency of one dependent global round trip under load (assumed, not measured on an MI355X:
the H200's probes read 0.3-0.7 us for one with the probe's own cost, tools/latency_calibration.py).
"""
import argparse
import json
import math
from pathlib import Path

HBM_BYTES_PER_S = 8e12
CLOCK_HZ = 2.4e9
UNITS = 256
TOKEN_BYTES = 306
VARIANT_KEYS = ("kernel", "family", "BLOCK_N", "convert", "num_warps", "num_stages", "MERGE")


def dispatched(rows):
    """(case row, variant row) of every dispatched gfx950 case of a compile report."""
    variants = [r for r in rows if r["row"] == "variant" and r["target"] == "gfx950"]
    for case in rows:
        if case["row"] == "case" and case["target"] == "gfx950" and case["role"] == "dispatched":
            yield case, next(v for v in variants if all(v.get(k) == case[k] for k in VARIANT_KEYS))


def predict_us(case, variant, latency_us, launch_us):
    """The model of the module docstring for one case, in microseconds."""
    counts = variant["latency"]
    block_n = case["BLOCK_N"]
    tiles = math.ceil(case["kv_len"] / block_n)
    tiles_per_program = math.ceil(tiles / case["num_splits"])
    programs = case["batch"] * case["num_splits"]
    issue_us = variant["clocks_per_element"]["issue"] * block_n * 576 / CLOCK_HZ * 1e6
    little_us = 0.0
    if counts["round_trips_per_tile"] <= 1 and counts["bytes_in_flight_per_unit"]:
        little_us = block_n * TOKEN_BYTES * latency_us / counts["bytes_in_flight_per_unit"]
    per_tile = max(counts["round_trips_per_tile"] * latency_us, issue_us, little_us)
    chain = (counts["round_trips_to_first_mma"] * latency_us + issue_us + (tiles_per_program - 1) * per_tile
             + latency_us)
    hbm_us = case["batch"] * case["kv_len"] * TOKEN_BYTES / HBM_BYTES_PER_S * 1e6
    split_us = max(math.ceil(programs / UNITS) * chain, hbm_us)
    combine_us = 2 * latency_us + 1.0 if case["launches"] == 2 else 0.0
    return case["launches"] * launch_us + split_us + combine_us


def table(rows, latencies, launch_us):
    out = {}
    for case, variant in dispatched(rows):
        key = f"({case['batch']}, {case['kv_len']})"
        out[key] = {"variant": f"{case['family']} BN{case['BLOCK_N']} w{case['num_warps']} s{case['num_stages']} "
                               f"x{case['num_splits']} {case['merge']}",
                    "counts": {k: variant["latency"][k] for k in ("round_trips_to_first_mma", "round_trips_per_tile",
                                                                  "bytes_in_flight_per_unit")},
                    "us": {str(latency): round(predict_us(case, variant, latency, launch_us), 1)
                           for latency in latencies}}
    return out


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", required=True)
    parser.add_argument("--baseline", help="an older compile report, shown beside")
    parser.add_argument("--latency-us", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--launch-us", type=float, default=4.0)
    parser.add_argument("--json")
    options = parser.parse_args(argv)
    reports = {"new": options.report} | ({"baseline": options.baseline} if options.baseline else {})
    tables = {name: table(json.loads(Path(path).read_text()), options.latency_us, options.launch_us)
              for name, path in reports.items()}
    names = list(tables)
    print("| case | " + " | ".join(f"{name}: form, RT>mma, RT/tile, KB in flight; us at L = "
                                    + " / ".join(map(str, options.latency_us)) for name in names) + " |")
    print("| --- |" + " --- |" * len(names))
    for key in tables["new"]:
        cells = []
        for name in names:
            row = tables[name][key]
            c = row["counts"]
            cells.append(f"{row['variant']}, {c['round_trips_to_first_mma']}, {c['round_trips_per_tile']}, "
                         f"{c['bytes_in_flight_per_unit'] / 1024:.1f}; "
                         + " / ".join(f"{row['us'][str(latency)]:.0f}" for latency in options.latency_us))
        print(f"| {key} | " + " | ".join(cells) + " |")
    print("| geomean | " + " | ".join(" / ".join(f"{geomean([r['us'][str(latency)] for r in tables[name].values()]):.0f}"
                                              for latency in options.latency_us) for name in names) + " |")
    if options.json:
        Path(options.json).write_text(json.dumps({"model": __doc__, "latency_us": options.latency_us,
                                                  "launch_us": options.launch_us, "reports": reports,
                                                  "tables": tables}, indent=1) + "\n")


if __name__ == "__main__":
    main()
