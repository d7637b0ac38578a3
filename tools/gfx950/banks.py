"""LDS bank conflicts as the emulator sees them: every LDS access of an emulated run, with
the lane addresses it really had, counted in LDS clocks under each bank model.

    counter = BankCounter()
    gfx950.emulate(kernel, grid, *args, num_warps=4, observers=[counter], **constexprs)
    counter.kernels[0].summary(innermost=False)   # per instruction and the main loop, per model

    python tools/gfx950/banks.py [--kernel gluon|scaled128|scaled64 ...]   # submission's split
        kernels on a small case: the table, beside the compile report's static counts, and
        results/gfx950_lds_banks.json

The models (a bank is 4 bytes; within a phase, distinct 4-byte words on one bank serialize,
one word read by several lanes is a broadcast; a phase takes as many clocks as its deepest
bank has distinct words):
* the compile report's four (tools/lds_banks.py, BANK_MODELS and phases_for, used as they
  are: "32 banks", "64 banks", "64 banks, paired groups" and MEASURED), with its conventions: ds_read2 /
  ds_write2 (and st64) count as one access of twice the width over both halves' words; 1- and
  2-byte accesses as 4-byte ones; ds_read_b64_tr_* as 8-byte reads; a load to LDS as a write
  of its width.
* MEASURED ("64 banks, measured"), gfx950 as HipKittens measured it (../shared/notes/gfx950.md,
  "LDS banks"): 64 banks; 16-byte reads in 4 phases of 16 lanes {0-3, 12-15, 20-27},
  {4-11, 16-19, 28-31} and the same + 32; 8-byte reads in 2 phases (lanes 0-31, 32-63),
  8-byte writes in 4 phases of 16 consecutive lanes; every other access as "64 banks".

An access's conflict-free clocks are its phases that have an active lane: for the compile
report's models, on a full wave, that is its own conflict-free count (bytes / (4 x banks)) for
every width but 12 bytes (which it serves in the 16-byte phases); for MEASURED it is the
floor the phases set (an 8-byte write: 4, where its bytes would fill 2). Lanes off in EXEC take
no part; an execution with no active lane costs nothing and is counted apart (`empty`).
The static walk (lds_banks.lds_bank_counts) has no EXEC: it counts all 64 lanes.

What the emulator sees that the static walk cannot: the addresses of every execution (not
the first pass of each loop), in every wave, branches taken as the data takes them. What it
does not see: ds_bpermute / ds_swizzle (no LDS memory; the static walk counts them at their
conflict-free clocks), LDS atomics (neither counts them; they are listed in `uncounted`), and
time: a clock here is a bank model's unit, not a measurement.
"""
import argparse
import datetime
import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import RUNNER_TRITON_VERSION  # noqa: E402
from isa_latency import loop_region  # noqa: E402
from lds_banks import BANK_MODELS, MEASURED_MODEL, phases_for  # noqa: E402

LANES = 64
ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "results" / "gfx950_lds_banks.json"
COMPILE_REPORT = ROOT / "results" / "compile_report_triton3.6.0.json"
MEASURED = MEASURED_MODEL
_PAIRED = re.compile(r"^ds_(read|write)2")        # ds_read2 / ds_write2 and their st64 forms
_COUNTED = re.compile(r"^ds_(read|write|load|store)")  # LDS atomics (ds_add_u32, ...) are not


# model -> (banks, the compile report's model it follows, {mnemonic: phases} where it differs): the compile
# report's own models, MEASURED among them
MODELS = {name: (banks, name, {}) for name, (banks, _) in BANK_MODELS.items()}
_PHASE_MAPS = {}


def phases(model, mnemonic, lane_bytes, kind):
    """The lane groups `model` serves together for one wave's access of `lane_bytes` bytes per
    lane (both halves of a ds_read2 / ds_write2), kind "read" or "write"."""
    if model not in MODELS:
        raise ValueError(f"model: expected one of {list(MODELS)}, got {model!r}")
    if kind not in ("read", "write"):
        raise ValueError(f"kind: expected 'read' or 'write', got {kind!r}")
    _, base, measured = MODELS[model]
    return measured.get(mnemonic) or phases_for(base, lane_bytes, kind)


def _phase_map(model, mnemonic, lane_bytes, kind):
    """(phase index of each lane (64,), number of phases), cached."""
    key = (model, mnemonic, lane_bytes, kind)
    if key not in _PHASE_MAPS:
        groups = phases(model, mnemonic, lane_bytes, kind)
        lane_phase = np.full(LANES, -1, dtype=np.int64)
        for index, group in enumerate(groups):
            lane_phase[group] = index
        if (lane_phase < 0).any() or sum(map(len, groups)) != LANES:
            raise ValueError(f"{model}: the phases of {mnemonic} do not cover each lane once")
        _PHASE_MAPS[key] = (lane_phase, len(groups))
    return _PHASE_MAPS[key]


def access_words(parts, nbytes, mask):
    """The 4-byte LDS words each active lane touches: parts a list of (64,) byte-address arrays
    (two for ds_read2 / ds_write2), nbytes per lane per part (1- and 2-byte accesses touch one
    word), mask (64,) bool -> (active lanes (n,), words (n, words per lane))."""
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != (LANES,):
        raise ValueError(f"mask: expected a (64,) bool array, got shape {mask.shape}")
    if nbytes <= 0:
        raise ValueError(f"nbytes: expected a positive byte count per lane, got {nbytes}")
    lanes = np.flatnonzero(mask)
    span = np.arange(max(nbytes, 4) // 4, dtype=np.int64)
    words = [np.broadcast_to(np.asarray(part, dtype=np.int64), (LANES,))[lanes, None] // 4 + span for part in parts]
    return lanes, np.concatenate(words, axis=1)


def phase_clocks(lanes, words, lane_phase, phase_count, banks):
    """(clocks, conflict-free clocks) of one wave's access: per phase, the most distinct words
    any bank holds among the phase's active lanes; conflict-free, the phases with an active lane."""
    if not len(lanes):
        return 0, 0
    phase = np.broadcast_to(lane_phase[lanes, None], words.shape).ravel()
    touched = np.unique((phase << 32) | words.ravel())           # each (phase, word) once: broadcasts
    slot = (touched >> 32) * banks + (touched & 0xFFFFFFFF) % banks
    slots, depth = np.unique(slot, return_counts=True)
    deepest = np.zeros(phase_count, dtype=np.int64)
    np.maximum.at(deepest, slots // banks, depth)
    return int(deepest.sum()), int(np.count_nonzero(deepest))


def access_cycles(parts, nbytes, mask, model, mnemonic, kind):
    """(clocks, conflict-free clocks) of one wave's LDS access in `model` (see access_words)."""
    lanes, words = access_words(parts, nbytes, mask)
    lane_phase, count = _phase_map(model, mnemonic, max(nbytes, 4) * len(parts), kind)
    return phase_clocks(lanes, words, lane_phase, count, MODELS[model][0])


class InstructionBanks:
    """One LDS instruction's executions (wave instructions) and their clocks per model."""

    def __init__(self, index, ins, kind, lane_bytes, models):
        self.index, self.ins, self.kind, self.lane_bytes = index, ins, kind, lane_bytes
        self.executions = self.empty = self.partial = 0
        self.cycles = dict.fromkeys(models, 0)
        self.conflict_free = dict.fromkeys(models, 0)

    def add(self, parts, nbytes, mask):
        lanes, words = access_words(parts, nbytes, mask)
        self.executions += 1
        if not len(lanes):
            self.empty += 1
            return
        self.partial += len(lanes) < LANES
        for model in self.cycles:
            lane_phase, count = _phase_map(model, self.ins.mnemonic, self.lane_bytes, self.kind)
            clocks, free = phase_clocks(lanes, words, lane_phase, count, MODELS[model][0])
            self.cycles[model] += clocks
            self.conflict_free[model] += free

    def factor(self, model):
        free = self.conflict_free[model]
        return self.cycles[model] / free if free else 1.0

    def as_dict(self, in_main_loop):
        return {"index": self.index, "line": self.ins.line, "text": self.ins.text, "mnemonic": self.ins.mnemonic,
                "kind": self.kind, "bytes_per_lane": self.lane_bytes, "in_main_loop": in_main_loop,
                "executions": self.executions, "empty": self.empty, "partial": self.partial,
                "cycles": dict(self.cycles), "conflict_free": dict(self.conflict_free),
                "factor": {m: round(self.factor(m), 3) for m in self.cycles}}


def main_loop(program, innermost=False, executed=None, matrix_prefix="v_mfma"):
    """(first, last) instruction indices of the main loop of a parsed program as the compile
    report finds it (isa_latency.loop_region: of the regions closed by a backward branch, the
    one with the most matrix instructions; the largest, or innermost the smallest), or None.
    executed: per-instruction execution counts (Kernel.counts): only branches the run executed
    close a region (the Gluon kernel's smallest copy of its tile loop is the second pass, which
    runs only after an overflow)."""
    def target(mnemonic, ins, position):
        if executed is not None and not executed[position]:
            return None
        if mnemonic.startswith(("s_branch", "s_cbranch")) and ins.operands and ins.operands[0].kind == "label":
            return program.labels.get(ins.operands[0].value)
        return None
    return loop_region([(i, ins.mnemonic, ins) for i, ins in enumerate(program.instructions)], target,
                       matrix_prefix, innermost)


class KernelBanks:
    """One kernel's LDS instructions (over every launch of its binary the counter saw)."""

    def __init__(self, kernel):
        self.kernel, self.name, self.program = kernel, kernel.name, kernel.program
        self.index_of = {id(ins): i for i, ins in enumerate(self.program.instructions)}
        self.rows = {}
        self.uncounted = Counter()   # LDS instructions no model counts (atomics): executions

    def summary(self, innermost=False):
        """{"main_loop": (first, last) lines of the executed main loop (main_loop over the
        branches this run executed) or None, "report_loop": the lines the compile report's rule
        picks from the text alone, "instructions": [InstructionBanks.as_dict by index],
        "models": {model: {"cycles_per_pass", "conflict_free_per_pass", "factor"}} over the main
        loop (each instruction once, averaged over its executions with an active lane: the
        static walk's "per tile"), "outside_main_loop": {model: {"cycles", "conflict_free"}
        summed over every execution of the other LDS instructions}, "max_instruction_factor":
        {model: the loop's worst instruction}, "uncounted": {mnemonic: executions}}."""
        region = main_loop(self.program, innermost, executed=self.kernel.counts)
        inside = (lambda i: region[0] <= i <= region[1]) if region else (lambda i: False)
        rows = [self.rows[i] for i in sorted(self.rows)]
        loop = [r for r in rows if inside(r.index) and r.executions > r.empty]
        models = {}
        for model in MODELS:
            cycles = sum(r.cycles[model] / (r.executions - r.empty) for r in loop)
            free = sum(r.conflict_free[model] / (r.executions - r.empty) for r in loop)
            models[model] = {"cycles_per_pass": round(cycles, 2), "conflict_free_per_pass": round(free, 2),
                             "factor": round(cycles / free, 3) if free else 1.0}
        outside = [r for r in rows if not inside(r.index)]
        return {"main_loop": self.lines(region), "report_loop": self.lines(main_loop(self.program, innermost)),
                "instructions": [r.as_dict(inside(r.index)) for r in rows], "models": models,
                "outside_main_loop": {m: {"cycles": sum(r.cycles[m] for r in outside),
                                          "conflict_free": sum(r.conflict_free[m] for r in outside)} for m in MODELS},
                "max_instruction_factor": {m: round(max((r.factor(m) for r in loop), default=1.0), 3)
                                           for m in MODELS},
                "uncounted": dict(self.uncounted)}

    def lines(self, region):
        return [self.program.instructions[i].line for i in region] if region else None


class BankCounter:
    """An emulator observer (gfx950.emulate(..., observers=[counter])): every LDS access's
    clocks per bank model, per instruction, per kernel binary (`kernels`, in launch order)."""

    WHAT = {"read": "read", "write": "write", "write (load to LDS)": "write"}

    def __init__(self):
        self._kernels = {}
        self._first_half = None   # (ins, addresses, mask) of a ds_read2 / ds_write2 awaiting its second half

    @property
    def kernels(self):
        return list(self._kernels.values())

    def lds(self, workgroup, ins, what, addresses, nbytes, mask):
        kind = self.WHAT.get(what)
        if kind is None:
            raise ValueError(f"what: expected one of {list(self.WHAT)}, got {what!r}")
        kernel = workgroup.dispatch.kernel
        tally = self._kernels.get(id(kernel))
        if tally is None:
            tally = self._kernels[id(kernel)] = KernelBanks(kernel)
        if not _COUNTED.match(ins.mnemonic) and what != "write (load to LDS)":
            tally.uncounted[ins.mnemonic] += 1
            return
        addresses = np.array(np.broadcast_to(addresses, (LANES,)), dtype=np.int64)
        parts = [addresses]
        if _PAIRED.match(ins.mnemonic):
            if self._first_half is None:
                self._first_half = (ins, addresses, np.array(mask, dtype=bool))
                return
            first_ins, first, first_mask = self._first_half
            self._first_half = None
            if first_ins is not ins or not np.array_equal(first_mask, mask):
                raise ValueError(f"{ins.text}: the second half of a paired LDS access does not follow its first "
                                 f"({first_ins.text})")
            parts = [first, addresses]
        index = tally.index_of[id(ins)]
        row = tally.rows.get(index)
        if row is None:
            row = tally.rows[index] = InstructionBanks(index, ins, kind, max(nbytes, 4) * len(parts), MODELS)
        row.add(parts, nbytes, mask)


# ---------------------------------------------------------------------------------------
# the command: submission's split kernels on the emulator, beside the compile report
# ---------------------------------------------------------------------------------------
# name -> (family constant's name, BLOCK_N, num_warps, num_stages, `innermost` as the compile
# report reads the kernel's main loop: the Gluon kernel's tile loop has a second back-edge
# around its last partial tile's masked copies, and a second copy for the overflow pass)
KERNELS = {"gluon": ("ONCE_SCORES", 128, 4, 1, True), "scaled128": ("SCALED_SCORES", 128, 8, 2, False),
           "scaled64": ("SCALED_SCORES", 64, 4, 2, False)}
STATIC_MODELS = list(BANK_MODELS)


def committed_static(report_rows, variant):
    """The committed compile report's row for `variant`'s build -> its "lds_banks" or None."""
    name = "_gluon_split_kernel" if variant.gluon else "_scaled_split_kernel"
    for row in report_rows:
        if (row.get("kernel") == name and row.get("target") == "gfx950" and "lds_banks" in row
                and (row["BLOCK_N"], row["MERGE"], row["num_warps"], row["num_stages"])
                == (variant.block_n, variant.merge, variant.num_warps, variant.num_stages)
                and (variant.gluon or (row.get("SPLIT_TAIL"), row.get("EARLY_TILE"))
                     == (variant.split_tail, variant.early_tile))):
            return row["lds_banks"]
    return None


def _asm_of(kernel):
    """The amdgcn text a loaded Kernel was parsed from (gfx950.load's cache)."""
    import gfx950
    return next(key[0] for key, loaded in gfx950._KERNELS.items() if loaded is kernel)


def _run_kernel(name, batch, kv_len, splits, merge_name, seed):
    """Emulate `name`'s split kernel (and its combine) on one case through submission's own
    launch code (gfx950.mla) -> (variant, the split kernel's KernelBanks, its amdgcn, what
    was wrong with the answer or None)."""
    from gfx950 import dispatch, mla
    sub = mla.mi355x_submission()
    family, block_n, num_warps, num_stages, _ = KERNELS[name]
    merge = getattr(sub, f"MERGE_{merge_name.upper()}")
    variant = sub.variants_for("gfx950", "hip", block_n, num_warps, num_stages, getattr(sub, family), merge)[0]
    if (name == "gluon") != variant.gluon:
        raise RuntimeError(f"{name}: submission offers {variant.describe()} (Gluon unavailable here?)")
    counter = BankCounter()
    data = mla.reference_input([kv_len] * batch, seed)
    dispatch.install(sub, observers=[counter])
    try:
        out = mla.run_variant(sub, variant, data, splits)
    finally:
        dispatch.install(sub)
    split_name = "_gluon_split_kernel" if variant.gluon else "_scaled_split_kernel"
    tally = next(k for k in counter.kernels if k.name == split_name)
    return variant, tally, _asm_of(tally.kernel), mla.wrong(sub, variant, data, out)


def static_rows(asm, num_warps, program):
    """The static walk's (lds_banks.lds_bank_counts) LDS rows of both its main-loop choices
    (innermost and not: together every copy of the tile loop) on the binary the emulator ran,
    by instruction index (its positions index the same instructions as the emulator's parse:
    checked)."""
    from lds_banks import lds_bank_counts
    rows = {}
    for innermost in (True, False):
        for row in lds_bank_counts(asm, num_warps, innermost=innermost)["instructions"]:
            ins = program.instructions[row["position"]]
            if ins.mnemonic != row["mnemonic"]:
                raise RuntimeError(f"static row {row['position']} is {row['mnemonic']}, the emulator's {ins.mnemonic}")
            rows[row["position"]] = row
    return rows


def static_totals(rows, indices):
    """The static walk's main-loop totals over the instructions `indices` (those the emulator
    counted in its main loop), in lds_bank_counts's form."""
    picked = [rows[i] for i in indices if i in rows]
    models = {}
    for model in STATIC_MODELS:
        cycles, ideal = sum(r["cycles"][model] for r in picked), sum(r["ideal"][model] for r in picked)
        models[model] = {"cycles_per_tile": round(cycles, 2), "ideal_per_tile": round(ideal, 2),
                         "factor": round(cycles / ideal, 3) if ideal else 1.0}
    return {"models": models, "instructions": len(picked), "missing": len(indices) - len(picked)}


def compare(name, batch, kv_len, splits, merge_name, seed, report_rows):
    """One kernel: emulated, the static walk on the same binary, the committed report -> dict."""
    innermost = KERNELS[name][4]
    variant, tally, asm, wrong = _run_kernel(name, batch, kv_len, splits, merge_name, seed)
    found = tally.summary(innermost)
    static = static_rows(asm, variant.num_warps, tally.program)
    for row in found["instructions"]:
        known = static.get(row["index"])
        row["static_factor"] = known and {m: round(known["cycles"][m] / known["ideal"][m], 3) for m in STATIC_MODELS}
    in_loop = [row["index"] for row in found["instructions"] if row["in_main_loop"]]
    committed = committed_static(report_rows, variant)
    return {"kernel": name, "name": tally.name, "variant": variant.describe(),
            "case": {"batch": batch, "kv_len": kv_len, "splits": splits, "seed": seed},
            "answer": wrong or "right (gfx950.mla.wrong)", "innermost": innermost, **found,
            "static_same_binary": static_totals(static, in_loop),
            "static_committed": None if committed is None else {
                "models": committed["models"], "max_instruction_factor": committed["max_instruction_factor"]}}


def print_kernel(result, every=False):
    models = list(MODELS)
    case = result["case"]
    print(f"\n{result['kernel']}: {result['variant']}; batch {case['batch']}, kv_len {case['kv_len']}, "
          f"{case['splits']} splits; the answer: {result['answer']}")
    print(f"  main loop: lines {result['main_loop']} (the loop this run executed; the compile report's rule on the "
          f"text alone picks {result['report_loop']})")
    print("  main loop, LDS clocks per wave per pass / conflict-free (x: their ratio); the static walk (lds_banks) "
          "on the same binary and in the committed compile report:")
    for model in models:
        emulated = result["models"][model]
        cells = [f"emulated {emulated['cycles_per_pass']:6.0f} / {emulated['conflict_free_per_pass']:<5.0f} "
                 f"x{emulated['factor']:.3f}"]
        for label in ("static_same_binary", "static_committed"):
            static = (result[label] or {}).get("models", {}).get(model)
            cells.append(f"{label.replace('_', ' ')} " + (f"{static['cycles_per_tile']:6.0f} / "
                                                          f"{static['ideal_per_tile']:<5.0f} x{static['factor']:.3f}"
                                                          if static else f"{'-':<21}"))
        print(f"    {model:<26} " + "   ".join(cells))
    print("  per instruction, over its executions: clocks / conflict-free, x their ratio (s: the static walk's ratio)")
    print(f"    {'line':>5} {'instruction':<44} {'execs':>5} {'part':>4} {'empty':>5} "
          + " ".join(f"{m[:27]:>27}" for m in models))
    for row in result["instructions"]:
        if not (every or row["in_main_loop"]):
            continue
        static = row.get("static_factor") or {}
        cells = [f"{row['cycles'][m]}/{row['conflict_free'][m]} x{row['factor'][m]:.2f}"
                 + (f" s{static[m]:.2f}" if m in static else "") for m in models]
        print(f"    {row['line']:>5} {row['text'][:44]:<44} {row['executions']:>5} {row['partial']:>4} "
              f"{row['empty']:>5} " + " ".join(f"{c:>27}" for c in cells))
    outside = result["outside_main_loop"]
    print("  outside the main loop, every execution: " + ", ".join(
        f"{m} {outside[m]['cycles']}/{outside[m]['conflict_free']}" for m in models))
    if result["uncounted"]:
        print(f"  not counted (LDS atomics): {result['uncounted']}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", action="append", choices=list(KERNELS),
                        help="a split kernel to run (repeatable; default: all three)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--kv-len", type=int, default=600)
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--merge", choices=["direct", "combine", "fused"], default="combine")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--all", action="store_true",
                        help="list (and write) every LDS instruction, not only the main loop's")
    parser.add_argument("--out", type=Path, default=RESULT, help="the JSON written (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.kv_len < 1 or args.splits < 1:
        parser.error("--batch, --kv-len and --splits must be positive")
    if (args.merge == "direct") != (args.splits == 1):
        parser.error("merge direct is for 1 split exactly (combine and fused for more)")
    report_rows = json.loads(COMPILE_REPORT.read_text())
    results = []
    for name in args.kernel or list(KERNELS):
        result = compare(name, args.batch, args.kv_len, args.splits, args.merge, args.seed, report_rows)
        print_kernel(result, args.all)
        result["instructions"] = [row for row in result["instructions"] if args.all or row["in_main_loop"]]
        results.append(result)
    document = {"device": "gfx950 emulator", "triton": RUNNER_TRITON_VERSION,
                "date": datetime.date.today().isoformat(),
                "command": " ".join(["python tools/gfx950/banks.py", *(sys.argv[1:] if argv is None else argv)]),
                "models": {m: f"{MODELS[m][0]} banks; phases as the compile report's {MODELS[m][1]!r}"
                              + (f" except {sorted(MODELS[m][2])}" if MODELS[m][2] else "") for m in MODELS},
                "kernels": results}
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
