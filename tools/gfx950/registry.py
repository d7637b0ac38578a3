"""The table of instruction semantics: mnemonic -> compile(instruction, context) -> run(wave).

Each ops_* module registers the mnemonics it implements with `@semantics(...)`. A compile
function reads the instruction's operands and modifiers once and returns a closure over
the wave; the closure returns None, or a Stop for the scheduler. A mnemonic or a modifier
a compile function does not handle raises Unsupported: execution never skips it.
"""
from dataclasses import dataclass

SEMANTICS = {}


class Unsupported(ValueError):
    """An instruction, or a form of it, the emulator does not implement."""


class Stop:
    """What a wave's instruction tells the scheduler: wait at a barrier, or end."""
    BARRIER = "barrier"
    END = "end"


def semantics(*mnemonics):
    def register(compile_function):
        for name in mnemonics:
            if name in SEMANTICS:
                raise RuntimeError(f"{name} registered twice")
            SEMANTICS[name] = compile_function
        return compile_function
    return register


def refuse_modifiers(instruction, allowed):
    """Unsupported for any modifier outside `allowed` (so a form nobody implemented stops the run)."""
    extra = set(instruction.modifiers) - set(allowed)
    if extra:
        raise Unsupported(f"{instruction.mnemonic}: modifier(s) {sorted(extra)} not implemented")


@dataclass
class CompileContext:
    labels: dict
    kernel_name: str
    lds_bytes: int

    def target(self, operand):
        if operand.kind != "label" or operand.value not in self.labels:
            raise Unsupported(f"branch target {operand.text!r} is not a label of the kernel")
        return self.labels[operand.value]
