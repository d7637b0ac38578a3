"""Where a call's time goes.

`python eval.py profile`: per case one call timed as the runner times it and one under
torch.profiler; each GPU kernel's time, their sum and the gap (event time - sum). The
computation is pure (kernel_breakdown, format_kernel_table, device_kernels) and tested here
on synthetic profiler events; the command on a CPU, where kernel times need a GPU.
tools/mutations_harness.py lists a deliberate bug for each rule.

`python tools/phase_probe.py`: the phase table of one launch's probe rows (pure, on synthetic
rows), and the command on a CPU, where it probes the dispatched variant through the
instrumented copy of submission.py (tools/instrument.py; its own tests: test_instrument.py).
"""
import json
import re
import sys
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

import eval as harness
from conftest import ROOT
from test_eval_modes import EXACT_SUBMISSION, TINY_CASE, harness_dir, with_submission  # noqa: F401 - a fixture
from test_harness import run_eval

sys.path.insert(0, str(ROOT / "tools"))
import instrument  # noqa: E402
import phase_probe  # noqa: E402

# one call's GPU activity, out of order as a profiler may list it: (name, start us, duration us)
KERNELS = [("_mla_combine_kernel", 1012.5, 2.0), ("_quantize_q_kernel", 1000.0, 1.5),
           ("_scaled_split_kernel", 1003.0, 8.0)]


def test_kernel_breakdown_sums_kernels_and_takes_the_gap_from_the_event_time():
    breakdown = harness.kernel_breakdown(KERNELS, event_us=16.0)
    assert [row["name"] for row in breakdown["kernels"]] == ["_quantize_q_kernel", "_scaled_split_kernel",
                                                            "_mla_combine_kernel"]
    assert [row["start_us"] for row in breakdown["kernels"]] == [0.0, 3.0, 12.5]
    assert [row["gpu_us"] for row in breakdown["kernels"]] == [1.5, 8.0, 2.0]
    assert breakdown["kernels_sum_us"] == 11.5 and breakdown["kernels_span_us"] == 14.5
    assert breakdown["event_us"] == 16.0 and breakdown["gap_us"] == pytest.approx(4.5)


def test_kernel_breakdown_without_kernels_has_no_gap():
    breakdown = harness.kernel_breakdown([], event_us=90e3)
    assert breakdown["kernels"] == [] and breakdown["kernels_sum_us"] == 0.0 and breakdown["gap_us"] is None


def test_the_table_lists_every_kernel_and_the_totals():
    table = harness.format_kernel_table("batchsize: 4; kvseqlen: 1024", harness.kernel_breakdown(KERNELS, 16.0),
                                        has_gpu=True)
    lines = table.splitlines()
    assert lines[0] == "case batchsize: 4; kvseqlen: 1024"
    assert lines[2].split() == ["_quantize_q_kernel", "0.0", "1.5"] and lines[4].split() == ["_mla_combine_kernel",
                                                                                             "12.5", "2.0"]
    totals = {line.rsplit(None, 1)[0].strip(): float(line.split()[-1]) for line in lines[5:]}
    assert totals == {"sum of kernels": 11.5, "span (first start to last end)": 14.5,
                      "event (one call, timed as the runner)": 16.0, "gap (event - sum: launch gaps, idle)": 4.5}


@pytest.mark.parametrize("has_gpu, says", [(False, "kernel times need a GPU"), (True, "recorded no GPU kernel")])
def test_the_table_without_kernels_says_why(has_gpu, says):
    table = harness.format_kernel_table("case", harness.kernel_breakdown([], 123.4), has_gpu=has_gpu)
    assert says in table and "123.4 us" in table


class Interval(SimpleNamespace):
    def elapsed_us(self):
        return self.end - self.start


def event(name, device_type, start, end, annotation=False):
    return SimpleNamespace(name=name, device_type=device_type, time_range=Interval(start=start, end=end),
                           is_user_annotation=annotation)


def test_device_kernels_are_the_gpu_activities_in_start_order():
    events = [event("aten::empty", DeviceType.CPU, 0.0, 5.0),
              event("_mla_combine_kernel", DeviceType.CUDA, 20.0, 22.0),
              event("custom_kernel", DeviceType.CUDA, 0.0, 30.0, annotation=True),
              event("Memset (Device)", DeviceType.CUDA, 4.0, 4.5),
              event("_bf16_split_kernel", DeviceType.CUDA, 8.0, 18.0)]
    assert harness.device_kernels(events) == [("Memset (Device)", 4.0, 0.5), ("_bf16_split_kernel", 8.0, 10.0),
                                             ("_mla_combine_kernel", 20.0, 2.0)]


def test_device_kernels_of_a_cpu_profile_are_none():
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(64, 64) @ torch.ones(64, 64)
    assert prof.events() and harness.device_kernels(prof.events()) == []


# exact attention, after a first call that takes 0.5 s (what builds and first-call tuning cost)
SLOW_FIRST_CALL = EXACT_SUBMISSION + '''
import time
_calls = []
_exact_kernel = custom_kernel


def custom_kernel(data):
    if not _calls:
        time.sleep(0.5)
    _calls.append(1)
    return _exact_kernel(data)
'''


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's run (interpreter)")
def test_profile_on_cpu_prints_the_report_as_text_and_writes_the_rows(harness_dir):  # noqa: F811
    """On a CPU without POPCORN_FD: the report as text only (no base64 line: that belongs to the
    protocol's fd), saying that kernel times need a GPU and how much of the call the CPU
    profiler's table covers; no profiler chatter on stderr and no "GPU kernels" in the
    progress line; the timed call comes after a warm one (the first call's 0.5 s is not in it)."""
    folder = with_submission(harness_dir, SLOW_FIRST_CALL)
    out = folder / "profile.json"
    code, lines, stdout, stderr = run_eval(folder, "profile", TINY_CASE + "\n", popcorn=False,
                                           args=("--json", str(out)))
    assert code == 0, stderr
    assert "benchmark.0.report" not in lines and lines["benchmark.0.spec"] == TINY_CASE
    assert not re.search(r"[A-Za-z0-9+*]{200}", stdout), "a base64 report on stdout"
    assert "kernel times need a GPU" in stdout and "Self CPU time total" in stdout
    assert "torch's operators only" in stdout
    assert "USDT" not in stderr and "profiler_start" not in stderr, stderr
    progress = [line for line in stderr.splitlines() if line.startswith("[1/1]")]
    assert progress and "host clock" in progress[0] and "GPU kernels" not in stderr, stderr
    record = json.loads(out.read_text())
    row, = record["rows"]
    assert record["mode"] == "profile" and record["device"] and row["spec"] == TINY_CASE
    assert row["report"].startswith(f"case {TINY_CASE}\n  kernel times need a GPU")
    assert "Self CPU time total" in row["report"]
    assert 0 < row["event_us"] < 0.4e6 and row["kernels"] == [] and row["gap_us"] is None


# --- tools/phase_probe.py ----------------------------------------------------------------

def probe_row(start, cycles, global_start_ns, global_end_ns):
    """One program's probe row: its clocks at start + each phase's cycles (None: unset)."""
    row = [instrument.UNSET] * instrument.SLOTS
    for phase, cycle in zip(instrument.PHASES, cycles):
        row[instrument.PHASES.index(phase)] = instrument.UNSET if cycle is None else start + cycle
    row[instrument.GLOBAL_START], row[instrument.GLOBAL_END] = global_start_ns, global_end_ns
    return row


def test_the_phase_table_takes_each_phase_since_its_programs_start_at_the_measured_clock_rate():
    # two programs at 2 cycles per ns (end - start: 2000 cycles over 1000 ns); the second has
    # one tile (no last tile's phases) and is not the sequence's last (no merge)
    first = [0, 400, 600, 800, 1000, 1100, 1200, 1400, 1500, 1600, 1700, 1800, 1900, 1950, 2000]
    second = [0, 600, 700, 900, 1000, 1100, 1300, None, None, None, None, 1400, 1500, None, 2000]
    rows = torch.tensor([probe_row(10_000, first, 50_000, 51_000), probe_row(90_000, second, 50_300, 51_300)])
    table, launch = phase_probe.phase_table(rows, instrument.PHASES, instrument.GLOBAL_START, instrument.GLOBAL_END)
    by_phase = {row["phase"]: row for row in table}
    assert [row["phase"] for row in table] == list(instrument.PHASES)
    assert launch == {"span_ns": 1300, "start_spread_ns": 300, "cycles_per_ns": 2.0}
    assert by_phase["range"]["median_ns"] == pytest.approx(250.0) and by_phase["range"]["p90_ns"] == 300.0
    assert by_phase["last loaded"]["programs"] == 1 and by_phase["last loaded"]["median_ns"] == 700.0
    assert by_phase["merged"]["programs"] == 1 and by_phase["end"]["median_ns"] == 1000.0
    assert by_phase["q"]["step_ns"] == pytest.approx(by_phase["q"]["median_ns"] - by_phase["range"]["median_ns"])


def test_a_kernel_launched_twice_is_summed():
    times = SimpleNamespace(kernel_times_us=lambda run, device: [("_bf16_split_kernel", 4.0),
                                                                 ("_mla_combine_kernel", 1.5),
                                                                 ("_bf16_split_kernel", 2.5)])
    assert phase_probe.kernel_sums_us(times, None, None) == {"_bf16_split_kernel": 6.5, "_mla_combine_kernel": 1.5}


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU's run (interpreter)")
def test_phase_probe_on_cpu_probes_the_dispatched_variant_and_writes_the_records(fresh_plans, tmp_path, capsys):
    out = tmp_path / "probe.json"
    record, = phase_probe.main(["--cases", "2x100", "--runs", "1", "--json", str(out)])
    assert json.loads(out.read_text()) == [json.loads(json.dumps(record))]
    choice = fresh_plans.choose(2, 100, torch.device("cpu"))  # one split of two 64-token tiles: DIRECT
    assert record["choice"] == str(choice) and (choice.block_n, choice.num_warps, choice.num_splits) == (64, 4, 1)
    assert record["probed_kernel"] == "_bf16_split_kernel" and record["clock"] == "amd"
    plan, = fresh_plans.STATE.plans.values()
    assert record["variant_fields"] == plan.variant._asdict() and "plain_variant" not in record
    assert record["programs"] == 2 and record["tiles_per_program"] == 2
    assert [row["phase"] for row in record["phases"]] == [phase for phase in instrument.PHASES if phase != "merged"]
    assert all(row["programs"] == 2 for row in record["phases"])
    assert set(record["kernels_us"]) == {"_bf16_split_kernel"}
    printed = capsys.readouterr().out
    assert "_bf16_split_kernel, bf16 family, portable conversion" in printed and "(amd clock)" in printed
    assert all(f"  {phase:<16} " in printed for phase in ("start", "tile0 values", "last values", "written", "end"))
