"""Which instruction forms of submission.py's gfx950 builds the corpus validates.

    python tools/gfx950/coverage.py           # run the corpus on the emulator; say whether the table is current
    python tools/gfx950/coverage.py --check   # the same, exit 1 if the committed table is not what it makes
    python tools/gfx950/coverage.py --write   # write the table and its JSON (the only way it writes)

The corpus runs twice: built with the runner's Triton (3.6.0) and with this Python's own (3.9.0,
requirements-cpu.txt), each case as one launch function builds it (a case the runner's Triton
cannot build says why: Case.runner). A form (gfx950.asm.form_of: the mnemonic with its source
and semantic modifiers) is validated when a corpus kernel executes it on the emulator and the
kernel's answer matches numpy: Triton's gfx950 code generation is tested on hardware upstream, so such a kernel's
instructions mean what the hardware does. The submission's forms come from the committed
compile reports (results/compile_report[_candidates]_triton3.6.0.json, rows "forms": kept
current by tests/test_compile_targets.py). A submission form no corpus kernel executes must
be named in UNVALIDATED with the reason; the table lists every form beside the cases that
ran it: docs/gfx950_coverage.md, with its JSON in results/gfx950_coverage.json. The table also
lists every form of aiter's FP8 MLA decode code objects (results/aiter_mla_forms.json) beside
the corpus kernels or the hand-written checks (tests/test_gfx950_aiter_forms.py) that ran it:
each must have one.
"""
import argparse
import datetime
import importlib.metadata
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import common  # noqa: E402
import gfx950  # noqa: E402
from gfx950.asm import form_of  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REPORTS = [ROOT / "results" / "compile_report_triton3.6.0.json",
           ROOT / "results" / "compile_report_candidates_triton3.6.0.json"]
TABLE = ROOT / "docs" / "gfx950_coverage.md"
RESULT = ROOT / "results" / "gfx950_coverage.json"
# aiter's FP8 MLA decode code objects' forms (issue 47; written by tools/aiter_mla/run.py --forms, which needs
# AITER_ASM_DIR): each form with the hand-written checks of tests/test_gfx950_aiter_forms.py that run it
AITER_FORMS = ROOT / "results" / "aiter_mla_forms.json"
MAX_UNVALIDATED = 5
RUNNER = common.RUNNER_TRITON_VERSION                 # the runner's Triton: gfx950.emulate(triton=None)
NEWER = importlib.metadata.version("triton")          # this Python's own: gfx950.emulate(triton="installed")
BUILDERS = {RUNNER: None, NEWER: gfx950.INSTALLED_TRITON}
# submission forms no corpus kernel executes: form -> why (at most MAX_UNVALIDATED)
UNVALIDATED = {
    "s_cbranch_vccz": "the Gluon kernel's full-tile test (`if valid >= BLOCK_N`: an SCC result made a lane mask, "
                      "ANDed with EXEC into VCC); no corpus construct made LLVM emit it (a scalar branch in a loop, "
                      "a scalar condition a select shares: s_cbranch_scc0/1). The Gluon kernel's matrix runs take "
                      "both sides (full tiles and a tail) and match exact attention",
    "v_lshlrev_b16_sdwa dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:BYTE_3":
        "the Gluon kernel's fp8 Q rope store (byte 3 of a packed word << 8); the corpus runs the BYTE_3 select "
        "(v_lshlrev_b32_sdwa, v_and_b32_sdwa) and v_lshlrev_b16 apart, not together (a masked fp8 byte store "
        "builds no halves); the kernel reads those bytes back for its scores, which the Gluon matrix runs check",
}


def submission_forms():
    """{form: [build names]} over every gfx950 build of the committed compile reports."""
    forms = defaultdict(list)
    for path in REPORTS:
        for row in json.loads(path.read_text()):
            if row.get("target") != "gfx950" or "forms" not in row:
                continue
            name = f"{row['kernel']}" + "".join(f" {k}={row[k]}" for k in ("family", "BLOCK_N", "MERGE", "num_warps",
                                                                            "num_stages", "CHUNK", "DIMS", "PHASE")
                                                  if k in row)
            for form in row["forms"]:
                forms[form].append(name)
    return dict(forms)


def executed_forms(launches):
    """The forms the launches' kernels executed at least once."""
    found = set()
    for launch in launches:
        program = launch.kernel.program
        found |= {form_of(ins) for ins, count in zip(program.instructions, launch.kernel.counts) if count}
    return found


def run_corpus(cases=None, rng_seed=0, triton=None):
    """Run corpus cases on the emulator, built with `triton` (gfx950.emulate's: None the runner's 3.6.0,
    "installed" this Python's own) -> {case name: (set of executed forms, error or None)}."""
    from gfx950.corpus import CASES
    results = {}
    for case in cases or CASES:
        launches = []

        def launch(kernel, grid, *args, **kwargs):
            result = gfx950.emulate(kernel, grid, *args, triton=triton, **kwargs)
            launches.append(result)
            return result
        gfx950.reset_counts()
        try:
            case.run(launch, np.random.default_rng(rng_seed))
            error = None
        except (AssertionError, gfx950.EmulationError, gfx950.BuildError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        results[case.name] = (executed_forms(launches), error)
    return results


def run_both(cases=None, rng_seed=0):
    """run_corpus with each Triton of BUILDERS -> {version: {case name: (forms, error)}}; a case the runner's
    Triton cannot build (Case.runner) runs with the newer one only."""
    from gfx950.corpus import CASES
    cases = list(cases or CASES)
    return {version: run_corpus([c for c in cases if version != RUNNER or not c.runner], rng_seed, triton=triton)
            for version, triton in BUILDERS.items()}


def corpus_forms(results_by_version):
    """{form: {version: [passing cases that executed it]}} over every form a passing corpus case executed."""
    table = defaultdict(lambda: {version: [] for version in results_by_version})
    for version, results in results_by_version.items():
        for name, (forms, error) in sorted(results.items()):
            if error is None:
                for form in forms:
                    table[form][version].append(name)
    return dict(sorted(table.items()))


def coverage(corpus_results, forms=None):
    """-> {form: {"builds": [...], "cases": [...]}} for every submission form, and the list of
    forms no passing case executed."""
    forms = submission_forms() if forms is None else forms
    table = {}
    for form, builds in sorted(forms.items()):
        cases = sorted(name for name, (executed, error) in corpus_results.items() if error is None and form in executed)
        table[form] = {"builds": builds, "cases": cases}
    uncovered = [form for form, entry in table.items() if not entry["cases"]]
    return table, uncovered


def _cases_cell(names, shown=6):
    return ", ".join(names[:shown]) + (f" (+{len(names) - shown})" if len(names) > shown else "")


def render(table, uncovered, results_by_version):
    """The coverage table (markdown): submission.py's forms against the corpus (its 3.6.0 runs), then the corpus's
    cases with their verdict under each Triton, then every form the corpus validates beyond submission.py's."""
    from gfx950.corpus import CASES
    versions = list(results_by_version)
    lines = ["# gfx950 instruction forms: submission.py's builds against the corpus", "",
             "Generated by `python tools/gfx950/coverage.py --write` (do not edit). Each form of the gfx950 builds of",
             "submission.py (Triton 3.6.0; the committed compile reports) beside the corpus kernels that executed it",
             "on the emulator with an answer matching numpy (tools/gfx950/corpus), built with the runner's Triton",
             f"{RUNNER}; then the corpus, built with Triton {' and '.join(versions)}, and every form it validates.",
             "What that proves: [gfx950_emulator.md](gfx950_emulator.md).", "",
             f"{len(table)} forms in {len({b for e in table.values() for b in e['builds']})} builds; "
             f"{len(table) - len(uncovered)} validated by the corpus, {len(uncovered)} not.", ""]
    if uncovered:
        lines += ["## Not validated by the corpus", "", "| form | why |", "| --- | --- |"]
        lines += [f"| `{form}` | {UNVALIDATED.get(form, 'NO REASON GIVEN')} |" for form in uncovered]
        lines.append("")
    lines += ["## Every form", "", "| form | builds | corpus kernels that ran it |", "| --- | --- | --- |"]
    for form, entry in table.items():
        lines.append(f"| `{form}` | {len(entry['builds'])} | {_cases_cell(entry['cases']) or '**none**'} |")
    lines += aiter_section(results_by_version[RUNNER])
    by_name = {case.name: case for case in CASES}
    ran = [name for name in by_name if any(name in results for results in results_by_version.values())]
    lines += ["", f"## The corpus: {len(ran)} kernels", "",
              "| case | what it exercises | " + " | ".join(f"Triton {v}" for v in versions) + " |",
              "| --- | --- | " + " | ".join("---" for _ in versions) + " |"]
    for name in ran:
        cells = []
        for version in versions:
            result = results_by_version[version].get(name)
            if result is None:
                cells.append(f"not built: {by_name[name].runner}" if version == RUNNER and by_name[name].runner
                             else "not run")
            else:
                cells.append("right" if result[1] is None else f"**wrong**: {result[1][:120]}")
        lines.append(f"| {name} | {by_name[name].exercises} | " + " | ".join(cells) + " |")
    forms = corpus_forms(results_by_version)
    beyond = {form: entry for form, entry in forms.items() if form not in table}
    lines += ["", f"## Every form the corpus validates: {len(forms)} ({len(beyond)} beyond submission.py's builds)",
              "", "| form | " + " | ".join(f"Triton {v} cases" for v in versions) + " |",
              "| --- | " + " | ".join("---" for _ in versions) + " |"]
    for form, entry in forms.items():
        lines.append(f"| `{form}` | " + " | ".join(_cases_cell(entry[v]) or "-" for v in versions) + " |")
    return "\n".join(lines) + "\n"


def aiter_forms(corpus_results):
    """{form: (objects {file: count}, corpus cases that ran it, hand-written checks)} of aiter's decode objects."""
    recorded = json.loads(AITER_FORMS.read_text())["forms"]
    return {form: (row["objects"], sorted(name for name, (executed, error) in corpus_results.items()
                                          if error is None and form in executed), row["aiter_forms_tests"])
            for form, row in sorted(recorded.items())}


def aiter_section(corpus_results):
    forms = aiter_forms(corpus_results)
    files = sorted({name for objects, _, _ in forms.values() for name in objects})
    new = [form for form, (_, cases, _) in forms.items() if not cases]
    lines = ["", f"## aiter's FP8 MLA decode code objects: {len(forms)} forms ({len(new)} no corpus kernel runs)", "",
             "AMD's hand-written gfx950 code objects (issue 47, [aiter_mla_emulated.md](aiter_mla_emulated.md); "
             "`AITER_ASM_DIR=... python tools/aiter_mla/run.py --forms` lists them into results/aiter_mla_forms.json). "
             "A form no corpus kernel runs is checked on hand-written amdgcn against numpy in "
             "tests/test_gfx950_aiter_forms.py.", "",
             "| form | " + " | ".join(f"`{name}`" for name in files) + " | corpus kernels that ran it | "
             "hand-written check |", "| --- | " + " | ".join("---" for _ in files) + " | --- | --- |"]
    for form, (objects, cases, hand) in forms.items():
        lines.append(f"| `{form}` | " + " | ".join(str(objects.get(name, "-")) for name in files) +
                     f" | {_cases_cell(cases) or '-'} | {', '.join(hand) or ('**none**' if not cases else '-')} |")
    return lines


def problems(table, uncovered, results_by_version):
    """What makes the coverage unacceptable (an empty list when it holds)."""
    found = [f"corpus case {name} failed with Triton {version}: {error}"
             for version, results in results_by_version.items() for name, (_, error) in results.items() if error]
    found += [f"{form}: not executed by any corpus kernel and not in UNVALIDATED" for form in uncovered
              if form not in UNVALIDATED]
    found += [f"aiter decode form {form}: run by no corpus kernel and no hand-written check"
              for form, (_, cases, hand) in aiter_forms(results_by_version[RUNNER]).items() if not cases and not hand]
    if len(uncovered) > MAX_UNVALIDATED:
        found.append(f"{len(uncovered)} forms unvalidated (at most {MAX_UNVALIDATED})")
    return found


def record(table, uncovered, results_by_version):
    """results/gfx950_coverage.json: the table, and every case's forms and verdict under each Triton ("cases": the
    runner's, "cases_newer": this Python's own)."""
    def cases(results):
        return {name: {"forms": sorted(forms), "error": error} for name, (forms, error) in results.items()}
    return {"date": datetime.date.today().isoformat(), "command": "python tools/gfx950/coverage.py --write",
            "triton": RUNNER, "triton_newer": NEWER, "cases": cases(results_by_version[RUNNER]),
            "cases_newer": cases(results_by_version[NEWER]), "table": table,
            "unvalidated": {form: UNVALIDATED.get(form) for form in uncovered}}


def recorded_results():
    """{version: {case: (forms, error)}} as results/gfx950_coverage.json holds them (the last --write)."""
    committed = json.loads(RESULT.read_text())
    return {version: {name: (set(case["forms"]), case["error"]) for name, case in committed[key].items()}
            for version, key in ((RUNNER, "cases"), (committed.get("triton_newer", NEWER), "cases_newer"))}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed table differs")
    parser.add_argument("--write", action="store_true",
                        help="write docs/gfx950_coverage.md and results/gfx950_coverage.json (nothing else writes "
                             "them)")
    args = parser.parse_args()
    results_by_version = run_both()
    table, uncovered = coverage(results_by_version[RUNNER])
    text = render(table, uncovered, results_by_version)
    issues = problems(table, uncovered, results_by_version)
    for issue in issues:
        print(issue, file=sys.stderr)
    if not args.write:
        same = TABLE.exists() and TABLE.read_text() == text
        print(f"{len(table)} forms, {len(uncovered)} unvalidated; " + (
            "the coverage table is current" if same else
            f"{TABLE.name} differs from what the corpus makes (--write writes it)"))
        sys.exit(0 if (same or not args.check) and not issues else 1)
    TABLE.write_text(text)
    RESULT.write_text(json.dumps(record(table, uncovered, results_by_version), indent=1) + "\n")
    print(f"{len(table)} forms, {len(uncovered)} unvalidated; wrote {TABLE.name}, "
          f"{RESULT.name}")
    sys.exit(1 if issues else 0)


if __name__ == "__main__":
    main()
