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


class Memory:
    def __init__(self):
        self.regions = {}      # region id -> Region

    def add_region(self, data, name=None, writable=True):
        """A new region for `data` (uint8 array) -> its base address. With a name, the whole
        region is one extent of that name; else add_extent names the tensors in it."""
        region_id = len(self.regions) + 1
        base = region_id << REGION_SHIFT
        self.regions[region_id] = Region(base, data, [(0, len(data), name)] if name else [], writable)
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
                names = ", ".join(f"{name} [{first:#x}, {end:#x})" for first, end, name in region.extents)
                raise MemoryFault(int(picked[bad]), int(addresses[picked[bad]]),
                                  f"{nbytes}-byte access at offset {int(offsets[bad]):#x} outside {names}")
            if write and not region.writable:
                raise MemoryFault(int(picked[0]), int(addresses[picked[0]]), "a store to read-only kernel arguments")
            groups.append((region, picked, offsets))
        return groups

    def load(self, addresses, nbytes, active):
        """-> uint8 (64, nbytes): the bytes at each active lane's address (0 elsewhere)."""
        out = np.zeros((64, nbytes), dtype=np.uint8)
        for region, lanes, offsets in self._resolve(addresses, nbytes, active, False):
            out[lanes] = region.data[offsets[:, None] + np.arange(nbytes)]
        return out

    def store(self, addresses, data, active):
        """data: uint8 (64, nbytes); lanes in order, so a later lane wins on overlap."""
        nbytes = data.shape[1]
        for region, lanes, offsets in self._resolve(addresses, nbytes, active, True):
            region.data[offsets[:, None] + np.arange(nbytes)] = data[lanes]

    def atomic(self, addresses, operation, operands, active, nbytes=4):
        """A read-modify-write per active lane, in lane order (lanes of one address see each
        other's updates, as the L2 serializes them). operation(old, operand) -> new, on
        uint32 (uint64 for 8 bytes). -> the old values (uint32/uint64 (64,))."""
        dtype = np.uint64 if nbytes == 8 else np.uint32
        old = np.zeros(64, dtype=dtype)
        for region, lanes, offsets in self._resolve(addresses, nbytes, active, True):
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
