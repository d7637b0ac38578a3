"""The gfx950 emulator's own parts (tools/gfx950): the parser, and instruction semantics
on hand-written amdgcn, run with gfx950.run_asm (no Triton build, fast).

These hold the emulator to our reading of AMD's CDNA4 ISA; what holds that reading to the
hardware is the corpus (tests/test_gfx950_corpus.py: kernels Triton built, against numpy).
"""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gfx950  # noqa: E402
from gfx950 import asm  # noqa: E402

LANES = np.arange(64)
STORE_V1 = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  {body}
  v_lshlrev_b32_e32 v9, 2, v0
  global_store_dword v9, v1, s[4:5]
  s_endpgm
"""


def lanes_after(body, dtype=torch.int32):
    """Run `body` (it leaves its result in v1) on one wave -> v1 of the 64 lanes."""
    out = torch.full((64,), -7, dtype=dtype)
    gfx950.run_asm(STORE_V1.format(body=body), [out])
    return out.numpy().view(np.uint32)


# --- the parser --------------------------------------------------------------------------------

def test_operands_and_modifiers_parse_as_written():
    ins = asm.parse_instruction("buffer_load_dwordx4 v[58:61], v76, s[24:27], 0 offen offset:144 sc0 sc1")
    assert [(o.kind, o.index, o.count) for o in ins.operands[:3]] == [("v", 58, 4), ("v", 76, 1), ("s", 24, 4)]
    assert ins.operands[3].value == 0 and ins.modifiers == {"offen": True, "offset": 144, "sc0": True, "sc1": True}
    ins = asm.parse_instruction("v_max3_f32 v1, v2, -|v3|, |s4|")
    assert (ins.operands[2].neg, ins.operands[2].abs, ins.operands[3].abs) == (True, True, True)
    ins = asm.parse_instruction("v_mov_b32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xa bank_mask:0xf bound_ctrl:1")
    assert ins.modifiers == {"quad_perm": (1, 0, 3, 2), "row_mask": 10, "bank_mask": 15, "bound_ctrl": 1}
    ins = asm.parse_instruction("ds_swizzle_b32 v1, v2 offset:swizzle(SWAP,16)")
    assert ins.modifiers["offset"] == ("swizzle", "SWAP", 16)
    ins = asm.parse_instruction("s_setreg_imm32_b32 hwreg(HW_REG_MODE, 23, 1), 1")
    assert ins.operands[0].kind == "hwreg" and ins.operands[0].value == ("HW_REG_MODE", "23", "1")
    assert asm.parse_instruction("buffer_wbl2 sc1").modifiers == {"sc1": True}
    assert asm.parse_instruction("v_fma_f32 v1, v2, v3, 1.0").operands[3].value == 1.0
    assert asm.parse_instruction("s_mov_b32 s1, -1").operands[1].value == -1


def test_waitcnt_counters_named_and_raw():
    assert asm.parse_instruction("s_waitcnt vmcnt(3) lgkmcnt(0)").modifiers == {"vmcnt": 3, "expcnt": 7, "lgkmcnt": 0}
    # raw simm16 on gfx9: vmcnt[3:0] + [15:14] << 4, expcnt[6:4], lgkmcnt[11:8]
    assert asm.parse_instruction("s_waitcnt 0xc07f").modifiers == {"vmcnt": 63, "expcnt": 7, "lgkmcnt": 0}


def test_program_labels_descriptor_metadata_and_forms():
    text = """
	.amdhsa_user_sgpr_count 14
	.amdhsa_user_sgpr_kernarg_preload_length 12
k:
	s_load_dwordx2 s[2:3], s[0:1], 0x0
	s_branch .LBB0_0
.LBB0_0:
	v_mov_b32_dpp v1, v2 row_shr:1 row_mask:0xf bank_mask:0xf
	v_fma_f32 v1, -v2, v3, 1.0
	s_endpgm
	.amdgpu_metadata
---
amdhsa.kernels:
  - .args:
      - .address_space:  global
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .offset:         8
        .size:           4
        .value_kind:     by_value
    .kernarg_segment_size: 16
    .name:           k
...
	.end_amdgpu_metadata
"""
    program = asm.parse(text)
    assert program.name == "k" and program.labels[".LBB0_0"] == 2 and program.entry == 2
    assert program.descriptor["user_sgpr_count"] == 14 and program.metadata["kernarg_segment_size"] == 16
    assert [(a["offset"], a["size"]) for a in program.kernargs] == [(0, 8), (8, 4)]
    assert [asm.form_of(i) for i in program.instructions[2:4]] == [
        "v_mov_b32_dpp row_shr:1 row_mask:0xf bank_mask:0xf", "v_fma_f32 -op1"]


# --- VALU forms ----------------------------------------------------------------------------------

def test_dpp_row_shift_bound_ctrl_and_masks():
    # without bound_ctrl an invalid source lane is not written (v1 keeps v0); with it, it reads 0
    kept = lanes_after("v_mov_b32_e32 v1, v0\n  v_mov_b32_dpp v1, v0 row_shr:1 row_mask:0xf bank_mask:0xf")
    zeroed = lanes_after("v_mov_b32_e32 v1, v0\n  v_mov_b32_dpp v1, v0 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1")
    first_of_row = LANES % 16 == 0
    assert (kept == np.where(first_of_row, LANES, LANES - 1)).all()
    assert (zeroed == np.where(first_of_row, 0, LANES - 1)).all()
    banks = lanes_after("v_mov_b32_e32 v1, 99\n  v_mov_b32_dpp v1, v0 row_shl:4 row_mask:0xf bank_mask:0x5")
    written = (LANES % 16) // 4 % 2 == 0          # banks 0 and 2 of each row
    assert (banks == np.where(written, LANES + 4, 99)).all()
    rows = lanes_after("v_mov_b32_e32 v1, 99\n  v_mov_b32_dpp v1, v0 row_bcast:15 row_mask:0xa bank_mask:0xf")
    assert (rows == np.where(LANES // 16 % 2 == 1, 16 * (LANES // 16) - 1, 99)).all()
    quads = lanes_after("v_mov_b32_dpp v1, v0 quad_perm:[2,3,0,1] row_mask:0xf bank_mask:0xf")
    assert (quads == LANES - LANES % 4 + np.array([2, 3, 0, 1])[LANES % 4]).all()


def test_bitop3_table_bit_order():
    # bit (a << 2 | b << 1 | c) of the table is the result for inputs a, b, c (CDNA4 pseudocode)
    body = "v_mov_b32_e32 v2, 0xff00ff00\n  v_mov_b32_e32 v3, 0xf0f0f0f0\n  v_mov_b32_e32 v4, 0xcccccccc\n  "
    for table, expected in ((0xF0, 0xFF00FF00), (0xCC, 0xF0F0F0F0), (0xAA, 0xCCCCCCCC),
                            (0x96, 0xFF00FF00 ^ 0xF0F0F0F0 ^ 0xCCCCCCCC), (0x80, 0xFF00FF00 & 0xF0F0F0F0 & 0xCCCCCCCC)):
        assert (lanes_after(body + f"v_bitop3_b32 v1, v2, v3, v4 bitop3:{table:#x}") == expected).all(), hex(table)


def test_perm_selectors():
    # {S0, S1} = 0x8877665544332211 (S1 low); selector bytes: 0 (0x11), 7 (0x88), 12 (0), 13 (0xff)
    body = "v_mov_b32_e32 v2, 0x88776655\n  v_mov_b32_e32 v3, 0x44332211\n  v_mov_b32_e32 v4, 0x0d0c0700\n  "
    assert (lanes_after(body + "v_perm_b32 v1, v2, v3, v4") == 0xFF008811).all()
    # 8..11: the sign of byte 1/3/5/7 (0x22: 0, 0x44: 0, 0x66: 0, 0x88: 1) replicated
    assert (lanes_after(body.replace("0x0d0c0700", "0x0b0a0908") + "v_perm_b32 v1, v2, v3, v4") == 0xFF000000).all()


def test_permlane_swaps():
    # both registers change: the upper half of vdst (v1) trades places with the lower half
    # of src0 (v2, a copy of v0, which the store's address needs unchanged)
    swap32 = lanes_after("v_add_u32_e32 v1, 100, v0\n  v_mov_b32_e32 v2, v0\n  v_permlane32_swap_b32_e32 v1, v2")
    assert (swap32 == np.where(LANES >= 32, LANES - 32, LANES + 100)).all()
    swap16 = lanes_after("v_add_u32_e32 v1, 100, v0\n  v_mov_b32_e32 v2, v0\n  v_permlane16_swap_b32_e32 v1, v2")
    assert (swap16 == np.where(LANES % 32 >= 16, LANES - 16, LANES + 100)).all()


def test_cross_lane_reads():
    swizzled = lanes_after("ds_swizzle_b32 v1, v0 offset:swizzle(SWAP,16)\n  s_waitcnt lgkmcnt(0)")
    assert (swizzled == LANES ^ 16).all()
    reversed_lanes = lanes_after("v_sub_u32_e32 v2, 63, v0\n  v_lshlrev_b32_e32 v2, 2, v2\n"
                                 "  ds_bpermute_b32 v1, v2, v0\n  s_waitcnt lgkmcnt(0)")
    assert (reversed_lanes == 63 - LANES).all()
    assert (lanes_after("v_readlane_b32 s6, v0, 37\n  v_mov_b32_e32 v1, s6") == 37).all()
    counted = lanes_after("s_mov_b32 s6, 0x55555555\n  v_mbcnt_lo_u32_b32 v1, s6, 0\n  v_mbcnt_hi_u32_b32 v1, s6, v1")
    assert (counted == (LANES + 1) // 2).all()


def test_sdwa_and_carries():
    assert (lanes_after("v_mov_b32_e32 v2, 0x12345678\n  v_mov_b32_e32 v1, 0\n"
                        "  v_or_b32_sdwa v1, v2, v1 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:BYTE_1 src1_sel:DWORD")
            == 0x00560000).all()
    carried = lanes_after("v_mov_b32_e32 v2, -1\n  v_add_co_u32_e32 v3, vcc, v2, v0\n"
                          "  v_addc_co_u32_e32 v1, vcc, 0, 0, vcc")
    assert (carried == (LANES >= 1)).all()


def test_float_min_max_ieee_zeros_and_nan():
    # max(+0, -0) = +0, min = -0; a quiet NaN operand gives the other operand
    assert (lanes_after("v_mov_b32_e32 v2, 0x80000000\n  v_max_f32_e32 v1, 0, v2") == 0).all()
    assert (lanes_after("v_mov_b32_e32 v2, 0x80000000\n  v_min_f32_e32 v1, 0, v2") == 0x80000000).all()
    assert (lanes_after("v_mov_b32_e32 v2, 0x7fc00000\n  v_max_f32_e32 v1, 1.0, v2") == 0x3F800000).all()


# --- memory: asynchronous completion, bounds ---------------------------------------------------------

BUFFER_PROLOGUE = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[8:9], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  s_and_b32 s5, s5, 0xffff
  s_mov_b32 s6, {num_records}
  s_mov_b32 s7, 0x27000
  v_lshlrev_b32_e32 v2, 2, v0
"""


def test_buffer_bounds_read_zero_and_drop_stores():
    data = torch.arange(1, 65, dtype=torch.int32)
    out = torch.full((64,), -1, dtype=torch.int32)
    text = BUFFER_PROLOGUE.format(num_records=128) + """
  v_mov_b32_e32 v1, 5
  buffer_load_dword v1, v2, s[4:7], 0 offen
  s_waitcnt vmcnt(0)
  buffer_store_dword v1, v2, s[4:7], 0 offen offset:4
  s_waitcnt vmcnt(0)
  s_mov_b32 s10, s8
  s_and_b32 s11, s9, 0xffff
  s_mov_b32 s12, 0x7ffffffe
  s_mov_b32 s13, 0x27000
  buffer_store_dword v1, v2, s[10:13], 0 offen
  s_endpgm
"""
    gfx950.run_asm(text, [data, out])
    # 128 bytes in range: lanes 0-31 read their word, the rest read 0; the stores (offset 4)
    # past byte 128 are dropped, so data keeps 1..64 except words 1..31 (lanes 0-30's values)
    assert (out.numpy() == np.where(LANES < 32, LANES + 1, 0)).all()
    assert (data.numpy() == np.where((LANES >= 1) & (LANES <= 31), LANES, LANES + 1)).all()


def test_a_load_lands_only_at_its_wait():
    data = torch.arange(100, 164, dtype=torch.int32)
    out = torch.zeros(64, dtype=torch.int32)
    waited = BUFFER_PROLOGUE.format(num_records=256) + """
  v_mov_b32_e32 v1, 7
  buffer_load_dword v1, v2, s[4:7], 0 offen
  {wait}
  v_add_u32_e32 v1, 1, v1
  s_mov_b32 s10, s8
  s_and_b32 s11, s9, 0xffff
  s_mov_b32 s12, 256
  s_mov_b32 s13, 0x27000
  buffer_store_dword v1, v2, s[10:13], 0 offen
  s_endpgm
"""
    gfx950.run_asm(waited.format(wait="s_waitcnt vmcnt(0)"), [data, out])
    assert (out.numpy() == LANES + 101).all()
    gfx950.run_asm(waited.format(wait=""), [data, out])        # the add reads v1 before the load lands
    assert (out.numpy() == 8).all()


def test_lds_write_visible_to_other_waves_only_once_retired():
    out = torch.zeros(128, dtype=torch.int32)
    text = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  v_add_u32_e32 v3, 1000, v0
  ds_write_b32 v2, v3
  {wait}
  s_barrier
  v_xor_b32_e32 v4, 0x100, v2        ; the other wave's word
  ds_read_b32 v1, v4
  s_waitcnt lgkmcnt(0)
  global_store_dword v2, v1, s[4:5]
  s_endpgm
"""
    gfx950.run_asm(text.format(wait="s_waitcnt lgkmcnt(0)"), [out], num_warps=2, lds_bytes=512)
    assert (out.numpy() == 1000 + (np.arange(128) ^ 64)).all()
    out.zero_()
    gfx950.run_asm(text.format(wait=""), [out], num_warps=2, lds_bytes=512, detectors=False, executor="serial")
    # wave 0 reads before wave 1's write retired (LDS starts zero); wave 1 sees wave 0's,
    # retired by the wait wave 0 made before its store
    assert (out.numpy()[:64] == 0).all() and (out.numpy()[64:] == 1000 + np.arange(64)).all()
    out.fill_(7)
    gfx950.run_asm(text.format(wait=""), [out], num_warps=2, lds_bytes=512, detectors=False)
    # in lockstep both waves read before either waits: neither sees the other's write
    assert (out.numpy() == 0).all()
    # with the detectors on (the default) the read is named as the race it is
    with pytest.raises(gfx950.EmulationError, match="LDS race: wave 0 reads bytes wave 1 wrote, before that write "
                                                    "retired"):
        gfx950.run_asm(text.format(wait=""), [out], num_warps=2, lds_bytes=512)


# --- errors that name what happened ---------------------------------------------------------------------

def test_an_unknown_opcode_stops_the_run_naming_it():
    with pytest.raises(gfx950.EmulationError, match=r"line \d+: v_frobnicate_b32 v1, v0.*v_frobnicate_b32 is not emulated"):
        lanes_after("v_frobnicate_b32 v1, v0")


def test_an_unimplemented_form_stops_the_run_naming_it():
    with pytest.raises(gfx950.EmulationError, match=r"DPP control .* not implemented"):
        lanes_after("v_mov_b32_dpp v1, v0 row_bcast:7 row_mask:0xf bank_mask:0xf")


def test_an_access_outside_every_tensor_names_lane_and_address():
    data = torch.zeros(16, dtype=torch.int32)
    text = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  global_load_dword v1, v2, s[4:5]
  s_waitcnt vmcnt(0)
  s_endpgm
"""
    with pytest.raises(gfx950.EmulationError, match=r"global_load_dword v1, v2, s\[4:5\].*lane 16, address 0x[0-9a-f]+"
                                                    r".*outside argument 0"):
        gfx950.run_asm(text, [data])


def test_a_workgroup_past_its_budget_is_a_hang():
    with pytest.raises(gfx950.EmulationError, match="a hang: the workgroup ran past its budget of 1000 wave "):
        gfx950.run_asm(".Lspin:\n  s_branch .Lspin\n", budget=1000)


@pytest.mark.parametrize("executor", ["lockstep", "serial"])
def test_waves_spinning_together_share_their_workgroups_budget(executor):
    """4 waves meeting at a barrier every round stop when their sum passes the budget (a hang ends as soon
    for 8 waves as for 1), not when each has run it; under either executor."""
    from gfx950.executor import Dispatch, Kernel, Workgroup
    from gfx950.memory import Memory
    program = asm.parse(".Lspin:\n  s_barrier\n  s_branch .Lspin\n")
    program.descriptor["user_sgpr_kernarg_segment_ptr"] = 1
    memory = Memory()
    base = memory.add_region(np.zeros(64, dtype=np.uint8), "kernel arguments", writable=False)
    dispatch = Dispatch(Kernel(program, 0, 4), memory, base, b"", (1,), budget=1000, executor=executor)
    groups = []

    class Recorded(Workgroup):
        def __init__(self, *args):
            super().__init__(*args)
            groups.append(self)
    dispatch.workgroup_class = Recorded
    with pytest.raises(gfx950.EmulationError, match="a hang"):
        dispatch.run()
    assert 1000 < sum(w.executed for w in groups[0].waves) <= 1002


RECORDED = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  s_cmp_eq_u32 s2, 0
  s_cbranch_scc0 .Lskip
  v_add_u32_e32 v3, 1, v0
  v_add_u32_e32 v3, 1, v3
.Lskip:
  global_load_dword v1, v2, s[4:5]
  s_waitcnt vmcnt(0)
  ds_write_b32 v2, v1
  s_waitcnt lgkmcnt(0)
  s_barrier
  global_store_dword v2, v1, s[4:5]
  s_endpgm
"""


@pytest.mark.parametrize("executor", ["lockstep", "serial"])
def test_the_launch_record_by_workgroup(tmp_path, monkeypatch, executor):
    """GFX950_RECORD: per workgroup, wave instructions by class, global bytes read and written by the
    active lanes, the longest wave; workgroup 0 takes the branch's two VALU more per wave."""
    path = tmp_path / "record.jsonl"
    monkeypatch.setenv("GFX950_RECORD", str(path))
    data = torch.arange(128, dtype=torch.int32)
    gfx950.run_asm(RECORDED, [data], grid=(2,), num_warps=2, lds_bytes=512, executor=executor)
    import json
    record = json.loads(path.read_text().splitlines()[-1])
    assert record["executor"] == executor and record["grid"] == [2, 1, 1]
    rows = {row["workgroup"][0]: row for row in record["workgroups"]}
    for group, extra in ((0, 2), (1, 0)):
        counts = rows[group]["wave_instructions"]
        assert counts == {"VALU": 2 * (1 + extra), "MFMA": 0, "SALU": 2 * 3, "SMEM": 2, "LDS": 2, "VMEM": 4,
                          "waits": 6, "barriers": 2}, (group, counts)
        assert rows[group]["bytes_read"] == 2 * 64 * 4 + 2 * 8     # the vector load, each wave's s_load_dwordx2
        assert rows[group]["bytes_written"] == 2 * 64 * 4
        assert rows[group]["longest_wave"] == 12 + extra
    assert record["wave_instructions"] == sum(sum(r["wave_instructions"].values()) for r in rows.values())


def test_lockstep_and_serial_agree_where_waves_diverge():
    """Waves looping a lane- and workgroup-dependent number of times (groups split and merge) leave the
    same memory under both executors."""
    text = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  v_and_b32_e32 v4, 7, v0
  v_add_u32_e32 v4, s2, v4
  v_mov_b32_e32 v1, 0
.Lloop:
  v_cmp_ne_u32_e32 vcc, 0, v4
  s_and_saveexec_b64 s[8:9], vcc
  s_cbranch_execz .Ldone
  v_add_u32_e32 v1, v1, v4
  v_subrev_u32_e32 v4, 1, v4
  s_or_b64 exec, exec, s[8:9]
  s_branch .Lloop
.Ldone:
  s_or_b64 exec, exec, s[8:9]
  v_mul_lo_u32 v3, s2, 1000
  v_add_u32_e32 v1, v1, v3
  global_store_dword v2, v1, s[4:5]
  s_endpgm
"""
    results = []
    for executor in ("lockstep", "serial"):
        out = torch.zeros(256, dtype=torch.int32)
        gfx950.run_asm(text, [out], grid=(4,), num_warps=4, executor=executor, order="reverse")
        results.append(out.clone())
    assert torch.equal(results[0], results[1])
    assert results[0].abs().sum() > 0



def test_a_write_back_completes_at_its_wait_or_the_next_release():
    """A store, its L2 written back (buffer_wbl2 sc1, outstanding until retired), then a flag's atomic:
    LLVM's release sequence has no wait between the two (the memory pipeline keeps the write-back ahead),
    so the atomic completes the write-back first, with or without the wait; the data is in memory."""
    text = """
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32_e32 v2, 2, v0
  global_store_dword v2, v0, s[4:5]
  s_waitcnt vmcnt(0)
  buffer_wbl2 sc1
  {wait}
  v_mov_b32_e32 v3, 0
  v_mov_b32_e32 v4, 1
  global_atomic_add v3, v4, s[6:7]
  s_endpgm
"""
    for wait, released in (("s_waitcnt vmcnt(0)", 0), ("", 1)):
        data, flag = torch.zeros(64, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
        launch = gfx950.run_asm(text.format(wait=wait), [data, flag])
        assert int(flag) == 64 and torch.equal(data, torch.arange(64, dtype=torch.int32))
        assert launch.dispatch.writeback_releases == released
