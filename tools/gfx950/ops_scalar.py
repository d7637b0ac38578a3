"""Scalar instructions: SOP1, SOP2, SOPC, SOPK, SOPP (branches, waits, the barrier, the end),
SMEM loads, and the MODE register. Values are Python ints of 32 (or 64) bits; SCC as the
CDNA4 ISA pseudocode sets it."""
import numpy as np

from .memory import words_of
from .registry import Stop, Unsupported, refuse_modifiers, semantics
from .wave import EXEC_LO, M0, MASK32, VCC_LO, scalar_getter, sgpr_index

MASK64 = (1 << 64) - 1


def signed32(x):
    x &= MASK32
    return x - (1 << 32) if x & 0x80000000 else x


def signed64(x):
    x &= MASK64
    return x - (1 << 64) if x >> 63 else x


def _dest(ins, position=0):
    index = sgpr_index(ins.operands[position])
    if index is None:
        raise Unsupported(f"{ins.mnemonic}: destination {ins.operands[position].text} is not a scalar register")
    return index


def _writer(index, width):
    """A setter of a scalar destination (EXEC writes keep the lane mask in step)."""
    if width == 64:
        return lambda w, value: w.set_s64(index, value)
    if index in (EXEC_LO, EXEC_LO + 1):
        def write_exec(w, value):
            w.s[index] = value & MASK32
            w.sync_exec()
        return write_exec

    def write(w, value):
        w.s[index] = value & MASK32
    return write


# --- SOP2 / SOP1 / SOPK: (result, scc or None) from the sources ----------------------------
def _add_i32(a, b):
    r = (a + b) & MASK32
    return r, int((a >> 31) == (b >> 31) and (r >> 31) != (a >> 31))


def _sub_i32(a, b):
    r = (a - b) & MASK32
    return r, int((a >> 31) != (b >> 31) and (r >> 31) != (a >> 31))


def _bfe(a, b, signed, width):
    offset, size = b & (width - 1), (b >> 16) & 0x7F
    if size == 0:
        return 0
    value = (a >> offset) & ((1 << size) - 1)
    if signed and value >> (size - 1) & 1:
        value -= 1 << size
    return value & (MASK32 if width == 32 else MASK64)


def _lshl_add(n):
    def op(a, b):
        r = (a << n) + b
        return r & MASK32, int(r > MASK32)
    return op


SOP2 = {  # name: (width, function(a, b, scc) -> (d, scc or None))
    "s_add_u32": (32, lambda a, b, c: ((a + b) & MASK32, int(a + b > MASK32))),
    "s_sub_u32": (32, lambda a, b, c: ((a - b) & MASK32, int(b > a))),
    "s_add_i32": (32, lambda a, b, c: _add_i32(a, b)),
    "s_sub_i32": (32, lambda a, b, c: _sub_i32(a, b)),
    "s_addc_u32": (32, lambda a, b, c: ((a + b + c) & MASK32, int(a + b + c > MASK32))),
    "s_subb_u32": (32, lambda a, b, c: ((a - b - c) & MASK32, int(b + c > a))),
    "s_min_i32": (32, lambda a, b, c: (a if signed32(a) < signed32(b) else b, int(signed32(a) < signed32(b)))),
    "s_min_u32": (32, lambda a, b, c: (a if a < b else b, int(a < b))),
    "s_max_i32": (32, lambda a, b, c: (a if signed32(a) >= signed32(b) else b, int(signed32(a) >= signed32(b)))),
    "s_max_u32": (32, lambda a, b, c: (a if a >= b else b, int(a >= b))),
    "s_cselect_b32": (32, lambda a, b, c: (a if c else b, None)),
    "s_cselect_b64": (64, lambda a, b, c: (a if c else b, None)),
    "s_and_b32": (32, lambda a, b, c: (a & b, int(a & b != 0))),
    "s_and_b64": (64, lambda a, b, c: (a & b, int(a & b != 0))),
    "s_or_b32": (32, lambda a, b, c: (a | b, int(a | b != 0))),
    "s_or_b64": (64, lambda a, b, c: (a | b, int(a | b != 0))),
    "s_xor_b32": (32, lambda a, b, c: (a ^ b, int(a ^ b != 0))),
    "s_xor_b64": (64, lambda a, b, c: (a ^ b, int(a ^ b != 0))),
    "s_andn2_b32": (32, lambda a, b, c: (a & ~b & MASK32, int(a & ~b & MASK32 != 0))),
    "s_andn2_b64": (64, lambda a, b, c: (a & ~b & MASK64, int(a & ~b & MASK64 != 0))),
    "s_orn2_b32": (32, lambda a, b, c: ((a | ~b) & MASK32, int((a | ~b) & MASK32 != 0))),
    "s_orn2_b64": (64, lambda a, b, c: ((a | ~b) & MASK64, int((a | ~b) & MASK64 != 0))),
    "s_nand_b64": (64, lambda a, b, c: (~(a & b) & MASK64, int(~(a & b) & MASK64 != 0))),
    "s_nor_b64": (64, lambda a, b, c: (~(a | b) & MASK64, int(~(a | b) & MASK64 != 0))),
    "s_xnor_b64": (64, lambda a, b, c: (~(a ^ b) & MASK64, int(~(a ^ b) & MASK64 != 0))),
    "s_lshl_b32": (32, lambda a, b, c: ((a << (b & 31)) & MASK32, int((a << (b & 31)) & MASK32 != 0))),
    "s_lshl_b64": (64, lambda a, b, c: ((a << (b & 63)) & MASK64, int((a << (b & 63)) & MASK64 != 0))),
    "s_lshr_b32": (32, lambda a, b, c: (a >> (b & 31), int(a >> (b & 31) != 0))),
    "s_lshr_b64": (64, lambda a, b, c: (a >> (b & 63), int(a >> (b & 63) != 0))),
    "s_ashr_i32": (32, lambda a, b, c: ((signed32(a) >> (b & 31)) & MASK32, int(signed32(a) >> (b & 31) != 0))),
    "s_ashr_i64": (64, lambda a, b, c: ((signed64(a) >> (b & 63)) & MASK64, int(signed64(a) >> (b & 63) != 0))),
    "s_bfm_b32": (32, lambda a, b, c: ((((1 << (a & 31)) - 1) << (b & 31)) & MASK32, None)),
    "s_mul_i32": (32, lambda a, b, c: ((signed32(a) * signed32(b)) & MASK32, None)),
    "s_mul_hi_u32": (32, lambda a, b, c: ((a * b) >> 32, None)),
    "s_mul_hi_i32": (32, lambda a, b, c: (((signed32(a) * signed32(b)) >> 32) & MASK32, None)),
    "s_bfe_u32": (32, lambda a, b, c: (_bfe(a, b, False, 32), int(_bfe(a, b, False, 32) != 0))),
    "s_bfe_i32": (32, lambda a, b, c: (_bfe(a, b, True, 32), int(_bfe(a, b, True, 32) != 0))),
    "s_absdiff_i32": (32, lambda a, b, c: (abs(signed32(a) - signed32(b)) & MASK32,
                                           int(abs(signed32(a) - signed32(b)) != 0))),
    "s_lshl1_add_u32": (32, lambda a, b, c: _lshl_add(1)(a, b)),
    "s_lshl2_add_u32": (32, lambda a, b, c: _lshl_add(2)(a, b)),
    "s_lshl3_add_u32": (32, lambda a, b, c: _lshl_add(3)(a, b)),
    "s_lshl4_add_u32": (32, lambda a, b, c: _lshl_add(4)(a, b)),
    "s_pack_ll_b32_b16": (32, lambda a, b, c: ((a & 0xFFFF) | ((b & 0xFFFF) << 16), None)),
    "s_pack_lh_b32_b16": (32, lambda a, b, c: ((a & 0xFFFF) | (b & 0xFFFF0000), None)),
    "s_pack_hh_b32_b16": (32, lambda a, b, c: ((a >> 16) | (b & 0xFFFF0000), None)),
}
# shift amounts and bfe controls are 32-bit operands even in the 64-bit forms
SOP2_NARROW_SECOND = {"s_lshl_b64", "s_lshr_b64", "s_ashr_i64"}


def _ff1(x, width):
    return (x & -x).bit_length() - 1 if x else MASK32


def _flbit(x, width):
    return width - x.bit_length() if x else MASK32


SOP1 = {  # name: (width, function(a) -> (d, scc or None))
    "s_mov_b32": (32, lambda a: (a, None)),
    "s_mov_b64": (64, lambda a: (a, None)),
    "s_not_b32": (32, lambda a: (~a & MASK32, int(~a & MASK32 != 0))),
    "s_not_b64": (64, lambda a: (~a & MASK64, int(~a & MASK64 != 0))),
    "s_brev_b32": (32, lambda a: (int(f"{a:032b}"[::-1], 2), None)),
    "s_bcnt0_i32_b32": (32, lambda a: (32 - bin(a).count("1"), int(32 - bin(a).count("1") != 0))),
    "s_bcnt1_i32_b32": (32, lambda a: (bin(a).count("1"), int(a != 0))),
    "s_bcnt1_i32_b64": (64, lambda a: (bin(a).count("1"), int(a != 0))),
    "s_ff1_i32_b32": (32, lambda a: (_ff1(a, 32), None)),
    "s_ff1_i32_b64": (64, lambda a: (_ff1(a, 64), None)),
    "s_flbit_i32_b32": (32, lambda a: (_flbit(a, 32), None)),
    "s_flbit_i32_b64": (64, lambda a: (_flbit(a, 64), None)),
    "s_sext_i32_i8": (32, lambda a: ((a & 0xFF) - ((a & 0x80) << 1) & MASK32, None)),
    "s_sext_i32_i16": (32, lambda a: ((a & 0xFFFF) - ((a & 0x8000) << 1) & MASK32, None)),
    "s_abs_i32": (32, lambda a: (abs(signed32(a)) & MASK32, int(abs(signed32(a)) != 0))),
}
SOP1_64_TO_32 = {"s_bcnt1_i32_b64", "s_ff1_i32_b64", "s_flbit_i32_b64"}
SAVEEXEC = {  # name: new exec from (old exec, source)
    "s_and_saveexec_b64": lambda e, s: e & s,
    "s_or_saveexec_b64": lambda e, s: e | s,
    "s_xor_saveexec_b64": lambda e, s: e ^ s,
    "s_andn2_saveexec_b64": lambda e, s: s & ~e & MASK64,
    "s_orn2_saveexec_b64": lambda e, s: (s | ~e) & MASK64,
    "s_nand_saveexec_b64": lambda e, s: ~(e & s) & MASK64,
    "s_andn1_saveexec_b64": lambda e, s: ~s & e & MASK64,
}
SOPC = {
    "eq_i32": lambda a, b: a == b, "lg_i32": lambda a, b: a != b,
    "gt_i32": lambda a, b: signed32(a) > signed32(b), "ge_i32": lambda a, b: signed32(a) >= signed32(b),
    "lt_i32": lambda a, b: signed32(a) < signed32(b), "le_i32": lambda a, b: signed32(a) <= signed32(b),
    "eq_u32": lambda a, b: a == b, "lg_u32": lambda a, b: a != b, "gt_u32": lambda a, b: a > b,
    "ge_u32": lambda a, b: a >= b, "lt_u32": lambda a, b: a < b, "le_u32": lambda a, b: a <= b,
}


@semantics(*SOP2)
def compile_sop2(ins, ctx):
    refuse_modifiers(ins, ())
    width, function = SOP2[ins.mnemonic]
    narrow = ins.mnemonic in SOP2_NARROW_SECOND
    first = scalar_getter(ins.operands[1], width)
    second = scalar_getter(ins.operands[2], 32 if narrow else width)
    write = _writer(_dest(ins), width)

    def run(w):
        value, scc = function(first(w), second(w), w.scc)
        write(w, value)
        if scc is not None:
            w.scc = scc
    return run


@semantics(*SOP1)
def compile_sop1(ins, ctx):
    refuse_modifiers(ins, ())
    width, function = SOP1[ins.mnemonic]
    source = scalar_getter(ins.operands[1], width)
    write = _writer(_dest(ins), 32 if ins.mnemonic in SOP1_64_TO_32 else width)

    def run(w):
        value, scc = function(source(w))
        write(w, value)
        if scc is not None:
            w.scc = scc
    return run


@semantics("s_bitset0_b32", "s_bitset1_b32", "s_bitset0_b64", "s_bitset1_b64")
def compile_bitset(ins, ctx):
    """S_BITSET0/1: D[S0[4:0]] (b64: S0[5:0]) = 0 / 1, the other bits of D kept; SCC unchanged."""
    refuse_modifiers(ins, ())
    width = 64 if ins.mnemonic.endswith("b64") else 32
    index = _dest(ins)
    source = scalar_getter(ins.operands[1], 32)
    write = _writer(index, width)
    value = 1 if "bitset1" in ins.mnemonic else 0

    def run(w):
        bit = source(w) & (width - 1)
        old = w.s64(index) if width == 64 else w.s[index]
        write(w, (old & ~(1 << bit)) | (value << bit))
    return run


@semantics(*SAVEEXEC)
def compile_saveexec(ins, ctx):
    refuse_modifiers(ins, ())
    function = SAVEEXEC[ins.mnemonic]
    source = scalar_getter(ins.operands[1], 64)
    write = _writer(_dest(ins), 64)

    def run(w):
        old = w.s64(EXEC_LO)
        value = source(w)
        write(w, old)
        new = function(old, value)
        w.set_exec(new & MASK32, new >> 32)
        w.scc = int(new != 0)
    return run


@semantics("s_cmov_b32", "s_cmov_b64", "s_cmovk_i32")
def compile_cmov(ins, ctx):
    width = 64 if ins.mnemonic.endswith("64") else 32
    source = scalar_getter(ins.operands[1], width)
    if ins.mnemonic == "s_cmovk_i32":
        value = ins.operands[1].value
        source = (lambda w: (value - ((value & 0x8000) << 1)) & MASK32)  # noqa: E731
    write = _writer(_dest(ins), width)

    def run(w):
        if w.scc:
            write(w, source(w))
    return run


@semantics(*(f"s_cmp_{name}" for name in SOPC), "s_cmp_eq_u64", "s_cmp_lg_u64")
def compile_sopc(ins, ctx):
    refuse_modifiers(ins, ())
    kind = ins.mnemonic[len("s_cmp_"):]
    width = 64 if kind.endswith("64") else 32
    function = SOPC.get(kind) or {"eq_u64": lambda a, b: a == b, "lg_u64": lambda a, b: a != b}[kind]
    first, second = scalar_getter(ins.operands[0], width), scalar_getter(ins.operands[1], width)

    def run(w):
        w.scc = int(function(first(w), second(w)))
    return run


@semantics("s_bitcmp0_b32", "s_bitcmp1_b32")
def compile_bitcmp(ins, ctx):
    first, second = scalar_getter(ins.operands[0]), scalar_getter(ins.operands[1])
    want = int(ins.mnemonic[8])

    def run(w):
        w.scc = int(((first(w) >> (second(w) & 31)) & 1) == want)
    return run


def _simm16(value, signed):
    value &= 0xFFFF
    return (value - ((value & 0x8000) << 1)) & MASK32 if signed else value


@semantics("s_movk_i32", "s_addk_i32", "s_mulk_i32", *(f"s_cmpk_{k}" for k in SOPC))
def compile_sopk(ins, ctx):
    refuse_modifiers(ins, ())
    name = ins.mnemonic
    signed = name.endswith("i32")
    imm = _simm16(ins.operands[1].value, signed)
    if name.startswith("s_cmpk_"):
        function = SOPC[name[len("s_cmpk_"):]]
        first = scalar_getter(ins.operands[0])

        def run_cmp(w):
            w.scc = int(function(first(w), imm))
        return run_cmp
    index = _dest(ins)
    write = _writer(index, 32)
    if name == "s_movk_i32":
        return lambda w: write(w, imm)
    if name == "s_mulk_i32":
        return lambda w: write(w, signed32(w.s[index]) * signed32(imm))

    def run_add(w):
        value, w.scc = _add_i32(w.s[index], imm)
        write(w, value)
    return run_add


# --- SOPP: control flow, waits, the barrier ----------------------------------------------
BRANCH_CONDITIONS = {
    "s_branch": lambda w: True,
    "s_cbranch_scc0": lambda w: w.scc == 0,
    "s_cbranch_scc1": lambda w: w.scc == 1,
    "s_cbranch_vccz": lambda w: w.s[VCC_LO] == 0 and w.s[VCC_LO + 1] == 0,
    "s_cbranch_vccnz": lambda w: w.s[VCC_LO] != 0 or w.s[VCC_LO + 1] != 0,
    "s_cbranch_execz": lambda w: w.s[EXEC_LO] == 0 and w.s[EXEC_LO + 1] == 0,
    "s_cbranch_execnz": lambda w: w.s[EXEC_LO] != 0 or w.s[EXEC_LO + 1] != 0,
}


@semantics(*BRANCH_CONDITIONS)
def compile_branch(ins, ctx):
    target = ctx.target(ins.operands[0])
    condition = BRANCH_CONDITIONS[ins.mnemonic]

    def run(w):
        if condition(w):
            w.pc = target
    return run


@semantics("s_endpgm")
def compile_endpgm(ins, ctx):
    def run(w):
        w.done = True
        return Stop.END
    return run


@semantics("s_barrier")
def compile_barrier(ins, ctx):
    def run(w):
        w.at_barrier = True
        return Stop.BARRIER
    return run


@semantics("s_waitcnt")
def compile_waitcnt(ins, ctx):
    vm, lgkm = ins.modifiers["vmcnt"], ins.modifiers["lgkmcnt"]

    def run(w):
        w.workgroup.retire(w, "vm", vm)
        w.workgroup.retire(w, "lgkm", lgkm)
    return run


@semantics("s_nop", "s_sleep", "s_setprio", "s_icache_inv", "s_dcache_inv", "s_dcache_wb", "s_sethalt_no",
           "s_sendmsg", "s_ttracedata")
def compile_noop(ins, ctx):
    if ins.mnemonic == "s_sendmsg" and "dealloc" not in ins.text.lower():
        raise Unsupported(f"{ins.text}: only the VGPR-deallocation message is a no-op here")
    return lambda w: None


# MODE register fields (gfx9): FP_ROUND [3:0], FP_DENORM [7:4], DX10_CLAMP [8], IEEE [9],
# ... FP16_OVFL [23]. Triton sets bit 23 on gfx950 (fp8 conversions saturate).
HW_REG_MODE = "HW_REG_MODE"
MODE_FP16_OVFL = 1 << 23


def _hwreg(operand):
    name, *rest = operand.value
    offset, size = (int(rest[0], 0), int(rest[1], 0)) if rest else (0, 32)
    if name not in (HW_REG_MODE, "1"):
        raise Unsupported(f"hardware register {name} not emulated (only {HW_REG_MODE})")
    return offset, size


@semantics("s_setreg_imm32_b32", "s_setreg_b32")
def compile_setreg(ins, ctx):
    offset, size = _hwreg(ins.operands[0])
    source = scalar_getter(ins.operands[1])
    field = ((1 << size) - 1) << offset

    def run(w):
        w.mode = (w.mode & ~field) | ((source(w) << offset) & field)
    return run


@semantics("s_getreg_b32")
def compile_getreg(ins, ctx):
    offset, size = _hwreg(ins.operands[1])
    write = _writer(_dest(ins), 32)
    return lambda w: write(w, (w.mode >> offset) & ((1 << size) - 1))


@semantics("s_memtime", "s_memrealtime")
def compile_clock(ins, ctx):
    """A counter that grows by one tick per wave instruction: the emulator keeps no time."""
    write = _writer(_dest(ins), 64)
    return lambda w: write(w, w.executed)


@semantics("s_getpc_b64")
def compile_getpc(ins, ctx):
    write = _writer(_dest(ins), 64)
    return lambda w: write(w, w.pc * 4)


# --- SMEM -----------------------------------------------------------------------------------
SMEM_DWORDS = {"s_load_dword": 1, "s_load_dwordx2": 2, "s_load_dwordx4": 4, "s_load_dwordx8": 8,
               "s_load_dwordx16": 16}


@semantics(*SMEM_DWORDS)
def compile_smem_load(ins, ctx):
    refuse_modifiers(ins, ("glc", "offset", "nv"))
    count = SMEM_DWORDS[ins.mnemonic]
    first = _dest(ins)
    base = scalar_getter(ins.operands[1], 64)
    offset = scalar_getter(ins.operands[2]) if len(ins.operands) > 2 else (lambda w: 0)
    extra = ins.modifiers.get("offset", 0)
    active = np.zeros(64, dtype=bool)
    active[0] = True

    def run(w):
        address = (base(w) + (offset(w) & ~3) + extra) & ~3 & MASK64
        # the scalar cache: read from memory (kernel arguments and constants; not through an L2)
        data = w.workgroup.memory_load(w, np.full(64, address, dtype=np.uint64), 4 * count, active, ins, True)
        values = [int(x) for x in words_of(data)[:, 0]]

        def land():
            w.s[first:first + count] = values
            if first <= EXEC_LO < first + count or first <= EXEC_LO + 1 < first + count:
                w.sync_exec()
        w.workgroup.issue(w, "lgkm", land)
    return run


# --- VGPR indexing (s_set_gpr_idx_on / _off; CDNA4 ISA, "VGPR indexing") ---------------------
# s_set_gpr_idx_on S0, gpr_idx(MODES) sets M0[7:0] = S0[7:0] (the index) and M0[15:12] = the modes
# (bit 0 SRC0, 1 SRC1, 2 SRC2, 3 DST) and turns indexing on: until s_set_gpr_idx_off, a VALU
# operand of an enabled kind names the VGPR its number + M0[7:0]. Only SRC0 is implemented.
GPR_IDX_MODES = {"SRC0": 1, "SRC1": 2, "SRC2": 4, "DST": 8}


@semantics("s_set_gpr_idx_on")
def compile_set_gpr_idx_on(ins, ctx):
    source, mode = ins.operands
    if mode.kind != "gpr_idx":
        raise Unsupported(f"{ins.text}: the mode operand")
    bits = sum(GPR_IDX_MODES[m] for m in mode.value)
    get = scalar_getter(source)

    def run(w):
        w.s[M0] = (w.s[M0] & ~0xF0FF & 0xFFFFFFFF) | (get(w) & 0xFF) | (bits << 12)
        w.gpr_idx = True
    return run


@semantics("s_set_gpr_idx_off")
def compile_set_gpr_idx_off(ins, ctx):
    def run(w):
        w.gpr_idx = False
    return run


def index_regions(code, program, context):
    """Recompile the VALU instructions between an s_set_gpr_idx_on and the next s_set_gpr_idx_off
    (in program order) so that, while indexing is on, their src0 VGPR is offset by M0[7:0]; a mode
    other than SRC0 is Unsupported. Each index's variant is compiled once, when first run.
    -> the program counters rewritten (they run wave by wave, never in a lockstep group)."""
    from dataclasses import replace
    from .registry import SEMANTICS
    region, rewritten = None, []
    for pc, ins in enumerate(program.instructions):
        if ins.mnemonic == "s_set_gpr_idx_on":
            region = ins.operands[1].value if len(ins.operands) > 1 else ()
            continue
        if ins.mnemonic == "s_set_gpr_idx_off":
            region = None
            continue
        if region is None or not ins.mnemonic.startswith("v_"):
            continue
        rewritten.append(pc)
        if set(region) != {"SRC0"}:
            code[pc] = _refuse(f"{ins.text}: VGPR indexing of {', '.join(region)} (only SRC0 is implemented)")
            continue
        plain, variants = code[pc], {}
        src0 = 1 if len(ins.operands) > 1 else 0

        def run(w, plain=plain, variants=variants, ins=ins, src0=src0):
            if not getattr(w, "gpr_idx", False):
                return plain(w)
            index = w.s[M0] & 0xFF
            if index not in variants:
                op = ins.operands[src0]
                if op.kind != "v":
                    variants[index] = plain
                else:
                    moved = replace(op, index=op.index + index)
                    operands = ins.operands[:src0] + (moved,) + ins.operands[src0 + 1:]
                    variants[index] = SEMANTICS[ins.mnemonic](replace(ins, operands=operands), context)
            return variants[index](w)
        code[pc] = run
    return rewritten


def _refuse(why):
    def run(w):
        raise Unsupported(why)
    return run
