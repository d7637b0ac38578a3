"""tools/lds_banks.py's bank model on hand-made lane addresses with known answers, and
tools/isa_emulator.py on hand-written gfx950 ISA (no Triton, no GPU)."""
import sys

import numpy as np
import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import lds_banks  # noqa: E402
from isa_emulator import Machine, replay_waves, walk  # noqa: E402
from isa_latency import parse_amdgcn  # noqa: E402

LANES = np.arange(64)


def factors(addresses, width, kind="read"):
    """{model: clocks with conflicts / conflict-free} of one wave's access."""
    found = {}
    for model in lds_banks.BANK_MODELS:
        clocks, ideal = lds_banks.address_cycles([addresses], width, model, kind)
        found[model] = clocks / ideal
    return found


# A K-operand read: lane l reads 16 bytes of row l % 16 at 16-byte column l // 16.
K_ROWS, K_COLUMNS = LANES % 16, LANES // 16


@pytest.mark.parametrize("name, addresses, expected", [
    # rows 256 B apart: each 8-lane group (CK: lanes 0-3 rows 0-3 + lanes 20-23 rows 4-7) puts
    # 4 rows on the same 4 banks of 32; 16 rows on the same 4 of 64; a paired group 8 rows; a
    # measured phase (lanes 0-3, 12-15: rows 0-3, 12-15 of unit 0; 20-27: rows 4-11 of unit 1) 8
    ("256-byte rows", K_ROWS * 256 + K_COLUMNS * 16, {"32 banks": 4, "64 banks": 16, "64 banks, paired groups": 8,
                                                      "64 banks, measured": 8}),
    # a 16-byte pad per row: 17 units a row, so 16 rows are 16 units on 64 banks; on 32 banks
    # row 4's next unit lands on row 0's (17 * 4 + 1 = 69 = 5 mod 8 ... row 7 -> 0): 2-way; in a
    # measured phase row 11's unit 1 lands on row 12's unit 0 ((11 + 1) mod 16 = 12): 2-way
    ("272-byte rows", K_ROWS * 272 + K_COLUMNS * 16, {"32 banks": 2, "64 banks": 1, "64 banks, paired groups": 2,
                                                      "64 banks, measured": 2}),
    # unit u of row r stored at u ^ r: the 16 rows of one unit are 16 different units
    ("unit ^ row", K_ROWS * 256 + (K_COLUMNS ^ K_ROWS) * 16, {"32 banks": 1, "64 banks": 1,
                                                                 "64 banks, paired groups": 1, "64 banks, measured": 1}),
    ("consecutive blocks", LANES * 16, {"32 banks": 1, "64 banks": 1, "64 banks, paired groups": 1,
                                        "64 banks, measured": 1}),
    # lane quad q (its own row) at unit quad QUAD_UNITS[q % 8]: the paired groups' quads {0, 2, 5, 7} and
    # {1, 3, 4, 6} each meet 4 unit quads; the measured phases' {0, 3, 5, 6} and {1, 2, 4, 7} two twice
    ("quads paired apart, measured together", 16 * (LANES % 4 + 4 * np.array([0, 1, 1, 0, 2, 2, 3, 3])[LANES // 4 % 8])
     + 256 * (LANES // 4), {"32 banks": 1.5, "64 banks": 2, "64 banks, paired groups": 1, "64 banks, measured": 2}),
])
def test_16_byte_reads_against_hand_counted_conflicts(name, addresses, expected):
    assert factors(addresses, 16) == pytest.approx(expected), name


def test_4_byte_accesses_serialize_on_one_bank_and_broadcast_one_address():
    assert factors(LANES * 4, 4) == pytest.approx({m: 1 for m in lds_banks.BANK_MODELS})
    # 128 B apart: every lane on bank 0 (32 banks) or on banks 0 and 32 (64): 32 dwords a bank
    assert factors(LANES * 128, 4) == pytest.approx({m: 32 for m in lds_banks.BANK_MODELS})
    assert factors(np.zeros(64, dtype=int), 4) == pytest.approx({m: 1 for m in lds_banks.BANK_MODELS})
    # bytes: four lanes reading one dword's four bytes share it
    assert factors(LANES, 1) == pytest.approx({m: 1 for m in lds_banks.BANK_MODELS})


def test_writes_of_consecutive_blocks_are_conflict_free_in_every_model():
    assert factors(LANES * 16, 16, "write") == pytest.approx({m: 1 for m in lds_banks.BANK_MODELS})


def test_the_measured_phases_of_8_byte_accesses():
    """gfx950 as measured: ds_read_b64 in 2 phases of 32 lanes (as the 64-bank model), ds_write_b64 in 4 phases of
    16 lanes: consecutive 8-byte writes take 4 clocks where 512 bytes at 256 B a clock would take 2."""
    read = {m: lds_banks.address_cycles([LANES * 8], 8, m, "read") for m in lds_banks.BANK_MODELS}
    write = {m: lds_banks.address_cycles([LANES * 8], 8, m, "write") for m in lds_banks.BANK_MODELS}
    assert read["64 banks, measured"] == read["64 banks"] == (2, 2)
    assert write["64 banks, measured"] == (4, 2) and write["64 banks"] == (2, 2)
    assert lds_banks.BOUND_MODELS == ("32 banks", "64 banks", "64 banks, paired groups")


def test_conflict_free_clocks_are_bytes_over_the_banks_width():
    assert lds_banks.ideal_cycles(16, 1, "32 banks") == 8 and lds_banks.ideal_cycles(16, 1, "64 banks") == 4
    assert lds_banks.ideal_cycles(4, 2, "32 banks") == 4  # ds_read2_b32: 8 bytes a lane
    assert lds_banks.ideal_cycles(1, 1, "64 banks") == 1


# --- the emulator --------------------------------------------------------------------------

KERNEL_HEAD = """\t.text
_kernel:
"""


def loop_kernel(body_before, read, after=""):
    """A kernel: `body_before`, then a loop whose body holds an MFMA and `read`."""
    return (KERNEL_HEAD + body_before + "\n.LBB0_1:\n" + read
            + "\n\tv_mfma_f32_16x16x32_bf16 a[0:3], v[20:23], v[24:27], a[0:3]\n\ts_cbranch_scc1 .LBB0_1\n"
            + after + "\ts_endpgm\n")


def test_the_emulator_follows_an_address_from_the_work_item_id():
    """v0 = the work-item id: lane l of wave w; row = lane & 15, column unit = lane >> 4 ->
    row * 256 + unit * 16 + a kernel argument (an unknown wave-uniform base): the 256-byte
    rows' K read, 4x / 16x."""
    asm = loop_kernel("""\ts_load_dword s4, s[0:1], 0x10
\tv_and_b32_e32 v1, 15, v0
\tv_bfe_u32 v2, v0, 4, 2
\tv_lshlrev_b32_e32 v1, 8, v1
\tv_lshl_add_u32 v3, v2, 4, v1
\ts_waitcnt lgkmcnt(0)
\tv_add_u32_e32 v3, s4, v3""", "\tds_read_b128 v[8:11], v3 offset:64")
    found = lds_banks.lds_bank_counts(asm, 2)
    assert [r["mnemonic"] for r in found["instructions"]] == ["ds_read_b128"] and not found["unresolved"]
    assert found["max_instruction_factor"] == pytest.approx({"32 banks": 4, "64 banks": 16,
                                                             "64 banks, paired groups": 8, "64 banks, measured": 8})


def test_both_sides_of_a_branch_meet_with_the_value_they_agree_on():
    """The address is computed on both sides of a branch (two instruction sequences, one
    value); a register only one side writes keeps that side's value at the merge."""
    asm = loop_kernel("""\ts_cbranch_scc1 .LBB0_2
\tv_lshlrev_b32_e32 v3, 4, v0
\ts_branch .LBB0_3
.LBB0_2:
\tv_mul_u32_u24_e32 v3, 16, v0
\tv_mov_b32_e32 v9, 7
.LBB0_3:""", "\tds_read_b128 v[8:11], v3")
    found = lds_banks.lds_bank_counts(asm, 1)
    assert not found["unresolved"]
    assert found["max_instruction_factor"] == pytest.approx({m: 1 for m in lds_banks.BANK_MODELS})


def test_an_address_through_an_unknown_multiplier_is_unresolved():
    asm = loop_kernel("\ts_load_dword s4, s[0:1], 0x10\n\ts_waitcnt lgkmcnt(0)\n\tv_mul_lo_u32 v3, s4, v0",
                      "\tds_read_b32 v8, v3")
    assert lds_banks.lds_bank_counts(asm, 1)["unresolved"] == ["ds_read_b32"]


def test_a_seeded_kernel_argument_makes_the_multiplier_known():
    asm = loop_kernel("\ts_load_dword s4, s[0:1], 0x10\n\ts_waitcnt lgkmcnt(0)\n\tv_mul_lo_u32 v3, s4, v0",
                      "\tds_read_b32 v8, v3")
    machine = Machine(1, {0x10: 128})
    seen = []
    walk(asm, machine, lambda p, m, o: seen.append(machine.read("v3").lanes.copy()) if m.startswith("ds_") else None)
    assert (seen[0] == LANES * 128).all()


def test_each_wave_follows_its_own_branch_on_a_wave_uniform_test():
    """v_readfirstlane of the work-item id is 0 in wave 0 only: the others branch over the
    write-back (the Gluon kernel's FUSED release)."""
    asm = KERNEL_HEAD + """\ts_barrier
\tv_readfirstlane_b32 s4, v0
\ts_cmp_lg_u32 s4, 0
\ts_cbranch_scc1 .Lskip
\tbuffer_wbl2 sc1
.Lskip:
\ts_nop 0
\ts_endpgm
"""
    _, instructions = parse_amdgcn(asm)
    write_back = next(p for p, m, _ in instructions if m == "buffer_wbl2")
    paths = replay_waves(asm, Machine(4), 0, len(instructions))
    assert [write_back in path for path in paths] == [True, False, False, False]
