"""Static coverage: which instruction forms (asm.form_of) each corpus case's gfx950 builds
contain, and which forms of another set of builds (submission.py's) no case builds.

    python -m gfx950.corpus.static --asm DIR     # *.s files, e.g. submission.py's gfx950 builds
    python -m gfx950.corpus.static --forms FILE  # a listing: lines "count  form  [kernels]"
    (with tools/ on sys.path; --cases NAME,... to build only some cases; --table to list every target form
    with the cases that build it)

case_forms(case) runs the case with a launch that builds each kernel for gfx950 with the
runner's Triton (build.py: specialized as Triton 3.6's JIT would for the same arguments,
cached in .cache/gfx950-builds) instead of running it; the case's check then fails on the
untouched outputs, which is expected here and ignored.
"""
import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

from .. import asm
from ..build import build, describe_argument
from . import CASES

FAKE_BASE = 1 << 32      # device addresses the builds see: 256-byte aligned, one region per tensor
FAKE_ALIGN = 1 << 12


class BuildRecorder:
    """A `launch` that builds instead of running; .builds collects (kernel name, Built, seconds)."""

    def __init__(self):
        self.builds = []
        self._next = FAKE_BASE

    def _address(self, tensor):
        address = self._next
        size = tensor.untyped_storage().nbytes()
        self._next += -(-max(size, 1) // FAKE_ALIGN) * FAKE_ALIGN + FAKE_ALIGN
        return address

    def __call__(self, kernel, grid, *args, num_warps=4, num_stages=None, **constexprs):
        described = [describe_argument(a, self._address(a)) if hasattr(a, "data_ptr") else describe_argument(a)
                     for a in args]
        start = time.perf_counter()
        built = build(kernel, described, constexprs, num_warps=num_warps, num_stages=num_stages)
        self.builds.append((built.name, built, time.perf_counter() - start))


def program_forms(text):
    """The set of instruction forms in one kernel's amdgcn text."""
    return {asm.form_of(instruction) for instruction in asm.parse(text).instructions}


def case_builds(case, seed=0):
    """[(kernel name, Built, build seconds)] of one case's launches."""
    recorder = BuildRecorder()
    try:
        case.run(recorder, np.random.default_rng(seed))
    except AssertionError:
        pass  # nothing ran: the outputs are the inputs' initial values
    if not recorder.builds:
        raise RuntimeError(f"case {case.name}: no launch")
    return recorder.builds


def case_forms(case):
    """The set of instruction forms in the gfx950 builds of one case."""
    return set().union(*(program_forms(built.asm) for _, built, _ in case_builds(case)))


def forms_from_listing(path):
    """Forms of a listing whose lines are 'count  form  [kernels]' ('#' lines skipped)."""
    forms = set()
    for line in Path(path).read_text().splitlines():
        found = re.match(r"^\s*\d+\s+(.*?)\s+\[[^\]]*\]\s*$", line)
        if found:
            forms.add(found[1])
    return forms


def forms_from_asm_dir(path):
    """{form: [file stems]} over the *.s files of a directory."""
    found = {}
    for file in sorted(Path(path).glob("*.s")):
        for form in program_forms(file.read_text()):
            found.setdefault(form, []).append(file.stem)
    return found


def coverage(target_forms, cases=CASES):
    """({case name: (forms, [(kernel, seconds)])}, {target form not built by any case}). Every case the runner's
    Triton builds (Case.runner None) is built (or read from the build cache); a case that fails to build raises
    BuildError naming its kernel."""
    per_case = {}
    for case in cases:
        if case.runner:   # the runner's Triton cannot build it (it runs with the newer one only)
            continue
        builds = case_builds(case)
        forms = set().union(*(program_forms(built.asm) for _, built, _ in builds))
        per_case[case.name] = (forms, [(name, seconds) for name, _, seconds in builds])
    built = set().union(*(forms for forms, _ in per_case.values())) if per_case else set()
    return per_case, set(target_forms) - built


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--asm", help="directory of *.s files (the forms to cover)")
    source.add_argument("--forms", help="a forms listing: lines 'count  form  [kernels]'")
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--table", action="store_true", help="every target form with the cases that build it")
    args = parser.parse_args(argv)
    if args.asm:
        where = forms_from_asm_dir(args.asm)
        if not where:
            parser.error(f"--asm {args.asm}: no *.s files")
    else:
        where = {form: [] for form in forms_from_listing(args.forms)}
        if not where:
            parser.error(f"--forms {args.forms}: no 'count form [kernels]' lines")
    cases = CASES
    if args.cases:
        names = args.cases.split(",")
        unknown = sorted(set(names) - {case.name for case in CASES})
        if unknown:
            parser.error(f"--cases: unknown {unknown}; known: {[case.name for case in CASES]}")
        cases = [case for case in CASES if case.name in names]
    per_case, uncovered = coverage(where, cases)
    print(f"{'case':28} {'builds':>6} {'seconds':>8} {'forms':>6} {'target forms':>12}")
    for name, (forms, builds) in per_case.items():
        print(f"{name:28} {len(builds):6d} {sum(s for _, s in builds):8.1f} {len(forms):6d} {len(forms & set(where)):12d}")
    if args.table:
        print(f"\n{'target form':90} cases that build it")
        for form in sorted(where):
            cases_here = [name for name, (forms, _) in per_case.items() if form in forms]
            print(f"{form:90} {', '.join(cases_here) or '-'}")
    print(f"\n{len(where) - len(uncovered)} of {len(where)} target forms built by a case; {len(uncovered)} not:")
    for form in sorted(uncovered):
        print(f"  {form}" + (f"   [{', '.join(where[form])}]" if where[form] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
