"""LDS bank conflicts of a gfx950 kernel, read off its ISA: every LDS instruction's lane
addresses, the phases a wave's access is served in, and so its LDS clocks against the
conflict-free ideal. No Triton, no GPU: the functions take the amdgcn text.

    lds_bank_counts(amdgcn_text, num_warps, innermost=False)   # the main loop's LDS, per model
    address_cycles(addresses, width, model, kind)              # one instruction, hand-made lanes

The bank model (AMD's documentation, cited per fact):
* LDS has 32 or 64 banks of 4 bytes, depending on the chip; bank = (byte address / 4) mod banks
  (ROCm Composable Kernel docs, "Understanding AMD GPU LDS and Bank Conflicts"). MI355X (gfx950):
  64 banks (Modular's MAX docs, `make_mma_swizzle`: "AMD MI355X have 64 LDS banks x 4 bytes
  each"); no AMD document we have says so, so both counts are kept and the worse one bounds.
* A wave's access is served in phases; which lanes share a phase depends on the instruction
  (CK docs): ds_write_b128 in 8 phases of 8 consecutive lanes; ds_read_b128 in 8 phases of 8
  lanes 0-3+20-23, 4-7+16-19, 8-11+28-31, 12-15+24-27 (and the same + 32); measured on an
  MI300X (gfx942, 32 banks) together with ds_read_b64 in 4 phases of 16 consecutive lanes
  (a public microbenchmark, "Measuring bank-conflict behaviour", whose lane-group probe
  confirms CK's groups). Within a phase, distinct dword addresses on one bank serialize; lanes
  reading the same dword share it (broadcast). A phase takes max over banks of its distinct
  dwords there, at least 1 LDS clock.
* Four models, all counted; the compile report's bound takes the worst of the first three:
  - "32 banks": phases as measured on gfx942 (<= 4 B per lane: 2 phases of 32 lanes; 8 B:
    4 of 16; 16 B: reads in CK's 8 lane groups, writes in 8 runs of 8 lanes). 128 B per clock.
  - "64 banks": the same bytes per phase doubled (<= 4 B: 1 phase of 64 lanes; 8 B: 2 of 32;
    16 B: 4 runs of 16 consecutive lanes). 256 B per clock.
  - "64 banks, paired groups": as "64 banks", but a 16 B read's 16-lane phases are pairs of
    CK's 8-lane groups (0-3+8-11+20-23+28-31, 4-7+12-15+16-19+24-27, then + 32: the pairing
    under which consecutive 16-byte blocks stay conflict-free), the other way the measured
    gfx942 groups could widen.
  - "64 banks, measured": gfx950's own phases where HipKittens' experiments measured them (64
    banks of 4 B; ds_read_b128 in 4 phases of 16 lanes 0-3+12-15+20-27, 4-11+16-19+28-31, the
    same + 32; ds_read_b64 in 2 phases of 32 lanes; ds_write_b64 in 4 phases of 16 consecutive
    lanes); the other accesses as "64 banks". 256 B per clock.
  ds_read2/write2 (two dwords or qwords per lane at two offsets) are served as one access of
  twice the width; 1- and 2-byte accesses as 4-byte ones; the transposing reads
  (ds_read_b64_tr_*) as 8-byte reads. Copies from global memory straight to LDS
  (buffer_load ... lds) write 4 or 16 consecutive bytes per lane from M0 (gluon.md): no
  conflicts, bytes / (4 x banks) clocks. ds_bpermute_b32 / ds_swizzle_b32 move no banked
  data (one phase per 4-byte width, as a conflict-free access).

The lane addresses come from tools/isa_emulator.py's first pass over the kernel's control-flow
graph (every loop's body once, as its first iteration runs it: a loop that rotates a ring adds
a wave-uniform offset, which shifts every lane's bank alike and leaves the count unchanged). An
LDS instruction whose address is unknown in any lane is listed as unresolved (and counted at
its conflict-free cost, marked so). lds_read_sources follows the ring's data: which global bytes
each lane of each LDS read receives, through the copies that wrote those LDS bytes.
"""
import re
from collections import Counter

import numpy as np

from isa_emulator import LANES, Machine, lds_access, walk
from isa_latency import kernarg_register, loop_region, parse_amdgcn


def _contiguous(size):
    return [list(range(first, first + size)) for first in range(0, LANES, size)]


def _ck_read_b128_groups():
    pairs = ((0, 20), (4, 16), (8, 28), (12, 24))
    groups = [list(range(a, a + 4)) + list(range(b, b + 4)) for a, b in pairs]
    return groups + [[lane + 32 for lane in group] for group in groups]


def _paired(groups):
    """16-lane phases as unions of two of CK's 8-lane groups, the two that make a read of
    consecutive 16-byte blocks (lane l at 16 l) conflict-free on 64 banks, as CK's groups make it
    on 32: 0-3+8-11+20-23+28-31, 4-7+12-15+16-19+24-27, the same + 32."""
    return [groups[0] + groups[2], groups[1] + groups[3], groups[4] + groups[6], groups[5] + groups[7]]


def _hipkittens_read_b128_groups():
    """gfx950's measured ds_read_b128 phases: 0-3+12-15+20-27, 4-11+16-19+28-31, the same + 32."""
    first = [*range(0, 4), *range(12, 16), *range(20, 28)]
    second = [*range(4, 12), *range(16, 20), *range(28, 32)]
    return [first, second, [lane + 32 for lane in first], [lane + 32 for lane in second]]


# model name -> (banks, {(bytes per lane, "read" | "write"): phases}); widths not listed fall
# back to the next wider one
BANK_MODELS = {
    "32 banks": (32, {(4, "read"): _contiguous(32), (4, "write"): _contiguous(32),
                      (8, "read"): _contiguous(16), (8, "write"): _contiguous(16),
                      (16, "read"): _ck_read_b128_groups(), (16, "write"): _contiguous(8)}),
    "64 banks": (64, {(4, "read"): _contiguous(64), (4, "write"): _contiguous(64),
                      (8, "read"): _contiguous(32), (8, "write"): _contiguous(32),
                      (16, "read"): _contiguous(16), (16, "write"): _contiguous(16)}),
    "64 banks, paired groups": (64, {(4, "read"): _contiguous(64), (4, "write"): _contiguous(64),
                                     (8, "read"): _contiguous(32), (8, "write"): _contiguous(32),
                                     (16, "read"): _paired(_ck_read_b128_groups()),
                                     (16, "write"): _contiguous(16)}),
    "64 banks, measured": (64, {(4, "read"): _contiguous(64), (4, "write"): _contiguous(64),
                                (8, "read"): _contiguous(32), (8, "write"): _contiguous(16),
                                (16, "read"): _hipkittens_read_b128_groups(), (16, "write"): _contiguous(16)}),
}
MEASURED_MODEL = "64 banks, measured"  # gfx950's phases where measured (the latency model's LDS term)
BOUND_MODELS = tuple(model for model in BANK_MODELS if model != MEASURED_MODEL)  # the compile report's bound


def phases_for(model, width, kind):
    """The lane groups served together for an access of `width` bytes per lane."""
    _, table = BANK_MODELS[model]
    served = min((w for w, k in table if k == kind and w >= width), default=16)
    return table[(served, kind)]


def address_cycles(addresses, width, model, kind="read"):
    """LDS clocks one wave's access takes in `model`: addresses a list of per-lane byte
    address arrays (64,), one per part of the access (ds_read2: two), each part `width` bytes
    per lane; -> (clocks, conflict-free clocks)."""
    banks, _ = BANK_MODELS[model]
    parts = [np.asarray(a, dtype=np.int64) for a in addresses]
    part_width = max(width, 4)
    lane_width = part_width * len(parts)
    dwords = np.stack([(p[:, None] // 4) + np.arange(part_width // 4)[None, :] for p in parts], axis=1)
    dwords = dwords.reshape(LANES, -1)  # (lane, dwords it touches)
    clocks = 0
    for group in phases_for(model, lane_width, kind):
        touched = np.unique(dwords[group].ravel())
        clocks += int(Counter((touched % banks).tolist()).most_common(1)[0][1])
    return clocks, ideal_cycles(width, len(parts), model)


def ideal_cycles(width, parts, model):
    """The conflict-free LDS clocks of one wave's access: its bytes (1- and 2-byte accesses
    counted as 4) over the banks' 4 x banks bytes per clock, at least 1."""
    banks, _ = BANK_MODELS[model]
    return max(1, LANES * max(width, 4) * max(parts, 1) // (4 * banks))


def _main_loop(asm_text, matrix_prefix, innermost):
    labels, instructions = parse_amdgcn(asm_text)

    def branch(mnemonic, operands, position):
        return labels.get(operands.split(",")[0].strip()) if mnemonic.startswith(("s_branch", "s_cbranch")) else None
    return loop_region(instructions, branch, matrix_prefix, innermost)


def lds_bank_counts(asm_text, num_warps, innermost=False, matrix_prefix="v_mfma"):
    """The main loop's LDS instructions (isa_latency.loop_region; innermost as there) for a
    workgroup of num_warps waves -> {"instructions": [{position, mnemonic, kind, bytes_per_lane,
    resolved, cycles {model: per wave}, ideal {model: per wave}}], "models": {model:
    {"cycles_per_tile": per wave, "ideal_per_tile": per wave, "factor"}}, "worst_model" (of BOUND_MODELS),
    "unresolved": [mnemonics], "max_instruction_factor": {model: worst cycles / ideal of one
    instruction}}. A wave's cycles are averaged over the workgroup's waves."""
    region = _main_loop(asm_text, matrix_prefix, innermost)
    machine = Machine(num_warps)
    found = []

    def visit(position, mnemonic, operands):
        access = lds_access(mnemonic, operands)
        if access is not None and region and region[0] <= position <= region[1]:
            found.append((position, mnemonic, access, [(machine.read(reg), offset) for reg, offset in access[2]]))
    walk(asm_text, machine, visit)
    found.sort(key=lambda item: item[0])
    rows, totals = [], {model: [0.0, 0.0] for model in BANK_MODELS}
    for position, mnemonic, (kind, width, parts, copy), values in found:
        resolved = copy or all(value.known for value, _ in values)
        row = {"position": position, "mnemonic": mnemonic, "kind": kind, "bytes_per_lane": width * max(1, len(parts)),
               "resolved": resolved, "cycles": {}, "ideal": {}}
        for model in BANK_MODELS:
            per_wave = []
            for wave in range(num_warps):
                lanes = slice(wave * LANES, (wave + 1) * LANES)
                if copy or not resolved:
                    ideal = ideal_cycles(width, len(parts), model)
                    per_wave.append((ideal, ideal))
                else:
                    per_wave.append(address_cycles([value.lanes[lanes] + offset for value, offset in values],
                                                   width, model, kind))
            row["cycles"][model] = sum(c for c, _ in per_wave) / num_warps
            row["ideal"][model] = sum(i for _, i in per_wave) / num_warps
            totals[model][0] += row["cycles"][model]
            totals[model][1] += row["ideal"][model]
        rows.append(row)
    models = {model: {"cycles_per_tile": round(c, 2), "ideal_per_tile": round(i, 2),
                      "factor": round(c / i, 3) if i else 1.0} for model, (c, i) in totals.items()}
    worst = max(BOUND_MODELS, key=lambda m: models[m]["cycles_per_tile"]) if rows else None
    return {"instructions": rows, "models": models, "worst_model": worst,
            "unresolved": [r["mnemonic"] for r in rows if not r["resolved"]],
            "max_instruction_factor": {model: round(max((r["cycles"][model] / r["ideal"][model] for r in rows),
                                                        default=1.0), 3) for model in BANK_MODELS}}


def lds_read_sources(asm_text, num_warps, kernargs, innermost=False, matrix_prefix="v_mfma"):
    """For every LDS read of the main loop: the global bytes (their offsets, as the copies that
    wrote those LDS bytes computed them: the known part of each copy's voffset; a tile's
    wave-uniform base, such as its first row times the row stride, is left out) each lane
    receives -> [(position, mnemonic, [per lane: tuple of global byte offsets or None])].
    kernargs {byte offset: int32 value} seeds the kernel arguments the copies' offsets multiply
    (a row stride), so their per-lane part is known. Copies are replayed in program order
    (the prologue's fill the first slots the loop's first pass reads)."""
    region = _main_loop(asm_text, matrix_prefix, innermost)
    machine = Machine(num_warps, kernargs, kernarg_register(asm_text))
    found = []

    def visit(position, mnemonic, operands):
        access = lds_access(mnemonic, operands)
        if access is not None and not access[3] and access[0] == "read" and region and \
                region[0] <= position <= region[1]:
            kind, width, parts, _ = access
            values = [(machine.read(reg), offset) for reg, offset in parts]
            lanes = []
            for lane in range(machine.count):
                if not all(value.known for value, _ in values):
                    lanes.append(None)
                    continue
                addresses = [int(value.lanes[lane]) + offset + byte for value, offset in values for byte in range(width)]
                lanes.append(tuple(machine.shadow.get(address) for address in addresses))
            found.append((position, mnemonic, lanes))
    walk(asm_text, machine, visit)
    return sorted(found, key=lambda item: item[0])


# ---------------------------------------------------------------------------------------
# the ring's hazards: every read after its tile's copies retired in every wave, every copy
# after every wave's reads of the slot's previous tile
# ---------------------------------------------------------------------------------------

def kernarg_offsets(asm_text, names):
    """{argument name: its byte offset in the kernel-argument segment}: the metadata's .args
    entries in order are the kernel's non-constexpr arguments (`names`, the signature's order),
    then the hidden ones."""
    section = asm_text.split(".args:", 1)[1] if ".args:" in asm_text else ""
    offsets = [int(found) for found in re.findall(r"\.offset:\s+(\d+)", section.split(".name:", 1)[0])]
    return dict(zip(names, offsets))


def _loop_entry(asm_text, region):
    """The first instruction of the main loop that is entered from outside it (a rotated loop
    is entered at its header, below its body in the text)."""
    labels, instructions = parse_amdgcn(asm_text)
    first, last = region
    for position, mnemonic, operands in instructions:
        if mnemonic.startswith(("s_branch", "s_cbranch")) and not first <= position <= last:
            target = labels.get(operands.split(",")[0].strip())
            if target is not None and first <= target <= last:
                return target
    return first


def ring_hazards(asm_text, num_warps, kernargs, passes=6, innermost=True, matrix_prefix="v_mfma"):
    """The main loop's LDS ring, followed pass by pass: the loop entered at its header with the
    state the first-pass walk reaches there, each pass one rotation of the loop's text run
    straight (branches not taken: the whole-tile path), copies writing the LDS bytes M0 gives
    them, reads reading the bytes their addresses give. One wave's counters are followed
    (every wave runs the same code): vmcnt retires copies in issue order, lgkmcnt the LDS
    reads, an s_barrier makes what every wave has retired by then visible to all. Copies
    issued before the loop are outstanding at its entry (all of them: the strictest case).
    -> {"reads": n, "copies": n, "raw": [reads whose bytes' copies had not all retired
    before the last barrier before them], "war": [copies that overwrite bytes a read of an
    earlier pass had not finished reading before the last barrier before the copy],
    "unresolved": [instructions whose addresses or M0 were unknown]}."""
    labels, instructions = parse_amdgcn(asm_text)
    region = _main_loop(asm_text, matrix_prefix, innermost)
    entry = _loop_entry(asm_text, region)
    machine = Machine(num_warps, kernargs, kernarg_register(asm_text))
    before_loop, at_entry = [], []

    def visit(position, mnemonic, operands):
        if at_entry:
            return
        if position == entry:
            at_entry.append((machine.state(), dict(machine.shadow), dict(machine.writers)))
            return
        access = lds_access(mnemonic, operands)
        if access is not None and access[3] and access[0] == "write":
            machine.copy_tag = ("prologue", position)
            before_loop.append(machine.copy_tag)
    walk(asm_text, machine, visit)
    state, machine.shadow, machine.writers = at_entry[0]
    machine.set_state(state)
    order = list(range(entry, region[1] + 1)) + list(range(region[0], entry))
    vm, lgkm, retired, finished = list(dict.fromkeys(before_loop)), [], set(), set()
    seen_retired, seen_finished = set(), set()  # as of the last barrier
    readers = {}  # LDS byte -> read tags that read it
    found = {"reads": 0, "copies": 0, "raw": [], "war": [], "unresolved": []}
    for loop_pass in range(passes):
        for position in order:
            _, mnemonic, operands = instructions[position]
            tag = (loop_pass, position)
            if mnemonic.startswith(("s_branch", "s_cbranch")):
                continue
            access = lds_access(mnemonic, operands)
            if mnemonic == "s_waitcnt":
                for counter, keep in (("vm", vm), ("lgkm", lgkm)):
                    limit = re.search(rf"{counter}cnt\((\d+)\)", operands)
                    while limit and len(keep) > int(limit[1]):
                        (retired if counter == "vm" else finished).add(keep.pop(0))
            elif mnemonic == "s_barrier":
                seen_retired, seen_finished = set(retired), set(finished)
            elif access is not None and access[3] and access[0] == "write":  # a copy into LDS
                found["copies"] += 1
                m0 = machine.read("m0")
                width, offset = access[1], int(re.search(r"offset:(\d+)", operands)[1]) \
                    if re.search(r"offset:(\d+)", operands) else 0
                if not m0.known:
                    found["unresolved"].append(tag)
                else:
                    written = {int(a) for a in (m0.lanes[:, None] + offset + (machine.lane[:, None] * width
                                                                               + np.arange(width)[None, :])).ravel()}
                    pending = {read for byte in written for read in readers.get(byte, ()) if read not in seen_finished}
                    if pending:
                        found["war"].append((tag, mnemonic, sorted(pending)[:3]))
                vm.append(tag)
                machine.copy_tag = tag
            elif access is not None and not access[3] and access[0] == "read" and region[0] <= position <= region[1]:
                found["reads"] += 1
                kind, width, parts, _ = access
                values = [(machine.read(reg), off) for reg, off in parts]
                if not all(value.known for value, _ in values):
                    found["unresolved"].append(tag)
                else:
                    read_bytes = {int(a) + off + byte for value, off in values for a in value.lanes
                                  for byte in range(width)}
                    producers = {machine.writers.get(byte) for byte in read_bytes} - {None}
                    if producers - seen_retired:
                        found["raw"].append((tag, mnemonic, sorted(producers - seen_retired, key=str)[:3]))
                    for byte in read_bytes:
                        readers.setdefault(byte, set()).add(tag)
                lgkm.append(tag)
            elif mnemonic.startswith(("s_load", "s_buffer_load", "s_sendmsg")) or mnemonic.startswith("ds_"):
                lgkm.append(None)
            elif mnemonic.startswith(("buffer_", "global_", "flat_", "scratch_")):
                vm.append(None)
            machine.step(mnemonic, operands)
    return found
