"""Triton's intra-kernel profiler (Proton, instrumentation mode) against the hand-made phase
probes of tools/phase_probe.py, on one case, side by side.

    python tools/proton_probe.py [--case 4x8192] [--runs 20] [--out DIR]     # on a GPU
    python tools/proton_probe.py --aot [--out DIR] [--triton installed|DIR]  # on a CPU

On a GPU (one command; writes everything under --out, default $OUT or ./out):
  1. the case in its dispatched choice, probed as tools/phase_probe.py probes it (the
     instrumented copy of tools/instrument.py, mode `clock`: each program waits for a
     phase's data, synchronizes its warps, stores the SM clock; the median over programs of
     the time since the program started);
  2. the same call from two more copies of submission.py (tools/instrument.py, modes
     `proton-plain` and `proton-waited`) in which every `# phase` marker is a Proton point
     instead (a zero-length `triton.profiler.language` scope named after the phase, tile
     phases by their step, recorded by each warp): `plain`, the point alone (Proton as it
     is meant to be used: the clock read where the instruction stream reaches it, not when
     the phase's data has arrived), and `waited`, the hand probe's wait (the data's sum
     stored, a barrier) before the point (the same placement as the hand probes: only the
     clock differs);
  3. per copy: one warm call in a Proton session of its own (the instrumented build), one
     call in a second session written as a chrome trace (proton_<copy>.chrome_trace), and
     the event time of the instrumented call in a third (its trace not kept) beside
     submission.py's call (no probes); the trace's points per program (CTA): for
     each phase the latest warp's time since the program's earliest `start`, the tile
     phases' first occurrence as tile0 and their last as the last tile; the median over
     programs.
  Prints the three breakdowns side by side and writes proton_probe.json (device, versions,
  date, command, every table, the raw trace's first events and its keys).
With --aot (a CPU is enough): both copies' split kernels for the case's sm_90 variant (the
BF16 family's default launch, the first variant) built ahead of time with Proton's
instrumentation passes (as the instrumentation hook registers them: Triton 3.6's way or 3.9's,
with the H200's shared memory), to check that the instrumented kernel compiles with this
Triton; prints the Proton ops found in the TTGIR and PTX.

The copies leave submission.py untouched; a marker the transform cannot place is an error
(tools/instrument.py).
"""
import argparse
import datetime
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import torch  # noqa: E402

import instrument  # noqa: E402
from common import add_triton_option  # noqa: E402

# the names of the Proton points (a tile phase's point is its step's name: tile0 and the last
# tile are told apart in the trace by their order)
POINT_NAMES = ("start", "range", "q", *instrument.TILE_STEPS, "tiles done", "written", "merged", "end")
TILE_POINTS = instrument.TILE_STEPS
PHASE_ORDER = instrument.PHASES
COPIES = {"plain": "proton-plain", "waited": "proton-waited"}  # label -> tools/instrument.py mode
# H200 (sm_90) shared memory per block, opt-in (the instrumentation passes size their buffer by it)
H200_MAX_SHARED_BYTES = 232448


def proton_source(text: str, wait: bool) -> str:
    """submission.py's text with every `# phase` marker a Proton point (tools/instrument.py,
    mode proton-waited or proton-plain); InstrumentError on a marker it cannot place."""
    return instrument.instrumented_source(text, COPIES["waited" if wait else "plain"])


def load_copy(wait: bool, folder: Path):
    """Import a Proton copy of submission.py (a file of its own: Triton reads kernels' source)."""
    return instrument.load_copy(COPIES["waited" if wait else "plain"], folder=folder)


def trace_events(path: Path) -> list:
    data = json.loads(path.read_text())
    return data["traceEvents"] if isinstance(data, dict) else data


def event_cycles(event) -> float:
    """An event's start in SM clock cycles, within its CTA: Proton writes ts = (cycle + an
    offset per CTA) / freq with freq = its args' "Frequency (MHz)" (it assumes 1000), so
    ts x freq is the cycle count (the offset cancels within a CTA)."""
    freq = float((event.get("args") or {}).get("Frequency (MHz)", 1000.0))
    return float(event["ts"]) * freq


def trace_phases(events, cycles_per_ns, phase_order):
    """Points of one launch's chrome trace -> ({phase: {programs, median_ns, p90_ns,
    median_cycles}}, summary). Programs are the trace's pids ("<kernel> Core<i> CTA<j>"),
    warps the number in its tids ("warp <k> (line <l>)"); per program each phase's time is
    the latest warp's since the earliest `start` of the program; tile points: a warp's
    first occurrence is tile0's, its last the last tile's (when it has several). Cycles
    become ns at cycles_per_ns (the hand probes' SM clock over the global timer)."""
    names = set(POINT_NAMES)
    points = [e for e in events if e.get("name") in names and "ts" in e and e.get("ph", "X") == "X"]
    programs = {}
    for event in points:
        warp = re.match(r"warp (\d+)", str(event.get("tid", "")))
        warp = int(warp[1]) if warp else event.get("tid")
        programs.setdefault(event.get("pid"), {}).setdefault(warp, []).append((event_cycles(event), event["name"]))
    per_phase = {}
    for warps in programs.values():
        starts = [when for seq in warps.values() for when, name in seq if name == "start"]
        if not starts:
            continue
        origin = min(starts)
        latest = {}
        for seq in warps.values():
            seq.sort()
            for name in {name for _, name in seq}:
                times = [when for when, other in seq if other == name]
                found = ({f"tile0 {name}": times[0], **({f"last {name}": times[-1]} if len(times) > 1 else {})}
                         if name in TILE_POINTS else {name: times[0]})
                for phase, when in found.items():
                    latest[phase] = max(latest.get(phase, when), when)
        for phase, when in latest.items():
            per_phase.setdefault(phase, []).append(when - origin)
    table = {}
    for phase in phase_order:
        cycles = sorted(per_phase.get(phase, []))
        if cycles:
            table[phase] = {"programs": len(cycles), "median_cycles": statistics.median(cycles),
                            "median_ns": statistics.median(cycles) / cycles_per_ns,
                            "p90_ns": cycles[min(len(cycles) - 1, int(0.9 * len(cycles)))] / cycles_per_ns}
    return table, {"programs": len(programs), "points": len(points), "cycles_per_ns": cycles_per_ns}


def run_copy(module, label, sub, sub_record, case, runs, out_dir, scratch_dir):
    """One Proton copy on the GPU -> its record (trace table, event times, errors)."""
    import reference
    import triton.profiler as proton
    batch, kv_len, seed = case
    data = reference.generate_input(batch, 1, kv_len, seed)
    q, kv_data, qo_indptr, kv_indptr, config = data
    device = q.device
    choice = sub.Launch.parse(sub_record["choice"])

    def call(of):
        return of._run_choice(choice, q, kv_data, qo_indptr, kv_indptr, batch, config["sm_scale"])
    plan = call(module)[1]  # built and checked outside the sessions

    def launch():
        call(module)

    record = {"copy": label, "variant": plan.variant.describe()}
    for buffer in ("shared", "global"):
        try:
            mode = proton.mode.Default(buffer_type=buffer)
            proton.start(str(scratch_dir / f"proton_{label}_warm"), backend="instrumentation", data="trace", mode=mode)
            started = time.time()
            launch()
            torch.cuda.synchronize()
            proton.finalize()
            record.update(build_s=time.time() - started, buffer_type=buffer)
            break
        except Exception as exc:  # noqa: BLE001 - reported in the record, the other buffer tried
            record[f"error_{buffer}"] = f"{type(exc).__name__}: {exc}"[-2000:]
            try:
                proton.finalize()
            except Exception:  # noqa: BLE001
                pass
    if "buffer_type" not in record:
        return record
    trace_path = out_dir / f"proton_{label}"
    proton.start(str(trace_path), backend="instrumentation", data="trace", mode=mode)
    launch()
    torch.cuda.synchronize()
    proton.finalize()
    written = sorted(out_dir.glob(f"proton_{label}.*"))
    record["files"] = [path.name for path in written]
    proton.start(str(scratch_dir / f"proton_{label}_timed"), backend="instrumentation", data="trace", mode=mode)
    record["instrumented_event_us"] = statistics.median(module.time_call_us(launch, device) for _ in range(runs))
    proton.finalize()
    record["plain_event_us"] = statistics.median(sub.time_call_us(lambda: call(sub), device) for _ in range(runs))
    trace = next((path for path in written if "trace" in path.suffix or path.suffix == ".json"), None)
    if trace is None:
        record["error_trace"] = f"no chrome trace among {record['files']}"
        return record
    events = trace_events(trace)
    record["trace_keys"] = sorted({key for event in events for key in event})
    record["trace_first_events"] = events[:12]
    cycles_per_ns = sub_record["launch"]["cycles_per_ns"]
    try:
        record["phases"], record["trace_summary"] = trace_phases(events, cycles_per_ns, PHASE_ORDER)
    except Exception as exc:  # noqa: BLE001 - the raw trace is in out_dir for a second look
        record["error_analysis"] = f"{type(exc).__name__}: {exc}"
    return record


def print_side_by_side(hand, copies, file=sys.stdout):
    hand_rows = {row["phase"]: row for row in hand["phases"]}
    labels = [c["copy"] for c in copies]
    print(f"\n({hand['batch']}, {hand['kv_len']}) {hand.get('variant')}: {hand['programs']} programs x "
          f"{hand['tiles_per_program']} tiles; median over programs, us since the program's start", file=file)
    print(f"  {'phase':<16} {'hand probes':>12} " + " ".join(f"{'proton ' + label:>15}" for label in labels),
          file=file)
    for phase in PHASE_ORDER:
        cells = [f"{hand_rows[phase]['median_ns'] / 1e3:12.2f}" if phase in hand_rows else f"{'-':>12}"]
        for c in copies:
            row = (c.get("phases") or {}).get(phase)
            cells.append(f"{row['median_ns'] / 1e3:15.2f}" if row else f"{'-':>15}")
        if any(cell.strip() != "-" for cell in cells):
            print(f"  {phase:<16} " + " ".join(cells), file=file)
    print(f"  {'call, event us':<16} {hand['probed_event_us']:12.1f} " + " ".join(
        f"{c.get('instrumented_event_us', float('nan')):15.1f}" for c in copies)
        + f"   (plain call {hand['event_us']:.1f})", file=file)
    for c in copies:
        for key in sorted(k for k in c if k.startswith("error")):
            print(f"  proton {c['copy']} {key}: {c[key][:300]}", file=file)


def gpu_main(options, out_dir):
    import triton

    import phase_probe
    import submission as sub
    from common import parse_cases
    case = parse_cases(options.case)[0]
    device = torch.device("cuda")
    choice = sub.choose(case[0], case[1], device)
    started = time.time()
    hand = phase_probe.probe_case(sub, instrument.load_copy("clock"), *case, options.runs, choice)
    phase_probe.print_record(hand)
    copies = []
    with tempfile.TemporaryDirectory(prefix="proton-copies-") as folder:
        for wait in (False, True):
            module = load_copy(wait, Path(folder))
            copies.append(run_copy(module, "waited" if wait else "plain", sub, hand, case, options.runs, out_dir,
                                   Path(folder)))
            print(f"proton {copies[-1]['copy']}: done ({time.time() - started:.0f} s so far)", flush=True)
    print_side_by_side(hand, copies)
    record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python", *sys.argv]), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "triton": triton.__version__, "case": list(case),
              "hand_probes": hand, "proton": copies, "seconds": time.time() - started}
    (out_dir / "proton_probe.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    print(f"\nwrote {out_dir / 'proton_probe.json'} ({record['seconds']:.0f} s)")
    return record


def aot_main(options, out_dir):
    """Both copies' split kernels for the case's sm_90 dispatched variant, built with Proton's
    instrumentation passes registered by hand (no driver needed)."""
    import triton
    from triton.backends import backends
    from triton.profiler import mode as proton_mode
    from triton.profiler.flags import flags as proton_flags
    from triton.profiler.hooks import instrumentation as proton_hook
    from triton._C.libtriton import passes as triton_passes
    from triton._C.libtriton import proton as triton_proton

    import compile_report
    from common import parse_cases
    batch, kv_len, _ = parse_cases(options.case)[0]
    mode = proton_mode.Default()

    def to_llvmir_passes(pm):
        triton_proton.add_convert_proton_to_protongpu(
            pm, mode.metric_type, mode.sampling_strategy, mode.sampling_options, mode.granularity,
            mode.buffer_strategy, mode.buffer_type, mode.buffer_size, H200_MAX_SHARED_BYTES,
            proton_hook.InstrumentationHook.profile_buffer_size, proton_hook.InstrumentationHook.profile_buffer_alignment,
            True)
        triton_passes.common.add_cse(pm)
        triton_proton.add_allocate_proton_shared_memory(pm)

    def to_llvm_passes(pm):
        if hasattr(proton_hook, "Instrumentation"):  # Triton 3.6: the scratch buffer is a pass of its own
            triton_proton.add_allocate_proton_global_scratch_buffer(pm)
        triton_proton.add_convert_proton_nvidia_gpu_to_llvm(pm)

    if hasattr(proton_hook, "Instrumentation"):  # Triton 3.6's hook: an object on the backend's compiler
        backends["nvidia"].compiler.instrumentation = proton_hook.Instrumentation(
            {"ttgpuir_to_llvmir": to_llvmir_passes, "llvmir_to_llvm": to_llvm_passes})
    else:  # Triton 3.9's: callbacks registered per point (as InstrumentationHook.activate does)
        from triton._instrumentation import register_instrumentation
        for point, callback in (("load-dialects", triton_proton.load_dialects),
                                ("ttgpuir-to-llvmir", to_llvmir_passes), ("llvmir-to-llvm", to_llvm_passes)):
            register_instrumentation(point=point, backend="nvidia", callback=callback)
    proton_flags.instrumentation_on = True
    triton.knobs.compilation.instrumentation_mode = str(mode)
    rows = []
    num_sms = compile_report.TARGETS["sm90"][2]
    with tempfile.TemporaryDirectory(prefix="proton-copies-") as folder:
        for wait in (False, True):
            module = load_copy(wait, Path(folder))
            launch = module.default_launch(batch, kv_len, num_sms)  # sm_90 dispatches the BF16 family's default
            variant = module.variants_for("sm_90", "cuda", launch.block_n, launch.num_warps, launch.num_stages,
                                          launch.scores, launch.merge)[0]
            row = {"copy": "waited" if wait else "plain", "variant": variant.describe(), "triton": triton.__version__}
            try:
                compiled = instrument.compile_split(module, variant, "sm90", {"instrumentation_mode": str(mode)})
                ttgir, ptx = compiled.asm["ttgir"], compiled.asm["ptx"]
                row.update(proton_records_ttgir=ttgir.count("proton.record"),
                           clock_reads_ptx=len(re.findall(r"%clock|globaltimer", ptx)),
                           profile_scratch_size=getattr(compiled.metadata, "profile_scratch_size", None),
                           shared=compiled.metadata.shared)
            except Exception as exc:  # noqa: BLE001 - the row says what failed
                row["error"] = f"{type(exc).__name__}: {exc}"[-3000:]
            rows.append(row)
            print(json.dumps(row), flush=True)
    (out_dir / "proton_aot.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all("error" not in row for row in rows) else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", default="4x8192", help="BATCHxKV_LEN (default 4x8192)")
    parser.add_argument("--runs", type=int, default=20, help="event-timed calls per figure (median)")
    parser.add_argument("--out", default=os.environ.get("OUT", "out"), help="folder for the results")
    parser.add_argument("--aot", action="store_true", help="CPU: build the instrumented kernels for sm_90 only")
    add_triton_option(parser)
    options = parser.parse_args(argv)
    out_dir = Path(options.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if options.aot:
        return aot_main(options, out_dir)
    if not torch.cuda.is_available():
        print("proton_probe: needs a GPU (or --aot on a CPU)", file=sys.stderr)
        return 2
    gpu_main(options, out_dir)
    return 0


if __name__ == "__main__":
    if "--aot" in sys.argv[1:]:  # builds: with the runner's Triton unless --triton names another
        from common import run_with_triton
        run_with_triton(__file__)
    sys.exit(main())
