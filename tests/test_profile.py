"""`python eval.py profile`: per case one call timed as the runner times it and one under
torch.profiler; each GPU kernel's time, their sum and the gap (event time - sum). The
computation is pure (kernel_breakdown, format_kernel_table, device_kernels) and tested here
on synthetic profiler events; the command on a CPU, where kernel times need a GPU.
tools/mutations_harness.py lists a deliberate bug for each rule.
"""
import json
import re
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

import eval as harness
from test_eval_modes import EXACT_SUBMISSION, TINY_CASE, harness_dir, with_submission  # noqa: F401 - a fixture
from test_harness import run_eval

# one call's GPU activity, out of order as a profiler may list it: (name, start us, duration us)
KERNELS = [("_mla_combine_kernel", 1012.5, 2.0), ("_quantize_q_kernel", 1000.0, 1.5),
           ("_mla_scaled_split_kernel", 1003.0, 8.0)]


def test_kernel_breakdown_sums_kernels_and_takes_the_gap_from_the_event_time():
    breakdown = harness.kernel_breakdown(KERNELS, event_us=16.0)
    assert [row["name"] for row in breakdown["kernels"]] == ["_quantize_q_kernel", "_mla_scaled_split_kernel",
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
              event("_mla_split_kernel", DeviceType.CUDA, 8.0, 18.0)]
    assert harness.device_kernels(events) == [("Memset (Device)", 4.0, 0.5), ("_mla_split_kernel", 8.0, 10.0),
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
