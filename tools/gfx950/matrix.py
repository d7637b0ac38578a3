"""Every gfx950 variant the MI355X can pick, on every case, on the emulator (the full matrix;
CI runs one case per family and merge: tests/test_gfx950_submission.py).

    python tools/gfx950/matrix.py --write         # all of it (about an hour on one core), written
    python tools/gfx950/matrix.py --only gluon    # the variants whose description has "gluon", reported
    python tools/gfx950/matrix.py --json PATH     # the rows to PATH (any file; --write: the tracked ones)

Cases: one batch of uneven sequences (1, 7, 16, 129, 300 and 1000 tokens); the runner's
padded scale layout with 0xFF padding, and the trimmed one (the Gluon kernel reads whole
words of a scale row, so submission routes trimmed rows past it: not run there); each
merging variant at 2, 4 and 8 splits and FUSED's programs in ascending, reverse and
shuffled order. Every run has the detectors on. With --write (only then) it writes
results/gfx950_matrix.json with the fingerprint of the kernels it ran (kernels_fingerprint), and
submission.py's EMULATOR_PROVEN:
the variants every run of which was right (predicted_choice takes the latency model's fastest
of them). --only reruns some variants and keeps the others' rows, as long as no kernel changed
since they ran.
"""
import argparse
import datetime
import hashlib
import inspect
import json
import re
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import replace_block  # noqa: E402
from gfx950 import EmulationError, dispatch, mla  # noqa: E402

LENGTHS = [1, 7, 16, 129, 300, 1000]
LAYOUTS = [("padded", 0xFF), ("trimmed", None)]
SPLITS = {"direct": [1], "combine": [2, 4, 8], "fused": [2, 4, 8]}
ORDERS = {"fused": [None, "reverse", "shuffle:5"]}
RESULT = mla.ROOT / "results" / "gfx950_matrix.json"
PROVEN_BEGIN = "# --- BEGIN EMULATOR PROVEN ---"
PROVEN_END = "# --- END EMULATOR PROVEN ---"


def kernels_fingerprint(sub):
    """sha256 of what submission.py's gfx950 binaries are built from: every Triton and Gluon kernel's source,
    and the value of each module constant a kernel names. A kernel changed since the matrix ran shows here
    (tests/test_gfx950_submission.py holds results/gfx950_matrix.json to it); host code does not."""
    from triton.language import constexpr
    from triton.runtime.jit import KernelInterface  # a JITFunction, or an InterpretedFunction under TRITON_INTERPRET
    kernels = {name: inspect.getsource(obj.fn) for name, obj in vars(sub).items() if isinstance(obj, KernelInterface)}
    named = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", "".join(kernels.values())))
    values = {name: value.value if isinstance(value, constexpr) else value for name, value in vars(sub).items()}
    constants = {name: repr(value) for name, value in values.items()
                 if name in named and isinstance(value, (bool, int, float, str, tuple))}
    text = json.dumps([sorted(kernels.items()), sorted(constants.items())])
    return hashlib.sha256(text.encode()).hexdigest()


def proven(rows, variants):
    """The descriptions of `variants` whose every run in `rows` was right (a variant not run is not proven)."""
    verdicts = {}
    for row in rows:
        verdicts.setdefault(row["variant"], []).append(row["verdict"] == "right")
    return sorted(v.describe() for v in variants if verdicts.get(v.describe()) and all(verdicts[v.describe()]))


def proven_block(names):
    """submission.py's EMULATOR PROVEN block."""
    lines = [PROVEN_BEGIN, "# Written by tools/gfx950/matrix.py from results/gfx950_matrix.json: the split-kernel forms",
             "# (Variant.describe()) every run of which on the gfx950 emulator was right.", "EMULATOR_PROVEN = frozenset({"]
    return "\n".join(lines + [f"    {name!r}," for name in names] + ["})", PROVEN_END])


def write_proven(names, path=mla.ROOT / "submission.py"):
    replace_block(path, PROVEN_BEGIN, PROVEN_END, proven_block(names))


def cases(sub, variant):
    """(layout, padding, splits, order) of every run of one variant."""
    merge = sub.MERGE_NAMES[variant.merge]
    for layout, padding in LAYOUTS:
        if variant.gluon and layout == "trimmed":
            continue
        for splits in SPLITS[merge]:
            for order in ORDERS.get(merge, [None]):
                yield layout, padding, splits, order


def run(sub, variants, only=None):
    rows = []
    for variant in variants:
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
    parser.add_argument("--only", help="run the variants whose description contains this text; keep the others' rows")
    parser.add_argument("--write", action="store_true",
                        help="write results/gfx950_matrix.json and submission.py's EMULATOR_PROVEN (nothing else "
                             "writes them)")
    parser.add_argument("--json", metavar="PATH", help="write the rows to PATH")
    args = parser.parse_args()
    sub = mla.mi355x_submission()
    fingerprint = kernels_fingerprint(sub)
    variants = list(mla.mi355x_variants(sub))
    kept = []
    if args.only:
        before = json.loads(RESULT.read_text())
        if before.get("kernels_sha256") != fingerprint:
            sys.exit(f"{RESULT.name} ran other kernels than submission.py's now: "
                     "run the whole matrix (no --only)")
        kept = [row for row in before["runs"] if args.only not in row["variant"]]
    rows = kept + run(sub, variants, args.only)
    failed = [r for r in rows if r["verdict"] != "right"]
    document = json.dumps({"date": datetime.date.today().isoformat(), "device": "gfx950 emulator (CPU)",
                           "triton": "3.6.0", "command": " ".join(["python", *sys.argv]),
                           "kernels_sha256": fingerprint, "lengths": LENGTHS, "runs": rows}, indent=1) + "\n"
    names = proven(rows, variants)
    wrote = []
    if args.json:
        Path(args.json).write_text(document)
        wrote.append(args.json)
    if args.write:
        RESULT.write_text(document)
        write_proven(names)
        wrote += [RESULT.name, "submission.py's EMULATOR_PROVEN"]
    print(f"{len(rows) - len(failed)} of {len(rows)} runs right; {len(names)} of {len(variants)} variants proven; "
          + (f"wrote {', '.join(wrote)}" if wrote else "wrote nothing (--write: the results and EMULATOR_PROVEN)"))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
