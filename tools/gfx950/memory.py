"""Global memory as the emulated kernel sees it: the launch's tensors (and its kernel
arguments) each at a device address of its own, read and written in place.

Every tensor's storage gets a region of the 64-bit address space, `REGION_BYTES` apart, so
the region of an address is `address >> REGION_SHIFT`; inside it the tensor keeps its
offset in the storage (so alignment is the tensor's own). An access must fall inside the
extent of a tensor of its region (the bytes from the tensor's first element to its last):
anything else is a fault that names the address, the lane and the region's tensors.
"""
from dataclasses import dataclass, field

import numpy as np

from .registry import Unsupported

REGION_SHIFT = 36
REGION_BYTES = 1 << REGION_SHIFT


class MemoryFault(Exception):
    """An access outside every tensor: (lane, address, what). The executor adds the kernel
    and the instruction."""

    def __init__(self, lane, address, what):
        super().__init__(f"lane {lane}, address {address:#x}: {what}")
        self.lane, self.address, self.what = lane, address, what


@dataclass
class Region:
    base: int                 # device address of the storage's first byte
    data: np.ndarray          # uint8 view of the storage (shared with the torch tensor)
    extents: list = field(default_factory=list)   # [(first byte, end byte, name)] of its tensors
    writable: bool = True
    unmodelled: str = None    # what an access outside the extents reaches that the emulator does not model


class Memory:
    def __init__(self):
        self.regions = {}      # region id -> Region
        self.caches = None     # XcdCaches once a dispatch models the XCDs' L2s

    def add_region(self, data, name=None, writable=True, unmodelled=None):
        """A new region for `data` (uint8 array) -> its base address. With a name, the whole
        region is one extent of that name; else add_extent names the tensors in it.
        unmodelled: what the region stands for that the emulator does not model (an access
        outside its extents is then Unsupported with that text, not a fault)."""
        region_id = len(self.regions) + 1
        base = region_id << REGION_SHIFT
        self.regions[region_id] = Region(base, data, [(0, len(data), name)] if name else [], writable, unmodelled)
        return base

    def add_extent(self, base, first, end, name):
        self.region_of(base).extents.append((first, end, name))

    def region_of(self, base):
        return self.regions[base >> REGION_SHIFT]

    def _resolve(self, addresses, nbytes, active, write):
        """-> [(region, lane indices, byte offsets)], checking each active lane's access lies
        inside one tensor of its region."""
        lanes = np.nonzero(active)[0]
        if not len(lanes):
            return []
        addresses = np.asarray(addresses, dtype=np.uint64)
        if addresses.ndim == 0:
            addresses = np.full(64, addresses, dtype=np.uint64)
        ids = (addresses[lanes] >> np.uint64(REGION_SHIFT)).astype(np.int64)
        groups = []
        for region_id in np.unique(ids):
            picked = lanes[ids == region_id]
            region = self.regions.get(int(region_id))
            if region is None:
                lane = int(picked[0])
                raise MemoryFault(lane, int(addresses[lane]), "no tensor at this address")
            offsets = (addresses[picked] - np.uint64(region.base)).astype(np.int64)
            inside = np.zeros(len(picked), dtype=bool)
            for first, end, _ in region.extents:
                inside |= (offsets >= first) & (offsets + nbytes <= end)
            if not inside.all():
                bad = int(np.nonzero(~inside)[0][0])
                if region.unmodelled:
                    raise Unsupported(f"lane {int(picked[bad])}, address {int(addresses[picked[bad]]):#x}: "
                                      f"{region.unmodelled}")
                names = ", ".join(f"{name} [{first:#x}, {end:#x})" for first, end, name in region.extents)
                raise MemoryFault(int(picked[bad]), int(addresses[picked[bad]]),
                                  f"{nbytes}-byte access at offset {int(offsets[bad]):#x} outside {names}")
            if write and not region.writable:
                raise MemoryFault(int(picked[0]), int(addresses[picked[0]]), "a store to read-only kernel arguments")
            groups.append((region, picked, offsets))
        return groups

    def load(self, addresses, nbytes, active, xcd=None, bypass=False):
        """-> uint8 (64, nbytes): the bytes at each active lane's address (0 elsewhere), as
        XCD `xcd`'s L2 holds them (memory itself when bypassing or no L2 is modelled)."""
        out = np.zeros((64, nbytes), dtype=np.uint8)
        for region, lanes, offsets in self._resolve(addresses, nbytes, active, False):
            index = offsets[:, None] + np.arange(nbytes)
            if self.caches is None or xcd is None:
                out[lanes] = region.data[index]
            else:
                out[lanes] = self.caches.load(xcd, region.base >> REGION_SHIFT, index, bypass)
        return out

    def store(self, addresses, data, active, xcd=None, bypass=False, wave_key=0):
        """data: uint8 (64, nbytes); lanes in order, so a later lane wins on overlap. -> what
        retire_store needs once the wave's vmcnt wait retires the store."""
        nbytes = data.shape[1]
        written = []
        for region, lanes, offsets in self._resolve(addresses, nbytes, active, True):
            index = offsets[:, None] + np.arange(nbytes)
            if self.caches is None or xcd is None:
                region.data[index] = data[lanes]
            else:
                region_id = region.base >> REGION_SHIFT
                written.append((region_id, self.caches.store(xcd, region_id, index, data[lanes], bypass, wave_key)))
        return written

    def retire_store(self, xcd, written, wave_key):
        for region_id, flat in written:
            self.caches.retire(xcd, region_id, flat, wave_key)

    def atomic(self, addresses, operation, operands, active, nbytes=4):
        """A read-modify-write per active lane, in lane order (lanes of one address see each
        other's updates, as the L2 serializes them). operation(old, operand) -> new, on
        uint32 (uint64 for 8 bytes). -> the old values (uint32/uint64 (64,))."""
        dtype = np.uint64 if nbytes == 8 else np.uint32
        old = np.zeros(64, dtype=dtype)
        for region, lanes, offsets in self._resolve(addresses, nbytes, active, True):
            if self.caches is not None:
                self.caches.before_atomic(region.base >> REGION_SHIFT, offsets, nbytes)
            for lane, offset in zip(lanes, offsets):
                view = region.data[offset:offset + nbytes].view(dtype)
                old[lane] = view[0]
                view[0] = operation(dtype(view[0]), dtype(operands[lane]))
        return old


def bytes_of(words):
    """uint32 (n, 64) register rows -> uint8 (64, 4n) in memory order (little endian)."""
    return np.ascontiguousarray(np.asarray(words, dtype=np.uint32).T).view(np.uint8).reshape(64, -1)


def words_of(data):
    """uint8 (64, 4n) -> uint32 (n, 64) register rows."""
    return np.ascontiguousarray(data).view(np.uint32).reshape(64, -1).T


LINE_BYTES = 128   # an L2 line (MI300-class)


class _Lines:
    """One XCD's lines of one region that it holds apart from memory: per line touched, its
    128 bytes (`copy`), which are dirty, and the wave whose store is still in flight per byte
    (`inflight`, 0: none). `slot` maps a line of the region to its row (-1: the XCD sees
    memory itself there)."""

    def __init__(self, nbytes):
        self.slot = np.full(-(-nbytes // LINE_BYTES), -1, dtype=np.int32)
        self.count = 0
        self._grow(8)

    def _grow(self, rows):
        old = self.count
        copy, dirty, inflight, lines = (np.zeros((rows, LINE_BYTES), dtype=np.uint8),
                                        np.zeros((rows, LINE_BYTES), dtype=bool),
                                        np.zeros((rows, LINE_BYTES), dtype=np.int32), np.zeros(rows, dtype=np.int64))
        if old:
            copy[:old], dirty[:old], inflight[:old], lines[:old] = (self.copy[:old], self.dirty[:old],
                                                                    self.inflight[:old], self.lines[:old])
        self.copy, self.dirty, self.inflight, self.lines = copy, dirty, inflight, lines

    def ensure(self, lines, data):
        """Rows for `lines` (unique), new ones holding memory's bytes now (`data`)."""
        missing = lines[self.slot[lines] < 0]
        if not len(missing):
            return
        end = self.count + len(missing)
        if end > len(self.copy):
            self._grow(max(end, 2 * len(self.copy)))
        rows = np.arange(self.count, end)
        spans = missing[:, None] * LINE_BYTES + np.arange(LINE_BYTES)
        self.copy[rows] = np.where(spans < len(data), data[np.minimum(spans, len(data) - 1)], 0)
        self.dirty[rows] = False
        self.inflight[rows] = 0
        self.lines[rows] = missing
        self.slot[missing] = rows
        self.count = end

    def where(self, flat):
        """(rows, offsets) of byte indices whose lines have rows (-1 rows elsewhere)."""
        return self.slot[flat // LINE_BYTES], flat % LINE_BYTES

    def keep(self, kept):
        """Drop every row but `kept` (bool per row): their lines see memory again."""
        n = self.count
        self.slot[self.lines[:n][~kept]] = -1
        rows = np.nonzero(kept)[0]
        for array in (self.copy, self.dirty, self.inflight, self.lines):
            array[:len(rows)] = array[rows]
        self.count = len(rows)
        self.slot[self.lines[:self.count]] = np.arange(self.count, dtype=np.int32)


class XcdCaches:
    """The MI355X's L2s, one per XCD. A store lands in its XCD's L2 (dirty) and reaches
    memory only by a write-back (buffer_wbl2 sc1, a store at device scope: sc1, or the
    kernel's end). A load reads its XCD's copy of the line. Until the XCD invalidates
    (buffer_inv sc1), its copy of a line is the line as it was when the kernel started:
    another XCD's data is seen only after that XCD's release and this one's acquire (or by
    a load at device scope, sc1). Stricter than a cache filled on first touch, it is the
    worst case the memory model allows, so a missing acquire shows whatever the order.
    An invalidate makes the XCD see memory as it is then (the line refilled at once: the
    stalest fill the invalidate allows).

    Kept sparse, per line: an XCD holds a line apart from memory (_Lines) only once it stored
    to it, or memory changed under the copy it sees (before a write-back, a device-scope
    store or an atomic changes a line, every other XCD that sees memory there keeps the line
    as it was). A line nobody wrote costs nothing: a 0.6 GB KV cache read by every XCD is
    never copied."""

    def __init__(self, memory, xcds):
        self.memory = memory
        self.xcds = xcds
        self.tables = {}     # (xcd, region id) -> _Lines

    def _table(self, xcd, region_id):
        key = (xcd, region_id)
        if key not in self.tables:
            self.tables[key] = _Lines(len(self.memory.regions[region_id].data))
        return self.tables[key]

    def _changing(self, region_id, lines, writer=None):
        """Before memory's `lines` of a region change: every XCD but `writer` keeps what it sees."""
        data = self.memory.regions[region_id].data
        for xcd in range(self.xcds):
            if xcd != writer:
                self._table(xcd, region_id).ensure(lines, data)

    def load(self, xcd, region_id, index, bypass):
        data = self.memory.regions[region_id].data
        out = data[index]
        table = None if bypass else self.tables.get((xcd, region_id))
        if table is not None and table.count:
            rows, offsets = table.where(index)
            held = rows >= 0
            if held.any():
                out[held] = table.copy[rows[held], offsets[held]]
        return out

    def store(self, xcd, region_id, index, values, bypass, wave_key):
        data = self.memory.regions[region_id].data
        table = self._table(xcd, region_id)
        flat = index.ravel()
        lines = np.unique(flat // LINE_BYTES)
        table.ensure(lines, data)
        rows, offsets = table.where(flat)
        table.copy[rows, offsets] = values.ravel()
        if bypass:
            self._changing(region_id, lines, writer=xcd)
            data[flat] = values.ravel()
        else:
            table.dirty[rows, offsets] = True
            table.inflight[rows, offsets] = wave_key
        return flat

    def before_atomic(self, region_id, offsets, nbytes):
        """An atomic acts in memory: every XCD keeps the lines as it saw them."""
        flat = (np.asarray(offsets, dtype=np.int64)[:, None] + np.arange(nbytes)).ravel()
        self._changing(region_id, np.unique(flat // LINE_BYTES))

    def retire(self, xcd, region_id, flat, wave_key):
        table = self.tables[(xcd, region_id)]
        rows, offsets = table.where(flat)
        rows, offsets = rows[rows >= 0], offsets[rows >= 0]   # a line written back and dropped holds nothing in flight
        mine = table.inflight[rows, offsets] == wave_key
        table.inflight[rows[mine], offsets[mine]] = 0

    def write_back(self, xcd, wave_key=0):
        """The XCD's dirty bytes to memory: those retired, and those in flight from the wave
        issuing the write-back (its earlier stores are ahead of it in its memory pipeline)."""
        for (x, region_id), table in list(self.tables.items()):
            n = table.count
            if x != xcd or not n:
                continue
            inflight = table.inflight[:n]
            done = table.dirty[:n] & ((inflight == 0) | (inflight == wave_key))
            if not done.any():
                continue
            rows, offsets = np.nonzero(done)
            self._changing(region_id, np.unique(table.lines[rows]), writer=xcd)
            self.memory.regions[region_id].data[table.lines[rows] * LINE_BYTES + offsets] = table.copy[rows, offsets]
            table.dirty[rows, offsets] = False
            table.inflight[rows, offsets] = 0

    def invalidate(self, xcd):
        """Drop the XCD's lines that hold no dirty byte (it sees memory there again)."""
        for (x, _), table in self.tables.items():
            if x == xcd and table.count:
                table.keep(table.dirty[:table.count].any(1))

    def write_back_all(self):
        for table in self.tables.values():
            table.inflight[:table.count] = 0
        for xcd in range(self.xcds):
            self.write_back(xcd)
