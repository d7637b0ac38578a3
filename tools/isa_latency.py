"""Latency counts read off a kernel's ISA: global-load bytes in flight, dependent global round
trips, barriers. No Triton, no GPU: the functions take the ISA text.

    isa_latency_counts(amdgcn_text, waves_per_cu)   # gfx950 (any gfx9 wave64 AMDGPU text)
    sass_latency_counts(sass_text, warps_per_sm)    # sm_90 (`cuobjdump -sass`, control words kept)

The model (one wave or warp, instructions in program order):
* Vector memory retires in order. On gfx9 one counter (vmcnt) counts every vector memory
  instruction of the wave: loads, stores, atomics, global/buffer -> LDS copies and the cache
  operations (buffer_wbl2, buffer_inv); `s_waitcnt vmcnt(N)` waits until only the N newest
  are outstanding (an instruction that would make 64 outstanding first waits for the
  oldest: the counter has 6 bits). On sm_90 each variable-latency instruction names a
  scoreboard (SB0-SB5) in its control word, a later instruction's wait mask waits until
  every instruction on those scoreboards is done, and `DEPBAR.LE SBk, N` until at most N
  are (the analogue of vmcnt(N)).
* Round trips: every global/buffer/flat memory instruction (load, store, atomic, cache
  operation; sm_90: LDG, LDGSTS, LD, ATOMG, ATOM) takes one unit of latency -- one global
  round trip -- from its issue to its retirement; nothing else takes time (ALU, LDS and
  scalar-memory latency is not counted, nor is any bandwidth limit). A wait advances the
  wave's clock to the retirement of the youngest instruction it waits for. So a dependent
  global round trip is a wait that holds back a later global memory instruction (its
  address, its data, its exec mask or its issue in program order depend on what the wait
  waits for); loads issued together share one round trip.
  - round_trips_to_first_mma: the clock at the program's first matrix instruction (v_mfma*;
    HMMA/HGMMA), walking from the program's start in text order with every instruction
    executed once (conditional blocks included: an upper bound for a program that skips
    them). 2 is the least a kernel can have whose tile rows depend on a loaded index
    (kv_indptr's round trip, then the tile's).
  - round_trips_per_tile: the clock's advance per pass of the main loop (the backward
    branch's body with the most matrix instructions) in steady state (the body walked
    PASSES times from empty queues, averaged over the last MEASURED_PASSES). 1 = the loop
    waits each pass for loads it issued in the same pass; < 1 = the loads of one pass are
    consumed passes later (software pipelining).
  - load_groups_per_tile: the distinct clocks at which one steady-state pass issues its global
    loads: 1 = every load of the tile is issued together.
* Bytes in flight per CU (SM): at each matrix instruction of the steady-state passes, the
  bytes of the global loads (and global -> LDS copies) issued and not yet waited for -- a load
  issued in an earlier pass and not yet waited on counts -- averaged over those matrix
  instructions, times 64 lanes (sm_90: 32 threads) times the waves per CU (warps per SM)
  the occupancy allows. It is what the ISA allows to be in flight (a load may have returned
  before its wait), every lane counted (masked lanes too). Little's law turns it into the
  bandwidth a CU can draw: bytes in flight / latency (8 TB/s over 256 CUs at ~1.5-2 us of
  latency needs 45-60 KB per CU).
* barriers_per_tile: s_barrier (BAR.SYNC) instructions in the main loop's body.
"""
import re
from collections import deque

PASSES = 16  # walks of the loop body from empty queues; the first ones fill them
MEASURED_PASSES = 12  # the last passes, averaged: exact for pipelines 1, 2, 3, 4 or 6 passes deep
AMD_LANES, NVIDIA_LANES = 64, 32
VMCNT_MAX = 63  # gfx9: a 6-bit counter

# ---------------------------------------------------------------------------------------
# parsing
# ---------------------------------------------------------------------------------------


def parse_amdgcn(asm):
    """AMDGPU assembly text -> (labels {name: instruction index}, [(index, mnemonic, operands)]).
    Comments (`;`), directives and labels are not instructions."""
    labels, instructions = {}, []
    for line in asm.splitlines():
        text = line.split(";")[0].strip()
        label = re.match(r"^(\.?L\w+|\w+):", text)
        if label and text.endswith(":"):
            labels[label[1]] = len(instructions)
        elif text and not text.startswith(".") and not text.endswith(":"):
            mnemonic, _, operands = text.partition(" ")
            instructions.append((len(instructions), mnemonic, operands.strip()))
    return labels, instructions


def parse_sass(sass):
    """`cuobjdump -sass` text -> [(address, mnemonic, operands, control)]: control is the
    high word's scheduling bits {stall, write_sb, read_sb, wait_mask} (Volta-Hopper layout:
    bits 41-44 stall, 46-48 write scoreboard, 49-51 read scoreboard, 52-57 wait mask; 7 =
    no scoreboard). The predicate guard (@P0) is dropped."""
    lines = sass.splitlines()
    found = []
    for i, line in enumerate(lines):
        match = re.search(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);\s*/\* 0x[0-9a-f]{16} \*/",
                          line)
        high = re.search(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$", lines[i + 1]) if match and i + 1 < len(lines) else None
        if not match:
            continue
        bits = int(high[1], 16) >> 41 if high else 0x7E0  # no control word: no wait, no scoreboard
        control = {"stall": bits & 0xF, "write_sb": (bits >> 5) & 7, "read_sb": (bits >> 8) & 7,
                   "wait_mask": (bits >> 11) & 0x3F}
        found.append((int(match[1], 16), match[2], match[3].strip(), control))
    return found


def loop_region(instructions, backward_target, matrix_prefix, innermost=False):
    """(first, last) positions of the main loop: of the regions closed by a backward branch,
    the one with the most matrix instructions (mnemonics starting with matrix_prefix), the
    largest of those (innermost: the smallest, for a kernel whose tile loop sits inside
    another loop or has a second back-edge around a branch of its body); None without one.
    instructions: tuples (position, mnemonic, operands, ...); backward_target(mnemonic,
    operands, position) -> the position the branch jumps to, or None."""
    best, best_key = None, None
    for position, mnemonic, operands, *_ in instructions:
        target = backward_target(mnemonic, operands, position)
        if target is None or target >= position:
            continue
        matrix = sum(m.startswith(matrix_prefix) for p, m, *_ in instructions if target <= p <= position)
        key = (matrix, target - position if innermost else position - target)
        if best_key is None or key > best_key:
            best, best_key = (target, position), key
    return best


# ---------------------------------------------------------------------------------------
# the machine: in-order queues of outstanding memory instructions, one clock
# ---------------------------------------------------------------------------------------

class _Wave:
    """One wave's outstanding memory instructions per counter (queue) and its clock in
    units of one global round trip. caps: {queue: the counter's largest value}."""

    def __init__(self, caps=None):
        self.clock = 0
        self.caps = caps or {}
        self.queues = {}

    def issue(self, queue, load_bytes, latency):
        pending = self.queues.setdefault(queue, deque())
        cap = self.caps.get(queue)
        if cap is not None and len(pending) >= cap:
            self.wait(queue, cap - 1)
        retire = max(self.clock + latency, pending[-1][0] if pending else 0)
        pending.append((retire, load_bytes))

    def wait(self, queue, keep):
        pending = self.queues.get(queue, ())
        while len(pending) > keep:
            self.clock = max(self.clock, pending.popleft()[0])

    def commit(self, source, queue):
        """Every instruction pending on `source` becomes one entry of `queue` (sm_90's
        LDGDEPBAR: the cp.async copies issued since the last one form a group on SB0)."""
        pending = self.queues.pop(source, ())
        if pending:
            target = self.queues.setdefault(queue, deque())
            retire = max(max(r for r, _ in pending), target[-1][0] if target else 0)
            target.append((retire, sum(nbytes for _, nbytes in pending)))

    def bytes_in_flight(self):
        return sum(nbytes for pending in self.queues.values() for _, nbytes in pending)


# An abstract instruction: ("mem", queue, load bytes per lane, latency, is a global load),
# ("wait", queue, keep), ("commit", from queue, to queue), ("mma",), ("barrier",) or None
# (anything else).

def _run(ops, wave, on_mma=None, stop_at_mma=False):
    """Walk ops on wave; returns the clocks at which global loads were issued. on_mma(bytes)
    at every matrix instruction; stop_at_mma: return at the first one."""
    load_clocks = []
    for op in ops:
        if op is None:
            continue
        if op[0] == "wait":
            wave.wait(op[1], op[2])
        elif op[0] == "commit":
            wave.commit(op[1], op[2])
        elif op[0] == "mem":
            _, queue, load_bytes, latency, global_load = op
            if global_load:
                load_clocks.append(wave.clock)
            wave.issue(queue, load_bytes, latency)
        elif op[0] == "mma":
            if stop_at_mma:
                break
            if on_mma:
                on_mma(wave.bytes_in_flight())
    return load_clocks


def _counts(ops, loop, lanes, waves, caps=None, start=0):
    """The counts of the module docstring from one program's abstract instructions, its
    main loop's (first, last) index range (None: no loop) and where the program starts."""
    prologue = _Wave(caps)
    prologue_loads = _run(ops[start:], prologue, stop_at_mma=True)
    result = {"round_trips_to_first_mma": prologue.clock, "loads_before_first_mma": len(prologue_loads),
              "load_groups_before_first_mma": len(set(prologue_loads))}
    if loop is None:
        return result
    body = ops[loop[0]:loop[1] + 1]
    wave = _Wave(caps)
    samples, groups, clock_at = [], [], []
    for index in range(PASSES):
        measured = index >= PASSES - MEASURED_PASSES
        clock_at.append(wave.clock)
        issued = _run(body, wave, on_mma=samples.append if measured else None)
        if measured:
            groups.append(len(set(issued)))
    clock_at.append(wave.clock)
    load_bytes = sum(op[2] for op in body if op and op[0] == "mem" and op[4])
    in_flight = sum(samples) / len(samples) if samples else 0.0
    result.update(
        round_trips_per_tile=round((clock_at[-1] - clock_at[-1 - MEASURED_PASSES]) / MEASURED_PASSES, 3),
        load_groups_per_tile=round(sum(groups) / len(groups), 2),
        loads_per_tile=sum(1 for op in body if op and op[0] == "mem" and op[4]),
        load_bytes_per_tile_per_unit=load_bytes * lanes * waves,
        bytes_in_flight_per_unit=round(in_flight * lanes * waves, 1),
        max_bytes_in_flight_per_unit=max(samples, default=0) * lanes * waves,
        barriers_per_tile=sum(1 for op in body if op and op[0] == "barrier"),
        mma_per_tile=sum(1 for op in body if op and op[0] == "mma"))
    return result


# ---------------------------------------------------------------------------------------
# gfx950
# ---------------------------------------------------------------------------------------

VMEM_PREFIXES = ("global_", "buffer_", "flat_", "scratch_")
SMEM_LOADS = ("s_load", "s_buffer_load", "s_scratch_load")
COUNTER_MAX = {"vm": 63, "lgkm": 15}  # gfx9: vmcnt 6 bits, lgkmcnt 4 bits
_LOAD_WIDTHS = {"ubyte": 1, "sbyte": 1, "ushort": 2, "sshort": 2, "short": 2, "dword": 4, "dwordx2": 8,
                "dwordx3": 12, "dwordx4": 16, "b32": 4, "b64": 8, "b96": 12, "b128": 16, "u8": 1, "i8": 1,
                "u16": 2, "i16": 2}


def amdgcn_load_bytes(mnemonic):
    """Bytes per lane a vector memory load (global/buffer/flat, the -> LDS forms included)
    reads; 0 for anything else (stores, atomics, cache operations, and scratch: a spill's
    reload is a round trip, not data the kernel streams)."""
    if not mnemonic.startswith(VMEM_PREFIXES) or "_load" not in mnemonic or mnemonic.startswith("scratch_"):
        return 0
    width = re.search(r"_load(?:_lds)?_(\w+?)(?:_d16(?:_hi)?)?$", mnemonic)
    if not width:
        return 4
    if "d16" in mnemonic:
        return 2 if width[1] not in ("ubyte", "sbyte") else 1
    return _LOAD_WIDTHS.get(width[1], 4)


def _waitcnt(operands):
    """{counter: N} of `s_waitcnt vmcnt(N) lgkmcnt(M)`, or of a raw simm16 (gfx9: vmcnt in
    bits 3:0 and 15:14, lgkmcnt in 11:8); a counter at its largest value is no wait."""
    named = dict(re.findall(r"(vm|lgkm)cnt\((\d+)\)", operands))
    if named:
        return {counter: int(value) for counter, value in named.items()}
    if re.fullmatch(r"(0x[0-9a-fA-F]+|\d+)", operands.strip()):
        raw = int(operands.strip(), 0)
        found = {"vm": (raw & 0xF) | ((raw >> 14) & 0x3) << 4, "lgkm": (raw >> 8) & 0xF}
        return {counter: value for counter, value in found.items() if value < COUNTER_MAX[counter]}
    return {}


def amdgcn_instruction_ops(mnemonic, operands, kernarg_register="s[0:1]", kernarg_latency=0):
    """One instruction -> its abstract instructions (see _run): vector memory on the vm
    counter (one round trip each; global loads carry their bytes); scalar memory loads on
    lgkm: one round trip, except those of the kernel-argument segment (base
    kernarg_register), which take kernarg_latency (0: the segment every program reads,
    ~128 bytes, counted as cached; isa_latency_counts reports the chain both ways); LDS
    and the other lgkm instructions on lgkm without latency; waits; matrix instructions;
    s_barrier."""
    if mnemonic.startswith(VMEM_PREFIXES):
        load_bytes = amdgcn_load_bytes(mnemonic)
        return [("mem", "vm", load_bytes, 1, load_bytes > 0)]
    if mnemonic.startswith(SMEM_LOADS):
        base = operands.split(",")[1].strip() if operands.count(",") >= 1 else ""
        return [("mem", "lgkm", 0, kernarg_latency if base == kernarg_register else 1, False)]
    if mnemonic.startswith(("ds_", "s_memtime", "s_memrealtime", "s_sendmsg", "s_dcache")):
        return [("mem", "lgkm", 0, 0, False)]
    if mnemonic == "s_waitcnt":
        return [("wait", counter, keep) for counter, keep in _waitcnt(operands).items()]
    if mnemonic.startswith(("v_mfma", "v_smfmac")):
        return [("mma",)]
    if mnemonic == "s_barrier":
        return [("barrier",)]
    return []


def kernarg_register(asm):
    """The SGPR pair holding the kernel-argument segment's address: after the user SGPRs the
    .amdhsa directives enable before it (private segment buffer 4, dispatch and queue
    pointers 2 each)."""
    def enabled(name):
        found = re.search(rf"\.amdhsa_user_sgpr_{name}\s+(\d+)", asm)
        return int(found[1]) if found else 0
    first = 4 * enabled("private_segment_buffer") + 2 * enabled("dispatch_ptr") + 2 * enabled("queue_ptr")
    return f"s[{first}:{first + 1}]"


def _flatten(instructions, to_ops):
    """Every instruction's abstract instructions in order, and {position: (first, last) op
    index} (an instruction with none gets a None placeholder, so every position has one)."""
    ops, spans = [], {}
    for position, *fields in instructions:
        first = len(ops)
        ops += to_ops(*fields) or [None]
        spans[position] = (first, len(ops) - 1)
    return ops, spans


def _kernarg_preload_entry(asm, labels, instructions):
    """Where a kernel with preloaded kernel arguments starts: LLVM puts a block that loads
    them the old way (s_load ...; s_waitcnt; s_branch to the real entry) in the first 256
    bytes, and firmware that preloads starts past it. The index of that entry, else 0."""
    preload = re.search(r"\.amdhsa_user_sgpr_kernarg_preload_length\s+(\d+)", asm)
    if not preload or int(preload[1]) == 0:
        return 0
    for position, mnemonic, operands in instructions:
        if mnemonic == "s_branch":
            return labels.get(operands.strip(), 0)
        if not mnemonic.startswith(("s_load", "s_waitcnt", "s_mov")):
            return 0
    return 0


def isa_latency_counts(asm_text, waves_per_cu, matrix_prefix="v_mfma", innermost=False):
    """The module docstring's counts for one gfx950 kernel from its amdgcn text; waves_per_cu:
    the waves one CU holds at once (waves per SIMD x 4). Keys: round_trips_to_first_mma (and
    round_trips_to_first_mma_kernargs_uncached: every scalar load of a kernel argument a
    round trip too), loads_before_first_mma, load_groups_before_first_mma and, when it has a loop with matrix
    instructions, round_trips_per_tile, load_groups_per_tile, loads_per_tile,
    load_bytes_per_tile_per_unit (global-load bytes the CU's waves issue per pass),
    bytes_in_flight_per_unit (per CU, the average at the loop's matrix instructions),
    max_bytes_in_flight_per_unit, barriers_per_tile, mma_per_tile."""
    labels, instructions = parse_amdgcn(asm_text)
    entry = _kernarg_preload_entry(asm_text, labels, instructions)

    def branch(mnemonic, operands, position):
        return labels.get(operands.split(",")[0].strip()) if mnemonic.startswith(("s_branch", "s_cbranch")) else None
    loop = loop_region(instructions, branch, matrix_prefix, innermost)
    register = kernarg_register(asm_text)
    ops, spans = _flatten(instructions, lambda m, o: amdgcn_instruction_ops(m, o, register))
    loop_ops = (spans[loop[0]][0], spans[loop[1]][1]) if loop else None
    start = spans[entry][0] if instructions else 0
    counts = _counts(ops, loop_ops, AMD_LANES, waves_per_cu, COUNTER_MAX, start)
    with_kernargs, _ = _flatten(instructions, lambda m, o: amdgcn_instruction_ops(m, o, register, 1))
    counts["round_trips_to_first_mma_kernargs_uncached"] = _counts(with_kernargs, None, AMD_LANES, waves_per_cu,
                                                                   COUNTER_MAX, start)["round_trips_to_first_mma"]
    return counts


# ---------------------------------------------------------------------------------------
# sm_90
# ---------------------------------------------------------------------------------------

SASS_GLOBAL = ("LDG", "LD", "ATOMG", "ATOM")  # global (or generic) memory with a result
SASS_MMA = ("HMMA", "HGMMA", "IMMA", "QMMA")


def sass_load_bytes(mnemonic):
    """Bytes per thread a global load (LDG, LD, LDGSTS) reads; 0 otherwise."""
    if mnemonic.split(".")[0] not in ("LDG", "LD", "LDGSTS"):
        return 0
    width = re.search(r"\.(64|128)(?=\.|$)", mnemonic)
    if width:
        return int(width[1]) // 8
    small = re.search(r"\.[US](8|16)(?=\.|$)", mnemonic)
    return int(small[1]) // 8 if small else 4


def sass_instruction_ops(mnemonic, operands, control):
    """One instruction -> its abstract instructions: it first waits on the scoreboards of its
    wait mask (DEPBAR.LE SBk, N: until at most N are pending on SBk), then, if it is
    variable-latency, joins its write scoreboard (global memory: one round trip; LDS,
    constants, special registers: none) and its read scoreboard (no latency). A cp.async
    copy (LDGSTS) is pending on its own until LDGDEPBAR makes the copies since the last one
    one group on SB0, which DEPBAR.LE SB0, N counts."""
    step = [("wait", board, 0) for board in range(6) if control["wait_mask"] >> board & 1]
    depbar = re.match(r"SB(\d)\s*,\s*(0x[0-9a-f]+|\d+)", operands) if mnemonic.startswith("DEPBAR") else None
    if depbar:
        step.append(("wait", int(depbar[1]), int(depbar[2], 0)))
    base = mnemonic.split(".")[0]
    if base == "LDGSTS":
        step.append(("mem", "cp.async", sass_load_bytes(mnemonic), 1, True))
    elif base == "LDGDEPBAR":
        step.append(("commit", "cp.async", 0))
    elif control["write_sb"] != 7:
        load_bytes = sass_load_bytes(mnemonic)
        step.append(("mem", control["write_sb"], load_bytes, 1 if base in SASS_GLOBAL else 0, load_bytes > 0))
    if control["read_sb"] != 7:
        step.append(("mem", control["read_sb"], 0, 0, False))
    if base in SASS_MMA:
        step.append(("mma",))
    elif base == "BAR" and ".SYNC" in mnemonic:
        step.append(("barrier",))
    return step


def sass_latency_counts(sass_text, warps_per_sm, matrix_prefix="HMMA"):
    """isa_latency_counts for an sm_90 kernel's SASS (`cuobjdump -sass`, whose second comment
    word per instruction holds the control bits); warps_per_sm: warps one SM holds at once
    (programs per SM x warps per program). Per-unit figures are per SM (32 threads a warp)."""
    instructions = parse_sass(sass_text)
    ops, spans = _flatten(instructions, sass_instruction_ops)

    def branch(mnemonic, operands, position):
        target = re.search(r"0x([0-9a-f]+)", operands) if mnemonic == "BRA" else None
        return int(target[1], 16) if target else None
    loop = loop_region(instructions, branch, matrix_prefix)
    if loop is not None:
        loop = (spans[loop[0]][0], spans[loop[1]][1])
    return _counts(ops, loop, NVIDIA_LANES, warps_per_sm)


# ---------------------------------------------------------------------------------------
# the FUSED merge's release on gfx950
# ---------------------------------------------------------------------------------------

def _vector_store(mnemonic):
    return mnemonic.startswith(VMEM_PREFIXES) and "_store" in mnemonic


def release_order(asm_text):
    """Where a gfx950 kernel's release of its stores sits, for the FUSED merge: the first
    returning atomic (global_/buffer_atomic with sc0, the finished-split counter) and, before
    it, the release (buffer_wbl2), the s_barrier before that, the last s_waitcnt vmcnt(0)
    before the barrier and the last vector store before the atomic (instruction indices,
    None where absent). every_wave: that wait is in the barrier's basic block (no block
    label .LBB* and no branch between them), so every wave that reaches the barrier has
    executed it.
    ordered: last store < wait < barrier < release < atomic, with every_wave -- each wave's
    stores complete (in the L2) before any wave passes the barrier, and one lane writes the
    L2 back and then moves the counter."""
    labels, instructions = parse_amdgcn(asm_text)
    found = {"atomic": None, "release": None, "barrier": None, "wait": None, "last_store": None}
    for index, mnemonic, operands in instructions:
        if mnemonic.startswith(("global_atomic", "buffer_atomic")) and re.search(r"\b(sc0|glc)\b", operands):
            found["atomic"] = index
            break
    if found["atomic"] is None:
        return {**found, "every_wave": False, "ordered": False}
    before = instructions[:found["atomic"]]
    found["last_store"] = max((i for i, m, _ in before if _vector_store(m)), default=None)
    found["release"] = max((i for i, m, _ in before if m == "buffer_wbl2"), default=None)
    if found["release"] is not None:
        found["barrier"] = max((i for i, m, _ in before[:found["release"]] if m == "s_barrier"), default=None)
    if found["barrier"] is not None:
        found["wait"] = max((i for i, m, o in before[:found["barrier"]]
                             if m == "s_waitcnt" and _waitcnt(o).get("vm") == 0), default=None)
    wait, barrier = found["wait"], found["barrier"]
    blocks = [at for name, at in labels.items() if name.startswith(".LBB")]  # .Ltmp*: debug-line labels
    every_wave = wait is not None and not any(wait < at <= barrier for at in blocks) and not any(
        m.startswith(("s_branch", "s_cbranch", "s_setpc")) for _, m, _ in instructions[wait:barrier])
    steps = [found[k] for k in ("last_store", "wait", "barrier", "release", "atomic")]
    ordered = every_wave and None not in steps and steps == sorted(steps) and len(set(steps)) == len(steps)
    return {**found, "every_wave": every_wave, "ordered": ordered}
