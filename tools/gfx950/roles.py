"""Which vector registers an instruction reads and which it writes (for the detector of
reads of registers never written). Rows of the register file: VGPRs 0-255, AGPRs 256-511.
A register pair a VALU instruction reads as one 64-bit value counts by its low half.

The first operand is the destination of VALU, MFMA and load instructions; stores, LDS
writes, loads straight to LDS and non-returning atomics have none; a returning buffer
atomic reads and writes its first operand; v_fmac/v_mac and the permlane swaps read their
destination too (v_dot2c_ accumulates into it). Scalar destinations (compares, readlane, carries) hold no vector rows.
"""
from .wave import AGPR_BASE

READS_DESTINATION = ("v_fmac_", "v_mac_", "v_dot2c_", "v_permlane16_swap", "v_permlane32_swap")
NO_DESTINATION = ("ds_write", "buffer_store", "global_store", "flat_store", "scratch_store", "buffer_wbl2",
                  "buffer_inv")
LDS_ATOMICS_WITHOUT_RETURN = {"ds_add_u32", "ds_sub_u32", "ds_max_u32", "ds_min_u32", "ds_max_i32", "ds_min_i32",
                              "ds_and_b32", "ds_or_b32", "ds_xor_b32", "ds_max_f32", "ds_min_f32"}


def _rows(op):
    if op.kind == "v":
        return list(range(op.index, op.index + op.count))
    if op.kind == "a":
        return list(range(AGPR_BASE + op.index, AGPR_BASE + op.index + op.count))
    return []


def vector_roles(ins):
    """-> (rows read, rows written) of one instruction."""
    name = ins.mnemonic
    operands = list(ins.operands)
    if not operands or name.startswith("s_"):
        return [], []
    atomic = "_atomic_" in name
    returns = atomic and ("sc0" in ins.modifiers or "glc" in ins.modifiers)
    no_destination = (name.startswith(NO_DESTINATION) or (atomic and not returns) or name in LDS_ATOMICS_WITHOUT_RETURN
                      or ("lds" in ins.modifiers and name.startswith("buffer_load")) or name.startswith("global_load_lds"))
    if no_destination:
        return [r for op in operands for r in _rows(op)], []
    written = _rows(operands[0])
    if name.startswith("v_") and not name.startswith("v_mfma"):
        # a 64-bit VALU source (a register pair) counts by its low half: LLVM leaves the
        # high half undefined where only the result's low half is used (v_mad_u64_u32 as
        # a 32-bit multiply-add), and an undefined high half that mattered (an address)
        # would fault the access
        read = [r for op in operands[1:] for r in _rows(op)[:1 if op.count == 2 else op.count]]
    else:
        read = [r for op in operands[1:] for r in _rows(op)]
    if name.startswith(READS_DESTINATION) or (atomic and name.startswith("buffer_atomic")):
        read += written
    return read, written
