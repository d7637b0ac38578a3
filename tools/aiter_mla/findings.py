"""The detectors' findings in aiter's decode, classified: every detector stays on, and a finding
stops the run unless it is of a kind named here, which is recorded (kind, workgroup, waves, line,
instruction, count) and the run goes on reading what the hardware reads when its timing holds.

TIMING_ORDERED: a wave writes LDS bytes that another wave's load to LDS, issued before the last
barrier and not waited for, will write: the load lands first (it was issued hundreds of cycles
earlier). Or a wave reads LDS bytes that another wave's load to LDS (buffer_load ... lds),
issued after the reader's last barrier, will overwrite (or that load is issued over bytes the
other wave read since that barrier). Nothing in the ISA orders the two (no
barrier or wait between them): the code relies on the load's memory latency (hundreds of cycles)
outlasting the reader's LDS reads issued right after the same barrier. The reader gets the bytes
as they were before that load (as the hardware does when that timing holds).

ISSUE_ORDERED: a wave writes LDS bytes another wave read since the last barrier (a write after a
read, no barrier between), or reads bytes another wave wrote before the barrier without waiting
for that write (s_waitcnt lgkmcnt(N > 0) before s_barrier). Ordered only by the order in which
the LDS serves the waves' requests: the read issues first (the waves leave the barrier together
and the read comes a few instructions after it, the write tens of instructions later), or the
write was issued before the barrier and the read after it. Under LockstepDispatch the reader gets
the value that order gives; the ISA does not promise it.

Both kinds assume the waves of a workgroup advance together (LockstepDispatch: one instruction
per wave in turn; the hardware's four waves sit on four SIMDs and issue in parallel).
"""
import numpy as np

from gfx950.executor import EmulationError, BUDGET_ENV, DetectorFinding, Dispatch, Workgroup
from gfx950.registry import Stop

TIMING_ORDERED, ISSUE_ORDERED = "TIMING_ORDERED", "ISSUE_ORDERED"
KINDS = {kind: __doc__.split(f"{kind}: ", 1)[1].split("\n\n", 1)[0].replace("\n", " ")
         for kind in (TIMING_ORDERED, ISSUE_ORDERED)}
LDS_READ_LATENCY = 16   # wave instructions after which an LDS read's data is in its registers, waited for or not
ASSUMPTION_LDS_LATENCY = (f"LDS_LATENCY: an LDS read's data reaches its registers {LDS_READ_LATENCY} instructions of its "
                          "wave after it issues (or at the wait that retires it, if sooner); aiter's decode reads "
                          "registers whose ds_read it waited for only partly (s_waitcnt lgkmcnt(4) before 5 MFMAs "
                          "that read the next 4 reads' registers), relying on the LDS being faster than its MFMAs")
ASSUMPTION_LOCKSTEP = ("LOCKSTEP: a workgroup's waves advance one instruction each in turn (the hardware runs its "
                       "four waves on four SIMDs at once; nothing in the ISA makes them keep step)")


class Findings:
    """What a dispatch's accepted findings were: {(kind, line, instruction): count}, and the first
    workgroup and waves of each."""

    def __init__(self, accept=(TIMING_ORDERED, ISSUE_ORDERED)):
        self.accept = set(accept)
        self.counts, self.first = {}, {}

    def record(self, kind, ins, where):
        key = (kind, ins.line, ins.text)
        self.counts[key] = self.counts.get(key, 0) + 1
        self.first.setdefault(key, where)

    def rows(self):
        return [{"kind": kind, "line": line, "instruction": text, "count": count, "first": self.first[(kind, line, text)]}
                for (kind, line, text), count in sorted(self.counts.items(), key=lambda item: item[0][1])]


def workgroup_class(findings):
    """A Workgroup whose detectors record the accepted kinds in `findings` and raise the rest."""

    class ClassifyingWorkgroup(Workgroup):
        def __init__(self, dispatch, group_id, xcd, storages=None):
            super().__init__(dispatch, group_id, xcd, storages)
            self.dma_epoch = np.full(len(self.lds), -1, dtype=np.int32)

        def lds_dma(self, w, addresses, data, mask, ins):
            before = self.lds_dma_wave.copy() if self.detect else None
            self._dma_ins = ins
            super().lds_dma(w, addresses, data, mask, ins)
            queue = w.pending["vm"]
            land, pc = queue[-1]
            if before is not None:
                queue[-1] = (_Landing(land, np.nonzero((self.lds_dma_wave == w.wave_id) & (before != w.wave_id))[0]),
                             pc)
            if before is not None:
                self.dma_epoch[(self.lds_dma_wave == w.wave_id) & (before != w.wave_id)] = self.epoch

        def _check_overwrite(self, w, index, values, what):
            flat = np.asarray(index).ravel()
            dma = self.lds_dma_wave[flat]
            late = (dma >= 0) & (dma != w.wave_id)
            if late.any() and TIMING_ORDERED in findings.accept and \
                    (self.dma_epoch[flat][late] < self.epoch).all():
                # loads to LDS issued before the barrier, still in flight: they land first
                findings.record(TIMING_ORDERED, self._write_ins if not what.startswith("loads") else self._dma_ins,
                                {"workgroup": list(self.group_id), "writer": w.wave_id, "loader": int(dma[late][0])})
                bytes_in_flight = set(flat[late].tolist())
                for other in self.waves:
                    for landing, _ in other.pending["vm"]:
                        if isinstance(landing, _Landing) and not landing.done and \
                                bytes_in_flight.intersection(landing.index.tolist()):
                            landing()
                            self.lds_write_epoch[landing.index] = self.epoch - 1   # landed before this epoch
            kind = TIMING_ORDERED if what.startswith("loads to LDS") else ISSUE_ORDERED
            if kind in findings.accept:
                others = [i for i in range(len(self.waves)) if i != w.wave_id]
                flat = np.asarray(index).ravel()
                read = self.lds_read_epoch[others][:, flat] == self.epoch
                if read.any():
                    findings.record(kind, self._dma_ins if kind == TIMING_ORDERED else self._write_ins,
                                    {"workgroup": list(self.group_id), "loader": w.wave_id,
                                     "reader": others[int(np.nonzero(read.any(1))[0][0])]})
                    saved = self.lds_read_epoch[:, flat].copy()
                    self.lds_read_epoch[np.ix_(others, flat)] = -1
                    try:
                        return super()._check_overwrite(w, index, values, what)
                    finally:
                        self.lds_read_epoch[:, flat] = saved
            return super()._check_overwrite(w, index, values, what)

        def issue(self, w, counter, land):
            ins = w.workgroup.dispatch.kernel.program.instructions[w.pc - 1]
            if counter == "lgkm" and ins.mnemonic.startswith("ds_read"):
                w.pending[counter].append((land, w.pc - 1, w.executed))   # its issue time: LDS_LATENCY
            else:
                super().issue(w, counter, land)

        def lds_write(self, w, addresses, data, mask, ins, atomic=False):
            self._write_ins = ins
            return super().lds_write(w, addresses, data, mask, ins, atomic)

        def lds_read(self, w, addresses, nbytes, mask, ins, atomic=False):
            if self.detect and not atomic and ISSUE_ORDERED in findings.accept:
                lanes = np.nonzero(mask)[0]
                where = np.broadcast_to(np.asarray(addresses, dtype=np.int64), (64,))[lanes, None] + np.arange(nbytes)
                where = np.unique(where[(where >= 0) & (where < len(self.lds))])
                writer = self.lds_writer[where]
                pending = (writer >= 0) & (writer != w.wave_id)
                if pending.any() and (self.lds_write_epoch[where][pending] < self.epoch).all():
                    findings.record(ISSUE_ORDERED, ins, {"workgroup": list(self.group_id), "reader": w.wave_id,
                                                         "writer": int(writer[pending][0])})
                    saved = self.lds_writer[where].copy()
                    self.lds_writer[where[pending]] = -1   # the write, issued before the barrier, is served first
                    try:
                        return self._lds_read_timing(w, addresses, nbytes, mask, ins, atomic)
                    finally:
                        self.lds_writer[where] = saved
            return self._lds_read_timing(w, addresses, nbytes, mask, ins, atomic)

        def _lds_read_timing(self, w, addresses, nbytes, mask, ins, atomic=False):
            if self.detect and not atomic and TIMING_ORDERED in findings.accept:
                lanes = np.nonzero(mask)[0]
                where = np.broadcast_to(np.asarray(addresses, dtype=np.int64), (64,))[lanes, None] + np.arange(nbytes)
                where = where[(where >= 0) & (where < len(self.lds))]
                dma = self.lds_dma_wave[where]
                late = (dma >= 0) & (dma != w.wave_id) & (self.dma_epoch[where] == self.epoch)
                early = (dma >= 0) & ~late
                if late.any() and not early.any():
                    findings.record(TIMING_ORDERED, ins, {"workgroup": list(self.group_id), "reader": w.wave_id,
                                                          "loader": int(dma[late][0])})
                    saved = self.lds_dma_wave[where].copy()
                    self.lds_dma_wave[where] = -1   # read the bytes as they were before that load
                    try:
                        return super().lds_read(w, addresses, nbytes, mask, ins, atomic)
                    finally:
                        self.lds_dma_wave[where] = saved
            return super().lds_read(w, addresses, nbytes, mask, ins, atomic)

    return ClassifyingWorkgroup


class _Landing:
    """A load to LDS's landing that may happen early (once): `index` the LDS bytes it writes."""

    def __init__(self, land, index):
        self.land, self.index, self.done = land, index, False

    def __call__(self):
        if not self.done:
            self.done = True
            self.land()


class _Step:
    """Marks the end of one instruction of a wave under LockstepDispatch."""


def _stepping(function, latency):
    def run(w):
        status = function(w)
        queue = w.pending["lgkm"]
        # LDS reads land in issue order once `latency` instructions old (ASSUMPTION_LDS_LATENCY)
        while queue and len(queue[0]) == 3 and w.executed - queue[0][2] >= latency:
            queue.popleft()[0]()
        return _Step if status is None else status
    return run


class LockstepDispatch(Dispatch):
    """A Dispatch whose workgroups' waves advance one instruction each in turn (ASSUMPTION_LOCKSTEP).
    Built on the serial executor (its _run_workgroup): the lockstep one (tools/gfx950/lockstep.py)
    runs groups of waves through kernel.code without this class's turn order or read latency, and
    gave aiter's decode wrong answers (tests/test_aiter_emulated.py)."""

    def __init__(self, kernel, *args, **kwargs):
        stepping = object.__new__(type(kernel))
        stepping.__dict__.update(kernel.__dict__)
        stepping.code = [_stepping(f, LDS_READ_LATENCY) for f in kernel.code]
        super().__init__(stepping, *args, **{**kwargs, "executor": "serial"})

    def _run_workgroup(self, group):
        waves = group.waves
        while True:
            running = [w for w in waves if not (w.done or w.at_barrier)]
            while running:
                for w in running:
                    self._run_wave(w)
                running = [w for w in running if not (w.done or w.at_barrier)]
                if sum(w.executed for w in waves) > self.budget:
                    w = running[0] if running else waves[0]
                    raise EmulationError(self._where(w, w.pc - 1, f"a hang: the workgroup ran past its budget of "
                                                                  f"{self.budget} wave instructions ({BUDGET_ENV}=N)"))
            if all(w.done for w in waves):
                return
            group.epoch += 1
            for w in waves:
                w.at_barrier = False


__all__ = ["LockstepDispatch", "ISSUE_ORDERED", "ASSUMPTION_LOCKSTEP", "ASSUMPTION_LDS_LATENCY", "LDS_READ_LATENCY", "Findings", "workgroup_class", "TIMING_ORDERED", "KINDS", "DetectorFinding"]
