"""The FUSED merge's fences and loads on gfx950, read off a kernel's ISA (tools/isa_emulator.py
follows each wave; no Triton, no GPU):

    fused_fences(amdgcn_text, num_warps) -> {
        "release_waves":  how many waves execute buffer_wbl2 between the barrier that follows
                          the partial's stores and the counter's atomic (1: once per workgroup),
        "release_in_atomic_wave": the wave that writes the L2 back is the one whose lane adds,
        "acquire_in_every_wave": every vector load after the last barrier before the merge (where
                          the count reaches every wave) comes after a buffer_inv sc1 that
                          dominates it in the control-flow graph with exec never restored to a
                          wider mask in between: a wave with a lane on at the load executed the
                          invalidate; no wave reads a partial before invalidating its caches,
        "merge_loops":    the merge loops (loops after the atomic with vector loads), run one after
                          the other, each over a group of the 16 heads (the Gluon merge: 1; the
                          standard-Triton merge: 16 / MERGE_HEADS),
        "merge_loads_before_wait": in every merge loop, every load of a pass is issued before the
                          pass's first s_waitcnt vmcnt: one dependent round trip per pass, whatever
                          number of splits a pass loads (GL_MERGE_SPLITS, MERGE_SPLITS),
        "merge_loads_per_pass": the vector loads of one pass (the loop with the most),
        "merge_splits_per_pass": the splits a pass covers: the bytes all the merge loops' passes
                          load (widths x 64 lanes x waves) over one split's partial (16 x 512
                          float32 accumulators and 2 x 16 float32 m, l), down to a power of two
                          (loads of m and l replicated across lanes add less than that),
        (merge_round_trips(facts, S): a sequence of S splits merges in merge_loops x
                          ceil(S / merge_splits_per_pass) dependent round trips),
        "count_broadcast": the integer reductions ({"add"}, {"max"}, ...) that carry the
                          atomic's returned count to the other lanes before the merge's loads:
                          a sum of the one lane's value stays exact past 2^31 adds, a max of
                          an int32 does not}
The release itself (every wave's stores waited, then the barrier, then the write-back, then
the atomic) is isa_latency.release_order's check.
"""
import re

from isa_emulator import Machine, _blocks, replay_waves, walk
from isa_latency import amdgcn_load_bytes, kernarg_register, parse_amdgcn

VECTOR_LOADS = ("buffer_load", "global_load", "flat_load")
PARTIAL_BYTES = 16 * 512 * 4 + 2 * 16 * 4  # one split's float32 accumulators, m and l


def _dominators(successors, entry=0):
    """{block: set of blocks dominating it} of a control-flow graph (iterative data flow)."""
    blocks = range(len(successors))
    predecessors = {b: [] for b in blocks}
    for block, children in enumerate(successors):
        for child in children:
            predecessors[child].append(block)
    everything = set(blocks)
    dominators = {b: set(everything) for b in blocks}
    dominators[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for block in blocks:
            if block == entry:
                continue
            incoming = [dominators[p] for p in predecessors[block]]
            new = ({block} | set.intersection(*incoming)) if incoming else {block}
            if new != dominators[block]:
                dominators[block], changed = new, True
    return dominators


def _block_of(blocks, position):
    return next(i for i, (first, last) in enumerate(blocks) if first <= position <= last)


def fused_fences(asm_text, num_warps):
    """The module docstring's facts for one FUSED build (None where the kernel has no
    returning atomic: not a FUSED build)."""
    labels, instructions = parse_amdgcn(asm_text)
    atomics = [p for p, m, o in instructions if m.startswith(("global_atomic", "buffer_atomic"))
               and re.search(r"\b(sc0|glc)\b", o)]
    if not atomics:
        return None
    atomic = atomics[0]
    barrier = max(p for p, m, _ in instructions[:atomic] if m == "s_barrier")
    machine = Machine(num_warps, {}, kernarg_register(asm_text))
    at_barrier = []
    walk(asm_text, machine, lambda p, m, o: at_barrier.append(machine.state()) if p == barrier and not at_barrier
         else None)
    machine.set_state(at_barrier[0])
    paths = replay_waves(asm_text, machine, barrier, atomic + 1)
    releases = {p for p, m, _ in instructions[barrier:atomic] if m == "buffer_wbl2"}
    release_waves = [w for w, path in enumerate(paths) if path is not None and path & releases]
    undecided = any(path is None for path in paths)
    # the atomic's one active lane: lane 0 of the workgroup (wave 0) in every FUSED form here
    found = {"release_waves": None if undecided else len(release_waves),
             "release_in_atomic_wave": not undecided and release_waves == [0]}
    blocks, successors = _blocks(labels, instructions)
    dominators = _dominators(successors)
    first_load = next((p for p, m, _ in instructions if p > atomic and m.startswith(VECTOR_LOADS)), len(instructions))
    start = max((p for p, m, _ in instructions[atomic:first_load] if m == "s_barrier"), default=atomic)
    loads = [p for p, m, _ in instructions if p > start and m.startswith(VECTOR_LOADS)]
    # exec nesting from `start`: s_and_saveexec narrows (a wave whose lanes all drop skips the
    # region), a write of exec from a saved mask restores
    depth, depths = 0, {}
    for position, mnemonic, operands in instructions[start:]:
        if mnemonic.startswith(("s_and_saveexec", "s_or_saveexec")):
            depth += 1
        elif mnemonic.startswith(("s_or_b64", "s_mov_b64")) and operands.split(",")[0].strip() == "exec":
            depth -= 1
        depths[position] = depth
    found["count_broadcast"] = sorted({found[1] for _, m, _ in instructions[atomic:first_load]
                                       for found in [re.match(r"v_(add|max|min)_[iu]32", m)] if found})
    invalidates = [p for p, m, _ in instructions if p > start and m == "buffer_inv"]
    # a wave that executes a load (some lane on) executed the invalidate before it when the
    # invalidate dominates the load and exec was never restored to wider than at the
    # invalidate in between: every lane on at the load was on at the invalidate
    found["acquire_in_every_wave"] = bool(loads) and all(any(
        _block_of(blocks, inv) in dominators[_block_of(blocks, load)] and inv < load
        and min(depths[p] for p in range(inv, load + 1)) >= depths[inv] for inv in invalidates) for load in loads)
    # the merge loops: back-edges after the atomic whose bodies have vector loads
    bodies = []
    for position, mnemonic, operands in instructions:
        if position <= atomic or not mnemonic.startswith(("s_branch", "s_cbranch")):
            continue
        target = labels.get(operands.split(",")[0].strip())
        if target is None or target >= position or target <= atomic:
            continue
        body = instructions[target:position + 1]
        if any(m.startswith(VECTOR_LOADS) for _, m, _ in body):
            bodies.append(body)
    if not bodies:
        found.update(merge_loops=0, merge_loads_before_wait=False, merge_loads_per_pass=0, merge_splits_per_pass=0)
        return found
    pass_bytes = sum(amdgcn_load_bytes(m) for body in bodies for _, m, _ in body
                     if m.startswith(VECTOR_LOADS)) * 64 * num_warps
    covered = pass_bytes // PARTIAL_BYTES
    found.update(merge_loops=len(bodies),
                 merge_loads_per_pass=max(sum(m.startswith(VECTOR_LOADS) for _, m, _ in body) for body in bodies),
                 merge_splits_per_pass=1 << (covered.bit_length() - 1) if covered else 0,
                 merge_loads_before_wait=all(_loads_before_first_wait(body) for body in bodies))
    return found


def _loads_before_first_wait(body):
    first_wait = next((i for i, (_, m, o) in enumerate(body) if m == "s_waitcnt" and "vmcnt" in o), len(body))
    return all(i < first_wait for i, (_, m, _) in enumerate(body) if m.startswith(VECTOR_LOADS))


def merge_round_trips(facts, num_splits):
    """The dependent round trips of a FUSED merge of num_splits splits, from fused_fences' facts: merge_loops x
    ceil(num_splits / merge_splits_per_pass); None where the facts have no merge loop that loads whole splits."""
    if not facts or not facts.get("merge_splits_per_pass"):
        return None
    return facts["merge_loops"] * -(-num_splits // facts["merge_splits_per_pass"])
