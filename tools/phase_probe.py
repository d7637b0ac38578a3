"""Where one call's time goes: its kernels, and one program's chain of dependent phases.

    python tools/phase_probe.py [--cases 4x1024,64x1024,...] [--choices SPEC] [--runs N] [--json PATH]

Per leaderboard case (default all 8), in the dispatched choice (submission.choose) or in each
choice of SPEC (tools/sweep.py's: 'table' or tuples like 'triton,64,4,16,2,0,2'):
  * event us: the call timed as the runner times it (cache flush queued, device events
    around the call; the median of --runs calls), submission.py as it is;
  * kernels: each kernel's time in one call (submission.kernel_times_us: device events
    around each launch), their sum, and the rest of the event time (launch gaps);
  * phases: the same call run by the instrumented copy of submission.py (tools/instrument.py:
    its `# phase` markers become probes; each program waits for the data of a phase,
    synchronizes its warps and stores the SM clock), which dispatches, checks and falls
    back as submission.py does, so the variant probed is the one that runs; its split
    kernel's last launch, as the median over programs of the time since the program
    started: range (kv_indptr read), q loaded, the first and the last tile's loads / scores
    / softmax / values, all tiles done, partials or output written, merged (FUSED: the last
    program of a sequence), end; plus the spread of program start times (global timer) and
    the probed call's event time (the probes' barriers cost some time: their numbers are
    upper bounds). The Gluon kernel and aiter have no markers: not probed.
On a CPU the kernels run in Triton's interpreter and the clock is the emulator's counter (one
tick per read: the plumbing runs, the numbers mean nothing).
"""
import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402

from common import parse_cases, use_interpreter_without_gpu  # noqa: E402

use_interpreter_without_gpu()

import instrument  # noqa: E402

UNSET = instrument.UNSET  # a probe slot no program wrote (e.g. the last tile's when a program has one tile)


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


def kernel_sums_us(sub, run, device):
    """{kernel: us} of one run, a kernel launched twice summed."""
    kernels = {}
    for name, us in sub.kernel_times_us(run, device):
        kernels[name] = kernels.get(name, 0.0) + us
    return kernels


def probe_case(sub, copy, batch, kv_len, seed, runs, choice):
    """One case in one choice: submission's event and kernel times, the instrumented copy's
    probed call and phase table."""
    import reference
    data = reference.generate_input(batch, 1, kv_len, seed)
    q, kv_data, qo_indptr, kv_indptr, config = data
    device = q.device

    def call(module):
        return module._run_choice(choice, q, kv_data, qo_indptr, kv_indptr, batch, config["sm_scale"])
    plan = call(sub)[1]  # builds and checks the plan
    event_us = [sub.time_call_us(lambda: call(sub), device) for _ in range(runs)]
    kernels = kernel_sums_us(sub, lambda: call(sub), device)
    record = {"batch": batch, "kv_len": kv_len, "choice": str(choice),
              "event_us": statistics.median(event_us), "kernels_us": kernels,
              "kernel_sum_us": sum(kernels.values())}
    if choice.path != "triton":
        record["phases"] = "not probed: aiter"
        return record
    probed_plan = call(copy)[1]  # builds and checks the probed forms (falling back as submission does)
    variant = probed_plan.variant
    record.update(variant=variant.describe(), variant_fields=variant._asdict(), clock=copy.PROBE_CLOCK)
    if variant != plan.variant:
        record["plain_variant"] = plan.variant.describe()
    if variant.gluon:
        record["phases"] = "not probed: the Gluon kernel has no phase markers"
        return record
    record["probed_event_us"] = statistics.median(sub.time_call_us(lambda: call(copy), device) for _ in range(runs))
    copy.reset_probes()
    call(copy)
    probed = instrument.probe_record(copy)
    if probed is None or probed["what"] != variant.describe():
        raise RuntimeError(f"phase_probe: the probed launch is not the plan's variant ({variant.describe()}): "
                           f"{probed and probed['what']}")
    table, launch = phase_table(probed["rows"], copy.PROBE_PHASES, copy.PROBE_GLOBAL_START, copy.PROBE_GLOBAL_END)
    splits = probed_plan.launch.num_splits
    tiles = math.ceil(math.ceil(kv_len / variant.block_n) / splits)
    record.update(probed_kernel=probed["kernel"], programs=probed["rows"].shape[0], tiles_per_program=tiles,
                  phases=table, launch=launch)
    return record


def print_record(record, file=None):
    file = file or sys.stdout
    print(f"\n({record['batch']}, {record['kv_len']}) {record['choice']}: event {record['event_us']:.1f} us, "
          f"kernels {record['kernel_sum_us']:.1f} us, gaps {record['event_us'] - record['kernel_sum_us']:.1f} us",
          file=file)
    for name, us in record["kernels_us"].items():
        print(f"    {us:8.1f} us  {name[:90]}", file=file)
    if isinstance(record["phases"], str):
        print(f"  {record['phases']}", file=file)
        return
    launch = record["launch"]
    print(f"  {record['probed_kernel']}, {record['variant']}; {record['programs']} programs x "
          f"{record['tiles_per_program']} tiles; probed call {record['probed_event_us']:.1f} us; kernel span "
          f"{launch['span_ns'] / 1e3:.1f} us, start spread {launch['start_spread_ns'] / 1e3:.1f} us, "
          f"{launch['cycles_per_ns']:.2f} cycles/ns ({record['clock']} clock)", file=file)
    if "plain_variant" in record:
        print(f"  (submission.py itself ran {record['plain_variant']})", file=file)
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
    copy = instrument.load_copy("clock")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    records = []
    for batch, kv_len, seed in parse_cases(options.cases):
        for choice in parse_choices(options.choices, sub.choose(batch, kv_len, device)):
            records.append(probe_case(sub, copy, batch, kv_len, seed, options.runs, choice))
            print_record(records[-1])
    if options.json:
        Path(options.json).write_text(json.dumps(records, indent=1) + "\n")
    return records


if __name__ == "__main__":
    main()
