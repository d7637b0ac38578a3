"""Every Triton kernel, at the launch constants the dispatch really uses for the leaderboard
cases, compiles ahead of time for MI355X (gfx950) and H200 (sm_90) on this machine: no
register spills on either, and the split kernel's dots are matrix instructions.

The report runs in a subprocess because this process has Triton's interpreter switched on.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("aot") / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "compile_report.py"), "--json", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("target", ["gfx950", "sm90"])
def test_no_spills_and_matrix_instructions(rows, target):
    mine = [r for r in rows if r["target"] == target]
    assert {r["kernel"] for r in mine} == {"_mla_split_kernel", "_mla_combine_kernel"}
    assert {r["PTRS_FROM_TABLE"] for r in mine} == {True, False}
    for r in mine:
        assert r["spills"] == 0, r
        if r["kernel"] == "_mla_split_kernel":
            kinds = ",".join(r["matrix_kinds"])
            assert r["matrix_ops"] > 0 and ("v_mfma" in kinds if target == "gfx950" else "mma" in kinds), r


def test_report_covers_every_split_count_the_dispatch_uses(rows):
    sys.path.insert(0, str(ROOT / "tools"))
    import compile_report
    for target in ("gfx950", "sm90"):
        _, num_sms, platform = compile_report.TARGETS[target]
        import submission
        wanted = {submission._triton_launch_config(b, n, num_sms, platform).num_splits
                  for b, n in compile_report.LEADERBOARD_CASES}
        got = {r["NUM_SPLITS"] for r in rows if r["target"] == target and r["kernel"] == "_mla_split_kernel"}
        assert got == wanted
