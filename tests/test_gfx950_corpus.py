"""The gfx950 emulator held to the hardware: the corpus (tools/gfx950/corpus), small kernels
of our own that Triton 3.6.0 builds for gfx950, run on the emulator against numpy.

Triton's gfx950 code generation is tested on the hardware upstream, so a corpus kernel the
emulator runs to a wrong answer is an emulator bug. The same runs give the coverage of
submission.py's instruction forms (tools/gfx950/coverage.py, docs/gfx950_coverage.md), and
three behaviours every emulator of this machine must have: an unknown opcode stops the run
naming it, a removed wait reads stale data (which the corpus check catches), and a load past
a buffer's num_records reads zeros.
"""
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


@pytest.fixture(scope="module")
def corpus_results():
    return coverage.run_corpus()


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_corpus_kernel_matches_numpy(corpus_results, name):
    forms, error = corpus_results[name]
    assert error is None, error
    assert forms, f"{name} executed no instruction"


def test_every_submission_form_runs_in_the_corpus(corpus_results):
    """Every instruction form of submission.py's gfx950 builds is executed by a corpus kernel
    whose answer matched numpy, but at most MAX_UNVALIDATED forms, each with its reason."""
    table, uncovered = coverage.coverage(corpus_results)
    assert table, "no submission forms: the compile reports lack their 'forms'"
    assert coverage.problems(table, uncovered, corpus_results) == []


def test_the_coverage_table_is_current(corpus_results):
    """docs/gfx950_coverage.md is what `python tools/gfx950/coverage.py` makes now."""
    table, uncovered = coverage.coverage(corpus_results)
    assert coverage.TABLE.read_text() == coverage.render(table, uncovered)


def test_no_build_uses_the_packed_fma_form_gfx950_mis_executes():
    """gfx950 intermittently mis-executes v_pk_fma_f32 with op_sel:[0,1,0] (ROCm/rocMLIR PR 2459);
    the emulator runs the ISA as documented, so only this test keeps our builds off that form."""
    forms = coverage.submission_forms()
    assert not [f for f in forms if f.startswith("v_pk_fma_f32") and "op_sel:[0,1,0]" in f]


# --- three behaviours, on corpus kernels ---------------------------------------------------

def run_case(name, **emulate_options):
    """Run one corpus case with options for every launch (edit_asm, detectors, ...)."""
    def launch(kernel, grid, *args, **kwargs):
        return gfx950.emulate(kernel, grid, *args, **emulate_options, **kwargs)
    BY_NAME[name].run(launch, np.random.default_rng(0))


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
