"""The static latency counts (tools/isa_latency.py) held against the H200's phase probes: is
a dependent global round trip what the probes say it costs, and do the bytes the ISA keeps
in flight explain the time per tile? The model calibrated here predicts the MI355X.

    python tools/phase_probe.py --json probe.json          # on the H200
    python tools/latency_calibration.py --probe probe.json [--json PATH] [--triton installed|DIR]   # anywhere

For each probed record (a case in one choice) it builds that record's split-kernel variant for
sm_90 from this source (ahead of time, as tools/compile_report.py does: the probe must come
from the same commit; with the runner's Triton, the H200 runs' too, unless --triton names
another) and prints, side by side:
  static  RT>mma (round trips from the start to the first HMMA), RT/tile, load groups per
          tile, bytes of global loads in flight per SM at the loop's HMMAs (at the occupancy
          the build allows), the bytes the SM's programs load per tile;
  probed  range (kv_indptr read: ONE dependent round trip, plus the probe's own store,
          barrier and clock read), tile0 loaded (the first tile's data in every warp), the
          time per tile after the first ((last values - tile0 values) / (tiles - 1)), the
          split kernel's time;
  model   latency = range; first tile = RT>mma x latency (ALU time not counted: the probe
          also waits for Q and synchronizes, so measured >= model); per tile = the larger of
          RT/tile x latency and the tile's bytes at Little's law's rate (bytes in flight /
          latency); measured / model for both.
A ratio near 1 says the round trips explain the time; well above 1, the time is the SM's work
(issue, shared memory), which docs/performance.md found on the H200 (v9).
"""
import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]

from common import add_triton_option  # noqa: E402


def record_launch(sub, record):
    """The record's Launch: its literal form, or (probe files from before the Launch record) the tuple
    ["triton", block_n, num_warps, num_splits, num_stages, family, merge] or ["aiter"]."""
    choice = record["choice"]
    if isinstance(choice, str):
        return sub.Launch.parse(choice)
    return sub.AITER_LAUNCH if choice[0] == "aiter" else sub.Launch(*choice[1:])


def record_variant(sub, record):
    """The probed record's split-kernel Variant: its own fields where phase_probe wrote them,
    else the first variant its choice dispatches (older probe files); None for a form this
    source no longer has (probe files from before issue 31: the PTX conversion and its
    register pin, EVEN_ODD, dependent launches)."""
    if "variant_fields" in record:
        fields = record["variant_fields"]
        if fields.get("layout") or fields.get("pdl") or fields.get("convert") not in sub.CONVERT_NAMES \
                or fields.get("pin", 0) != sub.PIN_BY_PLATFORM["cuda"]:
            return None
        return sub.Variant(**{k: v for k, v in fields.items() if k in sub.Variant._fields})
    launch = record_launch(sub, record)
    return sub.variants_for("sm_90", "cuda", launch.block_n, launch.num_warps, launch.num_stages, launch.scores,
                            launch.merge)[0]


def phases(record):
    return {row["phase"]: row["median_ns"] / 1e3 for row in record.get("phases", []) if isinstance(row, dict)}


def split_kernel_us(record):
    """The split kernel's time in a probed record (its kernel's name: the family's, or the one
    kernel of before issue 31)."""
    times = record.get("kernels_us", {})
    return next((times[name] for name in ("_bf16_split_kernel", "_scaled_split_kernel", "_mla_split_kernel")
                 if name in times), None)


def compare(record, row):
    """One record's side-by-side numbers (row: the compile report's sm90 row of its variant)."""
    counts = row.get("latency", {})
    measured = phases(record)
    tiles = record.get("tiles_per_program", 1)
    per_tile = ((measured["last values"] - measured["tile0 values"]) / (tiles - 1)
                if tiles > 1 and "last values" in measured else None)
    latency = measured.get("range")
    out = {"batch": record["batch"], "kv_len": record["kv_len"], "choice": record["choice"],
           "variant": record.get("variant"), "tiles_per_program": tiles,
           "programs_per_sm": row.get("programs_per_sm"), "static": counts,
           "probed_us": {"range": latency, "tile0 loaded": measured.get("tile0 loaded"), "per_tile": per_tile,
                         "split_kernel": split_kernel_us(record)}}
    if latency and "round_trips_per_tile" in counts:
        first = counts["round_trips_to_first_mma"] * latency
        rate = counts["bytes_in_flight_per_unit"] / latency if counts["bytes_in_flight_per_unit"] else None
        bytes_time = counts["load_bytes_per_tile_per_unit"] / rate if rate else 0.0  # none in flight: RT only
        tile = max(counts["round_trips_per_tile"] * latency, bytes_time)
        out["model_us"] = {"latency": latency, "first_tile": first, "per_tile": tile,
                           "bytes_per_us_per_sm_littles_law": rate}
        out["measured_over_model"] = {
            "first_tile": measured.get("tile0 loaded", 0) / first if first else None,
            "per_tile": per_tile / tile if per_tile and tile else None}
    return out


def print_comparisons(rows):
    print(f"{'case':<12} {'choice':<30} {'RT>mma':>6} {'RT/t':>5} {'flightKB':>8} {'tileKB':>7} | {'range':>6} "
          f"{'tile0':>6} {'/tile':>6} {'split':>6} | {'m.first':>7} {'m./tile':>7} {'x first':>7} {'x tile':>6}")
    for r in rows:
        c, p, m, x = r["static"], r["probed_us"], r.get("model_us", {}), r.get("measured_over_model", {})

        def fmt(value, width, digits=2):
            return f"{value:>{width}.{digits}f}" if isinstance(value, (int, float)) else f"{'-':>{width}}"
        print(f"{str((r['batch'], r['kv_len'])):<12} {','.join(map(str, r['choice'][1:])):<30} "
              f"{c.get('round_trips_to_first_mma', '-'):>6} {c.get('round_trips_per_tile', '-'):>5} "
              f"{fmt(c.get('bytes_in_flight_per_unit', 0) / 1024, 8, 1)} "
              f"{fmt(c.get('load_bytes_per_tile_per_unit', 0) / 1024, 7, 1)} | {fmt(p['range'], 6)} "
              f"{fmt(p['tile0 loaded'], 6)} {fmt(p['per_tile'], 6)} {fmt(p['split_kernel'], 6)} | "
              f"{fmt(m.get('first_tile'), 7)} {fmt(m.get('per_tile'), 7)} {fmt(x.get('first_tile'), 7)} "
              f"{fmt(x.get('per_tile'), 6)}")
    print("static: this source's sm_90 build of the probed variant (flightKB: global-load KB in flight per SM at "
          "the loop's HMMAs; tileKB: KB the SM's programs load per tile); probed (us): range = one round trip "
          "+ probe cost, tile0 = first tile loaded, /tile = per tile after the first; model: latency = range, "
          "first = RT>mma x latency, per tile = max(RT/tile x latency, tile bytes / (flight / latency)); "
          "x: measured / model")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--probe", required=True, help="tools/phase_probe.py --json output (H200)")
    parser.add_argument("--json", help="write the comparisons here")
    add_triton_option(parser)
    options = parser.parse_args(argv)
    import compile_report
    import submission as sub
    rows, built, retired = [], {}, 0
    for record in json.loads(Path(options.probe).read_text()):
        if record_launch(sub, record).path != "triton" or not isinstance(record.get("phases"), list):
            continue
        variant = record_variant(sub, record)
        if variant is None:
            retired += 1
            continue
        if variant not in built:
            fn, signature, consts = compile_report._build_spec(variant)
            built[variant] = compile_report.compile_one("sm90", fn, signature, consts, variant.num_warps,
                                                        variant.num_stages)
        rows.append(compare(record, built[variant]))
    print_comparisons(rows)
    if retired:
        print(f"{retired} record(s) of a form this source no longer has: not compared")
    if options.json:
        Path(options.json).write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    from common import run_with_triton
    run_with_triton(__file__)  # the builds: the runner's Triton (the H200's too) unless --triton names another
    main()
