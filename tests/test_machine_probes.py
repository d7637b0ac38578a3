"""The machine probes (submission.py, "Machine probes"): on a CPU the report says they are not
timed; their kernels run in Triton's interpreter here at small sizes, timed by a fake timer
that costs each launch from what it does (a launch, each cold or warm line of a chase, the
bytes of a copy), so each figure must come out as the arithmetic says; the budget, a failing
probe, and tools/machine_probe_check.py's checks. Their AOT builds for gfx950 and sm_90 are in
tests/test_compile_targets.py, their block through ingest in tests/test_ingest.py, the offline
comparison with the model in tests/test_latency_model.py. tools/mutations.py lists a
deliberate bug for each rule."""
import json
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import machine_probe_check as check  # noqa: E402

CPU = torch.device("cpu")
# The probe kernels run on CPU tensors at interpreter sizes here; on a GPU machine Triton launches
# them on the GPU only, and tools/machine_probe_check.py runs the real probes there.
INTERPRETER_ONLY = pytest.mark.skipif(torch.cuda.is_available(), reason="the probes on CPU tensors, in the interpreter")
LAUNCH_US, COLD_US, WARM_US, ATOMIC_WARM_US, COPY_GBS = 3.0, 0.9, 0.25, 0.4, 5000.0


@pytest.fixture
def sub(fresh_plans, monkeypatch):
    monkeypatch.setattr(fresh_plans.STATE, "tuned", {})
    monkeypatch.setattr(fresh_plans.STATE, "tune_log", fresh_plans.fresh_tune_log())
    monkeypatch.setattr(fresh_plans.STATE, "machine", {})
    return fresh_plans


def small(sub):
    """Sizes the interpreter runs in well under a second."""
    return sub.ProbeSizes(copy_bytes=2 * sub.COPY_BLOCK * 4, hbm_region_bytes=64 << 10, hbm_hops=24,
                          l2_bytes=4 << 10)


class Recorded:
    """A kernel whose launches are recorded (name, grid, args) before they run (and announced
    to on_launch(name))."""

    def __init__(self, kernel, name, calls, on_launch=None):
        self.kernel, self.name, self.calls, self.on_launch = kernel, name, calls, on_launch

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.calls.append((self.name, grid, args))
            if self.on_launch is not None:
                self.on_launch(self.name)
            return self.kernel[grid](*args, **kwargs)
        return launch


def chase_us(args):
    """A chase's fake cost: each line cold on its first read in the run (the flush before it),
    warm after."""
    region, _, index, hops, atomic, _, _ = args
    seen, cost = set(), 0.0
    for _ in range(hops):
        cost += (ATOMIC_WARM_US if atomic else WARM_US) if index in seen else COLD_US
        seen.add(index)
        index = int(region[index])
    return cost


OUTLIER_US = 100.0  # the last of every PROBE_RUNS timed runs is this much slower (the medians and the best ignore it)


def fake_machine(sub, monkeypatch, clock=None, per_run_s=0.0, build_s=0.0):
    """The probe kernels recorded, and a timer that runs each timed run and returns its fake
    cost, the last of each PROBE_RUNS an outlier (advancing `clock` by per_run_s, and by
    build_s at each kernel's first launch: its build)."""
    calls, runs, built = [], [], set()

    def on_launch(name):
        if clock is not None and name not in built:
            clock.now += build_s
        built.add(name)
    for name in ("_probe_empty_kernel", "_probe_chase_kernel", "_probe_copy_kernel"):
        monkeypatch.setattr(sub, name, Recorded(getattr(sub, name), name, calls, on_launch))

    def timer(run, device):
        calls.clear()
        run()
        if clock is not None:
            clock.now += per_run_s
        cost = {"_probe_empty_kernel": lambda args: 0.0, "_probe_chase_kernel": chase_us,
                "_probe_copy_kernel": lambda args: 2 * args[0].numel() * 4 / (COPY_GBS * 1e3)}
        runs.append(None)
        outlier_us = OUTLIER_US if len(runs) % sub.PROBE_RUNS == 0 else 0.0
        return outlier_us + sum(LAUNCH_US + cost[name](args) for name, _, args in calls)
    return timer


def driver(device):
    return {"units": 256, "clock_mhz": 2400.0, "memory_clock_mhz": 1900.0, "memory_bus_bits": 8192, "xcds": None}


def test_on_a_cpu_the_report_says_the_probes_are_not_timed(sub, monkeypatch, capsys):
    monkeypatch.setenv("MLA_TUNE", "1")
    sub.tune_first_call(4, 1024, CPU, lambda choice: None, timer=lambda run, device: 1.0,
                        profiler=lambda run, device: [])
    line = [text for text in sub.tuning_report().splitlines() if text.startswith("submission: machine probes")]
    assert len(line) == 1 and line[0].endswith("not timed on a cpu (Triton's interpreter: no device to time)")
    assert line[0] in capsys.readouterr().err
    assert sub.MACHINE_BEGIN not in sub.tuning_report()  # nothing measured: no block


def test_the_probes_run_once_per_process(sub, monkeypatch, capsys):
    sub.machine_probes(CPU)
    monkeypatch.setattr(sub.STATE, "tune_log", sub.fresh_tune_log())
    sub.machine_probes(CPU)
    assert capsys.readouterr().err.count("submission: machine probes") == 1


@INTERPRETER_ONLY
def test_the_probes_figures_follow_from_the_timed_runs(sub, monkeypatch):
    """Each figure from the fake costs: the medians of the launches, the copy's bytes read
    and written over its best time, the HBM chase's time less one launch per hop, the L2
    and atomic chases' warm hops alone; the chases' kernels ran for real and ended where
    their cycles say."""
    sizes = small(sub)
    record = sub.measure_machine(CPU, sizes, timer=fake_machine(sub, monkeypatch), driver=driver)
    assert not record["failed"] and not record["skipped"], record
    found = record["figures"]
    copy_us = LAUNCH_US + 2 * sizes.copy_bytes / (COPY_GBS * 1e3)
    expected = {"launch_us": LAUNCH_US, "two_launches_us": 2 * LAUNCH_US, "copy_gbs": 2 * sizes.copy_bytes / copy_us / 1e3,
                "hbm_round_trip_us": COLD_US, "l2_round_trip_us": WARM_US, "atomic_round_trip_us": ATOMIC_WARM_US,
                **driver(CPU)}
    assert found == pytest.approx(expected)


@INTERPRETER_ONLY
def test_a_probe_that_fails_is_reported_and_the_others_go_on(sub, monkeypatch):
    """A chase one hop short (what a kernel that skipped a read does) ends elsewhere: its
    probe is reported failed, with where it ended; the launch and copy probes still hold."""
    timer = fake_machine(sub, monkeypatch)
    chase = sub._probe_chase_kernel

    class OneShort:
        def __getitem__(self, grid):
            return lambda region, end, start, hops, *rest, **kwargs: chase[grid](region, end, start, hops - 1, *rest,
                                                                                **kwargs)
    monkeypatch.setattr(sub, "_probe_chase_kernel", OneShort())
    record = sub.measure_machine(CPU, small(sub), timer=timer, driver=driver)
    assert [name for name, _ in record["failed"]] == ["HBM chase", "L2 chase", "atomic chase"]
    assert all("ended at word" in why for _, why in record["failed"])
    assert {"launch_us", "copy_gbs"} <= set(record["figures"])
    lines = sub.machine_lines(record)
    assert "  probe failed: HBM chase: RuntimeError: the chase of 23 ended at word" in "\n".join(lines)


@INTERPRETER_ONLY
@pytest.mark.parametrize("atomic", [0, 1])
def test_a_chase_never_reads_outside_its_region_whatever_it_reads(sub, atomic):
    """Every index is masked into the region (a power of two of words): a chain of garbage
    values, or a start outside, reads only inside it (the interpreter's bounds guard, the
    autouse fixture, fails the test otherwise) and ends inside it."""
    words = 1024
    region = torch.randint(-2**31, 2**31 - 1, (words,), dtype=torch.int32, generator=torch.Generator().manual_seed(3))
    end = torch.empty(1, dtype=torch.int32)
    sub._probe_chase_kernel[(1,)](region, end, words + 5, 50, atomic, 0, words - 1, num_warps=1)
    assert int(end) in set(region.tolist())


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@INTERPRETER_ONLY
def test_the_budget_skips_what_would_pass_it(sub, monkeypatch):
    """Each timed run costs 0.12 s of wall time here (5 per probe: 0.6 s, the launch probe
    1.2 s): after the launch and the copy (1.8 s) the next probe would pass the 2 s, so it
    and the rest are skipped, and the report names them."""
    clock = FakeClock()
    timer = fake_machine(sub, monkeypatch, clock, per_run_s=0.12)
    record = sub.measure_machine(CPU, small(sub), clock=clock, timer=timer, driver=driver)
    assert record["skipped"] == ["HBM chase", "L2 chase", "atomic chase"]
    assert record["wall_s"] == pytest.approx(1.8)
    assert "  probe skipped for the budget: atomic chase" in sub.machine_lines(record)


@INTERPRETER_ONLY
def test_a_probe_on_a_built_kernel_is_not_charged_its_build(sub, monkeypatch):
    """Each kernel's first launch costs 0.5 s of wall time here (its build), each timed run
    0.01 s: the launch probe takes 0.6 s, the copy and the HBM chase 0.55 s each (each builds
    its kernel), 1.7 s in all; the L2 and the atomic chases run the chase kernel already
    built, so each is charged the longest probe's own runs (0.1 s), not a build, and both run
    (1.9 s in all; charged the chase's build, the L2 chase would pass the 2 s: the H200's first run skipped
    both so)."""
    clock = FakeClock()
    timer = fake_machine(sub, monkeypatch, clock, per_run_s=0.01, build_s=0.5)
    record = sub.measure_machine(CPU, small(sub), clock=clock, timer=timer, driver=driver)
    assert record["skipped"] == [] and not record["failed"], record
    assert record["wall_s"] == pytest.approx(1.9)
    assert {"l2_round_trip_us", "atomic_round_trip_us"} <= record["figures"].keys()


@INTERPRETER_ONLY
@pytest.mark.parametrize("build_s, skipped", [(0.5, []), (0.62, ["HBM chase", "L2 chase", "atomic chase"])])
def test_a_probe_on_an_unbuilt_kernel_is_charged_its_build(sub, monkeypatch, build_s, skipped):
    """The edge of the build charge: each kernel's first launch costs build_s, each timed run 0.01
    s. The launch probe and the copy take 2 * build_s + 0.15 s; the HBM chase builds the chase
    kernel, so it is charged the longest build (build_s) beside the longest probe's own runs (0.05
    s): it runs while 3 * build_s + 0.2 <= 2 s. At 0.5 s it does (1.7 s), and the L2 and atomic
    chases after it on the built kernel; at 0.62 s it would end at 2.06 s, so it and the two after
    it (their kernel still unbuilt) are skipped, and the probes end at 1.39 s. Without the charge
    the HBM chase would be estimated at 1.44 s, run, and end past the budget."""
    clock = FakeClock()
    timer = fake_machine(sub, monkeypatch, clock, per_run_s=0.01, build_s=build_s)
    record = sub.measure_machine(CPU, small(sub), clock=clock, timer=timer, driver=driver)
    assert record["skipped"] == skipped and not record["failed"], record
    assert record["wall_s"] <= sub.PROBE_BUDGET_S
    assert record["wall_s"] == pytest.approx(2 * build_s + 0.15 if skipped else 3 * build_s + 0.4)


@INTERPRETER_ONLY
def test_the_report_lines_name_every_figure_and_end_with_the_block(sub, monkeypatch):
    import eval as harness
    record = sub.measure_machine(CPU, small(sub), timer=fake_machine(sub, monkeypatch), driver=driver)
    lines = sub.machine_lines(record)
    text = "\n".join(lines)
    assert "launch: empty 3.00 us, two back to back 6.00 us" in text
    assert "HBM (cold lines) 0.900 us, L2 0.250 us; returning device-scope atomics (L2) 0.400 us" in text
    assert "driver: 256 CUs, clock 2400 MHz" in text and "XCDs not reported" in text
    assert lines[-1].splitlines()[0] == sub.MACHINE_BEGIN and lines[-1].endswith(sub.MACHINE_END)
    machine, machine_on = harness.parse_machine_block(lines[-1], "report")
    printed = {**record["figures"], "probes_wall_s": record["wall_s"]}
    assert set(machine) == {"cpu"} and machine["cpu"].keys() == printed.keys() and machine["cpu"]["xcds"] is None
    assert {k: v for k, v in machine["cpu"].items() if v is not None} == \
        pytest.approx({k: v for k, v in printed.items() if v is not None}, rel=1e-4)
    assert machine_on["cpu"].endswith(f"machine probes, source {sub.SOURCE_ID}")


# --- tools/machine_probe_check.py -------------------------------------------------------

def test_the_h200_checks_compare_each_figure_within_its_tolerance():
    floors = {"call_floor_us": 3.0, "copy_rate_gbs": 4000.0}
    good = check.compare({"launch_us": 3.5, "copy_gbs": 3700.0, "hbm_round_trip_us": 0.6}, floors, 0.5)
    assert [row["within"] for row in good] == [True, True, True]
    bad = check.compare({"launch_us": 3.7, "copy_gbs": 3500.0, "hbm_round_trip_us": 0.63}, floors, 0.5)
    assert [row["within"] for row in bad] == [False, False, False]
    assert not any(row["within"] for row in check.compare({}, floors, None))


def test_the_phase_probes_round_trip_is_the_range_of_the_least_contended_case():
    """The H200's phase probes (results/h200_machine_probe_phase.json): (4, 1024) alone runs 64
    programs, its range 0.286 us; the other cases' 256 or 512 programs read 0.40-0.53."""
    records = json.loads((ROOT / "results" / "h200_machine_probe_phase.json").read_text())
    assert check.phase_round_trip_us(records) == pytest.approx(0.2857, abs=1e-4)
    tied = [dict(records[1], programs=64), records[0]]  # two cases of 64 programs: their median
    assert check.phase_round_trip_us(tied) == pytest.approx((0.2857 + 0.4721) / 2, abs=1e-4)


@INTERPRETER_ONLY
def test_the_runner_log_checks_find_the_lines_and_hold_the_wall_time(sub, monkeypatch):
    record = sub.measure_machine(CPU, small(sub), timer=fake_machine(sub, monkeypatch), driver=driver)
    log = "\n".join("stderr: " + line for text in sub.machine_lines(record) for line in text.splitlines())
    passing = [("popcorn.txt", "test-count: 4\ncheck: pass\n")]
    assert all(row["ok"] for row in check.log_checks(log, passing))
    slow = log.replace(f"probes' wall time {record['wall_s']:.2f} s", "probes' wall time 2.40 s")
    late = log + "\n" + slow  # a second process of the run took 2.4 s
    assert [row["ok"] for row in check.log_checks(late)] == [True, True, False]
    assert not check.log_checks(log, [("popcorn.txt", "check: fail\n")])[-1]["ok"]
    older = (ROOT / "results" / "h200_runner_eval_benchmark_v12_firstcall_stderr.txt").read_text()
    assert [row["ok"] for row in check.log_checks(older)] == [False, False, False]
