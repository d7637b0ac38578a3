"""tools/mi355x_prediction.py (issue 38): the public paths' model on a hand-made case, the fit recovering the
parameters that made a set of figures, every published figure within 30% of its prediction or explained, and the
committed artefacts -- submission.py's PREDICTED_US (what predicted_choice reads), results/mi355x_prediction.json
and the geomeans docs/performance.md and the README quote -- what the tool makes from the committed compile
report."""
import json
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import latency_model  # noqa: E402
import mi355x_prediction as prediction  # noqa: E402

RESULTS = ROOT / "results" / "mi355x_prediction.json"
REPORT = ROOT / "results" / "compile_report_triton3.6.0.json"
PARTIAL = 16 * 512 * 4 + 2 * 16 * 4


def test_a_public_path_from_its_kernels_and_bytes():
    """2 small kernels, a decode with a 12 us floor and its reduce, at batch 64 (4 splits, "fill"), 1024 tokens of
    576 B; 1 TB/s (a byte a picosecond), launches 5 us, round trips 0.5 us: each small kernel 5 + 1 + Q in and out
    (2 x 64 x 18,432 B); the decode 5 + max(12, 1.5 + its KV, Q and partials); the reduce 5 + the partials and
    output."""
    path = latency_model.PublicPath(kv_token_bytes=576, small_kernels=2, floor_us=12.0, splits="fill")
    machine = latency_model.ASSUMED["gfx950"]._replace(launch_us=5.0, extra_launch_us=5.0, round_trip_us=0.5,
                                                       hbm_bytes_per_s=1e12)
    small = 2 * (5.0 + 1.0 + 2 * 64 * 18432 / 1e6)
    decode = 5.0 + max(12.0, 1.5 + (64 * 1024 * 576 + 64 * 18432 + 64 * 4 * PARTIAL) / 1e6)
    reduce = 5.0 + max(1.0, (64 * 4 * PARTIAL + 64 * 16384) / 1e6)
    assert latency_model.public_path_us(path, 64, 1024, machine) == pytest.approx(small + decode + reduce)
    one_split = latency_model.public_path_us(path, 256, 1024, machine)  # 256 // 256 = 1 split: no reduce, no partials
    assert one_split == pytest.approx(2 * (5.0 + 1.0 + 2 * 256 * 18432 / 1e6) + 5.0 + max(
        12.0, 1.5 + (256 * 1024 * 576 + 256 * 18432 + 256 * 16384) / 1e6))


def test_the_fit_recovers_the_machine_that_made_the_figures(monkeypatch):
    """Figures computed by the model itself at launch 5.5 us and 4.35 TB/s (grid points): the fit returns them,
    with no residual; a path not marked for the fit does not move it."""
    made = latency_model.ASSUMED["gfx950"]._replace(launch_us=5.5, extra_launch_us=5.5, round_trip_us=0.7,
                                                    atomic_us=0.7, hbm_bytes_per_s=4.35e12)
    paths = {}
    for name, (path, published, fitted, source) in prediction.PUBLIC_PATHS.items():
        made_up = {case: latency_model.public_path_us(path, *case, made) for case in published}
        if not fitted:
            made_up = {case: us * 3 for case, us in made_up.items()}
        paths[name] = (path, made_up, fitted, source)
    monkeypatch.setattr(prediction, "PUBLIC_PATHS", paths)
    launch_us, rate, residual = prediction.fit(0.7)
    assert (launch_us, rate) == pytest.approx((5.5, 4.35e12)) and residual == pytest.approx(0.0, abs=1e-12)


@pytest.fixture(scope="module")
def made():
    """What the tool makes from the committed compile report: {"fits", "machines", "table", "summary"}."""
    fits = {name: prediction.fit(us) for name, us in prediction.ROUND_TRIP_US.items()}
    machines = prediction.machines(fits)
    table = prediction.candidate_rows(latency_model.load_rows(REPORT), machines)
    return {"fits": fits, "machines": machines, "table": table, "summary": prediction.summary(table)}


def test_every_published_figure_is_within_30_percent_or_explained(made):
    fitted = made["machines"]["fitted"][0]
    missed = {name for name, _, _, _, error in prediction.public_errors(fitted) if abs(error) > prediction.MAX_ERROR}
    assert missed <= set(prediction.RESIDUAL_NOTES), missed
    fitted_paths = [name for name, entry in prediction.PUBLIC_PATHS.items() if entry[2]]
    assert len(fitted_paths) >= 2 and all(name in prediction.PUBLIC_PATHS for name in prediction.RESIDUAL_NOTES)


def test_the_dispatchs_table_is_the_tools_prediction(made):
    """submission.py's MI355X PREDICTION block is what --write-submission writes from the committed report: every
    candidate of every case, fastest first (regenerate: python tools/mi355x_prediction.py --write-submission
    --json results/mi355x_prediction.json)."""
    text = (ROOT / "submission.py").read_text()
    block = text.split(prediction.PREDICTION_BEGIN, 1)[1].split(prediction.PREDICTION_END, 1)[0]
    assert prediction.PREDICTION_BEGIN + block + prediction.PREDICTION_END == prediction.prediction_block(made["table"])
    for case, found in made["table"].items():
        assert len(found) >= 5 and {row["candidate"].split()[0] for row in found} >= {"scaled", "bf16", "once"}, case
        assert {row["candidate"].split()[-1] for row in found} >= {"combine", "fused"}, case


def test_the_committed_results_and_the_docs_quote_the_tools_table(made):
    """results/mi355x_prediction.json holds the table, fits and summary the tool makes now; docs/performance.md and
    the README quote its geomeans (the model's fastest per case at the fitted parameters, and its range)."""
    committed = json.loads(RESULTS.read_text())
    assert committed["geomean"] == made["summary"]["geomean"] and committed["cases"] == made["summary"]["cases"]
    assert {name: (fit["launch_us"], fit["hbm_bytes_per_s"]) for name, fit in committed["fits"].items()} == \
        {name: (launch, rate) for name, (launch, rate, _) in made["fits"].items()}
    fastest = made["summary"]["geomean"]["fastest_us"]
    quoted = f"{fastest['fitted']:.1f} us ({fastest['low']:.1f}-{fastest['high']:.1f})"
    for doc in ("docs/performance.md", "README.md"):
        assert quoted in (ROOT / doc).read_text(), (doc, quoted)
