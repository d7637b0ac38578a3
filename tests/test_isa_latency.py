"""tools/isa_latency.py on small hand-written ISA: the round trips, bytes in flight and
barriers it counts are the ones worked out by hand in each test's docstring."""
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import isa_latency  # noqa: E402

# A 2-stage loop: kv_indptr's load, tile 0's load (its address from the index), then per
# pass the next tile's load issued before the wait that leaves exactly it outstanding.
TWO_STAGE = """
_kernel:
    s_load_dwordx2 s[2:3], s[0:1], 0x0      ; the old-firmware header (kernel arguments preloaded)
    s_waitcnt lgkmcnt(0)
    s_branch .LBB0_0
    .p2align 8
.LBB0_0:
    global_load_dword v1, v0, s[2:3]
    s_waitcnt vmcnt(0)
    global_load_dwordx4 v[4:7], v1, s[4:5]
.LBB0_1:
    global_load_dwordx4 v[8:11], v1, s[4:5] offset:16
    s_waitcnt vmcnt(1)
    v_mfma_f32_16x16x32_bf16 v[12:15], v[4:7], v[4:7], v[12:15]
    s_barrier
    v_mov_b32_e32 v4, v8
    s_cbranch_scc1 .LBB0_1
    s_endpgm
    .amdhsa_user_sgpr_kernarg_segment_ptr 1
    .amdhsa_user_sgpr_kernarg_preload_length 2
"""


def test_two_stage_loop_keeps_the_next_tile_in_flight():
    """Before the first MFMA: the index's round trip, then the tile's: 2. In the loop each
    MFMA has the next tile's 16 B per lane outstanding: 16 x 64 lanes x 4 waves = 4096 B per
    CU. The wait consumes the load of the pass before: the clock advances every other pass
    (0.5 round trips per tile), and each pass issues its one load at one time."""
    counts = isa_latency.isa_latency_counts(TWO_STAGE, waves_per_cu=4)
    assert counts["round_trips_to_first_mma"] == 2
    assert counts["round_trips_to_first_mma_kernargs_uncached"] == 2  # the header is skipped
    assert counts["bytes_in_flight_per_unit"] == 4096
    assert counts["max_bytes_in_flight_per_unit"] == 4096
    assert counts["round_trips_per_tile"] == 0.5
    assert counts["load_groups_per_tile"] == 1
    assert counts["load_bytes_per_tile_per_unit"] == 16 * 64 * 4
    assert (counts["barriers_per_tile"], counts["mma_per_tile"]) == (1, 1)


def test_loads_of_earlier_passes_count():
    """vmcnt(2): each MFMA has this pass's and the previous pass's loads outstanding (32 B
    per lane, 8192 B per CU at 4 waves; the first pass, from empty queues, had 16 and is
    not the steady state); a pass consumes the load of two passes before: one round trip
    every third pass."""
    counts = isa_latency.isa_latency_counts(TWO_STAGE.replace("vmcnt(1)", "vmcnt(2)"), waves_per_cu=4)
    assert counts["bytes_in_flight_per_unit"] == 32 * 64 * 4
    assert counts["round_trips_per_tile"] == 0.333


def test_a_wait_for_everything_leaves_nothing_in_flight():
    """vmcnt(0) in the loop: the pass waits for its own load, one round trip a tile."""
    counts = isa_latency.isa_latency_counts(TWO_STAGE.replace("vmcnt(1)", "vmcnt(0)"), waves_per_cu=4)
    assert counts["bytes_in_flight_per_unit"] == 0
    assert counts["round_trips_per_tile"] == 1


# One pass: the K bytes loaded and waited for before the scales are even issued (the
# 64-token SCALED form's shape), a store counted by vmcnt, an LDS read, then the MFMA.
CHAINED = """
.LBB0_1:
    buffer_load_dwordx4 v[2:5], v1, s[8:11], 0 offen
    buffer_store_dword v9, v1, s[12:15], 0 offen
    s_waitcnt vmcnt(1)
    ds_write_b128 v6, v[2:5]
    buffer_load_ubyte v7, v1, s[16:19], 0 offen
    global_load_dword v8, v[10:11], off
    s_waitcnt vmcnt(0) lgkmcnt(0)
    v_mfma_scale_f32_16x16x128_f8f6f4 v[12:15], v[2:9], v[2:9], v[12:15], v7, v8
    s_cbranch_scc1 .LBB0_1
    s_endpgm
"""


def test_loads_issued_after_a_wait_are_another_round_trip():
    """The scale and word loads go out after the K bytes' wait: 2 round trips and 2 load
    groups per tile, nothing outstanding at the MFMA; 16 + 1 + 4 B per lane issued."""
    counts = isa_latency.isa_latency_counts(CHAINED, waves_per_cu=8)
    assert counts["round_trips_to_first_mma"] == 2
    assert counts["round_trips_per_tile"] == 2
    assert counts["load_groups_per_tile"] == 2
    assert counts["bytes_in_flight_per_unit"] == 0
    assert counts["load_bytes_per_tile_per_unit"] == (16 + 1 + 4) * 64 * 8
    assert counts["loads_before_first_mma"] == 3 and counts["load_groups_before_first_mma"] == 2


def test_kernel_arguments_count_apart():
    """A kernel argument's scalar load on the chain: cached (not a round trip) in the main
    count, one round trip in the kernargs_uncached count; any other scalar load is one."""
    asm = """
    s_load_dwordx2 s[4:5], s[0:1], 0x10
    s_waitcnt lgkmcnt(0)
    global_load_dword v1, v0, s[4:5]
    s_waitcnt vmcnt(0)
    s_load_dword s6, s[4:5], 0x0
    s_waitcnt lgkmcnt(0)
    v_mfma_f32_16x16x32_bf16 v[12:15], v[4:7], v[4:7], v[12:15]
    s_endpgm
    .amdhsa_user_sgpr_kernarg_segment_ptr 1
    """
    counts = isa_latency.isa_latency_counts(asm, waves_per_cu=4)
    assert counts["round_trips_to_first_mma"] == 2
    assert counts["round_trips_to_first_mma_kernargs_uncached"] == 3
    assert "round_trips_per_tile" not in counts  # no loop


@pytest.mark.parametrize("operands, expected", [
    ("vmcnt(3)", {"vm": 3}), ("vmcnt(0) lgkmcnt(2)", {"vm": 0, "lgkm": 2}), ("lgkmcnt(0)", {"lgkm": 0}),
    ("0", {"vm": 0, "lgkm": 0}), ("0xcf7f", {}), ("0x0f75", {"vm": 5}), ("0xcf72", {"vm": 50}),
    ("0xc07f", {"lgkm": 0})])
def test_waitcnt_operands(operands, expected):
    """Named counters, and the raw simm16 (gfx9: vmcnt in bits 3:0 and 15:14, lgkmcnt in
    11:8, a counter at its largest value waits for nothing)."""
    assert isa_latency._waitcnt(operands) == expected


@pytest.mark.parametrize("mnemonic, nbytes", [
    ("global_load_dwordx4", 16), ("buffer_load_ubyte", 1), ("buffer_load_dwordx2", 8), ("global_load_dword", 4),
    ("global_load_lds_dwordx4", 16), ("buffer_load_short_d16", 2), ("global_store_dwordx4", 0),
    ("global_atomic_add", 0), ("buffer_wbl2", 0), ("ds_read_b128", 0), ("scratch_load_dwordx2", 0)])
def test_amdgcn_load_widths(mnemonic, nbytes):
    assert isa_latency.amdgcn_load_bytes(mnemonic) == nbytes


def sass_line(address, text, write_sb=7, read_sb=7, wait_mask=0, stall=1):
    """One instruction as `cuobjdump -sass` prints it: the text with its low encoding word,
    then the high word whose bits 41-57 hold the control fields."""
    control = stall | write_sb << 5 | read_sb << 8 | wait_mask << 11
    return (f"        /*{address:04x}*/                   {text} ;   /* 0x0000000000000000 */\n"
            f"                                                      /* 0x{control << 41:016x} */\n")


def test_sass_scoreboards():
    """sm_90: LDG (index) on SB0, an IMAD waiting on SB0 (1 round trip), then in the loop
    an LDG.E.128 on SB1 and an LDG.E.U8 on SB2; the HMMA waits on SB2 only, so the 16-byte
    load stays outstanding at it (16 x 32 threads x 8 warps = 4096 B per SM) until the
    back-edge's wait on SB1."""
    sass = "".join([
        sass_line(0x00, "LDG.E R2, desc[UR4][R2.64]", write_sb=0),
        sass_line(0x10, "IMAD R4, R2, 0x4, RZ", wait_mask=0b1),
        sass_line(0x20, "LDG.E.128 R8, desc[UR4][R4.64]", write_sb=1),
        sass_line(0x30, "LDG.E.U8 R12, desc[UR4][R4.64+0x100]", write_sb=2),
        sass_line(0x40, "HMMA.16816.F32.BF16 R16, R8, R8, R16", wait_mask=0b100),
        sass_line(0x50, "BAR.SYNC.DEFER_BLOCKING 0x0"),
        sass_line(0x60, "IADD3 R4, R4, 0x40, RZ", wait_mask=0b10),
        sass_line(0x70, "@P0 BRA 0x20"),
        sass_line(0x80, "EXIT"),
    ])
    counts = isa_latency.sass_latency_counts(sass, warps_per_sm=8)
    assert counts["round_trips_to_first_mma"] == 2
    assert counts["bytes_in_flight_per_unit"] == 16 * 32 * 8
    assert counts["round_trips_per_tile"] == 1 and counts["load_groups_per_tile"] == 1
    assert counts["load_bytes_per_tile_per_unit"] == 17 * 32 * 8
    assert counts["barriers_per_tile"] == 1 and counts["mma_per_tile"] == 1


def test_sass_depbar_keeps_the_newest():
    """DEPBAR.LE SB1, 1 waits until one instruction is left on SB1: of two 16-byte loads the
    newer stays outstanding at the HMMA."""
    sass = "".join([
        sass_line(0x00, "LDG.E.128 R8, desc[UR4][R4.64]", write_sb=1),
        sass_line(0x10, "LDG.E.128 R12, desc[UR4][R4.64+0x10]", write_sb=1),
        sass_line(0x20, "DEPBAR.LE SB1, 0x1"),
        sass_line(0x30, "HMMA.16816.F32.BF16 R16, R8, R8, R16"),
        sass_line(0x40, "@P0 BRA 0x0", wait_mask=0b10),
    ])
    counts = isa_latency.sass_latency_counts(sass, warps_per_sm=1)
    assert counts["bytes_in_flight_per_unit"] == 16 * 32


def test_sass_cp_async_groups():
    """cp.async: two 16-byte LDGSTS committed as one group (LDGDEPBAR), another group of
    one; DEPBAR.LE SB0, 1 leaves the newer group (16 B) outstanding at the HMMA."""
    sass = "".join([
        sass_line(0x00, "LDGSTS.E.BYPASS.128 [R2], desc[UR4][R4.64]"),
        sass_line(0x10, "LDGSTS.E.BYPASS.128 [R2+0x10], desc[UR4][R4.64+0x10]"),
        sass_line(0x20, "LDGDEPBAR"),
        sass_line(0x30, "LDGSTS.E.BYPASS.128 [R2+0x20], desc[UR4][R4.64+0x20]"),
        sass_line(0x40, "LDGDEPBAR"),
        sass_line(0x50, "DEPBAR.LE SB0, 0x1"),
        sass_line(0x60, "HMMA.16816.F32.BF16 R16, R8, R8, R16"),
        sass_line(0x70, "DEPBAR.LE SB0, 0x0"),
        sass_line(0x80, "@P0 BRA 0x0"),
    ])
    counts = isa_latency.sass_latency_counts(sass, warps_per_sm=1)
    assert counts["bytes_in_flight_per_unit"] == 16 * 32
    assert counts["load_bytes_per_tile_per_unit"] == 48 * 32
    assert counts["round_trips_per_tile"] == 1


# The FUSED merge's release as the gfx950 build emits it: the partial's stores, the wait,
# the barrier, then one lane writes the L2 back and moves the counter.
RELEASE = """
    buffer_store_dwordx4 v[2:5], v1, s[4:7], 0 offen
    buffer_store_dword v6, v7, s[4:7], 0 offen
    s_waitcnt vmcnt(0) ; v2
.Ltmp5:
    s_barrier
    s_and_saveexec_b64 s[0:1], s[2:3]
    s_cbranch_execz .LBB0_3
    buffer_wbl2 sc1
    s_waitcnt vmcnt(0)
    global_atomic_add v2, v2, v3, s[6:7] sc0
    s_waitcnt vmcnt(0)
    buffer_inv sc1
.LBB0_3:
    s_endpgm
"""


def test_release_order_in_every_wave():
    found = isa_latency.release_order(RELEASE)
    assert found["ordered"] and found["every_wave"]
    assert (found["last_store"], found["wait"], found["barrier"], found["release"], found["atomic"]) == (1, 2, 3, 6, 8)


@pytest.mark.parametrize("broken", [
    "no wait (today's FUSED on gfx950)", "the wait only in the releasing lane's branch",
    "a store after the wait", "the wait after the barrier"])
def test_release_order_misses(broken):
    """Each way a wave's store can still be in flight at the release is reported."""
    asm = {
        "no wait (today's FUSED on gfx950)": RELEASE.replace("    s_waitcnt vmcnt(0) ; v2\n", ""),
        "the wait only in the releasing lane's branch": RELEASE.replace(
            "    s_waitcnt vmcnt(0) ; v2\n", "    s_cbranch_execz .LBB0_2\n    s_waitcnt vmcnt(0)\n.LBB0_2:\n"),
        "a store after the wait": RELEASE.replace(
            "    s_waitcnt vmcnt(0) ; v2\n", "    s_waitcnt vmcnt(0) ; v2\n    buffer_store_dword v8, v7, s[4:7], 0 offen\n"),
        "the wait after the barrier": RELEASE.replace("    s_waitcnt vmcnt(0) ; v2\n.Ltmp5:\n    s_barrier\n",
                                                      "    s_barrier\n    s_waitcnt vmcnt(0) ; v2\n"),
    }[broken]
    assert asm != RELEASE
    assert not isa_latency.release_order(asm)["ordered"]


# --- tools/fence_order.py: the FUSED merge's loops, as the round trips the model charges (issue 38) ----------
def merge_loop(label, wait_inside=False):
    """One merge pass of 4 dwordx4 loads and a dword (at 8 waves: 4 x 8192 + 2048 bytes), its wait, its math."""
    loads = [f"    global_load_dwordx4 v[{10 + 4 * i}:{13 + 4 * i}], v[40:41], off nt" for i in range(4)]
    loads.append("    global_load_dword v30, v[42:43], off nt")
    if wait_inside:
        loads.insert(2, "    s_waitcnt vmcnt(0)")
    return "\n".join([f"{label}:", *loads, "    s_waitcnt vmcnt(0)", "    v_add_f32_e32 v50, v10, v30",
                      f"    s_cbranch_scc1 {label}"]) + "\n"


def test_the_merge_loops_and_the_splits_a_pass_covers():
    """Two merge loops after the counter's atomic (two head groups), each pass loading 34,816 bytes at 8 waves:
    69,632 bytes, 2.1 partials of 32,896 -> 2 splits a pass (down to a power of two); 8 splits merge in
    2 x ceil(8 / 2) = 8 round trips. A wait between a pass's loads is reported (the pass takes two)."""
    sys.path.insert(0, str(ROOT / "tools"))
    import fence_order
    release = RELEASE.replace("    buffer_inv sc1\n.LBB0_3:\n    s_endpgm\n", ".LBB0_3:\n    s_barrier\n    buffer_inv sc1\n")
    facts = fence_order.fused_fences(release + merge_loop(".LBB0_4") + merge_loop(".LBB0_5") + "    s_endpgm\n", 8)
    assert (facts["merge_loops"], facts["merge_loads_per_pass"], facts["merge_splits_per_pass"],
            facts["merge_loads_before_wait"]) == (2, 5, 2, True)
    assert fence_order.merge_round_trips(facts, 8) == 8 and fence_order.merge_round_trips(facts, 1) == 2
    waits = fence_order.fused_fences(release + merge_loop(".LBB0_4", True) + merge_loop(".LBB0_5") + "    s_endpgm\n", 8)
    assert waits["merge_loops"] == 2 and not waits["merge_loads_before_wait"]
    assert fence_order.merge_round_trips(None, 8) is None
