"""The emulator's reports and checks on the command line: tools/compile_report.py FILE reports on any
submission file (one not shaped like ours: the gfx950 builds its custom_kernel launches, run on the
emulator); tools/gfx950/coverage.py and matrix.py write their tracked files only with --write (a
check or a report rewrites nothing).
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from gfx950 import coverage, matrix  # noqa: E402


def compile_report(*argv, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(ROOT / "tools" / "compile_report.py"), *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("planted, verdict", [("", "pass"), ("40=read_past_end", "fail: EmulationError"),
                                              ("40=caught", "fail: EmulationError")])
def test_compile_report_reports_on_a_competitors_file(tmp_path, planted, verdict):
    out = tmp_path / "report.json"
    result = compile_report(str(ROOT / "tests" / "competitor_submission.py"), "--cases", "1x40", "--json", str(out),
                            env_extra={"PLANTED_BUG": planted})
    assert result.returncode == (0 if verdict == "pass" else 1), result.stderr[-3000:]
    rows = json.loads(out.read_text())
    case, = [r for r in rows if r["row"] == "case"]
    assert case["verdict"].startswith(verdict), case
    assert f"case 1x40: {verdict}" in result.stdout
    if planted:   # the launch stopped: no build ran to the end
        assert "MemoryFault" in case["verdict"] and not [r for r in rows if r["row"] == "launched"]
        return
    launched, = [r for r in rows if r["row"] == "launched"]
    assert launched["kernel"] == "_decode_kernel" and launched["triton"] == "3.6.0" and launched["num_warps"] == 4
    assert launched["matrix_ops"] > 0 and launched["regs_total"] > 0 and launched["shared_bytes"] > 0
    assert launched["wave_instructions"] > 0 and "_decode_kernel " in result.stdout


def exits(main, argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["tool.py", *argv])
    with pytest.raises(SystemExit) as stopped:
        main()
    return stopped.value.code


def test_the_coverage_report_and_check_write_nothing(monkeypatch, tmp_path):
    committed = coverage.recorded_results()
    monkeypatch.setattr(coverage, "run_both", lambda: committed)
    table, result = tmp_path / "table.md", tmp_path / "coverage.json"
    table.write_text("an old table\n")
    monkeypatch.setattr(coverage, "TABLE", table)
    monkeypatch.setattr(coverage, "RESULT", result)
    assert exits(coverage.main, [], monkeypatch) == 0 and exits(coverage.main, ["--check"], monkeypatch) == 1
    assert table.read_text() == "an old table\n" and not result.exists()
    assert exits(coverage.main, ["--write"], monkeypatch) == 0
    assert table.read_text() != "an old table\n" and result.exists()


def test_the_matrix_writes_its_results_and_the_proven_forms_only_with_write(monkeypatch, tmp_path):
    class Variant:
        def describe(self):
            return "a form"
    variant = Variant()
    monkeypatch.setattr(matrix.mla, "mi355x_submission", lambda: None)
    monkeypatch.setattr(matrix.mla, "mi355x_variants", lambda sub: {variant: [2]})
    monkeypatch.setattr(matrix, "kernels_fingerprint", lambda sub: "fingerprint")
    monkeypatch.setattr(matrix, "run", lambda sub, variants, only: [{"variant": "a form", "verdict": "right"}])
    written = []
    monkeypatch.setattr(matrix, "write_proven", written.append)
    monkeypatch.setattr(matrix, "RESULT", tmp_path / "matrix.json")
    assert exits(matrix.main, [], monkeypatch) == 0
    assert written == [] and not (tmp_path / "matrix.json").exists()
    assert exits(matrix.main, ["--json", str(tmp_path / "rows.json")], monkeypatch) == 0
    assert written == [] and not (tmp_path / "matrix.json").exists() and (tmp_path / "rows.json").exists()
    assert exits(matrix.main, ["--write"], monkeypatch) == 0
    assert written == [["a form"]]
    assert json.loads((tmp_path / "matrix.json").read_text())["runs"][0]["verdict"] == "right"


def test_every_form_of_aiters_decode_objects_is_run_by_a_corpus_kernel_or_a_hand_written_check(monkeypatch, tmp_path):
    committed = coverage.recorded_results()
    runner = committed[coverage.RUNNER]
    forms = coverage.aiter_forms(runner)
    assert len(forms) > 90 and all(cases or hand for _, cases, hand in forms.values())
    table, uncovered = coverage.coverage(runner)
    assert not [p for p in coverage.problems(table, uncovered, committed) if p.startswith("aiter")]
    text = coverage.render(table, uncovered, committed)
    assert "## aiter's FP8 MLA decode code objects" in text and "| `s_set_gpr_idx_on` |" in text
    # a form neither runs is a problem, named
    recorded = json.loads(coverage.AITER_FORMS.read_text())
    recorded["forms"]["v_made_up_b32"] = {"objects": {"x.co": 1}, "corpus_cases": [], "aiter_forms_tests": []}
    (tmp_path / "forms.json").write_text(json.dumps(recorded))
    monkeypatch.setattr(coverage, "AITER_FORMS", tmp_path / "forms.json")
    assert "aiter decode form v_made_up_b32: run by no corpus kernel and no hand-written check" in \
        coverage.problems(table, uncovered, committed)
