"""submission.py reads top-down: every top-level definition uses only top-level definitions below it.

A definition is a function or class of the module, or one defined in a module-level `if` (the Gluon kernels under
`if gl is not None`); a use is a Name load anywhere in it (body, decorators, defaults, annotations, bases) of another
definition's name that the definition does not bind itself. Constants (module-level assignments) are excepted both
ways. Triton and Gluon resolve a kernel's callees at its first compilation, so @jit helpers sit below their kernels.
"""
import ast
from pathlib import Path

SUBMISSION = Path(__file__).resolve().parents[1] / "submission.py"

# (user, used): upward uses that import time needs (the target runs while the module is being executed), each with
# its reason. Empty: none is needed.
EXCEPTIONS = {}


def definitions(tree):
    """{name: node} of the module's functions and classes, those in module-level `if` blocks included."""
    found = {}

    def visit(statements):
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                assert node.name not in found, f"{node.name} is defined twice"
                found[node.name] = node
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
    visit(tree.body)
    return found


def bound_names(node):
    """Names the definition binds itself (arguments, assignments, loop targets, nested definitions)."""
    bound = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.arg):
            bound.add(inner.arg)
        elif isinstance(inner, ast.Name) and isinstance(inner.ctx, (ast.Store, ast.Del)):
            bound.add(inner.id)
        elif inner is not node and isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(inner.name)
    return bound


def upward_uses(source):
    """[(user, used, user's line, used's line)] of every use of a definition defined above its user."""
    found = definitions(ast.parse(source))
    uses = []
    for name, node in found.items():
        local = bound_names(node)
        used = {inner.id for inner in ast.walk(node) if isinstance(inner, ast.Name)
                and isinstance(inner.ctx, ast.Load) and inner.id in found and inner.id != name
                and inner.id not in local}
        uses += [(name, other, node.lineno, found[other].lineno) for other in sorted(used)
                 if found[other].lineno < node.lineno]
    return sorted(uses, key=lambda use: (use[2], use[1]))


def test_every_definition_uses_only_definitions_below_it():
    uses = [use for use in upward_uses(SUBMISSION.read_text(encoding="utf-8")) if use[:2] not in EXCEPTIONS]
    assert not uses, f"{len(uses)} upward uses in submission.py (user line: uses used, defined at line):\n" + "\n".join(
        f"  {user} (line {line}) uses {used} (line {used_line})" for user, used, line, used_line in uses)


def test_every_exception_is_still_an_upward_use():
    uses = {use[:2] for use in upward_uses(SUBMISSION.read_text(encoding="utf-8"))}
    assert set(EXCEPTIONS) <= uses, f"exceptions no longer needed: {sorted(set(EXCEPTIONS) - uses)}"


def test_the_check_sees_an_upward_use():
    source = "def low():\n    return 1\n\n\ndef high(x=low):\n    return low() + x()\n"
    assert upward_uses(source) == [("high", "low", 5, 1)]
    assert upward_uses("def high():\n    low = 2\n    return low\n\n\ndef low():\n    pass\n") == []
