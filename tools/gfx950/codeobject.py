"""An AMDGPU code object (an ELF `.co` file, e.g. aiter's hand-written gfx950 kernels) as the
emulator's program.

    program = load_code_object(path)          # asm.Program: instructions, labels, descriptor, kernargs
    text = disassemble_code_object(path)      # the amdgcn text it was read from

The `.text` section is disassembled with ROCm's LLVM (`rocm-llvm-python`, a pip package for a
CPU: `rocm.llvm.c.disassembler`, the C API's LLVMCreateDisasmCPU("amdgcn-amd-amdhsa", "gfx950")
and LLVMDisasmInstruction); every branch target becomes a label (`.Lpc_<hex>`) and the branch
names it. The kernel descriptor (the `<kernel>.kd` symbol's 64 bytes in `.rodata`, LLVM's
AMDGPUUsage "Kernel Descriptor") gives the entry state as `.amdhsa_*` directives would: user
and system SGPR enables, the work-item id VGPRs, kernarg preload, LDS and private segment
sizes, the float mode; the metadata note (NT_AMDGPU_METADATA, a MessagePack map) gives the
kernel argument layout. Nothing here depends on Triton.
"""
import ctypes
import re
import struct

from .asm import parse

ELF_MAGIC = b"\x7fELF"
EM_AMDGPU = 224
NT_AMDGPU_METADATA = 32
SHT_SYMTAB, SHT_DYNSYM, SHT_NOTE = 2, 11, 7
# code object target: the disassembler this module asks LLVM for
TRIPLE, CPU = b"amdgcn-amd-amdhsa", b"gfx950"
# SOPP branches: a signed 16-bit dword offset from the next instruction
_BRANCH = re.compile(r"^(s_branch|s_cbranch_\w+|s_call_b64\s+s\[\d+:\d+\],)\s*(-?\d+)$")


class CodeObjectError(ValueError):
    """A file that is not an AMDGPU code object this module reads: names the file and what."""


# ---------------------------------------------------------------------------------------
# ELF
# ---------------------------------------------------------------------------------------
class _Elf:
    def __init__(self, data, path):
        if data[:4] != ELF_MAGIC or data[4] != 2 or data[5] != 1:
            raise CodeObjectError(f"{path}: not a little-endian 64-bit ELF file")
        machine, = struct.unpack_from("<H", data, 0x12)
        if machine != EM_AMDGPU:
            raise CodeObjectError(f"{path}: ELF machine {machine}, not AMDGPU ({EM_AMDGPU})")
        self.data, self.path = data, path
        shoff, = struct.unpack_from("<Q", data, 0x28)
        entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
        self.sections = []
        for i in range(count):
            name, kind, _, addr, offset, size, link, _, _, _ = struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize)
            self.sections.append({"name_offset": name, "type": kind, "addr": addr, "offset": offset, "size": size,
                                  "link": link})
        names = self.sections[names_index]
        for section in self.sections:
            section["name"] = self._string(names, section["name_offset"])

    def _string(self, section, offset):
        start = section["offset"] + offset
        return self.data[start:self.data.index(b"\0", start)].decode()

    def section(self, name):
        for section in self.sections:
            if section["name"] == name:
                return section
        raise CodeObjectError(f"{self.path}: no {name} section")

    def bytes_of(self, section):
        return self.data[section["offset"]:section["offset"] + section["size"]]

    def symbols(self):
        """{name: (value, size, section index)} of .symtab and .dynsym."""
        found = {}
        for section in self.sections:
            if section["type"] not in (SHT_SYMTAB, SHT_DYNSYM):
                continue
            strings = self.sections[section["link"]]
            for i in range(section["size"] // 24):
                name, _, _, index, value, size = struct.unpack_from("<IBBHQQ", self.data, section["offset"] + 24 * i)
                if name:
                    found[self._string(strings, name)] = (value, size, index)
        return found

    def notes(self):
        """[(type, name, desc bytes)] of every SHT_NOTE section."""
        out = []
        for section in self.sections:
            if section["type"] != SHT_NOTE:
                continue
            blob, at = self.bytes_of(section), 0
            while at + 12 <= len(blob):
                name_size, desc_size, kind = struct.unpack_from("<III", blob, at)
                at += 12
                name = blob[at:at + name_size].rstrip(b"\0").decode()
                at += (name_size + 3) & ~3
                out.append((kind, name, blob[at:at + desc_size]))
                at += (desc_size + 3) & ~3
        return out


# ---------------------------------------------------------------------------------------
# MessagePack (the metadata note), the subset LLVM writes
# ---------------------------------------------------------------------------------------
def _unpack(blob, at=0):
    """(value, next offset) of the MessagePack item at `at`."""
    b = blob[at]
    at += 1
    if b <= 0x7F:
        return b, at
    if b >= 0xE0:
        return b - 0x100, at
    if 0x80 <= b <= 0x8F:
        return _unpack_map(blob, at, b & 0x0F)
    if 0x90 <= b <= 0x9F:
        return _unpack_array(blob, at, b & 0x0F)
    if 0xA0 <= b <= 0xBF:
        n = b & 0x1F
        return blob[at:at + n].decode(), at + n
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in fixed:
        return fixed[b], at
    sizes = {0xCC: "<B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
             0xCA: ">f", 0xCB: ">d"}
    if b in sizes:
        value, = struct.unpack_from(sizes[b], blob, at)
        return value, at + struct.calcsize(sizes[b])
    if b in (0xD9, 0xDA, 0xDB, 0xC4, 0xC5, 0xC6):
        width = {0xD9: 1, 0xDA: 2, 0xDB: 4, 0xC4: 1, 0xC5: 2, 0xC6: 4}[b]
        n = int.from_bytes(blob[at:at + width], "big")
        raw = blob[at + width:at + width + n]
        return (raw.decode() if b >= 0xD9 else bytes(raw)), at + width + n
    if b in (0xDC, 0xDD):
        width = 2 if b == 0xDC else 4
        return _unpack_array(blob, at + width, int.from_bytes(blob[at:at + width], "big"))
    if b in (0xDE, 0xDF):
        width = 2 if b == 0xDE else 4
        return _unpack_map(blob, at + width, int.from_bytes(blob[at:at + width], "big"))
    raise CodeObjectError(f"MessagePack byte {b:#x} not read")


def _unpack_array(blob, at, n):
    items = []
    for _ in range(n):
        item, at = _unpack(blob, at)
        items.append(item)
    return items, at


def _unpack_map(blob, at, n):
    items = {}
    for _ in range(n):
        key, at = _unpack(blob, at)
        items[key], at = _unpack(blob, at)
    return items, at


# ---------------------------------------------------------------------------------------
# the kernel descriptor (AMDGPUUsage, "Kernel Descriptor" for GFX6-GFX12)
# ---------------------------------------------------------------------------------------
# (field, word, first bit, bits) of compute_pgm_rsrc1 / rsrc2 / rsrc3 (gfx90a+) -> .amdhsa_ name
_RSRC_FIELDS = (
    ("float_round_mode_32", "rsrc1", 12, 2), ("float_round_mode_16_64", "rsrc1", 14, 2),
    ("float_denorm_mode_32", "rsrc1", 16, 2), ("float_denorm_mode_16_64", "rsrc1", 18, 2),
    ("dx10_clamp", "rsrc1", 21, 1), ("ieee_mode", "rsrc1", 23, 1), ("fp16_overflow", "rsrc1", 26, 1),
    ("enable_private_segment", "rsrc2", 0, 1), ("user_sgpr_count", "rsrc2", 1, 5),
    ("system_sgpr_workgroup_id_x", "rsrc2", 7, 1), ("system_sgpr_workgroup_id_y", "rsrc2", 8, 1),
    ("system_sgpr_workgroup_id_z", "rsrc2", 9, 1), ("system_sgpr_workgroup_info", "rsrc2", 10, 1),
    ("system_vgpr_workitem_id", "rsrc2", 11, 2), ("tg_split", "rsrc3", 16, 1),
)
# kernel_code_properties bits -> .amdhsa_ name
_PROPERTY_BITS = (("user_sgpr_private_segment_buffer", 0), ("user_sgpr_dispatch_ptr", 1),
                  ("user_sgpr_queue_ptr", 2), ("user_sgpr_kernarg_segment_ptr", 3), ("user_sgpr_dispatch_id", 4),
                  ("user_sgpr_flat_scratch_init", 5), ("user_sgpr_private_segment_size", 6),
                  ("wavefront_size32", 10), ("uses_dynamic_stack", 11))


def kernel_descriptor(raw):
    """The 64 bytes of a kernel descriptor -> {.amdhsa_ directive name (no prefix): value}."""
    if len(raw) != 64:
        raise CodeObjectError(f"a kernel descriptor is 64 bytes, got {len(raw)}")
    group, private, kernarg = struct.unpack_from("<III", raw, 0)
    entry_offset, = struct.unpack_from("<q", raw, 16)
    words = dict(zip(("rsrc3", "rsrc1", "rsrc2"), struct.unpack_from("<III", raw, 44)))
    properties, preload = struct.unpack_from("<HH", raw, 56)
    d = {"group_segment_fixed_size": group, "private_segment_fixed_size": private, "kernarg_size": kernarg,
         "kernel_code_entry_byte_offset": entry_offset,
         "next_free_vgpr": ((words["rsrc1"] & 0x3F) + 1) * 8,
         "accum_offset": ((words["rsrc3"] & 0x3F) + 1) * 4,
         "user_sgpr_kernarg_preload_length": preload & 0x7F, "user_sgpr_kernarg_preload_offset": preload >> 7}
    for name, word, first, bits in _RSRC_FIELDS:
        d[name] = (words[word] >> first) & ((1 << bits) - 1)
    for name, bit in _PROPERTY_BITS:
        d[name] = (properties >> bit) & 1
    return d


# ---------------------------------------------------------------------------------------
# the disassembler
# ---------------------------------------------------------------------------------------
_DISASSEMBLER = None


def _disassembler():
    global _DISASSEMBLER
    if _DISASSEMBLER is None:
        try:
            from rocm.llvm.c import disassembler, target
        except ImportError as exc:
            raise CodeObjectError("reading a code object needs ROCm's LLVM for a CPU: pip install rocm-llvm-python "
                                  f"(requirements-cpu.txt; a cp311 wheel): {exc}") from None
        target.LLVMInitializeAllTargetInfos()
        target.LLVMInitializeAllTargetMCs()
        target.LLVMInitializeAllDisassemblers()
        context = disassembler.LLVMCreateDisasmCPU(TRIPLE, CPU, None, 0, None, None)
        if not context:
            raise CodeObjectError("ROCm's LLVM has no amdgcn gfx950 disassembler")
        _DISASSEMBLER = (disassembler, context)
    return _DISASSEMBLER


def disassemble(code, address):
    """[(address, text)] of the instructions in `code` (bytes) loaded at `address`; an invalid
    encoding is an error naming its address."""
    module, context = _disassembler()
    buffer = (ctypes.c_ubyte * max(len(code), 1)).from_buffer_copy(code or b"\0")
    out = ctypes.create_string_buffer(256)
    at, found = 0, []
    while at < len(code):
        size = module.LLVMDisasmInstruction(context, ctypes.addressof(buffer) + at, len(code) - at, address + at,
                                            out, len(out))
        if size == 0:
            raise CodeObjectError(f"no valid gfx950 instruction at {address + at:#x}")
        found.append((address + at, out.value.decode().strip()))
        at += size
    return found


def _label(address):
    return f".Lpc_{address:x}"


def _with_labels(instructions, kernel_name):
    """The instructions as amdgcn text: branch operands replaced by labels of their targets,
    each label before its instruction; the kernel's symbol first."""
    sizes = {a: b - a for (a, _), (b, _) in zip(instructions, instructions[1:])}
    if instructions:
        sizes[instructions[-1][0]] = 4
    targets, rewritten = set(), []
    for address, text in instructions:
        m = _BRANCH.match(text)
        if m:
            offset = int(m[2]) & 0xFFFF   # LLVM prints the simm16 unsigned at times
            target = address + sizes[address] + 4 * (offset - 0x10000 if offset & 0x8000 else offset)
            if target not in sizes:
                raise CodeObjectError(f"{text} at {address:#x}: target {target:#x} is not an instruction")
            targets.add(target)
            text = f"{m[1]} {_label(target)}"
        rewritten.append((address, text))
    lines = [f"{kernel_name}:"]
    for address, text in rewritten:
        if address in targets:
            lines.append(f"{_label(address)}:")
        lines.append(f"\t{text}\t; {address:#x}")
    return "\n".join(lines) + "\n"


class CodeObject:
    """One kernel of a code object file: `name`, `descriptor`, `metadata` (its kernel entry of
    the metadata note), `kernargs`, `text` (the disassembly with labels), `addresses`."""

    def __init__(self, path, kernel=None):
        with open(path, "rb") as f:
            data = f.read()
        elf = _Elf(data, path)
        symbols = elf.symbols()
        descriptors = sorted(n[:-3] for n in symbols if n.endswith(".kd"))
        if not descriptors:
            raise CodeObjectError(f"{path}: no kernel descriptor symbol (<kernel>.kd)")
        if kernel is None:
            if len(descriptors) > 1:
                raise CodeObjectError(f"{path}: {len(descriptors)} kernels ({', '.join(descriptors)}): name one")
            kernel = descriptors[0]
        if kernel not in descriptors:
            raise CodeObjectError(f"{path}: no kernel {kernel!r} (has {', '.join(descriptors)})")
        self.name, self.path = kernel, path
        kd_address, kd_size, kd_section = symbols[kernel + ".kd"]
        section = elf.sections[kd_section]
        start = section["offset"] + kd_address - section["addr"]
        self.descriptor = kernel_descriptor(data[start:start + kd_size])
        entry = kd_address + self.descriptor["kernel_code_entry_byte_offset"]
        text = elf.section(".text")
        self.metadata, self.kernargs = self._metadata(elf, kernel)
        end = text["addr"] + text["size"]
        for other, (value, _, _) in symbols.items():   # the next kernel's entry ends this one
            if other != kernel and not other.endswith(".kd") and entry < value < end and (other + ".kd") in symbols:
                end = value
        code = elf.bytes_of(text)[entry - text["addr"]:end - text["addr"]]
        self.instructions = disassemble(code, entry)
        self.text = _with_labels(self.instructions, kernel)

    @staticmethod
    def _metadata(elf, kernel):
        for kind, owner, desc in elf.notes():
            if kind == NT_AMDGPU_METADATA and owner == "AMDGPU":
                document, _ = _unpack(desc)
                for entry in document.get("amdhsa.kernels", []):
                    if entry.get(".symbol") == kernel + ".kd" or entry.get(".name") == kernel:
                        flat = {k.lstrip("."): v for k, v in entry.items() if not isinstance(v, (list, dict))}
                        args = [{k.lstrip("."): v for k, v in a.items()} for a in entry.get(".args", [])]
                        return flat, args
        return {}, []

    def program(self):
        """The emulator's Program: the parsed text with the descriptor, metadata and kernargs."""
        program = parse(self.text)
        program.name = self.name
        program.descriptor.update(self.descriptor)
        program.metadata = dict(self.metadata)
        program.kernargs = list(self.kernargs)
        program.sources = [None] * len(program.instructions)
        return program


def load_code_object(path, kernel=None):
    """An AMDGPU code object file -> the emulator's Program (asm.Program) of its kernel (the
    only one, or `kernel` by symbol name)."""
    return CodeObject(path, kernel).program()


def disassemble_code_object(path, kernel=None):
    """The amdgcn text of a code object's kernel, with labels at the branch targets."""
    return CodeObject(path, kernel).text
