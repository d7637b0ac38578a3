"""Time several choices of the same case side by side, as the runner times a call, alternating.

    python tools/sweep.py [--cases 4x1024,...] [--choices SPEC] [--baseline FILE ...] [--rounds N] [--json PATH]

Per case: one input (reference.generate_input with the leaderboard seed); each entry -- a
choice of this submission (SPEC below) or, with --baseline, another submission file's own
dispatch -- makes one checked call (the runner's rule, and every element within
8e-3 + 2e-2 |float32 attention on the same MXFP4 data|, the SCALED family's with its own
e4m3 Q), then --rounds rounds in which every entry makes one timed call (cache flush queued,
device events around the call): the order of entries rotates each round, so the H200's drift
falls on all of them alike. Prints per case each entry's mean and median us and its ratio to
the first entry, and writes the rows to --json with device, versions, date and command.

SPEC: 'table' (this file's dispatch for the case), 'aiter', or semicolon-separated launches such as
'triton,64,4,16,2,0,2' (block_n, num_warps, num_splits, num_stages, family, merge of a Launch; 'same' in a
field copies the table choice's).
"""
import argparse
import datetime
import importlib.util
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from common import parse_cases, use_interpreter_without_gpu  # noqa: E402

use_interpreter_without_gpu()



def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_choices(spec, table_choice):
    """SPEC -> Launches for one case: 'table', 'aiter', or 'triton,' then block_n, num_warps, num_splits,
    num_stages, family, merge ('same' copies the table choice's field)."""
    launch_type, names = type(table_choice), ("block_n", "num_warps", "num_splits", "num_stages", "scores", "merge")
    choices = []
    for item in spec.split(";"):
        item = item.strip()
        if item in ("table", "aiter"):
            choices.append(table_choice if item == "table" else launch_type(path="aiter"))
            continue
        fields = item.split(",")[1:]
        choices.append(launch_type(**{name: getattr(table_choice, name) if field == "same" else int(field)
                                      for name, field in zip(names, fields)}))
    return choices


def checked(sub, data, out, scaled):
    import reference
    ok, message = reference.check_implementation(data, out)
    q_for_exact = sub.quantize_q_reference(data[0])[2] if scaled else data[0]
    exact = reference.exact_attention((q_for_exact, *data[1:]))
    err = (out.float() - exact).abs()
    within = bool((err <= 8e-3 + 2e-2 * exact.abs()).all())
    return ok and within, message if not ok else ("" if within else f"max error {err.max().item():.3g}")


def sweep_case(sub, baselines, batch, kv_len, seed, spec, rounds):
    import reference
    data = reference.generate_input(batch, 1, kv_len, seed)
    device = data[0].device
    entries = []
    for choice in parse_choices(spec, sub.choose(batch, kv_len, device)):
        def run(choice=choice):
            return sub._run_choice(choice, data[0], data[1], data[2], data[3], batch, data[4]["sm_scale"])
        entries.append({"name": str(choice), "choice": str(choice), "run": lambda r=run: r()[0],
                        "plan": run})
    for baseline in baselines:
        entries.append({"name": "baseline " + baseline.__name__, "choice": None,
                        "run": lambda baseline=baseline: baseline.custom_kernel(data), "plan": None})
    for entry in entries:
        try:
            out = entry["plan"]()[0] if entry["plan"] else entry["run"]()
            plan = entry["plan"]()[1] if entry["plan"] else None
            variant = getattr(plan, "variant", None)
            entry["ran"] = variant.describe() if variant is not None else None
            if plan is not None and plan.variant != plan.variants[0]:
                entry["error"] = f"fell back: {plan.failures}"
                continue
            scaled = variant is not None and variant.scores != sub.BF16_SCORES  # SCALED and ONCE: e4m3 Q
            ok, message = checked(sub, data, out, scaled)
            entry["checked"] = ok
            if not ok:
                entry["error"] = message
        except Exception as exc:  # noqa: BLE001 - reported, never timed
            entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
    alive = [e for e in entries if "error" not in e]
    for entry in alive:
        entry["us"] = []
    for index in range(rounds):
        order = alive[index % len(alive):] + alive[:index % len(alive)] if alive else []
        for entry in order:
            entry["us"].append(sub.time_call_us(entry["run"], device))
    rows = []
    reference_us = statistics.mean(alive[0]["us"]) if alive else None
    for entry in entries:
        row = {k: v for k, v in entry.items() if k not in ("run", "plan")}
        if "us" in entry:
            row.update(mean_us=statistics.mean(entry["us"]), median_us=statistics.median(entry["us"]),
                       ratio_to_first=statistics.mean(entry["us"]) / reference_us)
        rows.append(row)
    return {"batch": batch, "kv_len": kv_len, "rows": rows}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", help="BATCHxKV_LEN,... (default: the 8 leaderboard cases)")
    parser.add_argument("--choices", default="table", help="SPEC (see the module docstring)")
    parser.add_argument("--baseline", action="append", default=[],
                        help="another submission file, timed with its own dispatch (repeatable)")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--json")
    options = parser.parse_args(argv)
    os.environ.setdefault("MLA_TUNE", "0")
    import submission as sub
    import triton
    baselines = [load_module(path, Path(path).stem) for path in options.baseline]
    results = []
    for batch, kv_len, seed in parse_cases(options.cases):
        result = sweep_case(sub, baselines, batch, kv_len, seed, options.choices, options.rounds)
        results.append(result)
        print(f"\n({batch}, {kv_len})", flush=True)
        for row in result["rows"]:
            timing = (f"{row['mean_us']:8.1f} mean {row['median_us']:8.1f} median  x{row['ratio_to_first']:.3f}"
                      if "mean_us" in row else f"not timed: {row.get('error')}")
            print(f"  {row['name']:<40} {timing}", flush=True)
    if options.json:
        record = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "command": "python tools/sweep.py " + " ".join(sys.argv[1:]),
                  "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
                  "torch": torch.__version__, "triton": triton.__version__, "results": results}
        Path(options.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
