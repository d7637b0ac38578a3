"""An instrumented copy of submission.py: its `# phase NAME: value` markers become probes.

    python tools/instrument.py [--mode clock|proton-plain|proton-waited] [--clock amd|nvidia] [--out PATH]
    python tools/instrument.py --aot gfx950 [--json PATH] [--triton installed|DIR]

submission.py carries no probe code: a line `# phase NAME: value` in a split kernel or one of
its helpers marks where a program's clock is to be stored once `value` is ready. This module
turns the file's text into a copy in which every marker is a probe, and loads that copy as a
module of its own (written to a folder of its own: Triton reads a kernel's source from its
file), which runs as submission.py runs: the same dispatch, plans, checks and fallbacks.

How a marker becomes a probe (mode `clock`, tools/phase_probe.py's):
  * `_phase_probe(probe_row, SLOT, value)`: the sum of `value` over every element is stored
    (the store waits for the data of the phase), then a barrier (every warp has it), then
    the clock, read by inline asm that takes that sum as its input (so it can be neither
    hoisted above the data nor merged with another read), into the program's row of the
    probe buffer at the phase's slot. The clock is the SM's cycle counter (AMD s_memtime,
    NVIDIA %clock64), and the global timer in ns (s_memrealtime x 10, %globaltimer) at the
    kernel's start and end, for the conversion to ns. The barriers serialize the warps: the
    probed times are upper bounds.
  * a kernel is a function with a `start` marker; the marker also defines
    `probe_row = probe_ptr + (program_id(1) * num_programs(0) + program_id(0)) * PROBE_SLOTS`
    (row seq * num_splits + split), and the kernel gets a `probe_ptr` parameter (before its
    first constexpr), which the copy's `_launch_kernel` passes: an int64 buffer (programs,
    PROBE_SLOTS) per grid, kept between calls (reset_probes() fills it with PROBE_UNSET);
    PROBE_LAUNCHES lists each probed launch since then (kernel, grid, variant description,
    rows).
  * `tile NAME` markers (loaded, scores, softmax, values) are per tile: their slot is the
    first tile's (`tile0 NAME`) when the tile starts at the split's first row `lo` (the
    kernel's name for it), else the last tile's (`last NAME`), which each later tile
    overwrites: the last tile computed. A program with one tile leaves the last tile's slots
    unset, one with none every tile slot.
  * the probe needs `probe_row` where a marker is, so it is threaded through the call chain:
    a function holding `tile` markers, or with a `tile_start` parameter that calls such a
    function, is a tile function and gets (probe_row, tile_slot); a function that receives a
    tile function as an argument (`_split_tiles`' TILE) gets (probe_row, probe_lo), and its
    calls through that parameter pass `_tile_slot(tile_start, probe_lo)`; any other
    function that holds a marker or calls one of these gets probe_row. Every call site of
    each is rewritten (the kernel's pass `lo`); the functions and calls are located in the
    file's syntax tree, and after the rewrite every call of a rewritten function is checked
    to pass exactly its parameters.
Mode `proton-plain` / `proton-waited` (tools/proton_probe.py's): each marker is a zero-length
Proton scope named after the phase instead (tile phases by their step name), `waited` after
the same wait (the sum stored, a barrier) as the clock probe; the same threading.

Anything the transform cannot place fails loudly (InstrumentError): a `# phase` comment that
does not parse, an unknown phase, a marker outside a jit function, a kernel without `start`
or `end` or with a marker before `start`, a tile marker in a kernel, a rewritten function
called from host code or with keywords, a probed kernel launched other than by
`_launch_kernel`, a call left with the wrong number of arguments.

--aot TARGET builds the copy's split kernels ahead of time (no GPU) for the target
(tools/compile_report.py's TARGETS: gfx950, sm90) in the first variants of the leaderboard's
launches and prints one JSON row per build (registers, spills, clock reads in the ISA), after
a first line naming the Triton: the runner's unless --triton names another (tools/common.py,
run_with_triton).
"""
import argparse
import ast
import hashlib
import importlib.util
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A program's probe row: these phases' clocks, then the global timer at start and end, then
# a sink for the probes' waits (PROBE_SLOTS int64 in all).
TILE_STEPS = ("loaded", "scores", "softmax", "values")
PHASES = ("start", "range", "q", *(f"tile0 {step}" for step in TILE_STEPS), *(f"last {step}" for step in TILE_STEPS),
          "tiles done", "written", "merged", "end")
GLOBAL_START, GLOBAL_END, SINK = len(PHASES), len(PHASES) + 1, len(PHASES) + 2
SLOTS = len(PHASES) + 3
UNSET = -1  # a slot no program wrote
TILE0, LAST_TILE = PHASES.index("tile0 loaded"), PHASES.index("last loaded")
# the names a marker may carry: the program's phases and `tile STEP`
MARKER_NAMES = ("start", "range", "q", *(f"tile {step}" for step in TILE_STEPS), "tiles done", "written", "merged",
                "end")
MODES = ("clock", "proton-plain", "proton-waited")
CLOCKS = ("amd", "nvidia")
MARKER = re.compile(r"^(?P<indent>[ \t]*)# phase (?P<name>[a-z0-9 ]+?): (?P<value>\S.*?)\s*$")
MARKER_LIKE = re.compile(r"^\s*#\s*phase\b")
SPLIT_FIRST_ROW = "lo"  # the kernels' name for the split's first row (what tile0 is)


class InstrumentError(ValueError):
    """A marker or a call the transform cannot place."""


def _fail(message):
    raise InstrumentError(f"tools/instrument.py: {message}")


# --- what the copy gets ------------------------------------------------------------------

CLOCK_READS = {
    # (cycle counter, global timer in ns) of one wave / warp, after `dep` (an int32)
    "amd": ('tl.inline_asm_elementwise("s_memtime $0\\ns_waitcnt lgkmcnt(0)", "=s,v", [dep], dtype=tl.int64, '
            'is_pure=False, pack=1)',
            'tl.inline_asm_elementwise("s_memrealtime $0\\ns_waitcnt lgkmcnt(0)", "=s,v", [dep], '
            'dtype=tl.int64, is_pure=False, pack=1) * 10'),  # a 100 MHz clock
    "nvidia": ('tl.inline_asm_elementwise("mov.u64 $0, %clock64;", "=l,r", [dep], dtype=tl.int64, is_pure=False, '
               'pack=1)',
               'tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l,r", [dep], dtype=tl.int64, '
               'is_pure=False, pack=1)'),
}

WAIT = '''    ready = tl.sum(dep.to(tl.float32) + tl.zeros([1], tl.float32))
    tl.store(probe_row + {sink}, ready.to(tl.int64))
    tl.debug_barrier()'''

CLOCK_PROBE = '''

@triton.jit
def _phase_clock(dep, GLOBAL: tl.constexpr):
    """The {clock} cycle counter (GLOBAL: the global timer in ns) read after `dep` (int32)."""
    if GLOBAL:
        return {global_read}
    return {cycle_read}


@triton.jit
def _phase_probe(probe_row, slot, dep, GLOBAL: tl.constexpr):
    """The clock into probe_row[slot] once `dep` (any tensor or scalar the phase produced)
    is ready in every warp: its sum is stored first (the store waits for the data), then a
    barrier, then the clock read, which takes the sum as its input."""
{wait}
    tl.store(probe_row + slot, _phase_clock(ready.to(tl.int32, bitcast=True), GLOBAL))
'''

PROTON_POINT = '''

import triton.profiler.language as _proton_language  # noqa: E402

_proton_language.enable_semantic("triton")
PROTON_WAIT_C = tl.constexpr({wait_flag})


@triton.jit
def _proton_point(probe_row, dep, NAME: tl.constexpr):
    """A zero-length Proton scope NAME, recorded by each warp; with PROTON_WAIT_C first the
    clock probe's wait (dep's sum stored, a barrier)."""
    if PROTON_WAIT_C:
{wait}
    _proton_language.enter_scope(NAME)
    _proton_language.exit_scope(NAME)
'''

APPENDIX = '''

# =======================================================================================
# tools/instrument.py: this copy's phase probes (mode {mode}{clock_note}); not in submission.py
# =======================================================================================
INSTRUMENT_MODE = {mode!r}
PROBE_CLOCK = {clock!r}
PROBE_PHASES = {phases!r}
PROBE_SLOTS = {slots}
PROBE_GLOBAL_START, PROBE_GLOBAL_END, PROBE_SINK = {global_start}, {global_end}, {sink}
PROBE_UNSET = {unset}
{probe_functions}

@triton.jit
def _tile_slot(tile_start, lo):
    """The first slot of a tile's phases: the first tile's, or the last tile's (each later
    tile overwrites them)."""
    return tl.where(tile_start == lo, {tile0}, {last_tile})


PROBED_KERNELS = ({kernels},)
PROBE_LAUNCHES = []  # {{kernel, grid, what, rows}} of each probed launch since reset_probes()
_PROBE_ROWS = {{}}
_unprobed_launch_kernel = _launch_kernel


def probe_rows(kernel_name, grid, device):
    """The probe buffer of a grid (programs, PROBE_SLOTS) int64, made once (PROBE_UNSET)."""
    key = (kernel_name, tuple(grid), str(device))
    if key not in _PROBE_ROWS:
        _PROBE_ROWS[key] = torch.full((grid[0] * grid[1], PROBE_SLOTS), PROBE_UNSET, dtype=torch.int64, device=device)
    return _PROBE_ROWS[key]


def reset_probes():
    """Every probe buffer back to PROBE_UNSET, PROBE_LAUNCHES emptied."""
    PROBE_LAUNCHES.clear()
    for rows in _PROBE_ROWS.values():
        rows.fill_(PROBE_UNSET)


def _launch_kernel(kernel, grid, args, constants, what):
    """submission's _launch_kernel, a probed kernel given its probe buffer (probe_ptr)."""
    if any(kernel is probed for probed in PROBED_KERNELS):
        rows = probe_rows(_kernel_name(kernel), grid, args[0].device)
        PROBE_LAUNCHES.append({{"kernel": _kernel_name(kernel), "grid": tuple(grid), "what": what, "rows": rows}})
        constants = {{**constants, "probe_ptr": rows}}
    return _unprobed_launch_kernel(kernel, grid, args, constants, what)
'''


def _probe_lines(name, value, indent, mode):
    """The statements a marker becomes."""
    lines = []
    if name == "start":
        lines.append(f"probe_row = probe_ptr + (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) * {SLOTS}")
    if mode == "clock":
        if name.startswith("tile "):
            slot = f"tile_slot + {TILE_STEPS.index(name[5:])}"
        else:
            slot = str(PHASES.index(name))
        probe = f"_phase_probe(probe_row, {slot}, {value}, False)  # phase {name}"
        lines += {"start": [f"_phase_probe(probe_row, {GLOBAL_START}, {value}, True)  # global timer", probe],
                  "end": [probe, f"_phase_probe(probe_row, {GLOBAL_END}, {value}, True)  # global timer"]
                  }.get(name, [probe])
    else:
        point = name[5:] if name.startswith("tile ") else name
        lines.append(f'_proton_point(probe_row, {value}, "{point}")  # phase {name}')
    return [indent + line for line in lines]


# --- reading the file ------------------------------------------------------------------------

def _is_jit(node):
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr == "jit":
            return True
    return False


def _params(node):
    return [arg.arg for arg in node.args.args]


def _calls(node):
    return [call for call in ast.walk(node) if isinstance(call, ast.Call)]


def _called_name(call):
    return call.func.id if isinstance(call.func, ast.Name) else None


def _extended_end(node, lines):
    """A function's last line, comments indented under it included (a marker after its
    last statement is its own)."""
    end = node.end_lineno
    while end < len(lines):
        line = lines[end]
        if line.strip() and not (line.lstrip().startswith("#") and len(line) - len(line.lstrip()) > node.col_offset):
            break
        end += 1
    while end > node.end_lineno and not lines[end - 1].strip():
        end -= 1
    return end


def find_markers(text):
    """[(line number, indent, name, value)] of every `# phase` marker; InstrumentError on a
    `# phase` comment that is not a marker, an unknown name or a value that is not an
    expression."""
    markers = []
    for number, line in enumerate(text.splitlines(), 1):
        if not MARKER_LIKE.match(line):
            continue
        found = MARKER.match(line)
        if not found:
            _fail(f"line {number}: a `# phase` comment that is no marker `# phase NAME: value`: {line.strip()!r}")
        name, value = found["name"], found["value"]
        if name not in MARKER_NAMES:
            _fail(f"line {number}: unknown phase {name!r} (known: {', '.join(MARKER_NAMES)})")
        try:
            ast.parse(value, mode="eval")
        except SyntaxError:
            _fail(f"line {number}: the value of phase {name!r} is no expression: {value!r}")
        markers.append((number, found["indent"], name, value))
    if not markers:
        _fail("no `# phase NAME: value` marker in the file")
    return markers


class _Plan:
    """Which functions a copy changes, and how (from the syntax tree and the markers)."""

    def __init__(self, text, markers):
        try:
            self.tree = ast.parse(text)
        except SyntaxError as exc:
            _fail(f"the source does not parse: {exc}")
        functions = [node for node in ast.walk(self.tree) if isinstance(node, ast.FunctionDef)]
        self.jit = {}
        for node in functions:
            if _is_jit(node):
                if node.name in self.jit:
                    _fail(f"two jit functions named {node.name}")
                self.jit[node.name] = node
        self.host = [node for node in functions if not _is_jit(node)]
        self.markers = {}  # function name -> [(line, indent, name, value)]
        lines = text.splitlines()
        ends = {node: _extended_end(node, lines) for node in functions}
        for marker in markers:
            owner = [node for node in functions if node.lineno <= marker[0] <= ends[node]]
            owner = min(owner, key=lambda node: node.end_lineno - node.lineno) if owner else None
            if owner is None or owner.name not in self.jit:
                _fail(f"line {marker[0]}: phase {marker[2]!r} outside a jit function")
            self.markers.setdefault(owner.name, []).append(marker)
        self._classify()

    def _classify(self):
        names = {name: {marker[2] for marker in found} for name, found in self.markers.items()}
        self.kernels = sorted(name for name, found in names.items() if "start" in found)
        if not self.kernels:
            _fail("no kernel: no function holds a `start` marker")
        for name in self.kernels:
            found = self.markers[name]
            if "end" not in names[name]:
                _fail(f"kernel {name} has a `start` marker but no `end`")
            if found[0][2] != "start":
                _fail(f"kernel {name}: phase {found[0][2]!r} (line {found[0][0]}) before `start`")
            if any(marker[2].startswith("tile ") for marker in found):
                _fail(f"kernel {name} holds a tile marker: tile phases belong in a tile function")
            body_indent = self.jit[name].body[0].col_offset
            if len(found[0][1].expandtabs()) != body_indent:
                _fail(f"kernel {name}: `start` (line {found[0][0]}) is not at the kernel's top level")
            if SPLIT_FIRST_ROW not in {node.id for node in ast.walk(self.jit[name]) if isinstance(node, ast.Name)}:
                _fail(f"kernel {name} has no `{SPLIT_FIRST_ROW}` (the split's first row, the first tile's start)")
        for name, found in names.items():
            if name not in self.kernels and found & {"start", "end"}:
                _fail(f"{name} holds `start`/`end` but is no kernel (they go in the kernel)")
        self.tiles = {name for name, found in names.items() if any(n.startswith("tile ") for n in found)}
        self.loops = {}  # tile loop -> its tile function parameter
        self.loop_tiles = {}  # tile loop -> the tile functions passed to it
        self.helpers = {name for name in names if name not in self.kernels and name not in self.tiles}
        changed = True
        while changed:
            before = (len(self.tiles), len(self.loops), len(self.helpers))
            for name, node in self.jit.items():
                self._find_loops(node)
                if name in self.kernels or name in self.tiles or name in self.loops:
                    continue
                callees = {_called_name(call) for call in _calls(node)}
                if "tile_start" in _params(node) and callees & self.tiles:
                    self.tiles.add(name)
                    self.helpers.discard(name)
                elif callees & self.probed():
                    self.helpers.add(name)
            changed = before != (len(self.tiles), len(self.loops), len(self.helpers))
        for name in self.loops:
            self.helpers.discard(name)
        self._check_tiles()

    def _find_loops(self, caller):
        """Functions called with a tile function as an argument: tile loops (their parameter
        at that position is the tile function)."""
        for call in _calls(caller):
            callee = _called_name(call)
            for position, arg in enumerate(call.args):
                if isinstance(arg, ast.Name) and arg.id in self.tiles and callee in self.jit:
                    params = _params(self.jit[callee])
                    if position >= len(params):
                        _fail(f"{caller.name} passes {arg.id} past {callee}'s parameters")
                    if self.loops.get(callee, params[position]) != params[position]:
                        _fail(f"{callee} takes tile functions in two parameters")
                    self.loops[callee] = params[position]
                    self.loop_tiles.setdefault(callee, set()).add(arg.id)

    def _check_tiles(self):
        """Where each tile function takes tile_start (the slot is chosen by it)."""
        lacking = sorted(name for name in self.tiles if "tile_start" not in _params(self.jit[name]))
        if lacking:
            _fail(f"tile functions without a `tile_start` parameter: {lacking}")
        self.tile_start = {name: _params(self.jit[name]).index("tile_start") for name in self.tiles}

    def probed(self):
        return self.tiles | set(self.loops) | self.helpers | set(self.kernels)

    def extra_params(self, name):
        if name in self.tiles:
            return ["probe_row", "tile_slot"]
        if name in self.loops:
            return ["probe_row", "probe_lo"]
        return ["probe_row"]


# --- the rewrite ---------------------------------------------------------------------------

class _Positions:
    """Character offsets in the text of ast positions (1-based line, UTF-8 byte column)."""

    def __init__(self, lines):
        self.lines, self.starts = lines, [0]
        for line in lines:
            self.starts.append(self.starts[-1] + len(line))

    def __call__(self, lineno, col):
        return self.starts[lineno - 1] + len(self.lines[lineno - 1].encode()[:col].decode())


def _call_insertion(text, offset, call, extra):
    """(offset, text) appending `extra` to a call's arguments, before its closing paren."""
    end = offset(call.end_lineno, call.end_col_offset) - 1
    if text[end] != ")":
        _fail(f"line {call.lineno}: a call that does not end in `)`")
    before = text[:end].rstrip()
    separator = "" if before.endswith("(") else " " if before.endswith(",") else ", "
    return end, separator + ", ".join(extra)


def instrumented_source(text, mode="clock", clock="amd"):
    """submission.py's text -> the instrumented copy's (see the module docstring)."""
    if mode not in MODES:
        _fail(f"mode must be one of {MODES}, got {mode!r}")
    if clock not in CLOCKS:
        _fail(f"clock must be one of {CLOCKS}, got {clock!r}")
    markers = find_markers(text)
    plan = _Plan(text, markers)
    lines = text.splitlines(keepends=True)
    offset = _Positions(lines)
    edits = []  # (offset, replaced characters, new text)
    for name, node in plan.jit.items():
        if name in plan.kernels:
            first_constexpr = next((arg for arg in node.args.args if arg.annotation is not None
                                    and "constexpr" in ast.unparse(arg.annotation)), None)
            if first_constexpr is None:
                _fail(f"kernel {name} has no constexpr parameter to put probe_ptr before")
            edits.append((offset(first_constexpr.lineno, first_constexpr.col_offset), 0, "probe_ptr, "))
        elif name in plan.probed():
            if node.args.defaults or node.args.vararg or node.args.kwonlyargs:
                _fail(f"{name} has defaults or variadic parameters: its probe parameters cannot be appended")
            last = node.args.args[-1]
            edits.append((offset(last.end_lineno, last.end_col_offset), 0,
                          ", " + ", ".join(plan.extra_params(name))))
        for call in _calls(node):
            extra = _call_extra(plan, name, call)
            if extra:
                if call.keywords or any(isinstance(arg, ast.Starred) for arg in call.args):
                    _fail(f"line {call.lineno}: a call of {ast.unparse(call.func)} with keywords or *args")
                at, added = _call_insertion(text, offset, call, extra)
                edits.append((at, 0, added))
    for host in plan.host:
        for call in _calls(host):
            if _called_name(call) in plan.probed() - set(plan.kernels):
                _fail(f"line {call.lineno}: host function {host.name} calls the probed jit function "
                      f"{_called_name(call)}")
        _check_kernel_launches(plan, host)
    for number, indent, name, value in markers:
        start = offset(number, 0)
        edits.append((start, len(lines[number - 1].rstrip("\r\n")), "\n".join(_probe_lines(name, value, indent, mode))))
    body = text
    for at, length, new in sorted(edits, key=lambda edit: edit[0], reverse=True):
        body = body[:at] + new + body[at + length:]
    body += _appendix(plan, mode, clock)
    check_copy(body, plan)
    return body


def _call_extra(plan, caller, call):
    """The arguments a call inside `caller` gains, or None."""
    callee = _called_name(call)
    if caller in plan.loops and callee == plan.loops[caller]:  # through the tile parameter
        start_index = _tile_start_index(plan, caller)
        return ["probe_row", f"_tile_slot({ast.unparse(call.args[start_index])}, probe_lo)"]
    if callee not in plan.probed() or callee in plan.kernels:
        return None
    if callee in plan.tiles:
        if caller in plan.tiles:
            return ["probe_row", "tile_slot"]
        if caller not in plan.kernels:
            _fail(f"line {call.lineno}: {caller} calls the tile function {callee} but is neither a kernel nor a "
                  f"tile function (with a tile_start parameter)")
        return ["probe_row", f"_tile_slot({ast.unparse(call.args[plan.tile_start[callee]])}, {SPLIT_FIRST_ROW})"]
    if callee in plan.loops:
        lo = SPLIT_FIRST_ROW if caller in plan.kernels else ("probe_lo" if caller in plan.loops else None)
        if lo is None:
            _fail(f"line {call.lineno}: {caller} calls the tile loop {callee} without a first row to give it")
        return ["probe_row", lo]
    return ["probe_row"]


def _tile_start_index(plan, loop):
    """Where the tile functions passed to `loop` take tile_start (one place for all)."""
    indices = {plan.tile_start[name] for name in plan.loop_tiles[loop]}
    if len(indices) != 1:
        _fail(f"the tile functions {sorted(plan.loop_tiles[loop])} of {loop} take tile_start at different positions")
    return indices.pop()


def _check_kernel_launches(plan, host):
    """A probed kernel is launched only through _launch_kernel (where the copy passes its
    probe buffer)."""
    named = {node.id for node in ast.walk(host) if isinstance(node, ast.Name) and node.id in plan.kernels}
    if not named:
        return
    direct = [node for node in ast.walk(host) if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
              and node.value.id in plan.kernels]
    if direct or "_launch_kernel" not in {_called_name(call) for call in _calls(host)}:
        _fail(f"host function {host.name} launches {sorted(named)} other than through _launch_kernel")


def _appendix(plan, mode, clock):
    wait = WAIT.format(sink=SINK)
    if mode == "clock":
        cycle_read, global_read = CLOCK_READS[clock]
        functions = CLOCK_PROBE.format(clock=clock, cycle_read=cycle_read, global_read=global_read, wait=wait)
    else:
        functions = PROTON_POINT.format(wait_flag=mode == "proton-waited", wait=re.sub("^", "    ", wait, flags=re.M))
    return APPENDIX.format(mode=mode, clock_note=f", {clock} clock" if mode == "clock" else "",
                           clock=clock if mode == "clock" else None, phases=PHASES, slots=SLOTS,
                           global_start=GLOBAL_START, global_end=GLOBAL_END, sink=SINK, unset=UNSET,
                           probe_functions=functions, tile0=TILE0, last_tile=LAST_TILE,
                           kernels=", ".join(plan.kernels))


def check_copy(body, plan):
    """The copy parses, holds no marker, and every call of a rewritten function passes
    exactly its parameters (a call site the rewrite missed fails here)."""
    try:
        tree = ast.parse(body)
    except SyntaxError as exc:
        _fail(f"the instrumented copy does not parse: {exc}")
    left = [line for line in body.splitlines() if MARKER_LIKE.match(line)]
    if left:
        _fail(f"markers left in the copy: {left}")
    defs = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and _is_jit(node)}
    for name, node in defs.items():
        loop_param = plan.loops.get(name)
        for call in _calls(node):
            callee = _called_name(call)
            if loop_param is not None and callee == loop_param:
                wanted = {len(defs[tile].args.args) for tile in plan.loop_tiles[name]}
            elif callee in plan.probed() and callee not in plan.kernels:
                wanted = {len(defs[callee].args.args)}
            else:
                continue
            if len(call.args) not in wanted:
                _fail(f"{name} calls {callee} with {len(call.args)} arguments, its parameters are {wanted}")
    for name in plan.kernels:
        if "probe_ptr" not in _params(defs[name]):
            _fail(f"kernel {name} has no probe_ptr parameter in the copy")


# --- the copy as a module --------------------------------------------------------------------

MODULE_NAMES = {"clock": "submission_probed", "proton-plain": "submission_proton_plain",
                "proton-waited": "submission_proton_waited"}


def default_clock():
    """The clock of this machine's GPU (an AMD one, or none: the interpreter emulates
    s_memtime), NVIDIA's on CUDA."""
    import torch
    return "nvidia" if torch.cuda.is_available() and not torch.version.hip else "amd"


def write_copy(mode="clock", clock=None, source=None, folder=None):
    """The copy's file: under `folder` (default a temporary folder named by the content),
    written atomically (parallel test workers write the same bytes)."""
    clock = clock or default_clock()
    text = instrumented_source(source if source is not None else (ROOT / "submission.py").read_text(), mode, clock)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = Path(folder) if folder else Path(tempfile.gettempdir()) / f"mla-instrumented-{digest}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{MODULE_NAMES[mode]}.py"
    if not path.exists() or path.read_text() != text:
        partial = folder / f".{path.name}.{digest}.partial"
        partial.write_text(text)
        partial.replace(path)
    return path


def load_copy(mode="clock", clock=None, source=None, folder=None):
    """Import the instrumented copy as a module of its own (sys.modules[its name]); it
    imports task.py as submission.py does, so the repository root must be on sys.path."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    path = write_copy(mode, clock, source, folder)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def probe_record(module, kernel_name=None):
    """The latest probed launch since reset_probes() (of kernel_name, if given) ->
    {kernel, grid, what, rows (a CPU copy)}; None when there was none."""
    launches = [launch for launch in module.PROBE_LAUNCHES if kernel_name in (None, launch["kernel"])]
    if not launches:
        return None
    return {**launches[-1], "rows": launches[-1]["rows"].cpu()}


# --- ahead of time -------------------------------------------------------------------------

def launch_constants(module, variant, num_splits=2, batch=2):
    """(kernel, constexprs and options) the copy's _launch_triton passes for `variant`,
    taken from the call itself (on small CPU tensors, the launch intercepted)."""
    import torch
    captured = []
    total_kv = 64
    q = torch.zeros((batch, module.NUM_HEADS, module.QK_HEAD_DIM), dtype=torch.bfloat16)
    packed = torch.zeros((total_kv, module.PACKED_ROW_BYTES), dtype=torch.uint8)
    scales = torch.zeros((total_kv, module.SCALE_COLS), dtype=torch.uint8)
    indptr = torch.arange(batch + 1, dtype=torch.int32)
    out = torch.empty((batch, module.NUM_HEADS, module.V_HEAD_DIM), dtype=torch.bfloat16)
    scratch = module.make_scratch(batch, num_splits, q.device, [variant])
    saved = module._unprobed_launch_kernel
    module._unprobed_launch_kernel = lambda kernel, grid, args, constants, what: captured.append((kernel, constants))
    try:
        module._launch_triton(variant, num_splits, q, packed, scales, indptr, indptr, out, scratch, 1.0, 1.0,
                              module.Q_BYTES_TIMED)
    finally:
        module._unprobed_launch_kernel = saved
    (kernel, constants), = captured
    return kernel, {name: value for name, value in constants.items() if name != "probe_ptr"}


def aot_variants(module, arch, platform, num_sms):
    """The first variant of each leaderboard case's launches (the dispatched family's and the
    BF16 family's default), each merge, without repeats."""
    import compile_report
    variants = []
    for batch, kv_len in compile_report.LEADERBOARD_CASES:
        launches = [module.default_launch(batch, kv_len, num_sms)]
        if arch in module.SCALED_NATIVE:
            launches.append(module.scaled_launch(batch, kv_len, num_sms))
        for launch in launches:
            for merge in {launch.merge, module.MERGE_FUSED if launch.num_splits > 1 else launch.merge}:
                variant = module.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages,
                                              launch.scores, merge)[0]
                if variant not in variants and not variant.gluon:
                    variants.append(variant)
    return variants


def compile_split(module, variant, target_name, extra_options=None):
    """The copy's split kernel of `variant` built ahead of time for target_name (a
    tools/compile_report.py TARGETS key), with the constexprs its _launch_triton passes ->
    Triton's compiled kernel (raises what the build raises)."""
    import triton
    from triton.compiler import ASTSource

    import compile_report
    target = compile_report.TARGETS[target_name][0]
    kernel, constants = launch_constants(module, variant)
    options = {key: constants.pop(key) for key in ("num_warps", "num_stages")}
    signature = {name: {**compile_report.SCALED_SIGNATURE, "probe_ptr": "*i64"}[name]
                 for name, param in zip(kernel.arg_names, kernel.params) if not param.is_constexpr}
    source = ASTSource(fn=kernel, signature=signature, constexprs=constants,
                       attrs=compile_report._attrs(kernel, signature, target.backend))
    return triton.compile(source, target=target, options={**options, **(extra_options or {})})


def aot_build(target_name, variants=None, mode="clock"):
    """The copy's split kernels built for target_name -> [row]: the variant, the clock reads
    found in the ISA, registers and spills (gfx950; sm90: the PTX's reads and shared
    memory), or the error. variants: a list, a function
    of the copy's module returning one, or None (aot_variants)."""
    import triton

    import compile_report
    target, arch, num_sms, platform = compile_report.TARGETS[target_name]
    clock = "amd" if target.backend == "hip" else "nvidia"
    module = load_copy(mode, clock)
    rows = []
    if callable(variants):  # variants of the copy's own (its Variant class)
        variants = variants(module)
    for variant in variants or aot_variants(module, arch, platform, num_sms):
        row = {"target": target_name, "triton": triton.__version__, "clock": clock, "variant": variant.describe()}
        try:
            compiled = compile_split(module, variant, target_name)
        except Exception as exc:  # noqa: BLE001 - a failed build is a row
            rows.append({**row, "error": f"{type(exc).__name__}: {exc}"[-2000:]})
            continue
        row["kernel"] = compiled.metadata.name
        if target.backend == "hip":
            asm = compiled.asm["amdgcn"]
            row.update(clock_reads=len(re.findall(r"\bs_memtime\b", asm)),
                       global_reads=len(re.findall(r"\bs_memrealtime\b", asm)),
                       vgprs=_amdgcn_field(asm, "vgpr_count"), sgprs=_amdgcn_field(asm, "sgpr_count"),
                       spills=_amdgcn_field(asm, "vgpr_spill_count"))
        else:
            ptx = compiled.asm["ptx"]
            row.update(clock_reads=ptx.count("%clock64"), global_reads=ptx.count("%globaltimer"),
                       shared=compiled.metadata.shared)  # registers: ptxas's (tools/compile_report.py)
        rows.append(row)
    return rows


def _amdgcn_field(asm, name):
    found = re.search(rf"\.{name}:\s+(\d+)", asm)
    return int(found[1]) if found else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=MODES, default="clock")
    parser.add_argument("--clock", choices=CLOCKS, help="default: this machine's (amd without a GPU)")
    parser.add_argument("--out", help="write the copy here (default: print where it was written)")
    parser.add_argument("--aot", metavar="TARGET", help="build the copy's split kernels for TARGET (gfx950, sm90)")
    parser.add_argument("--json", help="--aot: write the rows here")
    sys.path.insert(0, str(ROOT / "tools"))
    from common import add_triton_option
    add_triton_option(parser)
    options = parser.parse_args(argv)
    if options.aot:
        rows = aot_build(options.aot, mode=options.mode)
        for row in rows:
            print(json.dumps(row), flush=True)
        if options.json:
            Path(options.json).write_text(json.dumps(rows, indent=1) + "\n")
        return 0 if rows and all("error" not in row for row in rows) else 1
    if options.out:
        text = instrumented_source((ROOT / "submission.py").read_text(), options.mode, options.clock or "amd")
        Path(options.out).write_text(text)
        print(options.out)
    else:
        print(write_copy(options.mode, options.clock))
    return 0


if __name__ == "__main__":
    if "--aot" in sys.argv[1:]:  # builds: with the runner's Triton unless --triton names another
        sys.path.insert(0, str(ROOT / "tools"))
        from common import run_with_triton
        run_with_triton(__file__)
    sys.exit(main())
