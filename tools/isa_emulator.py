"""A first-pass emulation of an AMDGPU (gfx9, wave64) kernel's ISA text: every register's value in
every lane of one workgroup, where it can be known without running the kernel. For the
instruments that need lane addresses: tools/lds_banks.py (LDS bank conflicts, the ring's data
flow) and the FUSED release's per-wave checks (tools/isa_latency.py's release tests).

    walk(amdgcn_text, Machine(waves, kernargs), visit)     # the control-flow graph's first pass
    replay_waves(amdgcn_text, machine_state, waves, start, stop)  # each wave's own path

Registers hold per-lane values for the workgroup's waves (v0 = the work-item id, 64 lanes a
wave); a value may carry an unknown wave-uniform term (a kernel argument, a program id,
anything loaded): addition keeps it, any other operation on it with a lane-varying operand
makes the value unknown. Scalar registers are uniform in a wave by construction. Lane masks
(vcc, SGPR pairs, exec) are per lane set / clear / unknown, SCC per wave. The walk visits the
control-flow graph in reverse postorder with the back-edges cut (every loop's body once, as
its first iteration runs it), each block from the join of its predecessors' states.
"""
import re

import numpy as np

from isa_latency import parse_amdgcn

LANES = 64
MASK32 = 0xFFFFFFFF

# ---------------------------------------------------------------------------------------
# the emulator
# ---------------------------------------------------------------------------------------

class Value:
    """A 32-bit register's value in every lane of the workgroup: `lanes` (int64, masked to 32
    bits) plus, when `uniform_unknown`, an unknown term that is the same in every lane of a
    wave. lanes None: unknown."""

    __slots__ = ("lanes", "uniform_unknown")

    def __init__(self, lanes, uniform_unknown=False):
        self.lanes = None if lanes is None else np.asarray(lanes, dtype=np.int64) & MASK32
        self.uniform_unknown = uniform_unknown

    @property
    def known(self):
        return self.lanes is not None

    @property
    def exact(self):
        return self.lanes is not None and not self.uniform_unknown

    def wave_uniform(self):
        if self.lanes is None:
            return False
        waves = self.lanes.reshape(-1, LANES)
        return bool((waves == waves[:, :1]).all())


UNKNOWN = Value(None)
BUFFER_OUT_OF_RANGE = 0x80000000  # the offset Triton's AMD backend gives a buffer access's masked lanes


def _join_values(a, b, name, count):
    """Two paths' values of one register (Machine.join). Known beats unknown: a register a path
    leaves unknown is dead on it, or set by something not modelled; the other path's value is
    the one the loop's addresses are built from (their lane patterns are the same on every path)."""
    if a is b or not b.known:
        return a
    if not a.known:
        return b
    if a.known and b.known and a.uniform_unknown == b.uniform_unknown and np.array_equal(a.lanes, b.lanes):
        return a
    if a.known and b.known:
        difference = (a.lanes - b.lanes).reshape(-1, LANES)
        if (difference == difference[:, :1]).all():
            return Value(a.lanes, True)
    if name.startswith("s") or name == "m0":  # a scalar register is uniform in its wave
        return Value(np.zeros(count), True)
    return UNKNOWN


def _mask_op(stem, a, b):
    """s_and_b64 / s_or_b64 / s_andn2_b64 / s_xor_b64 on per-lane 1 / 0 / -1 (unknown) masks."""
    if stem == "s_andn2_b64":
        b = np.where(b < 0, -1, 1 - b)
    if stem == "s_xor_b64":
        return np.where((a < 0) | (b < 0), -1, a ^ b)
    if stem == "s_or_b64":
        return np.where((a == 1) | (b == 1), 1, np.where((a == 0) & (b == 0), 0, -1))
    return np.where((a == 0) | (b == 0), 0, np.where((a == 1) & (b == 1), 1, -1))

_SIGNED = lambda x: np.where(x >= 1 << 31, x - (1 << 32), x)  # noqa: E731


def _sign_extend(field, width):
    width = np.maximum(width, 1)
    return np.where(field >> (width - 1) & 1, field - (1 << width), field)


# name -> (number of sources, function on int64 arrays)
_EXACT_OPS = {
    "and": (2, lambda a, b: a & b), "or": (2, lambda a, b: a | b), "xor": (2, lambda a, b: a ^ b),
    "not": (1, lambda a: ~a), "lshr": (2, lambda a, s: a >> (s & 31)),
    "ashr": (2, lambda a, s: _SIGNED(a) >> (s & 31)),
    "bfe": (3, lambda a, o, w: (a >> (o & 31)) & ((1 << (w & 31)) - 1)),
    # s_bfe_u32: the field's offset in bits 4:0 of the second operand, its width in bits 22:16
    "sbfe": (2, lambda a, f: (a >> (f & 31)) & ((1 << ((f >> 16) & 0x7F)) - 1)),
    "bfe_i": (3, lambda a, o, w: _sign_extend((a >> (o & 31)) & ((1 << (w & 31)) - 1), w & 31)),
    "bfi": (3, lambda m, a, b: (m & a) | (~m & b)),
    "and_or": (3, lambda a, b, c: (a & b) | c), "or3": (3, lambda a, b, c: a | b | c),
    "xad": (3, lambda a, b, c: (a ^ b) + c), "max_u": (2, np.maximum), "min_u": (2, np.minimum),
    "max_i": (2, lambda a, b: np.maximum(_SIGNED(a), _SIGNED(b))),
    "min_i": (2, lambda a, b: np.minimum(_SIGNED(a), _SIGNED(b))),
    "mul_u24": (2, lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF)),
    "mul_i24": (2, lambda a, b: _sign_extend(a & 0xFFFFFF, 24) * _sign_extend(b & 0xFFFFFF, 24)),
    "mad_u24": (3, lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c),
    "mul_hi_u": (2, lambda a, b: (a * b) >> 32),
    "lshl_or": (3, lambda a, s, c: (a << (s & 31)) | c),
    "bfrev": (1, lambda a: np.array([int(f"{int(x) & MASK32:032b}"[::-1], 2) for x in np.ravel(a)]).reshape(np.shape(a))),
}
# VALU mnemonic stem (without _e32/_e64) -> (op, operand order: indices of the sources)
_VALU = {
    "v_and_b32": ("and", (0, 1)), "v_or_b32": ("or", (0, 1)), "v_xor_b32": ("xor", (0, 1)),
    "v_not_b32": ("not", (0,)), "v_lshrrev_b32": ("lshr", (1, 0)), "v_ashrrev_i32": ("ashr", (1, 0)),
    "v_bfe_u32": ("bfe", (0, 1, 2)), "v_bfe_i32": ("bfe_i", (0, 1, 2)), "v_bfi_b32": ("bfi", (0, 1, 2)), "v_and_or_b32": ("and_or", (0, 1, 2)),
    "v_or3_b32": ("or3", (0, 1, 2)), "v_xad_u32": ("xad", (0, 1, 2)), "v_max_u32": ("max_u", (0, 1)),
    "v_min_u32": ("min_u", (0, 1)), "v_max_i32": ("max_i", (0, 1)), "v_min_i32": ("min_i", (0, 1)),
    "v_mul_u32_u24": ("mul_u24", (0, 1)), "v_mul_i32_i24": ("mul_i24", (0, 1)), "v_mad_u32_u24": ("mad_u24", (0, 1, 2)),
    "v_mul_hi_u32": ("mul_hi_u", (0, 1)), "v_lshl_or_b32": ("lshl_or", (0, 1, 2)), "v_bfrev_b32": ("bfrev", (0,)),
}
_SALU = {
    "s_and_b32": ("and", (0, 1)), "s_or_b32": ("or", (0, 1)), "s_xor_b32": ("xor", (0, 1)),
    "s_not_b32": ("not", (0,)), "s_lshr_b32": ("lshr", (0, 1)), "s_ashr_i32": ("ashr", (0, 1)),
    "s_bfe_u32": ("sbfe", (0, 1)), "s_max_u32": ("max_u", (0, 1)), "s_min_u32": ("min_u", (0, 1)),
    "s_max_i32": ("max_i", (0, 1)), "s_min_i32": ("min_i", (0, 1)), "s_mul_hi_u32": ("mul_hi_u", (0, 1)),
}
_COMPARES = {"eq": np.equal, "ne": np.not_equal, "lg": np.not_equal, "lt": np.less, "gt": np.greater,
             "le": np.less_equal, "ge": np.greater_equal}
# inline constants of the AMDGPU assembler that are floats: their float32 bit patterns
_FLOAT_CONSTANTS = {text: int(np.float32(float(text)).view(np.uint32))
                    for text in ("0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0")}


def _registers(operand):
    """'v7' -> ['v7'], 'v[8:11]' -> ['v8', ..., 'v11'], 's[0:1]' likewise; else []."""
    found = re.fullmatch(r"([vsa])\[(\d+):(\d+)\]", operand)
    if found:
        return [f"{found[1]}{n}" for n in range(int(found[2]), int(found[3]) + 1)]
    if re.fullmatch(r"[vsa]\d+", operand) or operand in ("vcc_lo", "vcc_hi", "m0", "exec_lo", "exec_hi"):
        return [operand]
    if operand in ("vcc", "exec"):
        return [f"{operand}_lo", f"{operand}_hi"]
    return []


def _split_operands(text):
    """'v1, v2, 3 offset:16 op_sel:[0,1]' -> (['v1', 'v2', '3'], {'offset': '16', ...})."""
    modifiers = {}
    pattern = r"\b([A-Za-z_]\w*):(\[[^\]]*\]|[^\s,]+)"
    for key, value in re.findall(pattern, text):
        modifiers[key] = value
    text = re.sub(pattern, "", text)
    operands = [part.strip() for part in text.split(",")]
    operands = [o.split()[0] for o in operands if o]  # trailing bare modifiers ("offen", "lds", "glc")
    bare = set(re.findall(r"\b(offen|idxen|lds|glc|slc|nt|sc0|sc1|off)\b", text))
    return operands, modifiers, bare


class Machine:
    """The registers of one workgroup of `waves` waves, each 64 lanes."""

    def __init__(self, waves, kernargs=None, kernarg_pair="s[0:1]"):
        self.count = waves * LANES
        self.regs = {"v0": Value(np.arange(self.count))}
        self.kernargs = kernargs or {}  # byte offset in the kernel-argument segment -> its int32 value
        self.kernarg_pair = kernarg_pair
        self.shadow = {}  # LDS byte address (the workgroup's) -> the global byte copied there (-1: zero)
        self.writers = {}  # LDS byte address -> the copy_tag of the copy that wrote it last
        self.copy_tag = None  # what record_copy files each copy under (the caller sets it)
        self.masks = {}  # 'vcc' / 's[28:29]' / 'exec' -> per lane 1 (set), 0 (clear) or -1 (unknown)
        self.scc = None
        self.lane = np.arange(self.count) % LANES

    # --- states at the blocks of the control-flow graph ------------------------------------
    def state(self):
        return dict(self.regs), dict(self.masks), self.scc

    def set_state(self, state):
        regs, masks, scc = state
        self.regs, self.masks, self.scc = dict(regs), dict(masks), scc

    def join(self, states):
        """The state where the paths of `states` meet: a register keeps its value where every
        path agrees, becomes that value plus an unknown wave-uniform term where they differ by a
        wave-uniform amount (a ring slot's offset), unknown otherwise; masks lane by lane."""
        regs, masks, scc = dict(states[0][0]), dict(states[0][1]), states[0][2]
        for other_regs, other_masks, other_scc in states[1:]:
            for name in set(regs) | set(other_regs):
                regs[name] = _join_values(regs.get(name, UNKNOWN), other_regs.get(name, UNKNOWN), name, self.count)
            for name in set(masks) | set(other_masks):
                a, b = masks.get(name), other_masks.get(name)
                masks[name] = None if a is None or b is None else np.where(a == b, a, -1).astype(np.int8)
            masks = {name: mask for name, mask in masks.items() if mask is not None}
            scc = None if scc is None or other_scc is None else np.where(scc == other_scc, scc, -1).astype(np.int8)
        return regs, masks, scc

    # --- reading and writing -------------------------------------------------------------
    def read(self, operand):
        if re.fullmatch(r"-?(0x[0-9a-fA-F]+|\d+)", operand):
            return Value(np.full(self.count, int(operand, 0)))
        if operand in _FLOAT_CONSTANTS:
            return Value(np.full(self.count, _FLOAT_CONSTANTS[operand]))
        names = _registers(operand)
        if len(names) != 1:
            return UNKNOWN
        name = names[0]
        from_mask = self._register_from_mask(name)
        if from_mask is not None:
            return from_mask
        if name in self.regs:
            return self.regs[name]
        if name.startswith("s") or name == "m0":  # an SGPR nothing here wrote: a kernel argument, a program id
            return Value(np.zeros(self.count), uniform_unknown=True)
        return UNKNOWN

    def _register_from_mask(self, name):
        """A 32-bit half of an SGPR pair (or vcc, exec) that holds a lane mask, as its bits in
        each wave; None if no known mask holds it."""
        for key, mask in self.masks.items():
            pair = _registers(key if key not in ("vcc", "exec") else key)
            if name in pair and len(pair) == 2 and (mask >= 0).all():
                half = pair.index(name)
                bits = mask.reshape(-1, LANES)[:, 32 * half:32 * half + 32].astype(np.int64)
                words = (bits << np.arange(32)[None, :]).sum(axis=1)
                return Value(np.repeat(words, LANES))
        return None

    def write(self, operand, value):
        for name in _registers(operand):
            value_here = value if len(_registers(operand)) == 1 else UNKNOWN
            if not value_here.known and (name.startswith("s") or name == "m0"):
                value_here = Value(np.zeros(self.count), True)  # a scalar register is uniform in its wave
            self.regs[name] = value_here
        self.masks.pop(self._mask_key(operand), None)
        for key in list(self.masks):
            if set(_registers(key)) & set(_registers(operand)):
                del self.masks[key]

    @staticmethod
    def _mask_key(operand):
        return {"vcc_lo": "vcc", "exec_lo": "exec"}.get(operand, operand)

    def read_mask(self, operand):
        key = self._mask_key(operand)
        if key == "exec" and key not in self.masks:
            return np.ones(self.count, dtype=np.int8)
        found = self.masks.get(key)
        return np.full(self.count, -1, dtype=np.int8) if found is None else found

    def write_mask(self, operand, mask):
        """mask: per lane 1 / 0 / -1 (int8), a bool array, or None (unknown in every lane)."""
        self.write(operand, UNKNOWN)
        if mask is None:
            mask = np.full(self.count, -1, dtype=np.int8)
        self.masks[self._mask_key(operand)] = np.asarray(mask).astype(np.int8)

    # --- value arithmetic ------------------------------------------------------------------
    def _exact(self, op, sources):
        arity, function = _EXACT_OPS[op]
        if any(not s.known for s in sources):
            return UNKNOWN
        if any(s.uniform_unknown for s in sources):
            # a function of wave-uniform values is wave-uniform, of unknown value
            return Value(np.zeros(self.count), True) if all(s.wave_uniform() for s in sources) else UNKNOWN
        return Value(function(*[s.lanes for s in sources[:arity]]))

    def _add(self, a, b, sign=1):
        if not (a.known and b.known):
            return UNKNOWN
        return Value(a.lanes + sign * b.lanes, a.uniform_unknown or b.uniform_unknown)

    def _mul(self, a, b):
        """a * b: linear in a term whose factor is exact and wave-uniform (an unknown uniform
        term stays one), exact when both are, wave-uniform when both are."""
        for x, factor in ((a, b), (b, a)):
            if x.known and factor.exact and factor.wave_uniform():
                return Value(x.lanes * factor.lanes, x.uniform_unknown)
        if a.exact and b.exact:
            return Value(a.lanes * b.lanes)
        if a.known and b.known and a.wave_uniform() and b.wave_uniform():
            return Value(np.zeros(self.count), True)
        return UNKNOWN

    def _shift_left(self, a, shift):
        if shift.known and not shift.uniform_unknown:
            return self._mul(a, Value(np.left_shift(1, shift.lanes & 31)))
        return self._mul(a, UNKNOWN if not shift.wave_uniform() else Value(np.zeros(self.count), True))

    def _select(self, mask, if_false, if_true):
        """v_cndmask: per lane if_true where the mask is set. Where the condition is unknown and
        one side is the buffer's out-of-range offset (BUFFER_OUT_OF_RANGE: the masked lanes of
        a buffer access, which read zero), the other side: the data flow of a whole tile."""
        if not (if_false.known and if_true.known):
            return UNKNOWN
        mask = mask.copy()
        for side, value in ((0, if_false), (1, if_true)):
            other = if_true if side == 0 else if_false
            if value.exact and (value.lanes == BUFFER_OUT_OF_RANGE).all() and not (other.exact and (
                    other.lanes == BUFFER_OUT_OF_RANGE).all()):
                mask[mask < 0] = 1 - side
        if (mask < 0).any():
            return UNKNOWN
        chosen_unknown = (if_true.uniform_unknown and (mask == 1).any()) or (if_false.uniform_unknown and (mask == 0).any())
        return Value(np.where(mask == 1, if_true.lanes, if_false.lanes), chosen_unknown)
        return Value(np.where(mask == 1, if_true.lanes, if_false.lanes))

    def _compare(self, name, a, b):
        found = re.match(r"v_cmpx?_(\w+?)_([iu])32", name)
        if not found or found[1] not in _COMPARES or not (a.exact and b.exact):
            return None
        x, y = (a.lanes, b.lanes) if found[2] == "u" else (_SIGNED(a.lanes), _SIGNED(b.lanes))
        return _COMPARES[found[1]](x, y)

    def _scalar_compare(self, name, a, b):
        """SCC of s_cmp_* per lane (uniform in each wave), or None where unknown."""
        found = re.fullmatch(r"s_cmpk?_(\w+?)_([iu])32", name)
        if not (a.exact and b.exact):
            return None
        x, y = (a.lanes, b.lanes) if found[2] == "u" else (_SIGNED(a.lanes), _SIGNED(b.lanes))
        return _COMPARES[found[1]](x, y).astype(np.int8)

    def branch_taken(self, mnemonic, lanes):
        """Whether the wave (its lanes) takes a conditional branch, or None if unknown."""
        condition = mnemonic[len("s_cbranch_"):]
        if condition in ("scc0", "scc1"):
            wave = self.scc_mask()[lanes]
            value = None if (wave < 0).any() else bool(wave[0])
            return None if value is None else value == (condition == "scc1")
        mask = {"vccz": "vcc", "vccnz": "vcc", "execz": "exec", "execnz": "exec"}.get(condition)
        if mask is None:
            return None
        wave = self.read_mask(mask)[lanes]
        if condition.endswith("nz"):
            return True if (wave == 1).any() else (False if (wave == 0).all() else None)
        return True if (wave == 0).all() else (False if (wave == 1).any() else None)

    def scc_mask(self):
        return np.full(self.count, -1, dtype=np.int8) if self.scc is None else self.scc

    def _mbcnt(self, mask_value, add, high):
        if not (mask_value.exact and add.known):
            return UNKNOWN
        bits = mask_value.lanes
        below = np.where(self.lane >= (32 if high else 0), np.minimum(self.lane - (32 if high else 0), 32), 0)
        counts = np.array([bin(int(m) & ((1 << int(n)) - 1) if n < 32 else int(m)).count("1")
                           for m, n in zip(bits, below)])
        return Value(counts + add.lanes, add.uniform_unknown)

    # --- one instruction ---------------------------------------------------------------------
    def record_copy(self, mnemonic, operands_text):
        """A global -> LDS copy: each lane's W bytes land at M0 + offset + W x lane of its wave;
        the shadow maps each of those LDS bytes to the global byte it came from (the known
        part of voffset + offset; None where unknown)."""
        access = lds_access(mnemonic, operands_text)
        operands, modifiers, _ = _split_operands(operands_text)
        width, offset = access[1], int(modifiers.get("offset", 0))
        m0, voffset = self.read("m0"), self.read(operands[0])
        if not m0.known:
            return
        lane_bytes = self.lane[:, None] * width + np.arange(width)[None, :]
        lds = m0.lanes[:, None] + offset + lane_bytes
        source = None if not voffset.known else (voffset.lanes[:, None] + offset + np.arange(width)[None, :])
        if source is not None:  # a masked lane's offset is BUFFER_OUT_OF_RANGE: it reads zeros
            source = np.where(voffset.lanes[:, None] >= BUFFER_OUT_OF_RANGE, -1, source)
        for lane in range(self.count):
            for index, address in enumerate(lds[lane]):
                self.shadow[int(address)] = None if source is None else int(source[lane, index])  # -1: zero
                self.writers[int(address)] = self.copy_tag

    def step(self, mnemonic, operands_text):
        """Execute one instruction's effect on the registers (unknown where not modelled)."""
        operands, _, _ = _split_operands(operands_text)
        access = lds_access(mnemonic, operands_text) if mnemonic.startswith(("buffer_load", "global_load")) else None
        if access is not None and access[3]:
            self.record_copy(mnemonic, operands_text)
            return
        stem = re.sub(r"_(e32|e64|dpp|sdwa)$", "", mnemonic)
        if mnemonic.startswith(("s_waitcnt", "s_barrier", "s_branch", "s_cbranch", "s_nop", "s_endpgm",
                                "s_setprio", "s_sleep", "s_sched", "ds_", "buffer_store", "global_store",
                                "s_dcache", "buffer_wbl2", "buffer_inv", "s_setreg", "s_icache")) and \
                not mnemonic.startswith(("ds_read", "ds_bpermute", "ds_swizzle", "ds_load", "ds_permute")):
            return
        if mnemonic.endswith(("_sdwa", "_dpp")) or not operands:
            if operands:
                self.write(operands[0], UNKNOWN)
            return
        read = self.read
        dest = operands[0]
        sources = [read(o) for o in operands[1:]]
        if stem in ("v_mov_b32", "s_mov_b32", "s_movk_i32", "v_accvgpr_write_b32", "v_accvgpr_read_b32",
                    "v_accvgpr_mov_b32"):  # AGPRs also hold spilled values
            self.write(dest, sources[0])
        elif stem == "s_mov_b64":
            constant = {"-1": 1, "0": 0}.get(operands[1])
            self.write_mask(dest, np.full(self.count, constant, dtype=np.int8) if constant is not None
                            else self.read_mask(operands[1]))
        elif stem == "s_cselect_b64":
            picks = [{"-1": 1, "0": 0}.get(o) for o in operands[1:3]]
            scc = self.scc_mask()
            if None in picks:
                self.write_mask(dest, None)
            else:
                self.write_mask(dest, np.where(scc < 0, -1, np.where(scc == 1, picks[0], picks[1])).astype(np.int8))
        elif stem in ("s_and_saveexec_b64", "s_or_saveexec_b64"):
            exec_mask, source = self.read_mask("exec"), self.read_mask(operands[1])
            self.write_mask(dest, exec_mask)
            self.write_mask("exec", _mask_op("s_and_b64" if "and" in stem else "s_or_b64", exec_mask, source))
        elif stem in ("v_add_u32", "s_add_i32", "s_add_u32", "v_add_nc_u32"):
            self.write(dest, self._add(sources[0], sources[1]))
        elif stem in ("v_sub_u32", "s_sub_i32", "s_sub_u32"):
            self.write(dest, self._add(sources[0], sources[1], -1))
        elif stem == "v_subrev_u32":
            self.write(dest, self._add(sources[1], sources[0], -1))
        elif stem in ("v_add3_u32",):
            self.write(dest, self._add(self._add(sources[0], sources[1]), sources[2]))
        elif stem in ("v_add_co_u32", "v_sub_co_u32", "v_subrev_co_u32"):
            a, b = sources[1], sources[2]
            result = {"v_add_co_u32": lambda: self._add(a, b), "v_sub_co_u32": lambda: self._add(a, b, -1),
                      "v_subrev_co_u32": lambda: self._add(b, a, -1)}[stem]()
            self.write(dest, result)
            self.write_mask(operands[1], None)
        elif stem == "v_mad_u64_u32":  # d[2], carry[2], a, b, c[2]: the low half (addresses); the high one if exact
            low_c = self.read(_registers(operands[4])[0]) if _registers(operands[4]) else read(operands[4])
            product = self._mul(read(operands[2]), read(operands[3]))
            low = self._add(product, low_c)
            names = _registers(dest)
            self.write(operands[1], UNKNOWN)
            self.write(names[0], low)
            exact = low.exact and all(read(o).exact for o in operands[2:4]) and low_c.exact
            high = UNKNOWN
            if exact and len(_registers(operands[4])) == 2 and self.read(_registers(operands[4])[1]).exact:
                full = (read(operands[2]).lanes * read(operands[3]).lanes + low_c.lanes
                        + (self.read(_registers(operands[4])[1]).lanes << 32))
                high = Value((full >> 32) & MASK32)
            self.write(names[1], high)
        elif stem in ("s_addk_i32",):
            self.write(dest, self._add(read(dest), read(operands[1])))
        elif stem in ("s_mulk_i32",):
            self.write(dest, self._mul(read(dest), read(operands[1])))
        elif stem in ("v_mul_lo_u32", "s_mul_i32"):
            self.write(dest, self._mul(sources[0], sources[1]))
        elif stem in ("v_lshlrev_b32",):
            self.write(dest, self._shift_left(sources[1], sources[0]))
        elif stem in ("s_lshl_b32",):
            self.write(dest, self._shift_left(sources[0], sources[1]))
        elif re.fullmatch(r"s_lshl([1-4])_add_u32", stem):
            shift = int(re.fullmatch(r"s_lshl([1-4])_add_u32", stem)[1])
            self.write(dest, self._add(self._shift_left(sources[0], Value(np.full(self.count, shift))), sources[1]))
        elif stem == "v_lshl_add_u32":
            self.write(dest, self._add(self._shift_left(sources[0], sources[1]), sources[2]))
        elif stem == "v_add_lshl_u32":
            self.write(dest, self._shift_left(self._add(sources[0], sources[1]), sources[2]))
        elif stem in _VALU or (stem in _SALU and _SALU[stem][0]):
            op, order = _VALU.get(stem) or _SALU[stem]
            self.write(dest, self._exact(op, [sources[i] for i in order]))
        elif stem in ("v_bitop3_b32",):
            self.write(dest, self._bitop3(sources, operands_text))
        elif stem == "v_cndmask_b32":
            mask = self.read_mask(operands[3]) if len(operands) > 3 else self.read_mask("vcc")
            self.write(dest, self._select(mask, sources[0], sources[1]))
        elif stem.startswith(("v_cmp_", "v_cmpx_")):
            if len(operands) == 3:  # dest (vcc, an SGPR pair or exec), a, b: inactive lanes write 0
                compare = self._compare(stem, sources[0], sources[1])
                compare = np.full(self.count, -1, dtype=np.int8) if compare is None else compare.astype(np.int8)
                active = self.read_mask("exec")
                self.write_mask(dest, np.where(active == 0, 0, np.where(active == 1, compare,
                                                                         np.where(compare == 0, 0, -1))))
            else:  # v_cmpx_* a, b: exec
                self.write_mask("exec", self._compare(stem, sources[0], sources[1]) if len(sources) > 0 else None)
        elif stem in ("v_readfirstlane_b32",):
            value = sources[0]
            first = None if not value.known else np.repeat(value.lanes.reshape(-1, LANES)[:, 0], LANES)
            self.write(dest, Value(first, value.uniform_unknown) if value.known else UNKNOWN)
        elif stem in ("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32"):
            self.write(dest, self._mbcnt(sources[0], sources[1], stem.startswith("v_mbcnt_hi")))
        elif stem in ("s_and_b64", "s_or_b64", "s_andn2_b64", "s_xor_b64"):
            a, b = self.read_mask(operands[1]), self.read_mask(operands[2])
            self.write_mask(dest, _mask_op(stem, a, b))
        elif re.fullmatch(r"s_cmpk?_(eq|lg|lt|gt|le|ge)_[iu]32", stem):
            self.scc = self._scalar_compare(stem, read(operands[0]), read(operands[1]))
        elif stem in ("s_cselect_b32",):
            self.write(dest, self._select(self.scc_mask(), sources[1], sources[0]))
        else:
            for operand in operands[:1]:
                self.write(operand, UNKNOWN)
            if stem.startswith(("s_load", "s_buffer_load")):
                base = operands[1] if len(operands) > 1 else ""
                offset = int(operands[2], 0) if len(operands) > 2 and re.fullmatch(r"0x[0-9a-fA-F]+|\d+",
                                                                                     operands[2]) else None
                for index, name in enumerate(_registers(dest)):
                    seeded = self.kernargs.get(offset + 4 * index) if base == self.kernarg_pair and offset is not None \
                        else None
                    self.regs[name] = Value(np.full(self.count, seeded)) if seeded is not None else \
                        Value(np.zeros(self.count), True)

    def _bitop3(self, sources, operands_text):
        table = re.search(r"bitop3:(0x[0-9a-fA-F]+|\d+)", operands_text)
        if not table or len(sources) < 3 or not all(s.exact for s in sources[:3]):
            return UNKNOWN
        truth = int(table[1], 0)
        a, b, c = (s.lanes for s in sources[:3])
        result = np.zeros(self.count, dtype=np.int64)
        for index in range(8):
            if truth >> index & 1:
                terms = [x if index >> shift & 1 else ~x for x, shift in ((a, 2), (b, 1), (c, 0))]
                result |= terms[0] & terms[1] & terms[2]
        return Value(result)


# ---------------------------------------------------------------------------------------
# the LDS instructions
# ---------------------------------------------------------------------------------------

def _blocks(labels, instructions):
    """The kernel's basic blocks [(first, last) instruction index] and their successors."""
    leaders = {0} | {at for name, at in labels.items() if name.startswith(".LBB") or at == 0}
    for position, mnemonic, _ in instructions:
        if mnemonic.startswith(("s_branch", "s_cbranch", "s_endpgm", "s_setpc", "s_swappc")):
            leaders.add(position + 1)
    starts = sorted(at for at in leaders if at < len(instructions))
    blocks = [(start, (starts[i + 1] if i + 1 < len(starts) else len(instructions)) - 1)
              for i, start in enumerate(starts)]
    index_of = {start: i for i, (start, _) in enumerate(blocks)}
    successors = []
    for i, (start, last) in enumerate(blocks):
        _, mnemonic, operands = instructions[last]
        found = []
        if mnemonic.startswith(("s_branch", "s_cbranch")):
            target = labels.get(operands.split(",")[0].strip())
            if target in index_of:
                found.append(index_of[target])
        if not mnemonic.startswith(("s_branch", "s_endpgm", "s_setpc")) and i + 1 < len(blocks):
            found.append(i + 1)
        successors.append(found)
    return blocks, successors


def walk(asm_text, machine, visit):
    """Run `machine` over the kernel's first pass: its control-flow graph in reverse postorder
    with the back-edges cut (every loop's body once, entered from before the loop, as its first
    iteration runs it), each block starting from the join of its predecessors' states (both
    sides of a branch meet). visit(position, mnemonic, operands) is called before each
    instruction is executed."""
    labels, instructions = parse_amdgcn(asm_text)
    blocks, successors = _blocks(labels, instructions)
    order, on_stack, seen, back = [], set(), set(), set()
    stack = [(0, iter(successors[0]))] if blocks else []
    seen.add(0)
    on_stack.add(0)
    while stack:  # iterative depth-first search: postorder and back-edges
        block, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_stack.discard(block)
            order.append(block)
        elif child in on_stack:
            back.add((block, child))
        elif child not in seen:
            seen.add(child)
            on_stack.add(child)
            stack.append((child, iter(successors[child])))
    exits = {}
    predecessors = {}
    for block, children in enumerate(successors):
        for child in children:
            if (block, child) not in back:
                predecessors.setdefault(child, []).append(block)
    initial = machine.state()
    for block in reversed(order):
        arriving = [exits[p] for p in predecessors.get(block, []) if p in exits]
        machine.set_state(machine.join(arriving) if arriving else initial)
        first, last = blocks[block]
        for position, mnemonic, operands in instructions[first:last + 1]:
            visit(position, mnemonic, operands)
            machine.step(mnemonic, operands)
        exits[block] = machine.state()
    return labels, instructions


def lds_access(mnemonic, operands_text):
    """(kind, bytes per lane per part, [(address operand, byte offset)], copy) of an LDS
    instruction, or None: kind "read" / "write"; ds_read2 / write2 have two parts
    (offset0, offset1 in units of the width, or of 64 x the width for *st64); copy: a
    global -> LDS copy (its lanes write consecutively from M0)."""
    operands, modifiers, bare = _split_operands(operands_text)
    if mnemonic.startswith(("buffer_load", "global_load")) and ("lds" in bare or "_lds_" in mnemonic):
        width = re.search(r"dwordx(\d)", mnemonic)
        return "write", 4 * (int(width[1]) if width else 1), [], True
    if mnemonic.startswith(("ds_bpermute", "ds_permute", "ds_swizzle")):
        return "read", 4, [], True
    if not mnemonic.startswith(("ds_read", "ds_write", "ds_load", "ds_store")):
        return None
    kind = "read" if mnemonic.startswith(("ds_read", "ds_load")) else "write"
    address = operands[1] if kind == "read" else operands[0]
    if mnemonic.startswith("ds_read_b64_tr") or mnemonic.startswith("ds_load_tr"):
        width = 8
    elif mnemonic.startswith("ds_read_b96_tr"):
        width = 12
    else:
        found = re.search(r"_[bui](\d+)", mnemonic)
        width = int(found[1]) // 8 if found else 4
    if re.search(r"(read|write)2", mnemonic):
        unit = width * (64 if "st64" in mnemonic else 1)
        parts = [(address, int(modifiers.get("offset0", 0)) * unit), (address, int(modifiers.get("offset1", 0)) * unit)]
    else:
        parts = [(address, int(modifiers.get("offset", 0)))]
    return kind, width, parts, False




def replay_waves(asm_text, machine, start, stop, max_steps=20000):
    """Each wave of `machine` (its registers as they stand, e.g. from walk() at instruction
    `start`) on its own path from `start` until it reaches or passes `stop` (in the text) or
    s_endpgm: branches
    followed where the wave's condition is known (SCC, vcc, exec), both ways nowhere.
    -> [set of instruction positions wave w executed] per wave; None for a wave whose path
    hit a branch it cannot decide."""
    labels, instructions = parse_amdgcn(asm_text)
    paths = []
    for wave in range(machine.count // LANES):
        lanes = slice(wave * LANES, (wave + 1) * LANES)
        own = Machine(machine.count // LANES, machine.kernargs, machine.kernarg_pair)
        own.set_state(machine.state())
        position, executed = start, set()
        for _ in range(max_steps):
            if position >= len(instructions) or position >= stop:
                break
            _, mnemonic, operands = instructions[position]
            executed.add(position)
            if mnemonic == "s_endpgm":
                break
            target = labels.get(operands.split(",")[0].strip()) if mnemonic.startswith(("s_branch", "s_cbranch")) \
                else None
            if mnemonic == "s_branch":
                position = target
                continue
            if mnemonic.startswith("s_cbranch"):
                taken = own.branch_taken(mnemonic, lanes)
                if taken is None:
                    executed = None
                    break
                position = target if taken else position + 1
                continue
            own.step(mnemonic, operands)
            position += 1
        paths.append(executed)
    return paths
