"""The forms aiter's gfx950 MLA decode objects added to the emulator, each on hand-written amdgcn
(gfx950.run_asm) against numpy, and the code object reader's pieces that need no aiter file (the
kernel descriptor, the metadata note's MessagePack). No Triton build emits these forms, so these
hold the emulator to AMD's ISA text, not to hardware; aiter's decode running right end to end
(tests/test_aiter_emulated.py, with AITER_ASM_DIR) is the check against AMD's own use of them.
"""
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gfx950  # noqa: E402
from gfx950.codeobject import _unpack, kernel_descriptor  # noqa: E402

STORE = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v3, 2, v0
  {body}
  global_store_dword v3, v2, s[4:5]
  s_endpgm
"""


def lanes_of(body, extra_args=()):
    out = torch.full((64,), -1, dtype=torch.int32)
    gfx950.run_asm(STORE.format(body=body), [out, *extra_args])
    return out.numpy()


@pytest.mark.parametrize("row_lane", [0, 5, 15])
def test_dpp_row_newbcast_gives_each_row_its_lane(row_lane):
    got = lanes_of(f"v_mul_u32_u24 v1, v0, 3\n  v_mov_b32_dpp v2, v1 row_newbcast:{row_lane} row_mask:0xf bank_mask:0xf")
    lane = np.arange(64)
    assert got.tolist() == (3 * (lane - lane % 16 + row_lane)).tolist()


def test_gpr_idx_offsets_src0_until_it_is_turned_off():
    body = """v_mov_b32 v10, 100
  v_mov_b32 v11, 200
  v_mov_b32 v12, 300
  s_mov_b32 s6, 2
  s_set_gpr_idx_on s6, gpr_idx(SRC0)
  v_add_u32_e32 v20, v10, v0
  s_set_gpr_idx_off
  v_add_u32_e32 v21, v10, v0
  v_mul_u32_u24 v2, v20, 1000
  v_add_u32_e32 v2, v2, v21"""
    lane = np.arange(64)
    assert lanes_of(body).tolist() == ((300 + lane) * 1000 + 100 + lane).tolist()


def test_gpr_idx_of_another_operand_is_refused_by_name():
    body = """s_mov_b32 s6, 1
  s_set_gpr_idx_on s6, gpr_idx(DST)
  v_mov_b32 v2, v0
  s_set_gpr_idx_off"""
    with pytest.raises(gfx950.EmulationError, match="VGPR indexing of DST"):
        lanes_of(body)


def test_a_strided_descriptor_without_index_is_range_checked_in_bytes():
    # stride 4 (word 1 bits 16-29), num_records 40 bytes: offsets 0..252, those >= 40 read 0
    body = """s_load_dwordx2 s[8:9], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  s_and_b32 s9, s9, 0xffff
  s_or_b32 s9, s9, 0x40000
  s_mov_b32 s10, 40
  s_mov_b32 s11, 0x20000
  buffer_load_dword v2, v3, s[8:11], 0 offen
  s_waitcnt vmcnt(0)"""
    source = torch.arange(1, 65, dtype=torch.int32)
    got = lanes_of(body, [source])
    assert got.tolist() == [v if i < 10 else 0 for i, v in enumerate(range(1, 65))]


def test_kernel_descriptor_fields():
    raw = bytearray(64)
    struct.pack_into("<III", raw, 0, 163840, 0, 288)
    struct.pack_into("<q", raw, 16, 4288)
    rsrc1 = 63 | (3 << 18)                     # 512 VGPRs; fp32 denormals flushed (0), fp16/64 kept (3)
    rsrc2 = (2 << 1) | (1 << 7) | (1 << 8) | (1 << 9)   # 2 user SGPRs; workgroup ids x, y, z
    struct.pack_into("<III", raw, 44, 63, rsrc1, rsrc2)
    struct.pack_into("<HH", raw, 56, 1 << 3, 0)  # kernarg segment pointer
    d = kernel_descriptor(bytes(raw))
    assert (d["group_segment_fixed_size"], d["kernarg_size"], d["kernel_code_entry_byte_offset"]) == (163840, 288, 4288)
    assert (d["next_free_vgpr"], d["accum_offset"], d["float_denorm_mode_32"], d["float_denorm_mode_16_64"]) == \
        (512, 256, 0, 3)
    assert (d["user_sgpr_count"], d["user_sgpr_kernarg_segment_ptr"], d["user_sgpr_dispatch_ptr"]) == (2, 1, 0)
    assert [d[f"system_sgpr_workgroup_id_{a}"] for a in "xyz"] == [1, 1, 1]


def test_metadata_messagepack():
    # {"amdhsa.kernels": [{".name": "k", ".kernarg_segment_size": 288, ".args": [{".offset": 0, ".size": 8}]}]}
    blob = (b"\x81\xaeamdhsa.kernels\x91\x83\xa5.name\xa1k\xb5.kernarg_segment_size\xcd\x01\x20"
            b"\xa5.args\x91\x82\xa7.offset\x00\xa5.size\x08")
    value, end = _unpack(blob)
    assert end == len(blob)
    assert value == {"amdhsa.kernels": [{".name": "k", ".kernarg_segment_size": 288, ".args": [{".offset": 0,
                                                                                                 ".size": 8}]}]}


@pytest.mark.parametrize("high_word", [False, True])
def test_cvt_pk_fp8_f32_rounds_to_nearest_even_into_the_selected_word(high_word):
    """v_cvt_pk_fp8_f32 (aiter's P to e4m3): two floats to e4m3fn codes, nearest even (torch's conversion), into
    word 0 or (op_sel:[0,0,1]) word 1, the other word kept."""
    rng = np.random.default_rng(47)
    grid = torch.arange(0, 127, dtype=torch.uint8).view(torch.float8_e4m3fn).float().numpy()   # finite codes >= 0
    middles = (grid[:-1] + grid[1:]) / 2                                                          # ties both ways
    values = np.concatenate([grid, middles, -grid, -middles, rng.uniform(-448, 448, 200)]).astype(np.float32)
    values = values[:128]
    pairs = torch.tensor(values.view(np.int32).reshape(64, 2))
    sel = " op_sel:[0,0,1]" if high_word else ""
    body = f"""s_load_dwordx2 s[8:9], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v4, 3, v0
  global_load_dwordx2 v[6:7], v4, s[8:9]
  s_waitcnt vmcnt(0)
  v_mov_b32 v2, 0x5a5a5a5a
  v_cvt_pk_fp8_f32 v2, v6, v7{sel}"""
    got = lanes_of(body, [pairs]).view(np.uint32)
    codes = torch.tensor(values).to(torch.float8_e4m3fn).view(torch.uint8).numpy().astype(np.uint32).reshape(64, 2)
    packed = codes[:, 0] | (codes[:, 1] << 8)
    expected = (packed << 16) | 0x5A5A if high_word else 0x5A5A0000 | packed
    assert got.tolist() == expected.tolist()


def test_mfma_16x16x32_fp8_fp8_is_the_product_of_its_operands():
    """v_mfma_f32_16x16x32_fp8_fp8 (aiter's non-persistent decode): D (16 x 16) = A (16 x 32) B (32 x 16) on e4m3
    codes, A row i / B column j in lanes i (j) + 16 g holding k = 8 g .. 8 g + 7 (AMD's matrix instruction
    calculator for CDNA3), D row 4 g + r in lane j + 16 g, register r."""
    rng = np.random.default_rng(470)
    codes = rng.integers(0, 256, (2, 64, 8)).astype(np.uint8)
    codes[(codes & 0x7F) == 0x7F] = 0x38   # no NaN codes
    operands = torch.tensor(codes.reshape(2, 64, 8).view(np.int32).reshape(-1))
    out = torch.zeros(64 * 4, dtype=torch.float32)
    text = """
  s_load_dwordx4 s[4:7], s[0:1], 0x0
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v1, 3, v0
  global_load_dwordx2 v[4:5], v1, s[6:7]
  global_load_dwordx2 v[6:7], v1, s[6:7] offset:512
  s_waitcnt vmcnt(0)
  v_mfma_f32_16x16x32_fp8_fp8 v[8:11], v[4:5], v[6:7], 0
  s_nop 7
  s_nop 7
  v_lshlrev_b32 v1, 4, v0
  global_store_dwordx4 v1, v[8:11], s[4:5]
  s_endpgm
"""
    gfx950.run_asm(text, [out, operands])
    values = torch.tensor(codes).view(torch.float8_e4m3fn).double().numpy()   # (2, 64 lanes, 8 bytes)
    a = np.zeros((16, 32))
    b = np.zeros((32, 16))
    for lane in range(64):
        group = lane // 16
        a[lane % 16, 8 * group:8 * group + 8] = values[0, lane]
        b[8 * group:8 * group + 8, lane % 16] = values[1, lane]
    d = a @ b
    got = out.numpy().reshape(64, 4)
    expected = np.array([[d[4 * (lane // 16) + r, lane % 16] for r in range(4)] for lane in range(64)])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("overflow", [0, 1])
def test_the_descriptors_fp16_overflow_sets_mode_at_entry(overflow):
    """A code object's fp16_overflow (kernel descriptor rsrc1 bit 26, `.amdhsa_fp16_overflow`) is MODE.FP16_OVFL at
    entry: 1000.0 to e4m3 saturates to 448 (0x7E) with it, and is NaN (0x7F) without it."""
    text = f".amdhsa_fp16_overflow {overflow}\n" + STORE.format(body="""v_mov_b32 v1, 0x447a0000
  v_mov_b32 v2, 0
  v_cvt_pk_fp8_f32 v2, v1, v1""")
    out = torch.full((64,), -1, dtype=torch.int32)
    gfx950.run_asm(text, [out])
    assert (out.numpy() & 0xFF).tolist() == [0x7E if overflow else 0x7F] * 64


# The routine scalar and integer forms aiter's decode objects use and no corpus kernel runs (results/
# aiter_mla_forms.json): each result written to out[k * 64 + lane] (k: its row), against numpy.
ROUTINE = """
  s_load_dwordx2 s[4:5], s[0:1], 0x0
  s_load_dwordx2 s[8:9], s[0:1], 0x8
  s_waitcnt lgkmcnt(0)
  v_lshlrev_b32 v3, 2, v0
  s_min_u32 s10, s8, s9
  s_sub_u32 s11, s8, s9
  s_cselect_b32 s12, 1, 0
  s_cmp_eq_i32 s8, s9
  s_cselect_b32 s13, 1, 0
  s_cmp_le_u32 s8, s9
  s_cselect_b32 s14, 1, 0
  s_cmpk_eq_u32 s8, 0x1234
  s_cselect_b32 s15, 1, 0
  v_add_u32_e64 v4, v0, s8
  v_mul_u32_u24_e64 v5, v0, s9
  v_mul_i32_i24_e64 v6, s8, v0
  {stores}
  s_endpgm
"""
ROUTINE_ROWS = ("s10", "s11", "s12", "s13", "s14", "s15", "v4", "v5", "v6")


@pytest.mark.parametrize("a, b", [(0xFFFFF123, 0x01001234), (5, 5), (0x1234, 7), (7, 0x1234), (0x80000000, 1)])
def test_routine_scalar_and_integer_forms_of_aiters_decode(a, b):
    stores = "\n  ".join((f"v_mov_b32 v2, {reg}" if reg.startswith("s") else f"v_mov_b32 v2, {reg}") +
                         f"\n  global_store_dword v3, v2, s[4:5] offset:{256 * row}" for row, reg in enumerate(ROUTINE_ROWS))
    out = torch.full((len(ROUTINE_ROWS) * 64,), -1, dtype=torch.int32)
    gfx950.run_asm(ROUTINE.format(stores=stores), [out, a, b])
    got = out.numpy().view(np.uint32).reshape(len(ROUTINE_ROWS), 64).astype(np.int64)
    lane = np.arange(64, dtype=np.int64)
    mask = 0xFFFFFFFF

    def i24(x):
        return ((x & 0xFFFFFF) ^ 0x800000) - 0x800000

    def signed(x):
        return (x ^ 0x80000000) - 0x80000000
    expected = [min(a, b), (a - b) & mask, int(b > a), int(a == b), int(a <= b), int(a == 0x1234),
                (lane + a) & mask, (lane * (b & 0xFFFFFF)) & mask, (i24(a) * lane) & mask]
    for row, (reg, want) in enumerate(zip(ROUTINE_ROWS, expected)):
        assert got[row].tolist() == np.broadcast_to(np.asarray(want, dtype=np.int64), (64,)).tolist(), \
            f"{reg} (a {a:#x} = {signed(a)}, b {b:#x})"
