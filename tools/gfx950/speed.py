"""Wave instructions a second of the emulator, before and after, in one run: submission.py's
Gluon split kernel (the form the MI355X dispatches at the shape) on the leaderboard's input.

    python tools/gfx950/speed.py                       # (64, 8192): main's executor, then this one
    python tools/gfx950/speed.py --write               # ... and results/gfx950_speed.json

"before" is the emulator of git revision --before (default main's 339ee55, the serial
executor: one workgroup after another), run on the first --serial-workgroups workgroups of
the grid (at ~8k wave instructions a second the whole grid would take half an hour);
"after" is this checkout's, on the whole grid, every detector on. Each runs in its own
process on the same input (saved once) and reports the wave instructions its launches
executed and the seconds they took.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "339ee55"
RESULT = ROOT / "results" / "gfx950_speed.json"


def measure(tools, data_path, batch, kv_len, workgroups, executor):
    """In this process: the Gluon variant's call on the saved input, with `tools` first on sys.path;
    -> {wave_instructions, seconds, rate, grid}."""
    sys.path.insert(0, str(tools))
    sys.path.insert(1, str(ROOT))
    import numpy as np
    import torch
    from gfx950 import executor as ex
    from gfx950 import mla
    sub = mla.mi355x_submission()
    data = torch.load(data_path, weights_only=False)
    device = torch.device("cpu")
    launch = sub.predicted_choice(batch, kv_len, device, 256)
    variant = next(v for v in sub.launch_variants(launch, device) if v.gluon)
    if workgroups:
        ids = ex.Dispatch.group_ids
        ex.Dispatch.group_ids = lambda self: ids(self)[:workgroups]
    if executor and "executor" in ex.Dispatch.__init__.__code__.co_varnames:
        os.environ["GFX950_EXECUTOR"] = executor
    runs = []
    run = ex.Dispatch.run

    def timed(self, order=None):
        start = time.perf_counter()
        run(self, order)
        runs.append({"kernel": self.kernel.name, "grid": list(self.grid), "seconds": time.perf_counter() - start,
                     "wave_instructions": self.instructions})
    ex.Dispatch.run = timed
    out = mla.run_variant(sub, variant, data, launch.num_splits)
    gluon = [r for r in runs if r["kernel"] == "_gluon_split_kernel"]
    seconds = sum(r["seconds"] for r in gluon)
    count = sum(r["wave_instructions"] for r in gluon)
    problem = None if workgroups else mla.wrong(sub, variant, data, out)
    return {"variant": variant.describe(), "num_splits": launch.num_splits, "grid": gluon[0]["grid"],
            "workgroups_run": workgroups or int(np.prod(gluon[0]["grid"])), "wave_instructions": count,
            "seconds": round(seconds, 2), "wave_instructions_per_s": round(count / seconds), "answer": (problem or "right") if not workgroups else "not checked (part of the grid)"}


def _checkout(revision, directory):
    """The tree of git `revision` into `directory` (-> its tools path)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(directory)], input=archive.stdout, check=True)
    return Path(directory) / "tools"


def _child(tools, data_path, args, workgroups, executor):
    command = [sys.executable, __file__, "--child", str(tools), "--data", str(data_path), "--batch", str(args.batch),
               "--kv", str(args.kv), "--workgroups", str(workgroups), "--executor", executor]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--kv", type=int, default=8192)
    parser.add_argument("--before", default=BEFORE, help="git revision of the emulator measured first")
    parser.add_argument("--serial-workgroups", type=int, default=2)
    parser.add_argument("--write", action="store_true", help=f"write {RESULT.relative_to(ROOT)}")
    parser.add_argument("--input", help="the input saved by torch.save (made and saved there when absent)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--workgroups", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--executor", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args.data, args.batch, args.kv, args.workgroups, args.executor)))
        return
    sys.path.insert(0, str(ROOT / "tools"))
    sys.path.insert(1, str(ROOT))
    import torch
    from gfx950 import mla
    with tempfile.TemporaryDirectory() as scratch:
        data_path = Path(args.input or Path(scratch) / "input.pt")
        if not data_path.exists():
            start = time.perf_counter()
            torch.save(mla.reference_input([args.kv] * args.batch, 1), data_path)
            print(f"input ({args.batch}, {args.kv}): {time.perf_counter() - start:.0f} s", flush=True)
        before = _child(_checkout(args.before, scratch), data_path, args, args.serial_workgroups, "serial")
        print("before", json.dumps(before), flush=True)
        after = _child(ROOT / "tools", data_path, args, 0, "lockstep")
        print("after ", json.dumps(after), flush=True)
    speedup = after["wave_instructions_per_s"] / before["wave_instructions_per_s"]
    print(f"speed-up: {speedup:.1f}x")
    if args.write:
        import numpy
        record = {"what": "emulator wave instructions a second on the Gluon split kernel, detectors on",
                  "device": f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared)",
                  "versions": {"python": platform.python_version(), "numpy": numpy.__version__,
                               "torch": torch.__version__},
                  "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "command": f"python tools/gfx950/speed.py --batch {args.batch} --kv {args.kv} --write",
                  "before": {"revision": args.before, **before}, "after": after, "speedup": round(speedup, 1)}
        RESULT.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
