"""tools/gfx950/banks.py: LDS bank conflicts counted from the addresses of emulated LDS
accesses, on hand-written amdgcn run with gfx950.run_asm (each lane's address loaded from a
tensor) and on address arrays given to the counting directly. No Triton build.

The answers are counted by hand in each test's comment: a bank is 4 bytes; a 16-byte access
covers 4 banks; "unit" b below means 16-byte block b of a 256-byte (64-bank) row.
"""
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gfx950  # noqa: E402
import lds_banks  # noqa: E402
from gfx950 import banks  # noqa: E402
from gfx950.asm import parse  # noqa: E402

LANES = np.arange(64)
STATIC = banks.STATIC_MODELS  # the compile report's models, the measured one among them
MEASURED = banks.MEASURED
# v1: lane l's address (element l of the tensor argument); v[4:7] written, for the stores
ADDRESS_KERNEL = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v9, 2, v0
  global_load_dword v1, v9, s[4:5]
  v_mov_b32_e32 v4, 1
  v_mov_b32_e32 v5, 2
  v_mov_b32_e32 v6, 3
  v_mov_b32_e32 v7, 4
  s_waitcnt vmcnt(0)
  {body}
  s_waitcnt lgkmcnt(0)
  s_endpgm
"""


def observed(body, addresses):
    """Run `body` (LDS instructions addressed by v1) on one wave -> [(mnemonic, executions,
    {model: (clocks, conflict-free clocks)})] in program order."""
    counter = banks.BankCounter()
    gfx950.run_asm(ADDRESS_KERNEL.format(body=body), [torch.tensor(addresses, dtype=torch.int32)],
                   lds_bytes=1 << 16, observers=[counter])
    (kernel,) = counter.kernels
    return [(row.ins.mnemonic, row.executions, {m: (row.cycles[m], row.conflict_free[m]) for m in banks.MODELS})
            for _, row in sorted(kernel.rows.items())]


def one(body, addresses):
    (found,) = observed(body, addresses)
    return found[2]


# Lanes 0-15 read units 0-15 of row 0; lanes 16-31 units 8-15, 0-7 of row 4 (1 KB on: the
# same banks, other words); lanes 32-63 the same in rows 8 and 12. Consecutive 16-lane phases
# and CK's 8-lane groups (and their pairs) see each bank once a phase; HipKittens' measured
# groups put lanes 0-3 (units 0-3) with 24-27 (units 0-3, row 4) and 12-15 with 20-23: 2-way.
LANE_IN_HALF = LANES % 32
UNIT = np.where(LANE_IN_HALF < 16, LANE_IN_HALF, (LANE_IN_HALF + 8) % 16)
GROUPS_DISAGREE = UNIT * 16 + (LANE_IN_HALF // 16) * 1024 + (LANES // 32) * 2048


def test_measured_read_b128_phases_disagree_with_consecutive_phases():
    clocks = one("ds_read_b128 v[10:13], v1", GROUPS_DISAGREE)
    # 4 phases of 16 lanes (64 banks): 1 clock each; 32 banks: 8 phases of 8, 1 each
    assert clocks["64 banks"] == (4, 4) and clocks["64 banks, paired groups"] == (4, 4)
    assert clocks["32 banks"] == (8, 8)
    assert clocks[MEASURED] == (8, 4)   # 2-way in each of the 4 measured phases


def test_256_byte_rows_read_b128_under_every_model():
    # lane l: row l % 16 (256 B apart: one bank column), 16-byte column l // 16
    clocks = one("ds_read_b128 v[10:13], v1", (LANES % 16) * 256 + (LANES // 16) * 16)
    # consecutive 16 lanes: one column, 16 rows -> 16-way, 4 phases; CK 8-lane groups on 32
    # banks: 4 rows of one column and 4 of the next on other banks -> 4-way, 8 phases; paired:
    # 8 rows of a column; measured: lanes 0-3 + 12-15 column 0, 20-27 column 1 -> 8-way
    assert clocks == {"32 banks": (32, 8), "64 banks": (64, 4), "64 banks, paired groups": (32, 4),
                      MEASURED: (32, 4)}


def test_one_word_read_by_every_lane_is_a_broadcast():
    assert one("ds_read_b128 v[10:13], v1", np.full(64, 4096)) == {m: (c, c) for m, c in
                                                                    [("32 banks", 8), ("64 banks", 4),
                                                                     ("64 banks, paired groups", 4), (MEASURED, 4)]}
    assert one("ds_read_b32 v10, v1", np.zeros(64, dtype=int)) == {"32 banks": (2, 2), "64 banks": (1, 1),
                                                                    "64 banks, paired groups": (1, 1),
                                                                    MEASURED: (1, 1)}


def test_read_b64_two_phases_of_32_lanes_on_64_banks():
    # lanes 0-15 read 8 bytes at 8 l (banks 0-31), lanes 16-31 the same banks 256 B on
    # (other words): 64 banks' 32-lane phases (measured too) 2-way; 32 banks' 16-lane phases 1
    clocks = one("ds_read_b64 v[10:11], v1", (LANES % 16) * 8 + (LANES // 16) * 256)
    assert clocks == {"32 banks": (4, 4), "64 banks": (4, 2), "64 banks, paired groups": (4, 2), MEASURED: (4, 2)}


def test_write_b64_four_measured_phases_of_16_consecutive_lanes():
    # the same addresses written: measured, 4 phases of 16 lanes, each on banks 0-31 once ->
    # 4 clocks, conflict-free; "64 banks" serves 32 lanes a phase: the same 4 clocks, 2-way
    clocks = one("ds_write_b64 v1, v[4:5]", (LANES % 16) * 8 + (LANES // 16) * 256)
    assert clocks == {"32 banks": (4, 4), "64 banks": (4, 2), "64 banks, paired groups": (4, 2), MEASURED: (4, 4)}


def test_read2_halves_count_as_one_access_of_twice_the_width():
    # ds_read2_b32 at 8 l, offsets 0 and 1 word: 2 consecutive words a lane, an 8-byte access
    (found,) = observed("ds_read2_b32 v[10:11], v1 offset1:1", LANES * 8)
    assert found[1] == 1 and found[2] == {"32 banks": (4, 4), "64 banks": (2, 2), "64 banks, paired groups": (2, 2),
                                          MEASURED: (2, 2)}
    # st64: the second word 256 B on, on the first's bank: 2-way in every phase
    (found,) = observed("ds_read2st64_b32 v[10:11], v1 offset1:1", LANES * 4)
    assert found[2] == {"32 banks": (8, 4), "64 banks": (4, 2), "64 banks, paired groups": (4, 2), MEASURED: (4, 2)}
    # and the writes likewise
    (found,) = observed("ds_write2st64_b32 v1, v4, v5 offset1:1", LANES * 4)
    assert found[1] == 1 and found[2]["64 banks"] == (4, 2)


def test_lanes_off_in_exec_take_no_part():
    # lanes 0-15 only, each on bank 0 (256 B apart): 16 words on one bank in one phase
    body = "s_mov_b32 exec_lo, 0xffff\n  s_mov_b32 exec_hi, 0\n  ds_read_b32 v10, v1"
    assert one(body, LANES * 256) == {"32 banks": (16, 1), "64 banks": (16, 1), "64 banks, paired groups": (16, 1),
                                      MEASURED: (16, 1)}
    # no lane: an execution that costs nothing, counted as empty
    counter = banks.BankCounter()
    gfx950.run_asm(ADDRESS_KERNEL.format(body="s_mov_b64 exec, 0\n  ds_read_b32 v10, v1"),
                   [torch.tensor(LANES * 256, dtype=torch.int32)], lds_bytes=1 << 16, observers=[counter])
    (row,) = counter.kernels[0].rows.values()
    assert (row.executions, row.empty, row.cycles["64 banks"], row.conflict_free["64 banks"]) == (1, 1, 0, 0)


def test_every_wave_and_workgroup_is_counted():
    counter = banks.BankCounter()
    text = ("  v_and_b32_e32 v1, 63, v0\n  v_lshlrev_b32_e32 v1, 8, v1\n  ds_read_b32 v10, v1\n"
            "  s_waitcnt lgkmcnt(0)\n  s_endpgm\n")
    gfx950.run_asm(text, grid=(3,), num_warps=2, lds_bytes=1 << 15, observers=[counter])
    (row,) = counter.kernels[0].rows.values()
    # 6 wave executions, each 64 lanes on bank 0 (256 B apart): 64-way on 64 banks
    assert row.executions == 6 and row.cycles["64 banks"] == 6 * 64 and row.conflict_free["64 banks"] == 6


@pytest.mark.parametrize("width, parts, kind", [(1, 1, "read"), (2, 1, "write"), (4, 1, "read"), (4, 1, "write"),
                                                (8, 1, "read"), (8, 1, "write"), (16, 1, "read"),
                                                (16, 1, "write"), (4, 2, "read"), (8, 2, "write")])
def test_full_waves_count_as_the_compile_reports_static_walk(width, parts, kind):
    """On a full wave the counting is lds_banks.address_cycles's, clocks and conflict-free
    clocks both, on addresses full of conflicts and broadcasts (the measured model's
    conflict-free clocks here are its phases, never fewer than the static walk's bytes / 256)."""
    rng = np.random.default_rng(width * 10 + parts)
    for _ in range(20):
        addresses = [rng.integers(0, 96, 64) * rng.choice([4, 16, 64, 256]) for _ in range(parts)]
        for model in STATIC:
            mine = banks.access_cycles(addresses, width, np.ones(64, bool), model, "ds_any", kind)
            theirs = lds_banks.address_cycles(addresses, width, model, kind)
            if model == MEASURED:
                assert mine[0] == theirs[0] and mine[1] >= theirs[1], (model, addresses)
            else:
                assert mine == theirs, (model, addresses)


def test_measured_model_differs_from_64_banks_only_where_measured():
    for mnemonic, width, kind in [("ds_read_b32", 4, "read"), ("ds_write_b128", 16, "write"),
                                  ("ds_read_b64_tr_b16", 8, "read"), ("ds_read_b64", 8, "read")]:
        assert banks.phases(MEASURED, mnemonic, width, kind) == banks.phases("64 banks", mnemonic, width, kind)
    assert banks.phases(MEASURED, "ds_write_b64", 8, "write") == [list(range(s, s + 16)) for s in range(0, 64, 16)]
    first, second, *upper = banks.phases(MEASURED, "ds_read_b128", 16, "read")
    assert sorted(first + second) == list(range(32)) and upper == [[lane + 32 for lane in first],
                                                                    [lane + 32 for lane in second]]


def test_bad_input_is_named():
    counter = banks.BankCounter()
    with pytest.raises(ValueError, match="what: expected"):
        counter.lds(None, None, "copy", LANES, 4, np.ones(64, bool))
    with pytest.raises(ValueError, match="model: expected"):
        banks.phases("96 banks", "ds_read_b32", 4, "read")
    with pytest.raises(ValueError, match="kind: expected"):
        banks.phases("64 banks", "ds_read_b32", 4, "load")
    with pytest.raises(ValueError, match="mask: expected"):
        banks.access_words([LANES], 4, np.ones(32, bool))
    with pytest.raises(ValueError, match="nbytes: expected"):
        banks.access_words([LANES], 0, np.ones(64, bool))


TWO_LOOPS = """
  v_lshlrev_b32_e32 v1, 8, v0
  s_mov_b32 s10, 3
.LBB0_1:
  ds_read_b32 v2, v1
  v_mfma_f32_16x16x32_bf16 a[0:3], v[20:23], v[24:27], a[0:3]
  s_sub_u32 s10, s10, 1
  s_cmp_lg_u32 s10, 0
  s_cbranch_scc1 .LBB0_1
  s_branch .LBB0_3
.LBB0_2:
  ds_read_b32 v2, v1 offset:4
  v_mfma_f32_16x16x32_bf16 a[0:3], v[20:23], v[24:27], a[0:3]
  s_cbranch_scc1 .LBB0_2
.LBB0_3:
  s_waitcnt lgkmcnt(0)
  s_endpgm
"""


def test_main_loop_is_the_executed_copy_and_counted_per_pass():
    counter = banks.BankCounter()
    launch = gfx950.run_asm(TWO_LOOPS, lds_bytes=1 << 15, detectors=False, observers=[counter])
    program = parse(TWO_LOOPS)
    # from the text alone the smaller copy (never run) is the innermost main loop
    assert banks.main_loop(program, innermost=True) == (8, 10)
    assert banks.main_loop(program, innermost=True, executed=launch.kernel.counts) == (2, 6)
    found = counter.kernels[0].summary(innermost=True)
    (row,) = found["instructions"]
    assert row["in_main_loop"] and row["executions"] == 3
    # 64 lanes 256 B apart: all on bank 0; per pass 64 clocks on 64 banks, 2 x 32 on 32
    assert found["models"]["64 banks"] == {"cycles_per_pass": 64, "conflict_free_per_pass": 1, "factor": 64}
    assert found["models"]["32 banks"] == {"cycles_per_pass": 64, "conflict_free_per_pass": 2, "factor": 32}
    assert found["main_loop"] == [program.instructions[2].line, program.instructions[6].line]


def test_the_comparison_takes_the_variants_own_row_and_the_loops_instructions():
    def row(target, stages, early, marker):
        return {"kernel": "_scaled_split_kernel", "target": target, "BLOCK_N": 128, "MERGE": 1, "num_warps": 8,
                "num_stages": stages, "SPLIT_TAIL": True, "EARLY_TILE": early, "lds_banks": marker}
    rows = [row("sm_90", 2, False, "nvidia"), row("gfx950", 1, True, "one stage"), row("gfx950", 2, False, "two")]
    variant = SimpleNamespace(gluon=False, block_n=128, merge=1, num_warps=8, num_stages=2, split_tail=True,
                              early_tile=False)
    assert banks.committed_static(rows, variant) == "two"
    assert banks.committed_static(rows, SimpleNamespace(**{**vars(variant), "num_stages": 3})) is None
    static = {3: {"cycles": {m: 8 for m in STATIC}, "ideal": {m: 2 for m in STATIC}},
              5: {"cycles": {m: 1 for m in STATIC}, "ideal": {m: 1 for m in STATIC}},
              9: {"cycles": {m: 6 for m in STATIC}, "ideal": {m: 1 for m in STATIC}}}
    totals = banks.static_totals(static, [3, 5, 7])   # 9 outside the loop; 7 not in the static walk
    assert totals["models"]["64 banks"] == {"cycles_per_tile": 9, "ideal_per_tile": 3, "factor": 3.0}
    assert (totals["instructions"], totals["missing"]) == (2, 1)
