"""Every Triton kernel variant the dispatch can reach for the leaderboard cases builds ahead of
time for MI355X (gfx950) and H200 (sm_90) with the runner's Triton (requirements-runner.txt)
and with the newest one we use (requirements-cpu.txt): no build failure, no register spills,
matrix instructions in the split kernels, and the gfx950 native conversion in its loop at
<= 2 VALU lane-ops per KV element (issue 8's goal, counted on the runner's Triton).

Each build runs tools/compile_report.py in a subprocess (this process has Triton's
interpreter on); the runner's Triton lives in its own directory on PYTHONPATH: .ci/run
installs it there, and this test does so on demand (RUNNER_TRITON_DIR overrides the place).
"""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

RUNNER_TRITON = re.search(r"^triton==([\d.]+)", (ROOT / "requirements-runner.txt").read_text(), re.M)[1]


def runner_triton_dir():
    target = os.environ.get("RUNNER_TRITON_DIR") or str(ROOT / ".ci" / f"triton-{RUNNER_TRITON}")
    if not os.path.isdir(os.path.join(target, "triton")):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--target", target, f"triton=={RUNNER_TRITON}"], check=True, timeout=900)
    return target


def build_report(tmp_path_factory, pythonpath):
    out = tmp_path_factory.mktemp("aot") / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTHONPATH")}
    env["TRITON_DEFAULT_FP_FUSION"] = "1"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "compile_report.py"), "--json", str(out)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert out.exists(), result.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module", params=["runner", "newest"])
def rows(request, tmp_path_factory):
    rows = build_report(tmp_path_factory, runner_triton_dir() if request.param == "runner" else None)
    if request.param == "runner":
        assert {r["triton"] for r in rows} == {RUNNER_TRITON}
    return rows


@pytest.mark.parametrize("target", ["gfx950", "sm90"])
def test_every_variant_builds_without_spills(rows, target):
    mine = [r for r in rows if r["target"] == target]
    assert {r["kernel"] for r in mine} == {"_mla_split_kernel", "_mla_combine_kernel"}
    for r in mine:
        assert "error" not in r, f"{r['kernel']} {r.get('convert')} BN{r.get('BLOCK_N')}: {r.get('error')}"
        assert r["spills"] == 0, r
        if r["kernel"] == "_mla_split_kernel":
            kinds = ",".join(r["matrix_kinds"])
            assert r["matrix_ops"] > 0 and ("v_mfma" in kinds if target == "gfx950" else "mma" in kinds), r


@pytest.mark.parametrize("target, native", [("gfx950", "gfx950"), ("sm90", "ptx-sm90")])
def test_the_fallback_order_is_built_native_first(rows, target, native):
    converts = [r["convert"] for r in rows if r["target"] == target and r["kernel"] == "_mla_split_kernel"]
    assert converts and converts[0] == native and "portable" in converts


def test_gfx950_native_loop_meets_the_valu_goal(rows):
    loops = [r for r in rows if r["target"] == "gfx950" and r.get("convert") == "gfx950" and r["BLOCK_N"] == 64]
    assert loops
    for r in loops:
        assert r["loop_native_converts"] > 0, r  # v_cvt_scalef32_pk_bf16_fp4 in the loop
        if r["triton"] == RUNNER_TRITON:
            assert r["loop_valu_per_element"] <= 2.0, r


def test_report_covers_every_launch_the_dispatch_uses(monkeypatch):
    """What submission.choose() picks for each leaderboard case on each target (the
    measured table where it has the case, else the prediction) is among the launches the
    report builds."""
    sys.path.insert(0, str(ROOT / "tools"))
    import compile_report
    import submission
    cpu = submission.torch.device("cpu")
    for target, (_, arch, num_sms, platform) in compile_report.TARGETS.items():
        monkeypatch.setattr(submission, "_arch", lambda device, arch=arch: arch)
        monkeypatch.setattr(submission, "_num_sms", lambda device, num_sms=num_sms: num_sms)
        monkeypatch.setattr(submission, "_platform", lambda device, platform=platform: platform)
        submission._cached_prediction.cache_clear()
        chosen = {submission.SplitLaunch(*submission.choose(b, n, cpu)[1:])
                  for b, n in compile_report.LEADERBOARD_CASES}
        assert chosen <= set(compile_report.dispatched_launches(target)), target
    submission._cached_prediction.cache_clear()
