"""Where one call's time goes: its kernels, and one program's chain of dependent phases.

    python tools/phase_probe.py [--cases 4x1024,64x1024,...] [--choices SPEC] [--runs N] [--json PATH]

Per leaderboard case (default all 8), in the dispatched choice (submission.choose) or in each
choice of SPEC (tools/sweep.py's: 'table' or tuples like 'triton,64,4,16,2,0,2'):
  * event us: the call timed as the runner times it (cache flush queued, device events
    around the call; the median of --runs calls);
  * kernels: each GPU kernel's time in one call (torch.profiler), their sum, and the rest of
    the event time (launch gaps);
  * phases: the split kernel (either family) run once with its phase probes on (PROBE: each program waits for
    the data of a phase, synchronizes its warps and stores the SM clock), as the median over
    programs of the time since the program started: range (kv_indptr read), q loaded, the first
    and the last tile's loads / scores / softmax / values, all tiles done, partials or output
    written, end; plus the spread of program start times (global timer) and the probed call's
    event time (the probes' barriers cost some time: their numbers are upper bounds).
On a CPU the kernels run in Triton's interpreter and the timers are fake (the plumbing runs,
the numbers mean nothing).
"""
import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from common import parse_cases, use_interpreter_without_gpu  # noqa: E402

use_interpreter_without_gpu()

UNSET = -1  # a probe slot no program wrote (e.g. the last tile's when a program has one tile)


def phase_table(probe_rows, phase_names, global_start_slot, global_end_slot):
    """probe_rows: (programs, slots) int64 of clocks (UNSET where not written). -> rows of
    {phase, programs, median_ns, p90_ns, step_ns}: the time since each program's start
    (slot 0), converted with the median clock rate (cycles per global-timer ns) of the
    programs, the step from the previous phase's median; and {span_ns, start_spread_ns,
    cycles_per_ns} of the whole launch."""
    rows = probe_rows.tolist()
    rates = [(row[len(phase_names) - 1] - row[0]) / (row[global_end_slot] - row[global_start_slot])
             for row in rows if row[global_end_slot] > row[global_start_slot] and row[len(phase_names) - 1] > row[0]]
    cycles_per_ns = statistics.median(rates) if rates else 1.0
    table, previous = [], 0.0
    for slot, name in enumerate(phase_names):
        times = sorted((row[slot] - row[0]) / cycles_per_ns for row in rows if row[slot] != UNSET)
        if not times:
            continue
        median_ns = statistics.median(times)
        table.append({"phase": name, "programs": len(times), "median_ns": median_ns,
                      "p90_ns": times[min(len(times) - 1, int(0.9 * len(times)))], "step_ns": median_ns - previous})
        previous = median_ns
    starts = [row[global_start_slot] for row in rows]
    ends = [row[global_end_slot] for row in rows]
    launch = {"span_ns": max(ends) - min(starts), "start_spread_ns": max(starts) - min(starts),
              "cycles_per_ns": cycles_per_ns}
    return table, launch


def probe_case(sub, batch, kv_len, seed, runs, choice):
    """One case in one choice: event times, kernel times and the phase table."""
    import reference
    data = reference.generate_input(batch, 1, kv_len, seed)
    q, kv_data, qo_indptr, kv_indptr, config = data
    device = q.device

    def call():
        return sub._run_choice(choice, q, kv_data, qo_indptr, kv_indptr, batch, config["sm_scale"])
    plan = call()[1]  # builds and checks the plan
    event_us = [sub.time_call_us(call, device) for _ in range(runs)]
    try:
        kernels = dict(sub.kernel_times_us(call, device))
    except ValueError:  # no GPU: no kernel times
        kernels = {}
    record = {"batch": batch, "kv_len": kv_len, "choice": list(choice),
              "event_us": statistics.median(event_us), "kernels_us": kernels,
              "kernel_sum_us": sum(kernels.values())}
    if choice[0] != "triton":
        record["phases"] = "not probed: aiter"
        return record
    packed, scales = kv_data["mxfp4"]
    splits = plan.launch.num_splits
    probe = torch.full((batch * splits, sub.PROBE_SLOTS), UNSET, dtype=torch.int64, device=device)
    out = torch.empty((batch, sub.NUM_HEADS, sub.V_HEAD_DIM), dtype=torch.bfloat16, device=device)
    args = (q, packed.view(torch.uint8), scales.view(torch.uint8), qo_indptr, kv_indptr, out, plan.scratch,
            config["sm_scale"], plan.combine_dims)
    sub._attention(plan.variant, splits, *args, probe=probe)  # builds the probed form
    probe.fill_(UNSET)
    record["probed_event_us"] = sub.time_call_us(
        lambda: sub._attention(plan.variant, splits, *args, probe=probe), device)
    table, launch = phase_table(probe.cpu(), sub.PROBE_PHASES, sub.PROBE_GLOBAL_START, sub.PROBE_GLOBAL_END)
    tiles = math.ceil(math.ceil(kv_len / plan.variant.block_n) / splits)
    record.update(variant=plan.variant.describe(), variant_fields=plan.variant._asdict(),
                  programs=batch * splits, tiles_per_program=tiles,
                  phases=table, launch=launch)
    return record


def print_record(record, file=sys.stdout):
    print(f"\n({record['batch']}, {record['kv_len']}) {record['choice']}: event {record['event_us']:.1f} us, "
          f"kernels {record['kernel_sum_us']:.1f} us, gaps {record['event_us'] - record['kernel_sum_us']:.1f} us",
          file=file)
    for name, us in record["kernels_us"].items():
        print(f"    {us:8.1f} us  {name[:90]}", file=file)
    if isinstance(record["phases"], str):
        print(f"  {record['phases']}", file=file)
        return
    launch = record["launch"]
    print(f"  {record['variant']}; {record['programs']} programs x {record['tiles_per_program']} tiles; "
          f"probed call {record['probed_event_us']:.1f} us; kernel span {launch['span_ns'] / 1e3:.1f} us, "
          f"start spread {launch['start_spread_ns'] / 1e3:.1f} us, {launch['cycles_per_ns']:.2f} cycles/ns", file=file)
    print(f"  {'phase':<16} {'programs':>8} {'median us':>10} {'p90 us':>8} {'step us':>8}", file=file)
    for row in record["phases"]:
        print(f"  {row['phase']:<16} {row['programs']:>8} {row['median_ns'] / 1e3:>10.2f} "
              f"{row['p90_ns'] / 1e3:>8.2f} {row['step_ns'] / 1e3:>8.2f}", file=file)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", help="BATCHxKV_LEN,... (default: the 8 leaderboard cases)")
    parser.add_argument("--choices", default="table", help="SPEC as tools/sweep.py takes it")
    parser.add_argument("--runs", type=int, default=20, help="event-timed calls per case (median)")
    parser.add_argument("--json", help="write the records here")
    options = parser.parse_args(argv)
    import submission as sub
    from sweep import parse_choices
    cases = parse_cases(options.cases)
    records = []
    for batch, kv_len, seed in cases:
        for choice in parse_choices(options.choices, sub.choose(batch, kv_len, torch.device(
                "cuda" if torch.cuda.is_available() else "cpu"))):
            records.append(probe_case(sub, batch, kv_len, seed, options.runs, choice))
            print_record(records[-1])
    if options.json:
        Path(options.json).write_text(json.dumps(records, indent=1) + "\n")
    return records


if __name__ == "__main__":
    main()
