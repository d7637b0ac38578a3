"""A call's time predicted from the compile report's static latency counts, for any Triton or
Gluon candidate of the split kernel (its family, tile, warps, splits, stages and merge), under
a machine's parameters: the ones assumed (ASSUMED: nothing of ours has run on an MI355X) or the
ones the submission's machine probes measured (its MEASURED MACHINE block). For each candidate,
the compile report's build of the form it runs first (tools/compile_report.py --json) and that
build's counts (tools/isa_latency.py):

    python tools/latency_model.py --report results/compile_report_triton3.6.0.json \
        [--baseline OLD_REPORT.json] [--latency-us 1 2] [--launch-us 4] [--machine FILE] [--json PATH]
    python eval.py model LOG     # every candidate of a runner's tuning report beside its prediction

The first form prints the dispatched gfx950 case of each leaderboard case at each --latency-us
and, where FILE (a submission, by default submission.py, or a runner's log) holds a MEASURED
MACHINE block for gfx950, under the measured parameters too.

Model, per call (Machine's fields; L = round_trip_us; call_terms returns every term):
  launch_us + (launches - 1) x extra_launch_us (the split kernel, and the combine kernel when
      the splits merge through it; ~4 us per launch event-timed on AMD: ROCm TransferBench PR 297)
  + the split kernel: max(its HBM bytes at hbm_bytes_per_s, the programs' chain), the chain
      ceil(programs / (units x programs per unit)) x
      [ round_trips_to_first_mma x L + work(tile) + (tiles per program - 1) x per_tile + L ]
      programs per unit: as many workgroups as the build's registers and LDS let a CU (SM)
      hold (one for every SCALED form and the Gluon kernel); k = min(that, ceil(programs /
      units)): the programs sharing one unit;
      work(tile) = max(k x issue(tile), LDS(tile), in-order(tile)): a tile's work on its CU;
      per_tile = max(round_trips_per_tile x L, work(tile), and for a loop that prefetches
      (round_trips_per_tile <= 1) the tile's HBM bytes / (the bytes one program keeps in flight
      / L): Little's law), the bytes one program keeps in flight = bytes_in_flight_per_unit /
      programs per unit; issue(tile) = the report's issue clocks per element x tile elements /
      clock_hz; the last L: the partials' or output's stores
      LDS(tile) = the main loop's LDS clocks per wave per tile with bank conflicts in the chosen
      bank model (lds_banks; LDS_MODEL: gfx950's measured 64-bank phases) x the workgroup's waves
      x k / clock_hz: one CU's LDS pipe serves its waves one access at a time
      in-order(tile), at one wave per SIMD only (nothing else issues on the SIMD, so nothing
      hides a wait): the loop's issue per wave (compile_report.loop_issue) -- 4 clocks a VALU
      instruction, the MFMAs' clocks, a clock a scalar instruction and s_nop clock -- plus one
      LDS round trip (lds_clocks) per wait on LDS
  + the combine kernel (COMBINE): max(2 L + 1 us, the partials read back and the output written
      at hbm_bytes_per_s)
  + the FUSED merge: max(atomic_us (the counter) + the merge's round trips x L, the partials read
      back and the output written at hbm_bytes_per_s); the round trips as the build's ISA issues
      them (fence_order.merge_round_trips: merge loops x ceil(num_splits / splits a pass); a
      build without fence facts, sm_90's: one a split).
  Bytes (call_bytes): per KV token 312 in the runner's padded scale rows (306 trimmed), per
  sequence Q (18,432) and the output (16,384) or, over several splits, each split's partial
  (32,896) written by the split kernel and read back by the merge.
ASSUMED["gfx950"]: launches 4 us, L = 1 us (the H200's probes read 0.3-0.7 us for one round trip
with the probe's own cost: tools/latency_calibration.py), 8 TB/s, 2.4 GHz, 256 CUs, an LDS round
trip 64 clocks; ASSUMED["sm90"]: the H200's figures in the shared notes (one launch 2.85 us, each
further 1.5 us, L 0.6 us, the copy rate 4.27 TB/s, 1.98 GHz, 132 SMs). The parameters fitted to
public MI355X figures, and the per-case prediction with its range: tools/mi355x_prediction.py.
The public paths' own model: public_path_us (PublicPath).
"""
import argparse
import json
import math
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

import fence_order  # noqa: E402
import submission as sub  # noqa: E402
from fence_order import PARTIAL_BYTES  # noqa: E402

# Bytes a call moves (docs/performance.md, "The two numbers"): per KV token 288 bytes of e2m1 pairs and a row of
# e8m0 scales, 24 bytes in the runner's padded scale layout (the buffer aiter leaves: a row is read whole) or 18
# trimmed; per sequence Q (16 x 576 bf16) once, the output (16 x 512 bf16) or, when the splits merge, each split's
# partial (16 x 512 float32 + 2 x 16 float32) written and read back.
TOKEN_BYTES = {"padded": 288 + 24, "trimmed": 288 + 18}
Q_BYTES = 16 * 576 * 2
OUT_BYTES = 16 * 512 * 2
ELEMENTS_PER_TOKEN = 576
VARIANT_KEYS = ("kernel", "family", "BLOCK_N", "convert", "num_warps", "num_stages", "MERGE")
TARGET_ARCH = {"gfx950": ("gfx950", "hip"), "sm90": ("sm_90", "cuda")}  # compile-report target -> arch, platform
ARCH_TARGET = {arch: target for target, (arch, _) in TARGET_ARCH.items()}
VALU_ISSUE_CLOCKS = 4  # a wave64 VALU instruction on a 16-lane SIMD (gfx950.md)
COMBINE_WORK_US = 1.0  # the combine kernel's own work beside its two round trips
LDS_MODEL = "64 banks, measured"  # tools/lds_banks.py: gfx950's phases where HipKittens measured them


class Machine(NamedTuple):
    """The machine parameters the model takes (each one a figure of the machine probes, but lds_clocks)."""
    launch_us: float  # an empty launch, event-timed
    extra_launch_us: float  # each further dependent launch of the call
    round_trip_us: float  # L: one dependent global round trip (the probes' HBM chase)
    atomic_us: float  # a returning device-scope atomic (the FUSED merge's counter)
    hbm_bytes_per_s: float  # the copy rate, bytes read + written
    clock_hz: float
    units: int  # CUs (SMs)
    lds_clocks: float = 64.0  # one LDS round trip, clocks (an LDS wait in a wave's in-order issue)


ASSUMED = {"gfx950": Machine(4.0, 4.0, 1.0, 1.0, 8e12, 2.4e9, 256),
           "sm90": Machine(2.85, 1.53, 0.6, 0.6, 4.27e12, 1.98e9, 132)}
# Machine field <- (the probes' figures it is made of; how)
FROM_FIGURES = {"launch_us": ("launch_us",), "extra_launch_us": ("two_launches_us", "launch_us"),
                "round_trip_us": ("hbm_round_trip_us",), "atomic_us": ("atomic_round_trip_us",),
                "hbm_bytes_per_s": ("copy_gbs",), "clock_hz": ("clock_mhz",), "units": ("units",)}


def machine_from_figures(figures, assumed):
    """A Machine from the probes' figures (MEASURED_MACHINE's entry), each field the assumed
    one where its figures are missing -> (Machine, [the fields taken from `assumed`])."""
    values, missing = assumed._asdict(), []
    for field, names in FROM_FIGURES.items():
        found = [figures.get(name) for name in names]
        if any(value is None for value in found):
            missing.append(field)
            continue
        values[field] = {"extra_launch_us": lambda two, one: two - one, "hbm_bytes_per_s": lambda gbs: gbs * 1e9,
                         "clock_hz": lambda mhz: mhz * 1e6}.get(field, lambda value: value)(*found)
    return Machine(**values), missing


def programs_per_unit(variant):
    """Workgroups one CU (SM) holds at the build's occupancy (gfx950: waves per SIMD x 4 SIMDs
    / warps; sm90: programs per SM), at least 1."""
    if variant.get("programs_per_sm"):
        return variant["programs_per_sm"]
    return max(1, int(variant.get("waves_per_simd", 1) * 4 // variant["num_warps"]))


def call_bytes(case, layout="padded"):
    """{kernel: bytes} one call moves through HBM: the split kernel reads the KV rows (TOKEN_BYTES[layout] a token)
    and Q and writes the output (DIRECT) or the partials; the merge (COMBINE's kernel, FUSED's last programs) reads
    the partials back and writes the output."""
    batch, splits = case["batch"], case["num_splits"]
    partials = batch * splits * PARTIAL_BYTES if case["MERGE"] != sub.MERGE_DIRECT else 0
    return {"split": batch * case["kv_len"] * TOKEN_BYTES[layout] + batch * Q_BYTES
            + (partials or batch * OUT_BYTES),
            "merge": partials + batch * OUT_BYTES if partials else 0}


def inorder_issue_clocks(issue, lds_clocks):
    """One wave's in-order issue of one pass of its main loop (compile_report.loop_issue): VALU_ISSUE_CLOCKS a VALU
    instruction, the MFMAs' clocks, a clock a scalar instruction and s_nop clock, and an LDS round trip per wait on
    LDS (at one wave per SIMD nothing else issues meanwhile)."""
    return (VALU_ISSUE_CLOCKS * issue["valu"] + issue["mfma_clocks"] + issue["salu"] + issue["nop_clocks"]
            + issue["lgkm_waits"] * lds_clocks)


def merge_round_trips(variant, num_splits):
    """The FUSED merge's dependent round trips: as the build's ISA issues them (fence_order.merge_round_trips), else
    (sm_90 builds: no fence facts) one per split."""
    found = fence_order.merge_round_trips(variant.get("fused_fences"), num_splits)
    return num_splits if found is None else found


def call_terms(case, variant, machine, layout="padded", lds_model=LDS_MODEL):
    """The model of the module docstring for one call -> {term: us (or bytes)}; "total_us" is the prediction.
    case: batch, kv_len, BLOCK_N, num_splits, launches, MERGE; variant: the compile report's row of its build."""
    counts = variant["latency"]
    latency_us = machine.round_trip_us
    block_n = case["BLOCK_N"]
    tiles_per_program = math.ceil(math.ceil(case["kv_len"] / block_n) / case["num_splits"])
    programs = case["batch"] * case["num_splits"]
    per_unit = programs_per_unit(variant)
    sharing = min(per_unit, math.ceil(programs / machine.units))
    clock_us = 1e6 / machine.clock_hz
    issue_us = variant["clocks_per_element"]["issue"] * block_n * ELEMENTS_PER_TOKEN * clock_us
    # the LDS pipe of a CU serves its workgroups' waves one access at a time
    banks = variant.get("lds_banks", {}).get("models", {})
    lds_us = banks[lds_model]["cycles_per_tile"] * variant["num_warps"] * sharing * clock_us if banks else 0.0
    inorder_us = 0.0
    if variant.get("loop_issue") and variant.get("waves_per_simd", 2) <= 1:
        inorder_us = inorder_issue_clocks(variant["loop_issue"], machine.lds_clocks) * clock_us
    little_us = 0.0
    if counts["round_trips_per_tile"] <= 1 and counts["bytes_in_flight_per_unit"]:
        little_us = block_n * TOKEN_BYTES[layout] * latency_us * per_unit / counts["bytes_in_flight_per_unit"]
    work_us = max(sharing * issue_us, lds_us, inorder_us)  # a tile's work on its CU
    per_tile = max(counts["round_trips_per_tile"] * latency_us, work_us, little_us)
    chain = counts["round_trips_to_first_mma"] * latency_us + work_us + (tiles_per_program - 1) * per_tile + latency_us
    moved = call_bytes(case, layout)
    hbm_us = moved["split"] / machine.hbm_bytes_per_s * 1e6
    split_us = max(math.ceil(programs / (machine.units * per_unit)) * chain, hbm_us)
    merge_us = 0.0
    if case["MERGE"] == sub.MERGE_COMBINE:
        merge_us = max(2 * latency_us + COMBINE_WORK_US, moved["merge"] / machine.hbm_bytes_per_s * 1e6)
    elif case["MERGE"] == sub.MERGE_FUSED:
        merge_us = max(machine.atomic_us + merge_round_trips(variant, case["num_splits"]) * latency_us,
                       moved["merge"] / machine.hbm_bytes_per_s * 1e6)
    launch_us = machine.launch_us + (case["launches"] - 1) * machine.extra_launch_us
    return {"launch_us": launch_us, "chain_us": chain, "hbm_us": hbm_us, "split_us": split_us, "merge_us": merge_us,
            "per_tile_us": per_tile, "issue_us": issue_us, "lds_us": lds_us, "inorder_us": inorder_us,
            "little_us": little_us, "bytes": moved["split"] + moved["merge"],
            "total_us": launch_us + split_us + merge_us}


def predict_us(case, variant, machine, layout="padded", lds_model=LDS_MODEL):
    """call_terms' prediction of one call, in microseconds."""
    return call_terms(case, variant, machine, layout, lds_model)["total_us"]


# ---------------------------------------------------------------------------------------
# Public MI355X decode paths, from their own kernels and bytes (the parameters' fit: tools/mi355x_prediction.py)
# ---------------------------------------------------------------------------------------
class PublicPath(NamedTuple):
    """A public decode path on the MI355X as the model reads it: small kernels before the decode (each a launch, a
    load and a store round trip, Q's bytes in and out), the decode's first kernel (a launch, the index's and a tile's
    round trips and its store; at least floor_us of its own where measured) and, over several splits, the reduce (a
    launch, two round trips, the partials' bytes)."""
    kv_token_bytes: int  # bytes per KV token (fp8: 576)
    small_kernels: int  # kernels before the decode
    floor_us: float  # the decode kernel's measured minimum (0: none known)
    splits: str  # how it splits a sequence: "fill" = max(1, 256 // batch), "fill32" = the same at most 32


PUBLIC_SPLITS = {"fill": lambda batch: max(1, 256 // batch), "fill32": lambda batch: max(1, min(32, 256 // batch))}


def public_path_us(path, batch, kv_len, machine):
    """A public path's call in microseconds (PublicPath's model; the machine's launch_us for every launch)."""
    splits = PUBLIC_SPLITS[path.splits](batch)
    partials = batch * splits * PARTIAL_BYTES if splits > 1 else 0
    rate = 1e6 / machine.hbm_bytes_per_s
    small = path.small_kernels * (machine.launch_us + 2 * machine.round_trip_us + 2 * batch * Q_BYTES * rate)
    decode = machine.launch_us + max(path.floor_us, 3 * machine.round_trip_us + rate * (
        batch * kv_len * path.kv_token_bytes + batch * Q_BYTES + (partials or batch * OUT_BYTES)))
    reduce = machine.launch_us + max(2 * machine.round_trip_us, rate * (partials + batch * OUT_BYTES)) if partials \
        else 0.0
    return small + decode + reduce


def dispatched(rows):
    """(case row, build row) of every dispatched gfx950 case of a compile report (a split variant, or the Gluon
    kernel's build where the dispatch picks it)."""
    variants = [r for r in rows if r["row"] in ("variant", "gluon") and r["target"] == "gfx950"]
    for case in rows:
        if case["row"] == "case" and case["target"] == "gfx950" and case["role"] == "dispatched":
            yield case, next(v for v in variants if all(v.get(k) == case[k] for k in VARIANT_KEYS))


def table(rows, machines):
    """{case: {variant, counts, us: {machine name: us}}} of the dispatched gfx950 cases."""
    out = {}
    for case, variant in dispatched(rows):
        key = f"({case['batch']}, {case['kv_len']})"
        out[key] = {"variant": f"{case['family']} BN{case['BLOCK_N']} w{case['num_warps']} s{case['num_stages']} "
                               f"x{case['num_splits']} {case['merge']}",
                    "counts": {k: variant["latency"][k] for k in ("round_trips_to_first_mma", "round_trips_per_tile",
                                                                  "bytes_in_flight_per_unit")},
                    "us": {name: round(predict_us(case, variant, machine), 1) for name, machine in machines.items()}}
    return out


def geomean(values):
    return math.exp(sum(map(math.log, values)) / len(values))


# ---------------------------------------------------------------------------------------
# Any candidate of a first-call tuning report
# ---------------------------------------------------------------------------------------

def choice_from_description(text):
    """A report's candidate ('scaled t128 w8 s4 st2 combine', 'aiter') -> its Launch (submission's
    Launch.parse), None when the text is neither."""
    try:
        return sub.Launch.parse(text.strip())
    except ValueError:
        return None


def candidate_build(rows, target, batch, kv_len, choice):
    """(case fields for predict_us, the compile report's row of the build the candidate runs
    first) or (None, why there is no prediction)."""
    import compile_report
    if choice.path != "triton":
        return None, "aiter's own kernels: the model covers the Triton and Gluon split kernels"
    arch, platform = TARGET_ARCH[target]
    launch = choice
    case = {"batch": batch, "kv_len": kv_len, "BLOCK_N": launch.block_n, "num_splits": launch.num_splits,
            "launches": 2 if launch.merge == sub.MERGE_COMBINE else 1, "MERGE": launch.merge}
    if launch.scores == sub.ONCE_SCORES and target == "gfx950" and \
            (launch.block_n, launch.num_warps) == (sub.GL_BLOCK_N, sub.GL_NUM_WARPS):
        # the Gluon kernel: what the runner's Triton runs first (gluon_capable there)
        found = [r for r in rows if r["row"] == "gluon" and r["target"] == target and r["MERGE"] == launch.merge]
    else:
        variant = sub.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages,
                                   launch.scores, launch.merge)[0]
        fn, _, consts = compile_report._build_spec(variant)
        same = [r for r in rows if r["row"] in ("variant", "candidate") and r["target"] == target
                and r["kernel"] == fn.__name__
                and r["num_warps"] == variant.num_warps and r["num_stages"] == variant.num_stages]
        found = [r for r in same if all(r.get(k) == v for k, v in consts.items())]
    found = [r for r in found if "error" not in r and "latency" in r and "clocks_per_element" in r]
    if not found:
        return None, f"no {target} build of its first form in the compile report"
    return case, found[0]


def load_rows(report_path):
    """A compile report's rows, with the rows of its candidates' file beside it where there is
    one (compile_report_triton<V>.json -> compile_report_candidates_triton<V>.json: the tuning
    candidates' forms the report does not build, tools/compile_report.py --candidates)."""
    path = Path(report_path)
    beside = path.with_name(path.name.replace("compile_report_triton", "compile_report_candidates_triton"))
    return json.loads(path.read_text()) + (json.loads(beside.read_text()) if beside != path and beside.is_file()
                                           else [])


def error(predicted_us, measured_us):
    """The model's error: predicted / measured - 1."""
    return predicted_us / measured_us - 1


def compare_cases(cases, rows, target, machines):
    """Per case of a tuning report ({(batch, kv_len): [(description, measured us, runs)]},
    the pick first), each candidate's prediction under each Machine of `machines` ({name:
    Machine}) beside its measured time, and the model's error for the pick and the worst
    candidate (the largest |error| under the last machine) -> [{batch, kv_len, candidates,
    pick_error, worst}]."""
    last = list(machines)[-1]
    out = []
    for (batch, kv_len), candidates in cases.items():
        found = []
        for index, (description, measured_us, runs) in enumerate(candidates):
            row = {"candidate": description, "measured_us": measured_us, "runs": runs, "pick": index == 0}
            choice = choice_from_description(description)
            case, build = (None, "not a candidate description") if choice is None else \
                candidate_build(rows, target, batch, kv_len, choice)
            if case is None:
                row["no_prediction"] = build
            else:
                row["predicted_us"] = {name: predict_us(case, build, machine) for name, machine in machines.items()}
                row["error"] = {name: error(us, measured_us) for name, us in row["predicted_us"].items()}
            found.append(row)
        predicted = [row for row in found if "error" in row]
        worst = max(predicted, key=lambda row: abs(row["error"][last]), default=None)
        out.append({"batch": batch, "kv_len": kv_len, "candidates": found,
                    "pick_error": found[0].get("error") if found else None,
                    "worst": {"candidate": worst["candidate"], "error": worst["error"]} if worst else None})
    return out


def format_comparison(compared, machine_names):
    """The table of compare_cases: per case a line per candidate, then the errors."""
    lines = []
    head = "".join(f" {'predicted us, ' + name:>26}" for name in machine_names)
    for case in compared:
        lines += [f"\ncase ({case['batch']}, {case['kv_len']})", f"    {'candidate':<36} {'measured us':>11}{head}"]
        for row in case["candidates"]:
            cells = (f"  no prediction: {row['no_prediction']}" if "no_prediction" in row else
                     "".join(f" {row['predicted_us'][name]:>17.1f} ({row['error'][name]:+5.0%})"
                             for name in machine_names))
            lines.append(f"  {'*' if row['pick'] else ' '} {row['candidate']:<36} {row['measured_us']:>11.1f}{cells}")
    lines.append("\nthe model's error per case (predicted / measured - 1; * the pick; worst: the candidate with "
                 "the largest error under the last parameters):")
    for case in compared:
        pick = case["pick_error"]
        cells = ", ".join(f"{name} {pick[name]:+.0%}" for name in machine_names) if pick else "no prediction"
        worst = case["worst"]
        tail = (f"; worst {worst['candidate']}: " + ", ".join(f"{name} {worst['error'][name]:+.0%}"
                                                            for name in machine_names)) if worst else ""
        lines.append(f"  ({case['batch']}, {case['kv_len']}): pick {cells}{tail}")
    return "\n".join(lines)


def measured_machine(path, arch):
    """The MEASURED MACHINE entry for `arch` in the file at `path` (a submission or a log; the
    last block's entry where several hold it): (figures, provenance), or (None, why not)."""
    import eval as harness
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    if harness.MACHINE_BEGIN not in text:
        return None, f"{path} has no MEASURED MACHINE block"
    entries = harness.machine_entries(text, Path(path).name)
    if arch not in entries:
        held = ", ".join(sorted(entries))
        return None, (f"{path}'s MEASURED MACHINE block holds {held}, not {arch}: another device, refused" if held
                      else f"{path}'s MEASURED MACHINE block is empty (nothing ingested yet)")
    return entries[arch]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", required=True)
    parser.add_argument("--baseline", help="an older compile report, shown beside")
    parser.add_argument("--latency-us", type=float, nargs="+", default=[1.0, 2.0])
    parser.add_argument("--launch-us", type=float, default=4.0)
    parser.add_argument("--machine", default=str(ROOT / "submission.py"),
                        help="a file with a MEASURED MACHINE block (default submission.py)")
    parser.add_argument("--json")
    options = parser.parse_args(argv)
    assumed = ASSUMED["gfx950"]
    machines = {f"L={latency}": assumed._replace(round_trip_us=latency, atomic_us=latency, launch_us=options.launch_us,
                                                 extra_launch_us=options.launch_us)
                for latency in options.latency_us}
    figures, provenance = measured_machine(options.machine, "gfx950") if Path(options.machine).is_file() \
        else (None, f"{options.machine} is not a file")
    if figures is not None:
        machines["measured"], _ = machine_from_figures(figures, assumed)
    print(f"measured parameters: {provenance}")
    reports = {"new": options.report} | ({"baseline": options.baseline} if options.baseline else {})
    tables = {name: table(json.loads(Path(path).read_text()), machines) for name, path in reports.items()}
    names = list(tables)
    print("| case | " + " | ".join(f"{name}: form, RT>mma, RT/tile, KB in flight; us at "
                                    + " / ".join(machines) for name in names) + " |")
    print("| --- |" + " --- |" * len(names))
    for key in tables["new"]:
        cells = []
        for name in names:
            row = tables[name][key]
            c = row["counts"]
            cells.append(f"{row['variant']}, {c['round_trips_to_first_mma']}, {c['round_trips_per_tile']}, "
                         f"{c['bytes_in_flight_per_unit'] / 1024:.1f}; "
                         + " / ".join(f"{row['us'][machine]:.0f}" for machine in machines))
        print(f"| {key} | " + " | ".join(cells) + " |")
    print("| geomean | " + " | ".join(" / ".join(f"{geomean([r['us'][machine] for r in tables[name].values()]):.0f}"
                                              for machine in machines) for name in names) + " |")
    if options.json:
        Path(options.json).write_text(json.dumps({"model": __doc__, "machines": {k: m._asdict() for k, m in
                                                                                 machines.items()},
                                                  "measured_provenance": provenance, "reports": reports,
                                                  "tables": tables}, indent=1) + "\n")


if __name__ == "__main__":
    main()
