"""Every gfx950 variant the MI355X can pick, on every case, on the emulator (the full matrix;
CI runs one case per family and merge: tests/test_gfx950_submission.py).

    python tools/gfx950/matrix.py                 # all of it (about an hour on one core)
    python tools/gfx950/matrix.py --only gluon    # the variants whose description has "gluon"

Cases: one batch of uneven sequences (1, 7, 16, 129, 300 and 1000 tokens); the runner's
padded scale layout with 0xFF padding, and the trimmed one (the Gluon kernel reads whole
words of a scale row, so submission routes trimmed rows past it: not run there); each
merging variant at 2, 4 and 8 splits and FUSED's programs in ascending, reverse and
shuffled order. Every run has the detectors on. Writes results/gfx950_matrix.json.
"""
import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gfx950 import EmulationError, dispatch, mla  # noqa: E402

LENGTHS = [1, 7, 16, 129, 300, 1000]
LAYOUTS = [("padded", 0xFF), ("trimmed", None)]
SPLITS = {"direct": [1], "combine": [2, 4, 8], "fused": [2, 4, 8]}
ORDERS = {"fused": [None, "reverse", "shuffle:5"]}
RESULT = mla.ROOT / "results" / "gfx950_matrix.json"


def cases(sub, variant):
    """(layout, padding, splits, order) of every run of one variant."""
    merge = sub.MERGE_NAMES[variant.merge]
    for layout, padding in LAYOUTS:
        if variant.gluon and layout == "trimmed":
            continue
        for splits in SPLITS[merge]:
            for order in ORDERS.get(merge, [None]):
                yield layout, padding, splits, order


def run(only=None):
    sub = mla.mi355x_submission()
    rows = []
    for variant in mla.mi355x_variants(sub):
        if only and only not in variant.describe():
            continue
        for layout, padding, splits, order in cases(sub, variant):
            data = mla.reference_input(LENGTHS, seed=31, scale_layout=layout, scale_padding=padding)
            dispatch.install(sub, order=order)
            started = time.perf_counter()
            try:
                verdict = mla.wrong(sub, variant, data, mla.run_variant(sub, variant, data, splits))
            except EmulationError as exc:
                verdict = f"emulation stopped: {exc}"
            row = {"variant": variant.describe(), "layout": layout, "splits": splits, "order": order,
                   "seconds": round(time.perf_counter() - started, 1), "verdict": verdict or "right"}
            rows.append(row)
            print(f"{'ok  ' if verdict is None else 'FAIL'} {row['seconds']:6.1f} s  {variant.describe()}  "
                  f"{layout} splits={splits} order={order}" + ("" if verdict is None else f"\n      {verdict}"),
                  flush=True)
    dispatch.install(sub)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run the variants whose description contains this text")
    args = parser.parse_args()
    rows = run(args.only)
    failed = [r for r in rows if r["verdict"] != "right"]
    RESULT.write_text(json.dumps({"date": datetime.date.today().isoformat(), "device": "gfx950 emulator (CPU)",
                                  "triton": "3.6.0", "command": " ".join(["python", *sys.argv]),
                                  "lengths": LENGTHS, "runs": rows}, indent=1) + "\n")
    print(f"{len(rows) - len(failed)} of {len(rows)} runs right; wrote {RESULT.relative_to(mla.ROOT)}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
