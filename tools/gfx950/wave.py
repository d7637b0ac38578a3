"""A wave's registers, and the compilation of operands into fast getters and setters.

Registers of one wave (64 lanes):
  s        -- the scalar file as a Python list of 32-bit ints: s0..s101, flat_scratch 102-103,
              xnack_mask 104-105, VCC 106-107, ttmp 108-123, M0 124, EXEC 126-127
  v        -- numpy uint32 (512, 64): VGPRs v0..v255 in rows 0-255, AGPRs a0..a255 in rows 256-511
  scc      -- the scalar condition code (0/1)
  mode     -- the MODE register (round, denorm, IEEE, FP16_OVFL bits)

EXEC is kept twice: as the two SGPRs and as a boolean lane mask (exec_mask, exec_all) that
every VALU write uses; `set_exec` keeps them equal.
"""
import itertools
from collections import deque

import numpy as np

from .numerics import U32

LANES = 64
LANE_IDS = np.arange(LANES, dtype=np.uint32)
_LANE_BITS = np.arange(LANES, dtype=np.uint64)
AGPR_BASE = 256
VCC_LO, VCC_HI, M0, NULL, EXEC_LO, EXEC_HI = 106, 107, 124, 125, 126, 127
SPECIAL_SGPR = {"vcc": VCC_LO, "vcc_lo": VCC_LO, "vcc_hi": VCC_HI, "m0": M0, "exec": EXEC_LO, "exec_lo": EXEC_LO,
                "exec_hi": EXEC_HI, "flat_scratch": 102, "flat_scratch_lo": 102, "flat_scratch_hi": 103,
                "xnack_mask": 104, "xnack_mask_lo": 104, "xnack_mask_hi": 105, "null": NULL}
TTMP_BASE = 108
MASK32 = 0xFFFFFFFF
# inline float constants as float32 bit patterns (the same values as f16 and f64 further down)
INLINE_F32 = {0.5: 0x3F000000, -0.5: 0xBF000000, 1.0: 0x3F800000, -1.0: 0xBF800000, 2.0: 0x40000000,
              -2.0: 0xC0000000, 4.0: 0x40800000, -4.0: 0xC0800000, 0.15915494: 0x3E22F983}
INLINE_F16 = {0.5: 0x3800, -0.5: 0xB800, 1.0: 0x3C00, -1.0: 0xBC00, 2.0: 0x4000, -2.0: 0xC000, 4.0: 0x4400,
              -4.0: 0xC400, 0.15915494: 0x3118}
INLINE_F64 = {0.5: 0x3FE0000000000000, -0.5: 0xBFE0000000000000, 1.0: 0x3FF0000000000000,
              -1.0: 0xBFF0000000000000, 2.0: 0x4000000000000000, -2.0: 0xC000000000000000,
              4.0: 0x4010000000000000, -4.0: 0xC010000000000000, 0.15915494: 0x3FC45F306DC9C882}


_WAVE_KEYS = itertools.count(1)


class EmulationError(Exception):
    """Execution stopped: an instruction or form the emulator does not know, an access
    outside every tensor, a hang, a detector's finding. The message is one line naming the
    kernel, the workgroup and wave, the amdgcn instruction and its line, the Python source
    line the build's `.loc` gives it, and the fault. (Not a RuntimeError: code that treats a
    failed launch as a reason to fall back, as submission.py does, must not take it for
    one.)"""


def mask_to_bool(lo, hi):
    """Two 32-bit ints (a lane mask in an SGPR pair) -> bool (64,)."""
    return ((np.uint64(((hi & MASK32) << 32) | (lo & MASK32)) >> _LANE_BITS) & np.uint64(1)).astype(bool)


def bool_to_mask(mask):
    """bool (64,) -> (lo, hi) ints."""
    value = int((np.asarray(mask, dtype=np.uint64) << _LANE_BITS).sum(dtype=np.uint64))
    return value & MASK32, value >> 32


class Wave:
    """One wave's state while it runs. `storage` (v (512, 64) uint32, defined (512,) bool,
    exec_mask (64,) bool): views into the arrays of all waves run in lockstep (executor's
    Lockstep); by default the wave's own."""
    shape = (LANES,)   # the lanes' shape of the values an instruction computes (GroupWave: (waves, 64))

    def __init__(self, workgroup, wave_id, entry, storage=None):
        self.workgroup = workgroup
        self.wave_id = wave_id
        self.key = next(_WAVE_KEYS)   # a nonzero tag of this wave (its stores in flight)
        self.s = [0] * 128
        if storage is None:
            storage = (np.zeros((512, LANES), dtype=np.uint32), np.zeros(512, dtype=bool), np.ones(LANES, dtype=bool))
        self.v, self.defined, self.exec_mask = storage
        self.scc = 0
        self.pc = entry
        self.mode = 0
        self.done = False
        self.at_barrier = False
        self.executed = 0
        self.pending = {"vm": deque(), "lgkm": deque()}
        self.writebacks = deque()   # the lines of this wave's buffer_wbl2 sc1 not yet retired
        self.exec_all = True
        self.set_exec(MASK32, MASK32)
        self.scratch = None

    # --- EXEC and lane masks ---------------------------------------------------------
    def set_exec(self, lo, hi):
        self.s[EXEC_LO], self.s[EXEC_HI] = lo & MASK32, hi & MASK32
        self.exec_mask[:] = mask_to_bool(lo, hi)
        self.exec_all = (lo & MASK32) == MASK32 and (hi & MASK32) == MASK32

    def sync_exec(self):
        """After an SALU write to exec_lo / exec_hi."""
        self.set_exec(self.s[EXEC_LO], self.s[EXEC_HI])

    def read_mask(self, index):
        return mask_to_bool(self.s[index], self.s[index + 1])

    def write_mask(self, index, mask):
        """A per-lane result into an SGPR pair (lanes outside EXEC write 0)."""
        self.put_mask(index, mask & self.exec_mask)

    def put_mask(self, index, mask):
        """A lane mask into an SGPR pair as it is (EXEC follows when the pair is EXEC)."""
        lo, hi = bool_to_mask(mask)
        self.s[index], self.s[index + 1] = lo, hi
        if index == EXEC_LO:
            self.sync_exec()

    # --- VGPR writes under EXEC ----------------------------------------------------------
    def write_v(self, row, values):
        if self.exec_all:
            self.v[row] = values
        else:
            np.copyto(self.v[row], values, where=self.exec_mask, casting="unsafe")

    def write_v_where(self, row, values, mask):
        """values into row where `mask` (already combined with EXEC, as a DPP write is)."""
        np.copyto(self.v[row], values, where=mask, casting="unsafe")

    def write_v64(self, row, values):
        values = np.asarray(values, dtype=np.uint64)
        self.write_v(row, (values & np.uint64(MASK32)).astype(U32))
        self.write_v(row + 1, (values >> np.uint64(32)).astype(U32))

    def read_v64(self, row):
        return self.v[row].astype(np.uint64) | (self.v[row + 1].astype(np.uint64) << np.uint64(32))

    # --- the scalar file -----------------------------------------------------------------
    def s64(self, index):
        return self.s[index] | (self.s[index + 1] << 32)

    def set_s64(self, index, value):
        self.s[index], self.s[index + 1] = value & MASK32, (value >> 32) & MASK32
        if index == EXEC_LO:
            self.sync_exec()


# ---------------------------------------------------------------------------------------
# operands -> getters. `width` is the operand's size in bits (16, 32, 64); `kind` 'f' for
# float operands (float inline constants take the float encoding of that width), 'i'
# otherwise. Getters return a uint32 array (64,), a uint64 array for 64-bit VGPR pairs,
# or a numpy scalar for uniform values (SGPRs, constants).
# ---------------------------------------------------------------------------------------

def sgpr_index(op):
    """The scalar file index an SGPR-like operand names (s, ttmp, vcc, exec, m0, ...)."""
    if op.kind == "s":
        return op.index
    if op.kind == "ttmp":
        return TTMP_BASE + op.index
    if op.kind == "special" and op.value in SPECIAL_SGPR:
        return SPECIAL_SGPR[op.value]
    return None


def constant_bits(op, width, kind):
    """The bit pattern of an inline constant or literal in an operand of `width` bits."""
    if op.kind == "float":
        table = {16: INLINE_F16, 32: INLINE_F32, 64: INLINE_F64}[width]
        for value, bits in table.items():
            if abs(op.value - value) < 1e-7:
                return bits
        if width == 32:
            return int(np.array(op.value, dtype=np.float32).view(np.uint32))
        raise ValueError(f"float constant {op.text} in a {width}-bit operand")
    value = op.value
    if width == 64:
        # inline integers (-16..64) sign-extend; a 32-bit literal is zero-extended
        return value & (2 ** 64 - 1) if -16 <= value <= 64 else value & MASK32
    if width == 16 and -16 <= value <= 64:
        return value & 0xFFFF
    return value & MASK32


def scalar_getter(op, width=32):
    """A getter of a scalar operand's value as a Python int (SALU operands)."""
    index = sgpr_index(op)
    if index is not None:
        if width == 64:
            return lambda w: w.s[index] | (w.s[index + 1] << 32)
        return lambda w: w.s[index]
    if op.kind in ("int", "float"):
        value = constant_bits(op, width, "i")
        return lambda w: value
    if op.kind == "special" and op.value in ("scc", "src_scc"):
        return lambda w: w.scc
    if op.kind == "special" and op.value == "src_execz":
        return lambda w: int(w.s[EXEC_LO] == 0 and w.s[EXEC_HI] == 0)
    if op.kind == "special" and op.value == "src_vccz":
        return lambda w: int(w.s[VCC_LO] == 0 and w.s[VCC_HI] == 0)
    raise ValueError(f"operand {op.text} is not a scalar source")


def vector_getter(op, width=32, kind="i"):
    """A getter of a VALU source: array (64,) for VGPRs/AGPRs, else a uniform numpy scalar."""
    if op.kind in ("v", "a"):
        row = op.index + (AGPR_BASE if op.kind == "a" else 0)
        if width == 64:
            return lambda w: w.read_v64(row)
        return lambda w: w.v[row]
    if op.kind in ("int", "float"):
        value = constant_bits(op, width, kind)
        constant = np.uint64(value) if width == 64 else U32(value)
        return lambda w: constant
    index = sgpr_index(op)
    if index is not None:
        if width == 64:
            return lambda w: np.uint64(w.s[index] | (w.s[index + 1] << 32))
        return lambda w: U32(w.s[index])
    if op.kind == "special" and op.value in ("scc", "src_scc"):
        return lambda w: U32(w.scc)
    raise ValueError(f"operand {op.text} is not a vector source")


def vgpr_row(op):
    """The register-file row of a VGPR or AGPR operand."""
    if op.kind == "v":
        return op.index
    if op.kind == "a":
        return AGPR_BASE + op.index
    raise ValueError(f"operand {op.text} is not a VGPR or AGPR")


def register_rows(op):
    """The rows a VGPR/AGPR range operand names."""
    first = vgpr_row(op)
    return list(range(first, first + op.count))
