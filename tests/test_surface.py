"""The names of submission.py that eval.py, tools/ and tests/ use: declared here once (SURFACE),
so a restructure of submission.py breaks this test, naming what moved, instead of 27 files.

The scan (names_used) reads every .py file of eval.py, tools/ and tests/ (this one aside) as
Python and collects X where the submission module is:
  * `import submission [as S]` (S.X), `from submission import X`;
  * a tool module's name for it: `compile_report.sub.X` (any tools/ module that imports
    submission at its top level, under whatever name that module is imported as);
  * a function parameter named sub, submission or fresh_plans (conftest's fixture returns the
    module; fixtures and helpers that pass it on keep the name), and any local name assigned
    from one of these (`sub = fresh_plans`), or from a copy loader (COPY_LOADERS: a function
    that imports an instrumented copy of the file);
  * the string form: getattr/hasattr/setattr/delattr(S, "X"), monkeypatch.setattr(S, "X", ...)
    and monkeypatch.setattr("submission.X", ...);
  * the same inside a string that is a Python script importing submission or such a tool
    module (the scripts tests and tools run in a subprocess).
Names the files only read as text (the MEASURED DISPATCH block, source greps, mutation
snippets) are not attribute uses and are not scanned.

When a test here fails, its message lists the names to add to, or drop from, SURFACE (with
where each undeclared name is first used), or the declared names submission.py lacks;
`python tests/test_surface.py` prints the SURFACE the files use now.
"""
import ast
from pathlib import Path

from conftest import ROOT  # first: puts the repository on sys.path

import submission  # noqa: E402

# Every name of submission.py that eval.py, tools/*.py and tests/*.py use: public, then private.
SURFACE = frozenset("""
AITER_COMMIT AITER_LAUNCH BF16_SCORES COMBINE_DIMS_SPLIT COMBINE_MAX_CHUNK CONVERT_NAMES COPY_BLOCK E2M1_VALUES
EMULATOR_PROVEN FAMILY_NAMES FUSED_MERGE_PASS GFX950 GLUON_ERROR GL_BLOCK_N GL_NUM_WARPS
GL_SCALE_WORDS KernelLaunchError LOG2E Launch LOG2_SHIFT MACHINE_BEGIN MACHINE_END MAX_PLANS
MEASURED_DISPATCH MEASURED_ON MERGE_COMBINE MERGE_DIRECT MERGE_FUSED MERGE_NAMES NATIVE_CONVERT
NUM_HEADS NUM_HEADS_C NoVariantError ONCE_FALLBACK_TILE ONCE_GROUPS ONCE_GROUPS_C ONCE_OVERFLOW_LOG2
ONCE_OVERFLOW_LOG2_C ONCE_SCORES PACKED_ROW_BYTES PIN_BY_PLATFORM PLAIN_BLOCK_N PORTABLE
PREDICTED_US PROBE_BUDGET_S PROBE_RUNS ProbeSizes Q8_AMAX_FLOOR Q8_PARTIALS_BLOCK QK_HEAD_DIM Q_BYTES_CHECKED
Q_BYTES_TIMED ROPE_C
ROPE_PAD_BYTES_C SCALED_NATIVE SCALED_SCORES SCALE_COLS SOURCE_ID STATE TABLE_BEGIN TABLE_END
TUNE_CASES TUNE_CASE_TIMING_S TUNE_CASE_WALL_S TUNE_ROUNDS TUNE_TOTAL_WALL_S V_DIM_C V_HEAD_DIM
Variant aiter_commit_found candidate_groups check_output check_sample choose combine_dims
custom_kernel default_launch error_summary fresh_tune_log fused_merge_constants gl
gluon gluon_capable gluon_layout_problem input_key kernel_times_us launch_variants machine_block
machine_lines machine_probes make_scratch measure_machine once_launch predicted_choice
q8_edge_case q8_launches quantize_q_fp8 quantize_q_reference ranked_candidates scaled_launch
self_check source_id time_call_us tl torch triton tune_first_call tuning_report variants_for
_AiterPlan _TritonPlan _arch _attention _bf16_bits _bf16_halves _bf16_split_kernel _chase_chain
_device_faulted _device_name _gl_tiles _gluon_split_kernel _laid_out_like _launch_gluon
_launch_kernel _launch_triton _load_q_padded _marked _mla_combine_kernel _mxfp4_operands
_needs_tuning _num_sms _one_stage_only _plan _platform _probe_chase_kernel _probe_copy_kernel
_probe_empty_kernel _q_fp8_kernel _quantize_e4m3_blocks _quantize_fp8_per_tensor _quantize_q
_run_choice _scaled_split_kernel _split_range _synthetic_case _tile_rows _word_pairs_gfx950
_word_pairs_portable _words_to_bf16 _write_result
""".split())

SCANNED = ("eval.py", "tools/*.py", "tools/gfx950/*.py", "tests/*.py")
MODULE_PARAMETERS = {"sub", "submission", "fresh_plans"}
COPY_LOADERS = {"load_copy"}  # tools/instrument.py: imports an instrumented copy of submission.py
# Names tools/instrument.py adds to its copy (not submission.py's): their uses on a copy are not scanned.
COPY_NAMES = frozenset({"PROBE_LAUNCHES", "_unprobed_launch_kernel"})
STRING_ATTRIBUTE_CALLS = {"getattr", "hasattr", "setattr", "delattr"}


def scanned_files():
    own = Path(__file__).resolve()
    return sorted({path for pattern in SCANNED for path in ROOT.glob(pattern) if path.resolve() != own})


def _imports_submission(tree):
    """The top-level names a module binds to submission (`import submission as sub` -> {'sub'})."""
    return {alias.asname or alias.name for node in tree.body if isinstance(node, ast.Import)
            for alias in node.names if alias.name == "submission"}


def tool_holders(tools_dir=None):
    """{tools module name: the names under which it holds submission at its top level}."""
    holders = {}
    for path in sorted((tools_dir or ROOT / "tools").glob("*.py")):
        names = _imports_submission(ast.parse(path.read_text(encoding="utf-8")))
        if names:
            holders[path.stem] = names
    return holders


def names_used(source, holders=None):
    """{name: first line} of submission.py's names one file's source uses (the module docstring's rules)."""
    holders = tool_holders() if holders is None else holders
    tree = ast.parse(source)
    aliases, tool_aliases, used = set(), {}, {}

    def use(name, line):
        if not (name.startswith("__") and name.endswith("__")):
            used.setdefault(name, line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "submission":
                    aliases.add(alias.asname or alias.name)
                elif alias.name in holders:
                    tool_aliases[alias.asname or alias.name] = holders[alias.name]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if node.module == "submission":
                    use(alias.name, node.lineno)
                elif alias.name in holders.get(node.module, ()):
                    aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.arg) and node.arg in MODULE_PARAMETERS:
            aliases.add(node.arg)

    def is_module(node):
        if isinstance(node, ast.Name):
            return node.id in aliases
        return (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.attr in tool_aliases.get(node.value.id, ()))

    def is_copy(node):
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in COPY_LOADERS

    assigned = [node for node in ast.walk(tree) if isinstance(node, ast.Assign)]
    grown = True
    while grown:  # `sub = fresh_plans`, `module = load_copy(...)`, and names assigned from those
        before = len(aliases)
        for node in assigned:
            if is_module(node.value) or is_copy(node.value):
                aliases.update(target.id for target in node.targets if isinstance(target, ast.Name))
        grown = len(aliases) > before

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_module(node.value):
            use(node.attr, node.lineno)
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            first, second = node.args[0], node.args[1] if len(node.args) > 1 else None
            if name in STRING_ATTRIBUTE_CALLS and is_module(first) and isinstance(second, ast.Constant) \
                    and isinstance(second.value, str):
                use(second.value, node.lineno)
            elif name == "setattr" and isinstance(first, ast.Constant) and isinstance(first.value, str) \
                    and first.value.startswith("submission."):
                use(first.value.split(".")[1], node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            for name, line in _script_uses(node.value, holders).items():  # a script run in a subprocess
                use(name, node.lineno + line - 1)
    return used


def _script_uses(text, holders):
    """names_used of a string that is a Python script importing submission (or a tool module
    that holds it), else {}."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    return names_used(text, holders) if imported & ({"submission"} | set(holders)) else {}


def scan():
    """{name: 'file:line' of its first use} over every scanned file."""
    holders = tool_holders()
    found = {}
    for path in scanned_files():
        for name, line in names_used(path.read_text(encoding="utf-8"), holders).items():
            found.setdefault(name, f"{path.relative_to(ROOT)}:{line}")
    return {name: where for name, where in found.items() if name not in COPY_NAMES}


def test_every_declared_name_is_in_submission():
    missing = sorted(name for name in SURFACE if not hasattr(submission, name))
    assert not missing, f"declared in SURFACE but not in submission.py ({len(missing)}): {' '.join(missing)}"


def test_the_copy_names_are_the_instrumented_copys_own():
    instrument_source = (ROOT / "tools" / "instrument.py").read_text(encoding="utf-8")
    assert all(f"\n{name} = " in instrument_source and not hasattr(submission, name) for name in COPY_NAMES)


def test_every_name_used_is_declared():
    found = scan()
    undeclared = sorted(set(found) - SURFACE)
    assert not undeclared, (f"used but not declared in SURFACE ({len(undeclared)}; add them, or move the use "
                            "onto a declared name):\n" + "\n".join(f"  {name}  ({found[name]})" for name in undeclared))


def test_every_declared_name_is_used():
    unused = sorted(SURFACE - set(scan()))
    assert not unused, f"declared in SURFACE but used nowhere ({len(unused)}; drop them): {' '.join(unused)}"


SCAN_EXAMPLE = '''
import submission
import submission as sub2
import compile_report as report
from submission import custom_kernel, make_launch as launch

def test_it(fresh_plans, monkeypatch, other):
    s = fresh_plans
    s.choose
    sub2.Variant
    report.sub.variants_for
    report.other.not_submission
    monkeypatch.setattr(fresh_plans, "TUNED", {})
    monkeypatch.setattr("submission.AITER", None)
    getattr(submission, "tuning_report", None)
    copy = load_copy(True, folder)
    copy._scaled_split_kernel
    other.not_submission_either
    submission.__file__
    SCRIPT = \"\"\"
import submission as child
child.check_output
\"\"\"
    PROSE = \"\"\"not a script: submission.not_a_use
and a second line\"\"\"
'''


def test_the_scan_finds_every_form_of_use():
    used = names_used(SCAN_EXAMPLE, holders={"compile_report": {"sub"}})
    assert set(used) == {"custom_kernel", "make_launch", "choose", "Variant", "variants_for", "TUNED", "AITER",
                         "tuning_report", "_scaled_split_kernel", "check_output"}
    assert used["choose"] == 9


def test_the_tool_holders_are_found():
    """compile_report holds submission as `sub` (tools and tests reach it as compile_report.sub)."""
    assert "sub" in tool_holders().get("compile_report", set())


def surface_text(names):
    """SURFACE's text for `names`: the public names, then the private ones, wrapped."""
    import textwrap
    public = sorted(name for name in names if not name.startswith("_"))
    private = sorted(name for name in names if name.startswith("_"))
    return "\n".join(textwrap.wrap(" ".join(public), 100) + textwrap.wrap(" ".join(private), 100))


if __name__ == "__main__":  # python tests/test_surface.py: the SURFACE the files use now (after a merge)
    print(surface_text([name for name in scan() if hasattr(submission, name)]))
