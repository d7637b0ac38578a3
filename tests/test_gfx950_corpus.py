"""The gfx950 emulator held to the hardware: the corpus (tools/gfx950/corpus), small kernels
of our own that Triton builds for gfx950, run on the emulator against numpy: every case built
with the runner's Triton 3.6.0, and with this Python's own (3.9.0) a representative subset
(NEWER_IN_CI; GFX950_CORPUS_NEWER=all runs every case, as `python tools/gfx950/coverage.py`
does).

Triton's gfx950 code generation is tested on the hardware upstream, so a corpus kernel the
emulator runs to a wrong answer is an emulator bug. The same runs give the coverage of
submission.py's instruction forms (tools/gfx950/coverage.py, docs/gfx950_coverage.md), and
behaviours every emulator of this machine must have: an unknown opcode stops the run naming
it, a removed wait reads stale data (which the corpus check catches), a load past a buffer's
num_records reads zeros, and a load to LDS masked by an out-of-range M0 (Triton 3.8+) drops
its lanes, counted, while its global address stays bounds-checked.
"""
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gfx950  # noqa: E402
from gfx950 import coverage  # noqa: E402
from gfx950.corpus import CASES  # noqa: E402

BY_NAME = {case.name: case for case in CASES}
RUNNER, NEWER = coverage.RUNNER, coverage.NEWER
RECORDED = coverage.recorded_results()   # results/gfx950_coverage.json: the last `coverage.py --write`
RECORDED_NEWER = next(version for version in RECORDED if version != RUNNER)
# where this Python's own Triton is the runner's (the H200 image) there is no newer Triton to build with: the table's
# newer half is then the record's
NEWER_HERE = NEWER != RUNNER
# the cases CI runs with the newer Triton too: the forms 3.9 builds differently (masked async copies by M0, the
# dispatch-pointer entry state, mixed-precision FMAs, f64 and 64-bit atomics, the scaled conversions) and one of
# each kind of kernel; every case with GFX950_CORPUS_NEWER=all (or `python tools/gfx950/coverage.py`)
NEWER_IN_CI = ("async_copy", "pipelined_matmul", "atomic_xchg", "half", "layer_norm", "matmul_f16", "fp8", "int64",
               "atomics", "decode", "dot_scaled_e4m3_e2m1_32", "gluon_attention", "merge_partials", "byte_ops")
NEWER_CASES = sorted(BY_NAME) if os.environ.get("GFX950_CORPUS_NEWER") == "all" else NEWER_IN_CI

_RESULTS = {}


def corpus_result(name, version=RUNNER):
    """(executed forms, error or None) of corpus case `name` built with Triton `version` (run once a session)."""
    if (name, version) not in _RESULTS:
        result = coverage.run_corpus([BY_NAME[name]], triton=coverage.BUILDERS[version])
        _RESULTS[name, version] = result[name]
    return _RESULTS[name, version]


def runner_results():
    return {name: corpus_result(name) for name, case in BY_NAME.items() if not case.runner}


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_corpus_kernel_matches_numpy(name):
    if BY_NAME[name].runner:
        pytest.skip(f"not built with Triton {RUNNER}: {BY_NAME[name].runner}")
    forms, error = corpus_result(name)
    assert error is None, error
    assert forms, f"{name} executed no instruction"


@pytest.mark.skipif(not NEWER_HERE, reason=f"this Python's own Triton is the runner's {RUNNER}")
@pytest.mark.parametrize("name", NEWER_CASES)
def test_corpus_kernel_matches_numpy_built_with_the_newer_triton(name):
    """The case built with this Python's own Triton runs right, executing the forms the committed record (the
    coverage table's source) lists for it."""
    forms, error = corpus_result(name, NEWER)
    assert error is None, error
    recorded = RECORDED.get(NEWER, {})
    assert name in recorded, f"{name}: not in results/gfx950_coverage.json (python tools/gfx950/coverage.py --write)"
    assert forms == recorded[name][0], (f"{name} built with Triton {NEWER} executes other forms than the record: "
                                        f"new {sorted(forms - recorded[name][0])[:5]}, "
                                        f"gone {sorted(recorded[name][0] - forms)[:5]} (coverage.py --write)")


def test_every_submission_form_runs_in_the_corpus():
    """Every instruction form of submission.py's gfx950 builds is executed by a corpus kernel
    whose answer matched numpy, but at most MAX_UNVALIDATED forms, each with its reason."""
    results = runner_results()
    table, uncovered = coverage.coverage(results)
    assert table, "no submission forms: the compile reports lack their 'forms'"
    assert coverage.problems(table, uncovered, {RUNNER: results}) == []


def test_the_coverage_table_is_current():
    """docs/gfx950_coverage.md is what `python tools/gfx950/coverage.py --write` makes now: the runner's half from
    this session's runs, the newer Triton's from its runs here where they ran, else from the record."""
    results = runner_results()
    newer = dict(RECORDED[RECORDED_NEWER])
    newer.update({name: result for (name, version), result in _RESULTS.items() if version == RECORDED_NEWER})
    table, uncovered = coverage.coverage(results)
    assert coverage.TABLE.read_text() == coverage.render(table, uncovered, {RUNNER: results, RECORDED_NEWER: newer})


def test_no_build_uses_the_packed_fma_form_gfx950_mis_executes():
    """gfx950 intermittently mis-executes v_pk_fma_f32 with op_sel:[0,1,0] (ROCm/rocMLIR PR 2459);
    the emulator runs the ISA as documented, so only this test keeps our builds off that form."""
    forms = coverage.submission_forms()
    assert not [f for f in forms if f.startswith("v_pk_fma_f32") and "op_sel:[0,1,0]" in f]


# --- behaviours, on corpus kernels ---------------------------------------------------------

def run_case(name, version=RUNNER, **emulate_options):
    """Run one corpus case with options for every launch (edit_asm, detectors, ...) -> its launches."""
    launches = []

    def launch(kernel, grid, *args, **kwargs):
        launches.append(gfx950.emulate(kernel, grid, *args, triton=coverage.BUILDERS[version], **emulate_options,
                                       **kwargs))
        return launches[-1]
    BY_NAME[name].run(launch, np.random.default_rng(0))
    return launches


def test_an_unknown_opcode_in_a_built_kernel_is_named():
    def rename(asm):
        return re.sub(r"\bv_add_u32_e32\b", "v_add_u33_e32", asm, count=1)
    with pytest.raises(gfx950.EmulationError, match=r"line \d+: v_add_u33_e32 .*opcode v_add_u33_e32 is not emulated"):
        run_case("integer_ops", edit_asm=rename)


def test_a_removed_wait_reads_stale_data_the_corpus_catches():
    """masked_tail with its first `s_waitcnt vmcnt(0)` gone: the loaded registers are read
    before the loads land, so the kernel computes on stale values."""
    def drop_wait(asm):
        lines = asm.splitlines()
        first = next(i for i, line in enumerate(lines) if line.strip().startswith("s_waitcnt vmcnt(0)"))
        return "\n".join(lines[:first] + lines[first + 1:])
    run_case("masked_tail")   # the unedited kernel passes
    with pytest.raises(AssertionError, match="masked_tail"):
        run_case("masked_tail", edit_asm=drop_wait)


def test_a_load_past_num_records_reads_zeros():
    """masked_tail with its loads' descriptor cut to 256 bytes (num_records 0x100; the stores'
    kept): lanes past it load 0 instead of faulting, so from the 64th element on the kernel
    stores f(0) = 12345."""
    def shrink_loads(asm):
        loads = re.search(r"s_mov_b32 (s\d+), 0x7ffffffe\n", asm)
        copy = re.search(rf"s_mov_b32 (s\d+), {loads[1]}\n", asm)
        assert loads and copy, "masked_tail's build no longer has one num_records copied to the stores' descriptor"
        asm = asm.replace(copy[0], f"s_mov_b32 {copy[1]}, 0x7ffffffe\n", 1)
        return asm.replace(loads[0], f"s_mov_b32 {loads[1]}, 0x100\n", 1)
    with pytest.raises(AssertionError, match=r"masked_tail: values: 936 of 1000 elements wrong, first at index "
                                             r"\(?64,?\)?: got np.int32\(12345\)"):
        run_case("masked_tail", edit_asm=shrink_loads)


# --- loads to LDS masked by M0 (Triton 3.8+) ----------------------------------------------------------------------
MASKED_COPY = re.compile(r"s_cselect_b32 m0, .*0x7fffffff")


@pytest.mark.parametrize("name, dropped", [
    # 2 x 2 programs, 5 row-scale copies each (2 ahead, 3 steps), 3 of 4 waves masked, 64 lanes a wave
    ("pipelined_matmul", 2 * 2 * 5 * 3 * 64),
    # 7 narrow copies (2 ahead, 5 tiles), 2 of 4 waves masked, 64 lanes a wave
    ("async_copy", 7 * 2 * 64)])
@pytest.mark.skipif(not NEWER_HERE, reason=f"this Python's own Triton is the runner's {RUNNER}")
def test_masked_loads_to_lds_drop_their_lanes_counted(name, dropped):
    """Built with the newer Triton, the narrow copies a layout gives fewer waves than the program has are masked
    by M0 = 0x7fffffff (s_cselect_b32 m0, ..): the hardware drops those lanes' LDS writes, and so does the
    emulator, counting them (launch.dispatch.lds_dma_dropped); the answer is right. The runner's 3.6.0 branches
    around them instead: nothing dropped."""
    launches = run_case(name, NEWER)
    assert any(MASKED_COPY.search(launch.built.asm) for launch in launches), "no copy masked by M0 in the build"
    assert sum(launch.dispatch.lds_dma_dropped for launch in launches) == dropped
    assert sum(launch.dispatch.lds_dma_dropped for launch in run_case(name)) == 0


def _masked_copy_load(asm):
    """(the build's lines, the index of the first load to LDS after a masking M0 select)."""
    lines = asm.splitlines()
    select = next(i for i, line in enumerate(lines) if "s_cselect_b32 m0" in line and "0x7fffffff" in line)
    load = next(i for i in range(select + 1, len(lines)) if " lds" in lines[i] and "buffer_load" in lines[i])
    return lines, load


@pytest.mark.skipif(not NEWER_HERE, reason=f"this Python's own Triton is the runner's {RUNNER}")
def test_a_dropped_lane_reading_outside_every_tensor_still_faults():
    """The masked scale copy of pipelined_matmul with its global offset moved 2 GB - 1 MB past its tensor: the LDS
    side is dropped, the global read outside every tensor stays a fault."""
    def far_offset(asm):
        lines, load = _masked_copy_load(asm)
        voffset = re.search(r"buffer_load_dword\w* (v\d+),", lines[load])[1]
        return "\n".join(lines[:load] + [f"\tv_mov_b32_e32 {voffset}, 0x7ff00000"] + lines[load:])
    with pytest.raises(gfx950.EmulationError, match=r"buffer_load_dword .* lds.*MemoryFault"):
        run_case("pipelined_matmul", NEWER, edit_asm=far_offset)


@pytest.mark.skipif(not NEWER_HERE, reason=f"this Python's own Triton is the runner's {RUNNER}")
def test_a_load_to_lds_inside_the_cu_but_past_the_allocation_faults():
    """The masking M0 of pipelined_matmul's copies set to 128 KiB instead of 0x7fffffff: inside the CU's 160 KiB of
    LDS but past the program's allocation, a fault (a wrong LDS size or layout), not a dropped lane."""
    def inside_the_cu(asm):
        return asm.replace("0x7fffffff", "0x20000")
    with pytest.raises(gfx950.EmulationError, match=r"LDS write \(load to LDS\) of 4 bytes outside the \d+ bytes"):
        run_case("pipelined_matmul", NEWER, edit_asm=inside_the_cu)


# --- two races Triton's code can carry, on corpus kernels --------------------------------------

def test_the_detector_names_a_wait_group_that_counts_copies_some_waves_skip():
    """async_copy with one commit group left in flight: 2 of its 4 waves skip the narrow copy,
    so wait_group(1)'s vmcnt(2) leaves their previous tile's wide copy in flight at the reads."""
    from gfx950.corpus import gluon_kernels as gk

    def launch(kernel, grid, *args, **kwargs):
        kwargs["IN_FLIGHT"] = 1 if kernel is gk.async_copy_kernel else kwargs.get("IN_FLIGHT", 0)
        return gfx950.emulate(kernel, grid, *args, **kwargs)
    with pytest.raises(gfx950.EmulationError, match="LDS race: wave 2 reads bytes a load to LDS by wave 2 has not "
                                                    "landed in yet"):
        BY_NAME["async_copy"].run(launch, np.random.default_rng(0))


def test_the_eight_l2s_catch_a_merge_whose_waves_do_not_wait_for_their_stores():
    """attention_bf16_32's FUSED merge without its waves' store waits: wave 0's release does
    not carry the other waves' stores still in flight, and the last program, on another XCD,
    reads their partials stale."""
    from gfx950.corpus import triton_kernels as tk

    def launch(kernel, grid, *args, **kwargs):
        if kernel is tk.split_attention_kernel:
            kwargs["WAVE_WAITS"] = False
        return gfx950.emulate(kernel, grid, *args, **kwargs)
    with pytest.raises(AssertionError, match="attention_bf16_32: fused merge out"):
        BY_NAME["attention_bf16_32"].run(launch, np.random.default_rng(0))
