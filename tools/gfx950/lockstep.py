"""Waves in lockstep: all the waves of the resident workgroups that sit at one instruction
execute it together.

The registers of every resident wave live in one array over (rows, waves, lanes); a wave's
own registers (Wave.v, .defined, .exec_mask) are views into it. At each step the schedule
picks a program counter; every runnable wave at it forms the group that executes it:

* an instruction whose semantics are written over a leading waves axis (VALU, MFMA,
  conversions, compares: LOCKSTEP_COMPILERS) runs once, as one numpy operation over
  (waves x lanes), on a GroupWave;
* any other (scalar ALU, branches, memory, LDS, waits, barriers) runs wave by wave in the
  group's order, on the waves themselves, with every detector as in the serial executor.

A group splits where its waves' next program counters differ (a branch taken by some) and
merges where waves meet again: the waves at one program counter are one group. The schedule
advances the group at the lowest program counter (so the waves behind catch up and merge),
and every FAIR_EVERY-th step the group least recently advanced (so a wave spinning on a flag
another workgroup sets cannot starve that workgroup). Workgroups are resident in rounds of
`Dispatch.resident` in the order asked for (the MI355X runs one workgroup of a kernel this
size per CU); the next round starts when a round ends.
"""
import numpy as np

from .registry import Stop, Unsupported
from .wave import AGPR_BASE, EXEC_LO, LANES, MASK32

FAIR_EVERY = 16          # every 16th step advances the group waiting longest
LDS_ARRAYS = ("lds", "lds_visible", "lds_writer", "lds_write_wave", "lds_write_epoch", "lds_read_epoch", "lds_dma_wave")
_LANE_BITS = np.arange(LANES, dtype=np.uint64)


def lockstep_compilers():
    """The compile functions whose closures also run on a GroupWave (values over (waves, 64)):
    written over the lanes' last axis and using only the GroupWave's interface."""
    from . import ops_matrix, ops_scalar, ops_vector as ov
    return {ov.compile_valu, ov.compile_compare, ov.compile_cndmask, ov.compile_carry, ov.compile_bitop3,
            ov.compile_packed_f32, ov.compile_packed_16, ov.compile_fma_mix, ov.compile_div_scale,
            ov.compile_div_fmas, ov.compile_div_fixup, ov.compile_cvt_scaled_up, ov.compile_cvt_scaled_down,
            ov.compile_cvt_scaled_down_16, ov.compile_cvt_from_fp8, ov.compile_accvgpr, ops_matrix.compile_mfma,
            ops_scalar.compile_noop}


class NotUniform(Exception):
    """A group's waves disagree on state an instruction reads as one value (MODE): run it wave by wave."""


class _Rows:
    """A group's registers when its waves are not one contiguous run of the storage: reads
    gather (rows, waves, 64), writes scatter back."""

    def __init__(self, storage, index):
        self.storage, self.index = storage, index

    def __getitem__(self, key):
        if isinstance(key, tuple):
            raise Unsupported("lane-indexed register access in a lockstep group")
        return self.storage[key][..., self.index, :]

    def __setitem__(self, key, values):
        if isinstance(key, tuple):
            raise Unsupported("lane-indexed register access in a lockstep group")
        if isinstance(key, (int, np.integer)):
            self.storage[key, self.index] = values
        else:
            rows = np.arange(self.storage.shape[0])[key]
            self.storage[rows[:, None], self.index[None, :]] = values


class _Scalars:
    """A group's SGPR reads: (waves, 1) uint64, one per wave (broadcast over the lanes)."""

    def __init__(self, waves):
        self.waves = waves

    def __getitem__(self, index):
        return np.array([w.s[index] for w in self.waves], dtype=np.uint64)[:, None]


class GroupWave:
    """The waves of one lockstep group as one wave whose values have a leading waves axis:
    the interface of Wave that LOCKSTEP_COMPILERS' closures use."""

    def __init__(self, lockstep, index):
        self.lockstep = lockstep
        self.index = index
        first, count = int(index[0]), len(index)
        if int(index[-1]) - first + 1 == count:        # contiguous: views
            part = slice(first, first + count)
            self.v = lockstep.v[:, part]
            self.exec_mask = lockstep.exec_mask[part]
            self._where = part
        else:
            self.v = _Rows(lockstep.v, index)
            self.exec_mask = lockstep.exec_mask[index]
            self._where = index
        self.shape = (count, LANES)
        self.exec_all = bool(self.exec_mask.all())

    @property
    def waves(self):
        return [self.lockstep.waves[i] for i in self.index.tolist()]

    @property
    def s(self):
        return _Scalars(self.waves)

    @property
    def mode(self):
        modes = {w.mode for w in self.waves}
        if len(modes) != 1:
            raise NotUniform("MODE")
        return modes.pop()

    @property
    def scc(self):
        return np.array([w.scc for w in self.waves], dtype=np.uint64)[:, None]

    # --- VGPRs ---------------------------------------------------------------------------
    def write_v(self, row, values):
        if self.exec_all:
            self.v[row] = values
        else:
            self.write_v_where(row, values, self.exec_mask)

    def write_v_where(self, row, values, mask):
        storage = self.lockstep.v
        old = storage[row][self._where]
        storage[row, self._where] = np.where(mask, values, old)

    def write_v64(self, row, values):
        values = np.asarray(values, dtype=np.uint64)
        self.write_v(row, (values & np.uint64(MASK32)).astype(np.uint32))
        self.write_v(row + 1, (values >> np.uint64(32)).astype(np.uint32))

    def read_v64(self, row):
        return self.v[row].astype(np.uint64) | (self.v[row + 1].astype(np.uint64) << np.uint64(32))

    # --- lane masks in SGPR pairs ------------------------------------------------------------
    def read_mask(self, index):
        words = np.array([w.s[index] | (w.s[index + 1] << 32) for w in self.waves], dtype=np.uint64)
        return ((words[:, None] >> _LANE_BITS) & np.uint64(1)).astype(bool)

    def write_mask(self, index, mask):
        self.put_mask(index, mask & self.exec_mask)

    def put_mask(self, index, mask):
        words = np.packbits(np.broadcast_to(mask, self.shape), axis=1, bitorder="little").view("<u8")[:, 0]
        for w, word in zip(self.waves, words.tolist()):
            w.s[index], w.s[index + 1] = word & MASK32, word >> 32
            if index == EXEC_LO:
                w.sync_exec()
        if index == EXEC_LO:
            self.exec_mask = self.lockstep.exec_mask[self._where]
            self.exec_all = bool(self.exec_mask.all())


class Lockstep:
    """One round of resident workgroups (`groups`, in the order asked for) run in lockstep."""

    def __init__(self, dispatch, make_workgroups):
        self.dispatch = dispatch
        kernel = dispatch.kernel
        self.kernel = kernel
        self.waves = []
        plans = make_workgroups()       # [(group id, xcd)]
        count = len(plans) * kernel.num_warps
        self.v = np.zeros((512, count, LANES), dtype=np.uint32)
        self.defined = np.zeros((count, 512), dtype=bool)
        self.exec_mask = np.ones((count, LANES), dtype=bool)
        self.workgroups = []
        for group_id, xcd in plans:
            first = len(self.waves)
            storages = [(self.v[:, first + i], self.defined[first + i], self.exec_mask[first + i])
                        for i in range(kernel.num_warps)]
            group = dispatch.workgroup_class(dispatch, group_id, xcd, storages)
            self.workgroups.append(group)
            self.waves += group.waves
        self.workgroup_of = np.repeat(np.arange(len(self.workgroups)), kernel.num_warps)
        self.wave_id_of = np.tile(np.arange(kernel.num_warps), len(self.workgroups))
        self.epochs = np.zeros(len(self.workgroups), dtype=np.int32)
        self.lds = {}     # LDS array name -> (workgroups, ...) array; each workgroup's is a view of it
        for name in LDS_ARRAYS:
            if self.workgroups and hasattr(self.workgroups[0], name):
                self.lds[name] = np.stack([getattr(group, name) for group in self.workgroups])
                for i, group in enumerate(self.workgroups):
                    setattr(group, name, self.lds[name][i])
        self.executed = np.zeros(len(self.workgroups), dtype=np.int64)   # wave instructions per workgroup
        self.wave_executed = np.zeros(len(self.waves), dtype=np.int64)
        self.by_class = np.zeros((len(self.workgroups), kernel.classes.max(initial=0) + 1), dtype=np.int64)
        code = kernel.code
        compilers = lockstep_compilers()
        self.group_code = [getattr(run, "group", None) or (run if kernel.compilers[pc] in compilers else None)
                           for pc, run in enumerate(code)]
        self.pc = None   # the instruction a group runs

    def run(self):
        kernel, dispatch = self.kernel, self.dispatch
        if not self.waves:
            return
        code, counts, group_code = kernel.code, kernel.counts, self.group_code
        reads, writes = (kernel.reads, kernel.writes) if dispatch.detectors else (None, None)
        budget = dispatch.budget
        at = {kernel.program.entry: np.arange(len(self.waves))}     # program counter -> waves there (sorted)
        last_step = {}
        step = 0
        while at:
            step += 1
            if step % FAIR_EVERY == 0 and len(at) > 1:
                pc = min(at, key=lambda p: last_step.get(p, 0))
            else:
                pc = min(at)
            index = at.pop(pc)
            last_step.pop(pc, None)
            counts[pc] += len(index)
            if reads is not None:
                rows = reads[pc]
                if rows is not None:
                    missing = ~self.defined[index[:, None], rows[None, :]]
                    if missing.any():
                        first = int(np.nonzero(missing.any(1))[0][0])
                        w = self.waves[int(index[first])]
                        w.pc = pc + 1
                        names = ", ".join(f"a{r - AGPR_BASE}" if r >= AGPR_BASE else f"v{r}"
                                          for r, gone in zip(rows.tolist(), missing[first].tolist()) if gone)
                        dispatch.fail(w, pc, "DetectorFinding", f"reads {names}, never written in this wave")
                    if writes[pc] is not None:
                        self.defined[index[:, None], writes[pc][None, :]] = True
                elif writes[pc] is not None:
                    self.defined[index[:, None], writes[pc][None, :]] = True
            run = group_code[pc]
            if run is not None:
                self.pc = pc
                try:
                    run(GroupWave(self, index))
                    self._charge(index, pc, budget)
                    self._arrive(at, last_step, pc + 1, index, step)
                    continue
                except NotUniform:
                    pass
                except Exception as exc:   # noqa: BLE001 - named with the group's first wave, as the serial run does
                    w = self.waves[int(index[0])]
                    w.pc = pc + 1
                    self.sync()
                    dispatch.fail_with(w, pc, exc)
            self._one_by_one(at, last_step, pc, index, step, budget)
        self.sync()
        dispatch.instructions += int(self.executed.sum())

    def sync(self):
        """Each wave's `executed` (and each workgroup's counts by class) from the counts kept over the group."""
        for w, executed in zip(self.waves, self.wave_executed.tolist()):
            w.executed = executed
        for group, counts in zip(self.workgroups, self.by_class):
            group.by_class[:len(counts)] = counts

    def lds_read(self, g, addresses, nbytes, mask):
        """The bytes (waves, 64, nbytes) a group's LDS read gives each active lane, every detector of
        Workgroup.lds_read applied over the group at once; NotUniform (the read then runs wave by wave,
        which names the finding or fault as the serial run does) where any of them would stop it, or
        where observers watch LDS."""
        if self.dispatch.observers:
            raise NotUniform("LDS observers")
        size = self.kernel.lds_bytes
        addresses = np.broadcast_to(addresses, mask.shape)
        if ((mask & ((addresses < 0) | (addresses + nbytes > size))).any()):
            raise NotUniform("an LDS access out of bounds")
        groups = self.workgroup_of[g.index]
        waves = self.wave_id_of[g.index][:, None, None]
        index = np.where(mask, addresses, 0)[..., None] + np.arange(nbytes)          # (waves, 64, nbytes)
        flat = groups[:, None, None] * size + index
        writer = self.lds["lds_writer"].reshape(-1)[flat]
        lanes = mask[..., None]
        if self.dispatch.detectors:
            if (lanes & (self.lds["lds_dma_wave"].reshape(-1)[flat] >= 0)).any():
                raise NotUniform("a read of a load to LDS in flight")
            if (lanes & (writer >= 0) & (writer != waves)).any():
                raise NotUniform("a read of another wave's write in flight")
            last = self.lds["lds_write_wave"].reshape(-1)[flat]
            epochs = self.epochs[groups][:, None, None]
            if (lanes & (last >= 0) & (last != waves) & (self.lds["lds_write_epoch"].reshape(-1)[flat] == epochs)).any():
                raise NotUniform("a read of another wave's write in this epoch")
            read = self.lds["lds_read_epoch"].reshape(-1)
            spot = (groups[:, None, None] * self.kernel.num_warps + waves) * size + index
            read[spot[np.broadcast_to(lanes, spot.shape)]] = np.broadcast_to(epochs, spot.shape)[
                np.broadcast_to(lanes, spot.shape)]
        own = (writer == -1) | (writer == waves)
        out = np.where(own, self.lds["lds"].reshape(-1)[flat], self.lds["lds_visible"].reshape(-1)[flat])
        return np.where(lanes, out, 0).astype(np.uint8)

    def _charge(self, index, pc, budget):
        groups = self.workgroup_of[index]
        added = np.bincount(groups, minlength=len(self.executed))
        self.executed += added
        self.by_class[:, self.kernel.classes[pc]] += added
        self.wave_executed[index] += 1
        over = self.executed[groups] > budget
        if over.any():
            w = self.waves[int(index[np.nonzero(over)[0][0]])]
            w.pc = pc + 1
            self.sync()
            self.dispatch.hang(w, pc)

    @staticmethod
    def _arrive(at, last_step, pc, index, step):
        there = at.get(pc)
        if there is None:
            at[pc] = index
            last_step[pc] = step
        else:
            at[pc] = np.union1d(there, index)

    def _one_by_one(self, at, last_step, pc, index, step, budget):
        """The instruction wave by wave (in the group's order); then the waves regroup by their
        next program counter, leave at a barrier or at the end; a workgroup whose waves are all
        at the barrier (or done) is released."""
        run = self.kernel.code[pc]
        dispatch = self.dispatch
        moved = {}
        stopped = set()
        for i in index.tolist():
            w = self.waves[i]
            w.pc = pc + 1
            self.wave_executed[i] += 1
            w.executed = int(self.wave_executed[i])
            group = self.workgroup_of[i]
            self.executed[group] += 1
            self.by_class[group, self.kernel.classes[pc]] += 1
            try:
                status = run(w)
            except Exception as exc:   # noqa: BLE001 - named as the serial run names it
                self.sync()
                dispatch.fail_with(w, pc, exc)
            if status != Stop.END and self.executed[group] > budget:
                self.sync()
                dispatch.hang(w, pc)
            if status is None:
                moved.setdefault(w.pc, []).append(i)
                continue
            if status == Stop.END:
                w.workgroup.retire_all(w)
            stopped.add(group)
        for target, waves in moved.items():
            self._arrive(at, last_step, target, np.array(waves, dtype=np.int64), step)
        for group in stopped:
            workgroup = self.workgroups[group]
            if all(w.done or w.at_barrier for w in workgroup.waves) and any(w.at_barrier for w in workgroup.waves):
                workgroup.epoch += 1
                self.epochs[group] = workgroup.epoch
                first = int(group) * self.kernel.num_warps
                for offset, w in enumerate(workgroup.waves):
                    if w.at_barrier:
                        w.at_barrier = False
                        self._arrive(at, last_step, w.pc, np.array([first + offset], dtype=np.int64), step)
