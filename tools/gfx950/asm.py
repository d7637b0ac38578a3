"""The amdgcn text of one kernel, parsed once: its instructions with their operands and
modifiers, its labels, and the metadata the launch needs (kernel descriptor, kernel
arguments).

    program = parse(asm_text)
    program.instructions[i]        # Instruction(mnemonic, operands, modifiers, line)
    program.labels[".LBB0_3"]      # instruction index
    program.descriptor["user_sgpr_count"], program.kernargs  # the launch's facts

Syntax is LLVM's AMDGPU assembler syntax as Triton's gfx950 builds print it (LLVM's
AMDGPUUsage and AMDGPUAsmGFX940 documents): operands separated by commas, modifiers after
the last operand separated by spaces (`offen`, `offset:144`, `op_sel:[0,1]`, DPP and SDWA
controls, `cbsz:4`), `;` starts a comment.
"""
import re
from dataclasses import dataclass, field

# Modifier words that stand alone (no `:value`): they are never operands.
FLAG_MODIFIERS = {"offen", "idxen", "lds", "sc0", "sc1", "nt", "glc", "slc", "dlc", "gds", "clamp", "tfe",
                  "row_mirror", "row_half_mirror", "fi", "lwe", "addr64"}
# Operand-less instructions whose only text is modifiers or counters.
_COUNTER = re.compile(r"(vmcnt|expcnt|lgkmcnt)\((\d+)\)")
# s_waitcnt raw simm16 encoding on gfx9: vmcnt[3:0] | expcnt[6:4] | lgkmcnt[11:8] | vmcnt_hi[15:14]
WAITCNT_MAX = {"vmcnt": 63, "expcnt": 7, "lgkmcnt": 15}


@dataclass(frozen=True)
class Operand:
    """One operand as written. kind: 'v' (VGPR), 'a' (AGPR), 's' (SGPR), 'special' (vcc, exec,
    m0, scc, vcc_lo/hi, exec_lo/hi, off, null), 'int', 'float', 'label', 'hwreg', 'swizzle',
    'sendmsg'. Registers: index of the first and count. neg / abs: the VOP3 source modifiers;
    sext: the SDWA one."""
    kind: str
    index: int = 0
    count: int = 1
    value: object = None
    neg: bool = False
    abs: bool = False
    sext: bool = False
    text: str = ""


@dataclass(frozen=True)
class Instruction:
    mnemonic: str
    operands: tuple
    modifiers: dict
    line: int          # 1-based line in the asm text
    text: str          # the instruction as written (comment stripped)


@dataclass
class Program:
    name: str
    instructions: list
    labels: dict
    descriptor: dict           # .amdhsa_* directives (without the prefix) -> int
    metadata: dict = field(default_factory=dict)   # the .amdgpu_metadata kernel entry, flattened
    kernargs: list = field(default_factory=list)   # [{"offset", "size", "value_kind"}] in order
    sources: list = field(default_factory=list)    # per instruction: (source file, line) of its .loc, or None

    @property
    def entry(self):
        """The index execution starts at: the instruction after the kernarg preload prologue
        (`.LBB0_0` when the build preloads kernel arguments into SGPRs), else 0."""
        if self.descriptor.get("user_sgpr_kernarg_preload_length", 0) and ".LBB0_0" in self.labels:
            return self.labels[".LBB0_0"]
        return 0


_REGISTER = re.compile(r"^([vas])(?:(\d+)|\[(\d+):(\d+)\])$")
_TTMP = re.compile(r"^ttmp(?:(\d+)|\[(\d+):(\d+)\])$")
SPECIAL = {"vcc", "vcc_lo", "vcc_hi", "exec", "exec_lo", "exec_hi", "m0", "scc", "off", "null",
           "src_scc", "src_execz", "src_vccz", "flat_scratch", "flat_scratch_lo", "flat_scratch_hi",
           "xnack_mask", "xnack_mask_lo", "xnack_mask_hi"}
# inline constants written as floats (LLVM prints 1/(2*pi) as 0.15915494)
INLINE_FLOATS = {"0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0", "0.15915494", "0"}


class AsmError(ValueError):
    """Text the parser cannot read: names the line."""


def _split_top(text, sep):
    """Split on `sep` outside brackets and parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _int(text):
    return int(text, 0)


def parse_operand(text):
    raw = text
    neg = absolute = sext = False
    if text.startswith("sext(") and text.endswith(")"):
        sext, text = True, text[5:-1]
    if text.startswith("-") and (text[1:2] == "|" or text[1:2] in "vsa" or text[1:].startswith("abs(")) \
            and not re.match(r"^-\d", text):
        neg, text = True, text[1:]
    if text.startswith("neg(") and text.endswith(")"):
        neg, text = True, text[4:-1]
    if text.startswith("|") and text.endswith("|"):
        absolute, text = True, text[1:-1]
    elif text.startswith("abs(") and text.endswith(")"):
        absolute, text = True, text[4:-1]
    m = _REGISTER.match(text)
    if m:
        kind = m[1]
        if m[2] is not None:
            return Operand(kind, int(m[2]), 1, neg=neg, abs=absolute, sext=sext, text=raw)
        first, last = int(m[3]), int(m[4])
        return Operand(kind, first, last - first + 1, neg=neg, abs=absolute, sext=sext, text=raw)
    m = _TTMP.match(text)
    if m:
        first = int(m[1] if m[1] is not None else m[2])
        last = first if m[1] is not None else int(m[3])
        return Operand("ttmp", first, last - first + 1, text=raw)
    if text in SPECIAL:
        return Operand("special", value=text, neg=neg, abs=absolute, sext=sext, text=raw)
    if text.startswith(".L") or re.match(r"^[A-Za-z_]\w*$", text) and not text.startswith(("hwreg", "swizzle")):
        return Operand("label", value=text, text=raw)
    if text.startswith("hwreg("):
        args = [a.strip() for a in text[6:-1].split(",")]
        return Operand("hwreg", value=tuple(args), text=raw)
    if text.startswith("gpr_idx("):   # s_set_gpr_idx_on's mode: which operands M0 indexes
        return Operand("gpr_idx", value=tuple(a.strip() for a in text[8:-1].split(",") if a.strip()), text=raw)
    if text.startswith("sendmsg("):
        return Operand("sendmsg", value=text, text=raw)
    try:
        if re.match(r"^-?(0x[0-9a-fA-F]+|\d+)$", text):
            return Operand("int", value=_int(text), neg=neg, abs=absolute, sext=sext, text=raw)
        if re.match(r"^-?\d+\.\d*(e[-+]?\d+)?$", text):
            return Operand("float", value=float(text), neg=neg, abs=absolute, sext=sext, text=raw)
        m = re.match(r"^lit\((.*)\)$", text)
        if m:
            return parse_operand(m[1])
    except ValueError:
        pass
    raise AsmError(f"operand {raw!r} not understood")


def _modifier(token):
    """'offset:144' -> ('offset', 144); 'op_sel:[0,1]' -> ('op_sel', (0, 1)); 'offen' ->
    ('offen', True); 'dst_sel:WORD_1' -> ('dst_sel', 'WORD_1'); 'swizzle(SWAP,16)' as
    offset's value -> ('offset', ('swizzle', 'SWAP', 16))."""
    if token in FLAG_MODIFIERS:
        return token, True
    name, sep, value = token.partition(":")
    if not sep:
        raise AsmError(f"modifier {token!r} not understood")
    if value.startswith("["):
        return name, tuple(_int(v) for v in value[1:-1].split(","))
    if value.startswith("swizzle("):
        args = [a.strip() for a in value[8:-1].split(",")]
        return name, ("swizzle", args[0], *(_int(a) for a in args[1:]))
    try:
        return name, _int(value)
    except ValueError:
        return name, value


def parse_instruction(text, line=0):
    mnemonic, _, rest = text.partition(" ")
    rest = rest.strip()
    modifiers = {}
    if mnemonic == "s_waitcnt":
        counters = dict.fromkeys(WAITCNT_MAX)
        found = _COUNTER.findall(rest)
        if found:
            for name, count in found:
                counters[name] = int(count)
        elif rest:
            value = _int(rest)
            counters = {"vmcnt": (value & 0xF) | ((value >> 10) & 0x30), "expcnt": (value >> 4) & 7,
                        "lgkmcnt": (value >> 8) & 0xF}
        return Instruction(mnemonic, (), {k: (WAITCNT_MAX[k] if v is None else v) for k, v in counters.items()},
                           line, text)
    parts = _split_top(rest, ",") if rest else []
    if parts:
        last = parts[-1].split()
        # the last comma part is "operand modifier modifier ..."; an instruction with no
        # operands (buffer_wbl2 sc1) has only modifiers
        tokens = last
        first_is_modifier = last[0] in FLAG_MODIFIERS or (":" in last[0] and not last[0].startswith(("hwreg",)))
        if first_is_modifier and len(parts) == 1:
            parts = []
        else:
            parts[-1] = last[0]
            tokens = last[1:]
        for token in tokens:
            name, value = _modifier(token)
            modifiers[name] = value
    try:
        operands = tuple(parse_operand(p) for p in parts)
    except AsmError as exc:
        raise AsmError(f"line {line}: {text!r}: {exc}") from None
    return Instruction(mnemonic, operands, modifiers, line, text)


def _metadata(lines):
    """The first kernel's entry of the .amdgpu_metadata YAML block -> (flat dict of its
    scalar keys, its .args list). Enough YAML for what LLVM prints there."""
    meta, args = {}, []
    args_indent = None
    for raw in lines:
        text = raw.rstrip()
        m = re.match(r"^(\s*)(- )?\.([\w]+):\s*(.*)$", text)
        if not m:
            continue
        indent = len(m[1]) + (2 if m[2] else 0)
        key, value = m[3], m[4].strip()
        parsed = _int(value) if re.match(r"^-?\d+$", value) else value
        if key == "args" and not value:
            args_indent = indent
            continue
        if args_indent is not None and indent > args_indent:
            if m[2]:
                args.append({})
            args[-1][key] = parsed
            continue
        args_indent = None if args_indent is not None and indent <= args_indent else args_indent
        meta.setdefault(key, parsed)
    return meta, args


def parse(asm):
    """The amdgcn text of one kernel -> Program."""
    instructions, labels, descriptor = [], {}, {}
    files, location, sources = {}, None, []
    lines = asm.splitlines()
    name = None
    meta_lines, in_meta = [], False
    for number, raw in enumerate(lines, 1):
        if raw.strip() == ".amdgpu_metadata":
            in_meta = True
            continue
        if raw.strip() == ".end_amdgpu_metadata":
            in_meta = False
            continue
        if in_meta:
            meta_lines.append(raw)
            continue
        text = raw.split(";")[0].strip()
        if not text:
            continue
        m = re.match(r"^\.amdhsa_(\w+)\s+(\S+)$", text)
        if m:
            try:
                descriptor[m[1]] = _int(m[2])
            except ValueError:
                descriptor[m[1]] = m[2]
            continue
        if text.endswith(":") and re.match(r"^[.\w$]+:$", text):
            label = text[:-1]
            labels[label] = len(instructions)
            if name is None and not label.startswith("."):
                name = label
            continue
        if text.startswith("."):
            location = _debug_line(text, files, location)
            continue
        instructions.append(parse_instruction(text, number))
        sources.append(location)
    metadata, kernargs = _metadata(meta_lines)
    return Program(metadata.get("name", name or "kernel"), instructions, labels, descriptor, metadata, kernargs,
                   sources)


def _debug_line(text, files, location):
    """The source location after a directive: `.file N "dir" "name"` names file N, `.loc N LINE COL`
    sets the location of the instructions that follow ((path, line); line 0: none)."""
    m = re.match(r'^\.file\s+(\d+)\s+"([^"]*)"(?:\s+"([^"]*)")?', text)
    if m:
        files[int(m[1])] = f"{m[2]}/{m[3]}" if m[3] is not None else m[2]
        return location
    m = re.match(r"^\.loc\s+(\d+)\s+(\d+)", text)
    if m:
        line = int(m[2])
        return (files.get(int(m[1]), "?"), line) if line else None
    return location


# ---------------------------------------------------------------------------------------
# forms: what an instruction's semantics depend on besides its register numbers
# ---------------------------------------------------------------------------------------
# Modifiers whose value changes what an instruction computes (the rest -- offsets, cache
# bits -- change only where or how it accesses memory, which every form handles alike).
SEMANTIC_MODIFIERS = ("op_sel", "op_sel_hi", "neg_lo", "neg_hi", "clamp", "mul", "div", "quad_perm", "row_shl",
                      "row_shr", "row_ror", "row_bcast", "row_newbcast", "row_mirror", "row_half_mirror", "wave_shl", "wave_shr",
                      "wave_rol", "wave_ror", "row_mask", "bank_mask", "bound_ctrl", "dst_sel", "dst_unused",
                      "src0_sel", "src1_sel", "cbsz", "abid", "blgp", "lds", "offen", "idxen")


def form_of(instruction):
    """The instruction's form: its mnemonic, the source modifiers of its operands (neg, abs,
    sext, by position) and its semantic modifiers, e.g. 'v_mov_b32_dpp quad_perm:[1,0,3,2]
    row_mask:0xf bank_mask:0xf' or 'v_fma_f32 -s0'. Which registers or constants an operand
    names is not part of the form: every operand kind goes through one fetch. Two
    instructions of one form run the same code of the emulator."""
    parts = [instruction.mnemonic]
    for position, op in enumerate(instruction.operands):
        marks = "".join(mark for mark, on in (("-", op.neg), ("|", op.abs), ("sext", op.sext)) if on)
        if marks:
            parts.append(f"{marks}op{position}")
    for name in SEMANTIC_MODIFIERS:
        if name in instruction.modifiers:
            value = instruction.modifiers[name]
            if value is True:
                parts.append(name)
            elif isinstance(value, tuple):
                parts.append(f"{name}:[{','.join(map(str, value))}]")
            elif isinstance(value, int) and name in ("row_mask", "bank_mask"):
                parts.append(f"{name}:{value:#x}")
            else:
                parts.append(f"{name}:{value}")
    if instruction.mnemonic == "ds_swizzle_b32" and "offset" in instruction.modifiers:
        parts.append(f"offset:{instruction.modifiers['offset']}")
    return " ".join(parts)


def instruction_forms(asm_text):
    """The sorted distinct instruction forms of one kernel's amdgcn text."""
    return sorted({form_of(i) for i in parse(asm_text).instructions})
