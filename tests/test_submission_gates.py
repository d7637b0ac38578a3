"""The runner's server gates on the pasted file (gpu-mode/kernelbot src/kernelbot/api/
api_utils.py) and the contract of a self-contained submission: a file that fails one of
these never reaches the GPU."""
import ast
import sys

from conftest import ROOT

SOURCE_BYTES = (ROOT / "submission.py").read_bytes()
ALLOWED_IMPORTS = {"torch", "triton", "aiter", "task"}


DYNAMIC_IMPORTS = {"__import__", "import_module"}  # builtins.__import__, importlib.import_module


def imported_modules(source: str) -> set:
    """Every module the file imports: import statements, and calls of __import__ /
    importlib.import_module (by their literal first argument, "<dynamic>" otherwise)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." if node.level else node.module.split(".")[0])
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in DYNAMIC_IMPORTS:
                first = node.args[0] if node.args else None
                literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
                found.add(first.value.split(".")[0] if literal else "<dynamic>")
    return found


def outside_allowed(source: str) -> set:
    return imported_modules(source) - ALLOWED_IMPORTS - set(sys.stdlib_module_names)


def test_no_stream_in_any_letter_case():
    """The server rejects any file containing "stream" in any case, comments included."""
    assert b"stream" not in SOURCE_BYTES.lower()


def test_under_one_megabyte_and_utf8():
    assert len(SOURCE_BYTES) < 1_000_000
    SOURCE_BYTES.decode("utf-8")  # raises on a non-UTF-8 file


def test_popcorn_header():
    lines = SOURCE_BYTES.decode("utf-8").splitlines()
    assert lines[:2] == ["#!POPCORN leaderboard amd-mixed-mla", "#!POPCORN gpu MI355X"]


def test_imports_only_torch_triton_aiter_task_and_the_standard_library():
    source = SOURCE_BYTES.decode("utf-8")
    assert not outside_allowed(source), f"submission.py imports {sorted(outside_allowed(source))}"
    assert "task" in imported_modules(source)  # from task import input_t, output_t


def test_the_gate_checks_can_fail():
    """Each check above would catch a violation (a check that cannot fail proves nothing)."""
    assert b"stream" in b"# an UpStream fix".lower()
    assert outside_allowed("import numpy\nimport os\nfrom triton import language") == {"numpy"}
    assert outside_allowed("from . import helper") == {"."}
    assert outside_allowed("np = __import__('numpy')") == {"numpy"}
    assert outside_allowed("import importlib\nimportlib.import_module('scipy.linalg')") == {"scipy"}
    assert outside_allowed("name = 'x'\n__import__(name)") == {"<dynamic>"}
    try:
        b"\xff\xfe caf\xe9".decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        raise AssertionError("a non-UTF-8 file was accepted")
