"""Memory instructions: LDS (ds_*), buffer (MUBUF, with the resource descriptor's bounds and
the loads straight to LDS through M0), global, flat and scratch, and their atomics.

Every memory instruction completes asynchronously: its data is read (or its store data
taken) when it issues, and a load's result lands in its registers -- or, for a load to
LDS, in the LDS bytes -- only when an s_waitcnt retires it (in issue order per counter:
vmcnt for vector memory, lgkmcnt for LDS and scalar memory). So a missing wait reads the
registers' (or LDS's) old contents, as on hardware.
"""
import numpy as np

from . import numerics as nx
from .memory import bytes_of, words_of
from .registry import Unsupported, refuse_modifiers, semantics
from .wave import LANES, M0, MASK32, register_rows, scalar_getter, vector_getter, vgpr_row

LANE = np.arange(LANES)


def _land_rows(w, rows, words, mask):
    """Write loaded words (len(rows), 64) into registers, for the lanes of `mask`."""
    for row, values in zip(rows, words):
        np.copyto(w.v[row], values, where=mask)


# ---------------------------------------------------------------------------------------
# LDS
# ---------------------------------------------------------------------------------------
DS_READ = {"ds_read_b32": (4, None), "ds_read_b64": (8, None), "ds_read_b96": (12, None), "ds_read_b128": (16, None),
           "ds_read_u8": (1, "u"), "ds_read_i8": (1, "i"), "ds_read_u16": (2, "u"), "ds_read_i16": (2, "i"),
           "ds_read_u8_d16": (1, "lo"), "ds_read_u8_d16_hi": (1, "hi"), "ds_read_i8_d16": (1, "lo_i"),
           "ds_read_i8_d16_hi": (1, "hi_i"), "ds_read_u16_d16": (2, "lo"), "ds_read_u16_d16_hi": (2, "hi")}
DS_WRITE = {"ds_write_b8": (1, 0), "ds_write_b16": (2, 0), "ds_write_b32": (4, 0), "ds_write_b64": (8, 0),
            "ds_write_b96": (12, 0), "ds_write_b128": (16, 0), "ds_write_b8_d16_hi": (1, 2),
            "ds_write_b16_d16_hi": (2, 2)}
DS_PAIRS = {"ds_read2_b32": (4, 1), "ds_read2_b64": (8, 1), "ds_read2st64_b32": (4, 64), "ds_read2st64_b64": (8, 64),
            "ds_write2_b32": (4, 1), "ds_write2_b64": (8, 1), "ds_write2st64_b32": (4, 64),
            "ds_write2st64_b64": (8, 64)}


def _narrow_to_words(data, kind, old):
    """Bytes read by a narrow LDS load -> the 32-bit register value."""
    width = data.shape[1]
    value = data.view(np.uint8 if width == 1 else np.uint16)[:, 0].astype(np.uint32)
    top = np.uint32(1 << (8 * width - 1))
    if kind in ("i", "lo_i", "hi_i"):
        value = np.where(value & top, value | np.uint32(MASK32 ^ ((1 << 8 * width) - 1)), value).astype(np.uint32)
        if kind != "i":
            value &= np.uint32(0xFFFF)
    if kind in ("lo", "lo_i"):
        return (old & np.uint32(0xFFFF0000)) | value
    if kind in ("hi", "hi_i"):
        return (old & np.uint32(0xFFFF)) | (value << np.uint32(16))
    return value


@semantics(*DS_READ)
def compile_ds_read(ins, ctx):
    refuse_modifiers(ins, ("offset", "gds"))
    nbytes, kind = DS_READ[ins.mnemonic]
    rows = register_rows(ins.operands[0])
    get_address = vector_getter(ins.operands[1])
    offset = ins.modifiers.get("offset", 0)

    def run(w):
        mask = w.exec_mask.copy()
        addresses = np.asarray(get_address(w), dtype=np.int64) + offset
        data = w.workgroup.lds_read(w, addresses, nbytes, mask, ins)
        if kind is None:
            words = words_of(data)
        else:
            words = None

        def land():
            if words is not None:
                _land_rows(w, rows, words, mask)
            else:
                np.copyto(w.v[rows[0]], _narrow_to_words(data, kind, w.v[rows[0]]), where=mask)
        w.workgroup.issue(w, "lgkm", land)

    def run_group(g):
        """Every wave of a lockstep group at once (executor's lockstep.py): the bytes read together, each
        wave's landing queued on its own lgkmcnt."""
        lockstep = g.lockstep
        mask = g.exec_mask.copy()
        addresses = np.asarray(get_address(g), dtype=np.int64) + offset
        data = lockstep.lds_read(g, addresses, nbytes, mask)            # (waves, 64, nbytes)
        pc = lockstep.pc
        for w, lanes, read in zip(g.waves, mask, data):
            def land(w=w, lanes=lanes, read=read):
                if kind is None:
                    _land_rows(w, rows, words_of(read), lanes)
                else:
                    np.copyto(w.v[rows[0]], _narrow_to_words(read, kind, w.v[rows[0]]), where=lanes)
            w.pending["lgkm"].append((land, pc))
    run.group = run_group
    return run


@semantics(*DS_WRITE)
def compile_ds_write(ins, ctx):
    refuse_modifiers(ins, ("offset", "gds"))
    nbytes, byte_shift = DS_WRITE[ins.mnemonic]
    get_address = vector_getter(ins.operands[0])
    rows = register_rows(ins.operands[1])
    offset = ins.modifiers.get("offset", 0)

    def run(w):
        mask = w.exec_mask
        addresses = np.asarray(get_address(w), dtype=np.int64) + offset
        data = bytes_of(w.v[rows])[:, byte_shift:byte_shift + nbytes]
        w.workgroup.lds_write(w, addresses, data, mask, ins)
    return run


@semantics(*DS_PAIRS)
def compile_ds_pair(ins, ctx):
    refuse_modifiers(ins, ("offset0", "offset1", "gds"))
    size, stride = DS_PAIRS[ins.mnemonic]
    step = size * stride
    offsets = (ins.modifiers.get("offset0", 0) * step, ins.modifiers.get("offset1", 0) * step)
    words_each = size // 4
    if ins.mnemonic.startswith("ds_read"):
        rows = register_rows(ins.operands[0])
        get_address = vector_getter(ins.operands[1])

        def run_read(w):
            mask = w.exec_mask.copy()
            base = np.asarray(get_address(w), dtype=np.int64)
            parts = [words_of(w.workgroup.lds_read(w, base + o, size, mask, ins)) for o in offsets]
            w.workgroup.issue(w, "lgkm", lambda: _land_rows(w, rows, np.concatenate(parts), mask))
        return run_read
    get_address = vector_getter(ins.operands[0])
    data_rows = (register_rows(ins.operands[1])[:words_each], register_rows(ins.operands[2])[:words_each])

    def run_write(w):
        base = np.asarray(get_address(w), dtype=np.int64)
        for o, rows in zip(offsets, data_rows):
            w.workgroup.lds_write(w, base + o, bytes_of(w.v[rows]), w.exec_mask, ins)
    return run_write


def transpose_source(bits):
    """ds_read_b64_tr_b<bits>: which (lane, element) of the 16-lane block's 64-bit reads
    lands in each (lane, element) of the result -> (source lane (64, n), source element
    (64, n)), n = 64 // bits elements per lane. Within each block of 16 lanes the reads form
    a 16 x n matrix M[lane][element]; lane i receives, as its element j,
    M[j * (16 // n) + i // n][i % n]: the block's rows of 16 // n lanes are the rows of a
    tile whose column i % n... i.e. each lane gets one column of the (n x 16) tile the block
    read. (Held by bf16 dots whose B operand Triton reads with ds_read_b64_tr_b16; the other
    natural reading, n x n sub-blocks each transposed, fails them.)"""
    per_lane = 64 // bits
    lane = np.arange(LANES)[:, None]
    element = np.arange(per_lane)[None, :]
    block, i = lane - lane % 16, lane % 16
    source_lane = block + element * (16 // per_lane) + i // per_lane
    return np.broadcast_to(source_lane, (LANES, per_lane)), np.broadcast_to(i % per_lane, (LANES, per_lane))


@semantics("ds_read_b64_tr_b16", "ds_read_b64_tr_b8", "ds_read_b64_tr_b4")
def compile_ds_read_transposed(ins, ctx):
    refuse_modifiers(ins, ("offset",))
    bits = int(ins.mnemonic.rsplit("_b", 1)[1])
    rows = register_rows(ins.operands[0])
    get_address = vector_getter(ins.operands[1])
    offset = ins.modifiers.get("offset", 0)
    source_lane, source_element = transpose_source(bits)
    per_lane = 64 // bits

    def run(w):
        mask = w.exec_mask.copy()
        addresses = np.asarray(get_address(w), dtype=np.int64) + offset
        data = w.workgroup.lds_read(w, addresses, 8, mask, ins)          # (64, 8) bytes
        as_int = data.view(np.uint64)[:, 0]
        elements = (as_int[:, None] >> (np.arange(per_lane, dtype=np.uint64) * np.uint64(bits))[None, :]) \
            & np.uint64((1 << bits) - 1)                                   # (64, per_lane)
        picked = elements[source_lane, source_element]
        result = (picked << (np.arange(per_lane, dtype=np.uint64) * np.uint64(bits))[None, :]).sum(1, dtype=np.uint64)
        words = np.stack([(result & np.uint64(MASK32)).astype(np.uint32), (result >> np.uint64(32)).astype(np.uint32)])
        w.workgroup.issue(w, "lgkm", lambda: _land_rows(w, rows, words, mask))
    return run


@semantics("ds_bpermute_b32", "ds_permute_b32")
def compile_ds_permute(ins, ctx):
    refuse_modifiers(ins, ("offset",))
    row = vgpr_row(ins.operands[0])
    get_address, get_data = vector_getter(ins.operands[1]), vector_getter(ins.operands[2])
    offset = ins.modifiers.get("offset", 0)
    backward = ins.mnemonic == "ds_bpermute_b32"

    def run(w):
        mask = w.exec_mask.copy()
        lane_of = ((np.broadcast_to(np.asarray(get_address(w), dtype=np.int64), (LANES,)) + offset) // 4) % LANES
        data = np.broadcast_to(get_data(w), (LANES,))
        out = np.zeros(LANES, dtype=np.uint32)
        if backward:   # lane i reads lane lane_of[i] (0 where that lane is not in EXEC)
            out = np.where(mask[lane_of], data[lane_of], 0).astype(np.uint32)
        else:          # lane i writes to lane lane_of[i]; the highest lane wins
            for lane in np.nonzero(mask)[0]:
                out[lane_of[lane]] = data[lane]
        w.workgroup.issue(w, "lgkm", lambda: np.copyto(w.v[row], out, where=mask))
    return run


def swizzle_source(offset):
    """ds_swizzle_b32's source lane per lane from its offset (a number or the assembler's
    swizzle(...) macro): bit 15 set, quad permutation of offset[7:0]; clear, a bit-mask mode
    on 32-lane halves: ((lane & and) | or) ^ xor with offset[4:0], [9:5], [14:10]."""
    if isinstance(offset, tuple):
        mode, *args = offset[1:]
        if mode == "SWAP":
            offset = 0x1F | (args[0] << 10)
        elif mode == "REVERSE":
            offset = 0x1F | ((args[0] - 1) << 10)
        elif mode == "BROADCAST":
            size, lane = args
            offset = (0x20 - size) | (lane << 5)
        elif mode == "QDMode":
            offset = 0x8000 | sum(a << (2 * i) for i, a in enumerate(args))
        else:
            raise Unsupported(f"ds_swizzle mode {mode}")
    lane = np.arange(LANES)
    if offset & 0x8000:
        perm = [(offset >> (2 * i)) & 3 for i in range(4)]
        return lane - lane % 4 + np.array(perm)[lane % 4]
    and_mask, or_mask, xor_mask = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
    return (lane & 0x20) | (((lane & 0x1F & and_mask) | or_mask) ^ xor_mask)


@semantics("ds_swizzle_b32")
def compile_ds_swizzle(ins, ctx):
    refuse_modifiers(ins, ("offset",))
    row = vgpr_row(ins.operands[0])
    get_data = vector_getter(ins.operands[1])
    source = swizzle_source(ins.modifiers.get("offset", 0))

    def run(w):
        mask = w.exec_mask.copy()
        data = np.broadcast_to(get_data(w), (LANES,))
        out = np.where(mask[source], data[source], 0).astype(np.uint32)
        w.workgroup.issue(w, "lgkm", lambda: np.copyto(w.v[row], out, where=mask))
    return run


DS_ATOMIC = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "max_u32": np.maximum, "min_u32": np.minimum,
             "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
             "max_i32": lambda a, b: np.maximum(a.view(np.int32), b.view(np.int32)).view(np.uint32),
             "min_i32": lambda a, b: np.minimum(a.view(np.int32), b.view(np.int32)).view(np.uint32)}
DS_ATOMIC_NAMES = {"ds_add_u32": "add", "ds_sub_u32": "sub", "ds_max_u32": "max_u32", "ds_min_u32": "min_u32",
                   "ds_and_b32": "and", "ds_or_b32": "or", "ds_xor_b32": "xor", "ds_max_i32": "max_i32",
                   "ds_min_i32": "min_i32", "ds_max_f32": "max_f32", "ds_min_f32": "min_f32"}


@semantics(*DS_ATOMIC_NAMES, *(name.replace("ds_", "ds_").replace("_u32", "_rtn_u32").replace("_b32", "_rtn_b32")
                               .replace("_i32", "_rtn_i32").replace("_f32", "_rtn_f32") for name in DS_ATOMIC_NAMES))
def compile_ds_atomic(ins, ctx):
    refuse_modifiers(ins, ("offset",))
    returns = "_rtn_" in ins.mnemonic
    name = DS_ATOMIC_NAMES[ins.mnemonic.replace("_rtn", "")]
    if name.endswith("_f32"):
        from .ops_vector import fmax, fmin
        f = fmax if name == "max_f32" else fmin
        function = lambda a, b: f(a.view(np.float32), b.view(np.float32)).view(np.uint32)  # noqa: E731
    else:
        function = DS_ATOMIC[name]
    operands = ins.operands
    dest = vgpr_row(operands[0]) if returns else None
    get_address = vector_getter(operands[1 if returns else 0])
    get_data = vector_getter(operands[2 if returns else 1])
    offset = ins.modifiers.get("offset", 0)

    def run(w):
        mask = w.exec_mask.copy()
        addresses = np.broadcast_to(np.asarray(get_address(w), dtype=np.int64) + offset, (LANES,))
        data = np.broadcast_to(np.asarray(get_data(w), dtype=np.uint32), (LANES,))
        old = np.zeros(LANES, dtype=np.uint32)
        for lane in np.nonzero(mask)[0]:     # lanes in order, each seeing the one before
            one = np.zeros(LANES, dtype=bool)
            one[lane] = True
            current = words_of(w.workgroup.lds_read(w, addresses, 4, one, ins, atomic=True))[0]
            old[lane] = current[lane]
            new = np.asarray(function(np.array([current[lane]], dtype=np.uint32), data[lane:lane + 1]), dtype=np.uint32)
            w.workgroup.lds_write(w, addresses, bytes_of(np.broadcast_to(new, (1, LANES))), one, ins, atomic=True)
        if returns:
            w.workgroup.issue(w, "lgkm", lambda: np.copyto(w.v[dest], old, where=mask))
    return run


# ---------------------------------------------------------------------------------------
# buffer (MUBUF) instructions
# ---------------------------------------------------------------------------------------
BUFFER_LOADS = {"buffer_load_dword": (4, None), "buffer_load_dwordx2": (8, None), "buffer_load_dwordx3": (12, None),
                "buffer_load_dwordx4": (16, None), "buffer_load_ubyte": (1, "u"), "buffer_load_sbyte": (1, "i"),
                "buffer_load_ushort": (2, "u"), "buffer_load_sshort": (2, "i"),
                "buffer_load_ubyte_d16": (1, "lo"), "buffer_load_ubyte_d16_hi": (1, "hi"),
                "buffer_load_sbyte_d16": (1, "lo_i"), "buffer_load_sbyte_d16_hi": (1, "hi_i"),
                "buffer_load_short_d16": (2, "lo"), "buffer_load_short_d16_hi": (2, "hi")}
BUFFER_STORES = {"buffer_store_byte": (1, 0), "buffer_store_short": (2, 0), "buffer_store_dword": (4, 0),
                 "buffer_store_dwordx2": (8, 0), "buffer_store_dwordx3": (12, 0), "buffer_store_dwordx4": (16, 0),
                 "buffer_store_byte_d16_hi": (1, 2), "buffer_store_short_d16_hi": (2, 2)}
CACHE_BITS = ("sc0", "sc1", "nt", "glc", "slc")


def descriptor(words):
    """The fields of a buffer resource descriptor (four SGPR values)."""
    base = words[0] | ((words[1] & 0xFFFF) << 32)
    return {"base": base, "stride": (words[1] >> 16) & 0x3FFF, "num_records": words[2],
            "add_tid": (words[3] >> 23) & 1, "swizzle": (words[1] >> 31) & 1}


M0_LDS_OFFSET_BITS = 0x3FFFF   # a load to LDS takes its LDS offset from M0[17:0]


def lds_address(w, inst_offset, nbytes):
    """Each lane's LDS address of a load to LDS (CDNA4 ISA 9.1.9): M0[17:0] + the instruction offset + the lane's
    id x the transfer size (4 or 16 bytes). Triton 3.8+ masks a whole copy with M0 = 0x7fffffff, so the lanes
    address past the CU's LDS and Workgroup.lds_dma drops them."""
    return (w.s[M0] & M0_LDS_OFFSET_BITS) + inst_offset + LANE * nbytes


class _BufferAddressing:
    """The per-lane address and bounds of a MUBUF instruction (raw buffers: stride 0)."""

    def __init__(self, ins, vaddr_operand, rsrc_operand, soffset_operand):
        if "idxen" in ins.modifiers:
            raise Unsupported(f"{ins.text}: indexed (structured) buffer addressing")
        self.offen = "offen" in ins.modifiers
        self.get_voffset = vector_getter(vaddr_operand) if self.offen else None
        first = rsrc_operand.index
        if rsrc_operand.kind != "s" or rsrc_operand.count != 4:
            raise Unsupported(f"{ins.text}: resource operand {rsrc_operand.text}")
        self.rsrc = first
        self.get_soffset = scalar_getter(soffset_operand)
        self.inst_offset = ins.modifiers.get("offset", 0)
        self.text = ins.text

    def __call__(self, w, nbytes):
        """-> (addresses (64,) uint64, in_range (64,) bool per access, descriptor)."""
        d = descriptor(w.s[self.rsrc:self.rsrc + 4])
        # a stride with neither idxen nor swizzle nor add_tid (aiter's MLA decode reads its page indices
        # through a stride-4 descriptor, offen only) addresses as a raw buffer and is range-checked in bytes
        # against num_records: an assumption, named in docs/aiter_mla_emulated.md (STRIDE_WITHOUT_INDEX)
        if d["add_tid"] or d["swizzle"]:
            raise Unsupported(f"{self.text}: structured/swizzled buffer descriptors (stride {d['stride']})")
        voffset = np.asarray(self.get_voffset(w), dtype=np.int64) if self.offen else np.int64(0)
        offset = np.broadcast_to(voffset + self.inst_offset, (LANES,))
        in_range = offset + nbytes <= d["num_records"]
        addresses = (np.uint64(d["base"] + self.get_soffset(w)) + offset.astype(np.uint64)).astype(np.uint64)
        return addresses, in_range, d


@semantics(*BUFFER_LOADS)
def compile_buffer_load(ins, ctx):
    refuse_modifiers(ins, ("offen", "idxen", "offset", "lds", *CACHE_BITS))
    nbytes, kind = BUFFER_LOADS[ins.mnemonic]
    to_lds = "lds" in ins.modifiers
    operands = ins.operands
    if to_lds:
        if nbytes not in (4, 16) or kind is not None:
            # the ISA zero/sign-extends a byte or short to a dword at TID * 4; no corpus kernel validates it
            raise Unsupported(f"{ins.text}: a load to LDS of {nbytes} bytes{' (extended to a dword)' if kind else ''}")
        address = _BufferAddressing(ins, operands[0], operands[1], operands[2])
        rows = None
    else:
        rows = register_rows(operands[0])
        address = _BufferAddressing(ins, operands[1], operands[2], operands[3])
    inst_offset = ins.modifiers.get("offset", 0)
    bypass = "sc1" in ins.modifiers   # device (or system) scope: past this XCD's L2

    def run(w):
        mask = w.exec_mask.copy()
        addresses, in_range, _ = address(w, nbytes)
        data = w.workgroup.memory_load(w, addresses, nbytes, mask & in_range, ins, bypass)
        data[~in_range] = 0
        if to_lds:
            w.workgroup.lds_dma(w, lds_address(w, inst_offset, nbytes), data, mask, ins)
            return
        if kind is None:
            words = words_of(data)
            w.workgroup.issue(w, "vm", lambda: _land_rows(w, rows, words, mask))
        else:
            w.workgroup.issue(w, "vm", lambda: np.copyto(w.v[rows[0]], _narrow_to_words(data, kind, w.v[rows[0]]),
                                                         where=mask))
    return run


@semantics(*BUFFER_STORES)
def compile_buffer_store(ins, ctx):
    refuse_modifiers(ins, ("offen", "idxen", "offset", *CACHE_BITS))
    nbytes, byte_shift = BUFFER_STORES[ins.mnemonic]
    rows = register_rows(ins.operands[0])
    address = _BufferAddressing(ins, ins.operands[1], ins.operands[2], ins.operands[3])
    bypass = "sc1" in ins.modifiers   # device (or system) scope: written through to memory

    def run(w):
        mask = w.exec_mask.copy()
        addresses, in_range, _ = address(w, nbytes)
        data = bytes_of(w.v[rows])[:, byte_shift:byte_shift + nbytes].copy()
        w.workgroup.memory_store(w, addresses, data, mask & in_range, ins, bypass)
    return run


def _f32(bits):
    return np.uint32(bits).view(np.float32)


def _add_halves(kind):
    """The packed 2 x 16-bit float add of BUFFER_ATOMIC_PK_ADD_F16 / _BF16: each half rounded once (nearest even)."""
    def add(old, data):
        out = 0
        for shift in (0, 16):
            a, b = (old >> shift) & 0xFFFF, (data >> shift) & 0xFFFF
            if kind == "f16":
                total = np.float16(np.float64(np.uint16(a).view(np.float16)) + np.float64(np.uint16(b).view(np.float16)))
                half = int(total.view(np.uint16))
            else:
                total = np.float32(np.float64(_f32(a << 16)) + np.float64(_f32(b << 16)))
                half = int(nx.f32_to_bf16(total.view(np.uint32)))
            out |= half << shift
        return out
    return add


def _signed(value, bits):
    return value - (1 << bits) if value >> (bits - 1) else value


def _f64(bits):
    return np.uint64(bits).view(np.float64)


# name: (bytes, data registers, function(old, data) -> new on unsigned Python ints; data a tuple for cmpswap).
# From the CDNA4 ISA's BUFFER_ATOMIC_* pseudocode.
ATOMICS = {
    "add": (4, 1, lambda a, b: a + b), "sub": (4, 1, lambda a, b: a - b), "swap": (4, 1, lambda a, b: b),
    "smax": (4, 1, lambda a, b: b if _signed(b, 32) >= _signed(a, 32) else a),
    "smin": (4, 1, lambda a, b: b if _signed(b, 32) < _signed(a, 32) else a),
    "umax": (4, 1, max), "umin": (4, 1, min),
    "and": (4, 1, lambda a, b: a & b), "or": (4, 1, lambda a, b: a | b), "xor": (4, 1, lambda a, b: a ^ b),
    "inc": (4, 1, lambda a, b: 0 if a >= b else a + 1), "dec": (4, 1, lambda a, b: b if a == 0 or a > b else a - 1),
    "cmpswap": (4, 2, lambda a, d: d[0] if a == d[1] else a),
    "add_f32": (4, 1, lambda a, b: int(np.float32(np.float64(_f32(a)) + np.float64(_f32(b))).view(np.uint32))),
    "pk_add_f16": (4, 1, _add_halves("f16")), "pk_add_bf16": (4, 1, _add_halves("bf16")),
    "add_f64": (8, 2, lambda a, b: int(np.float64(_f64(a) + _f64(b)).view(np.uint64))),
    "max_f64": (8, 2, lambda a, b: b if _f64(b) > _f64(a) else a),
    "min_f64": (8, 2, lambda a, b: b if _f64(b) < _f64(a) else a),
    "cmpswap_x2": (8, 4, lambda a, d: d[0] if a == d[1] else a),
    **{f"{name}_x2": (8, 2, function) for name, function in (
        ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("swap", lambda a, b: b),
        ("smax", lambda a, b: b if _signed(b, 64) >= _signed(a, 64) else a),
        ("smin", lambda a, b: b if _signed(b, 64) < _signed(a, 64) else a), ("umax", max), ("umin", min),
        ("and", lambda a, b: a & b), ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b),
        ("inc", lambda a, b: 0 if a >= b else a + 1), ("dec", lambda a, b: b if a == 0 or a > b else a - 1))},
}


class _Atomic:
    """One atomic instruction's operation: the per-lane data from its data registers (a pair of values for
    cmpswap: source, then compare), applied in lane order by memory.atomic; the old values land in the returning
    form's destination (its first registers) when vmcnt retires it."""

    def __init__(self, op, data_operand):
        self.nbytes, self.registers, self.function = ATOMICS[op]
        self.rows = register_rows(data_operand)
        if len(self.rows) < self.registers:
            raise Unsupported(f"atomic {op}: {len(self.rows)} data registers, {self.registers} needed")
        self.pair = op.startswith("cmpswap")
        self.width = 8 * self.nbytes
        self.mask = (1 << self.width) - 1

    def data(self, w):
        words = [w.v[row].astype(np.uint64) for row in self.rows[:self.registers]]
        if self.nbytes == 8:
            words = [words[i] | (words[i + 1] << np.uint64(32)) for i in range(0, len(words), 2)]
        return [tuple(int(word[lane]) for word in words) for lane in range(LANES)]

    def run(self, w, addresses, mask, ins):
        data = self.data(w)
        function, pair, limit = self.function, self.pair, self.mask

        def operation(old, lane):
            value = data[int(lane)]
            return function(int(old), value if pair else value[0]) & limit
        return w.workgroup.memory_atomic(w, addresses, operation, np.arange(LANES), mask, ins, self.nbytes)

    def land(self, w, destination, old, mask):
        """The old values into the destination registers (1 or 2 a lane)."""
        old = np.asarray(old, dtype=np.uint64)
        for i, row in enumerate(range(destination, destination + self.nbytes // 4)):
            np.copyto(w.v[row], ((old >> np.uint64(32 * i)) & np.uint64(MASK32)).astype(np.uint32), where=mask)


@semantics(*(f"buffer_atomic_{op}" for op in ATOMICS))
def compile_buffer_atomic(ins, ctx):
    refuse_modifiers(ins, ("offen", "idxen", "offset", *CACHE_BITS))
    atomic = _Atomic(ins.mnemonic[len("buffer_atomic_"):], ins.operands[0])
    returns = "sc0" in ins.modifiers or "glc" in ins.modifiers
    row = vgpr_row(ins.operands[0])
    address = _BufferAddressing(ins, ins.operands[1], ins.operands[2], ins.operands[3])

    def run(w):
        mask = w.exec_mask.copy()
        addresses, in_range, _ = address(w, atomic.nbytes)
        old = atomic.run(w, addresses, mask & in_range, ins)
        w.workgroup.issue(w, "vm", (lambda: atomic.land(w, row, old, mask)) if returns else (lambda: None))
    return run


@semantics("buffer_wbl2", "buffer_inv", "buffer_wbinvl1", "buffer_wbinvl1_vol")
def compile_cache_control(ins, ctx):
    refuse_modifiers(ins, CACHE_BITS)
    name = ins.mnemonic

    def run(w):
        w.workgroup.cache_control(w, name, ins)
    return run


# ---------------------------------------------------------------------------------------
# global / flat / scratch
# ---------------------------------------------------------------------------------------
GLOBAL_LOADS = {"load_dword": (4, None), "load_dwordx2": (8, None), "load_dwordx3": (12, None),
                "load_dwordx4": (16, None), "load_ubyte": (1, "u"), "load_sbyte": (1, "i"), "load_ushort": (2, "u"),
                "load_sshort": (2, "i"), "load_short_d16": (2, "lo"), "load_short_d16_hi": (2, "hi"),
                "load_ubyte_d16": (1, "lo"), "load_ubyte_d16_hi": (1, "hi")}
GLOBAL_STORES = {"store_byte": (1, 0), "store_short": (2, 0), "store_dword": (4, 0), "store_dwordx2": (8, 0),
                 "store_dwordx3": (12, 0), "store_dwordx4": (16, 0), "store_byte_d16_hi": (1, 2),
                 "store_short_d16_hi": (2, 2)}


def _global_address(ins, vaddr, saddr):
    """-> address(w) (64,) uint64 of a global/flat instruction: a 64-bit VGPR address with
    saddr off, or SGPR base + 32-bit VGPR offset; plus the instruction offset."""
    inst_offset = ins.modifiers.get("offset", 0)
    if saddr is None or (saddr.kind == "special" and saddr.value == "off"):
        get = vector_getter(vaddr, 64)
        return lambda w: (np.asarray(get(w), dtype=np.uint64) + np.uint64(inst_offset & (2 ** 64 - 1))).astype(np.uint64)
    base = scalar_getter(saddr, 64)
    get_offset = vector_getter(vaddr)
    return lambda w: (np.uint64(base(w)) + np.asarray(get_offset(w), dtype=np.uint32).astype(np.uint64)
                      + np.uint64(inst_offset)).astype(np.uint64)


def _scratch_address(ins, vaddr, saddr):
    """-> offset(w) (64,) int64 into each lane's private memory."""
    inst_offset = ins.modifiers.get("offset", 0)
    parts = []
    if not (vaddr.kind == "special" and vaddr.value == "off"):
        parts.append(vector_getter(vaddr))
    if not (saddr.kind == "special" and saddr.value == "off"):
        parts.append(scalar_getter(saddr))
    return lambda w: np.broadcast_to(sum((np.asarray(p(w), dtype=np.int64) for p in parts), np.int64(inst_offset)),
                                     (LANES,))


def _split_global(mnemonic):
    for prefix in ("global_", "flat_", "scratch_"):
        if mnemonic.startswith(prefix):
            return prefix[:-1], mnemonic[len(prefix):]
    return None, mnemonic


@semantics(*(f"{space}_{op}" for space in ("global", "flat", "scratch") for op in GLOBAL_LOADS),
           "global_load_lds_dword", "global_load_lds_dwordx4")
def compile_global_load(ins, ctx):
    refuse_modifiers(ins, ("offset", *CACHE_BITS))
    space, op = _split_global(ins.mnemonic)
    if op.startswith("load_lds"):
        nbytes = 16 if op.endswith("x4") else 4
        get_address = _global_address(ins, ins.operands[0], ins.operands[1] if len(ins.operands) > 1 else None)

        def run_lds(w):
            mask = w.exec_mask.copy()
            data = w.workgroup.memory_load(w, get_address(w), nbytes, mask, ins, "sc1" in ins.modifiers)
            w.workgroup.lds_dma(w, lds_address(w, ins.modifiers.get("offset", 0), nbytes), data, mask, ins)
        return run_lds
    nbytes, kind = GLOBAL_LOADS[op]
    rows = register_rows(ins.operands[0])
    saddr = ins.operands[2] if len(ins.operands) > 2 else None
    if space == "scratch":
        get_offset = _scratch_address(ins, ins.operands[1], saddr)
    else:
        get_address = _global_address(ins, ins.operands[1], saddr)
    counter = "vm"
    bypass = "sc1" in ins.modifiers

    def run(w):
        mask = w.exec_mask.copy()
        if space == "scratch":
            data = w.workgroup.scratch_read(w, get_offset(w), nbytes, mask, ins)
        else:
            data = w.workgroup.memory_load(w, get_address(w), nbytes, mask, ins, bypass)
        if kind is None:
            words = words_of(data)
            w.workgroup.issue(w, counter, lambda: _land_rows(w, rows, words, mask))
        else:
            w.workgroup.issue(w, counter, lambda: np.copyto(w.v[rows[0]], _narrow_to_words(data, kind, w.v[rows[0]]),
                                                            where=mask))
    return run


@semantics(*(f"{space}_{op}" for space in ("global", "flat", "scratch") for op in GLOBAL_STORES))
def compile_global_store(ins, ctx):
    refuse_modifiers(ins, ("offset", *CACHE_BITS))
    space, op = _split_global(ins.mnemonic)
    nbytes, byte_shift = GLOBAL_STORES[op]
    rows = register_rows(ins.operands[1])
    saddr = ins.operands[2] if len(ins.operands) > 2 else None
    bypass = "sc1" in ins.modifiers
    if space == "scratch":
        get_offset = _scratch_address(ins, ins.operands[0], saddr)
    else:
        get_address = _global_address(ins, ins.operands[0], saddr)

    def run(w):
        mask = w.exec_mask.copy()
        data = bytes_of(w.v[rows])[:, byte_shift:byte_shift + nbytes].copy()
        if space == "scratch":
            w.workgroup.scratch_write(w, get_offset(w), data, mask, ins)
        else:
            w.workgroup.memory_store(w, get_address(w), data, mask, ins, bypass)
    return run


@semantics(*(f"{space}_atomic_{op}" for space in ("global", "flat") for op in ATOMICS))
def compile_global_atomic(ins, ctx):
    refuse_modifiers(ins, ("offset", *CACHE_BITS))
    space, op = _split_global(ins.mnemonic)
    returns = "sc0" in ins.modifiers or "glc" in ins.modifiers
    operands = ins.operands
    if returns:
        dest, vaddr, vdata, saddr = vgpr_row(operands[0]), operands[1], operands[2], (operands[3] if len(operands) > 3 else None)
    else:
        dest, vaddr, vdata, saddr = None, operands[0], operands[1], (operands[2] if len(operands) > 2 else None)
    atomic = _Atomic(op[len("atomic_"):], vdata)
    get_address = _global_address(ins, vaddr, saddr)

    def run(w):
        mask = w.exec_mask.copy()
        old = atomic.run(w, get_address(w), mask, ins)
        w.workgroup.issue(w, "vm", (lambda: atomic.land(w, dest, old, mask)) if returns else (lambda: None))
    return run
