"""Experiment: split-kernel variants timed side by side (alternating, runner-style), each
checked on its first call (self-check + check of the real output) by _TritonPlan."""
import sys, os, json, statistics, importlib.util, datetime
sys.path.insert(0, '.'); sys.path.insert(0, 'tools')
os.environ.setdefault("MLA_TUNE", "0")
import torch, triton
import submission as sub, reference

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m

CASES = {(4, 1024): 4217, (4, 8192): 4220, (32, 1024): 5412, (32, 8192): 5415, (64, 1024): 1357,
         (64, 8192): 1360, (256, 1024): 9823, (256, 8192): 9826}
forms = json.loads(sys.argv[1])  # {"4x1024": [[layout, bn, warps, splits, stages], ...]}
rounds = int(sys.argv[2]); out_path = sys.argv[3]
base = load('baseline/submission_79e9326.py', 'b79')
results = []
MODS = {}
for key, flist in forms.items():
    b, n = map(int, key.split('x'))
    data = reference.generate_input(b, 1, n, CASES.get((b, n), 7))
    q, kv, qo, kvi = data[0], data[1], data[2], data[3]
    packed, scales = sub._mxfp4_operands(kv, q.device)
    entries = [{"name": "79e9326", "run": lambda: base.custom_kernel(data)}]
    for layout, bn, w, splits, stages, *extra in flist:
        mod = [x for x in extra if x.endswith(".py")]  # another submission file
        flags = [x for x in extra if not x.endswith(".py")]  # Variant fields set True, e.g. "pdl"
        m = MODS.setdefault(mod[0], load(mod[0], "m%d" % len(MODS))) if mod else sub
        launch = m.make_launch(bn, w, splits, stages)
        plan = m._TritonPlan(b, launch, q.device, data[4]["sm_scale"])
        v = m.Variant(m.PTX_SM90, layout, 0, bn, w, stages, False, 0, launch.merge)
        v = v._replace(**{flag: True for flag in flags})
        plan.variants = [v]; plan.scratch = m.make_scratch(b, splits, q.device, plan.variants)
        name = (f"{m.LAYOUT_NAMES[layout]} t{bn} w{w} s{splits} st{stages}" + (f" {mod[0]}" if mod else "")
                + "".join(" " + flag for flag in flags))
        try:
            out = plan.run(q, packed, scales, qo, kvi)
            ok, msg = reference.check_implementation(data, out)
            if not ok: raise RuntimeError(msg)
        except Exception as e:
            print(key, name, "FAILED", sub.error_summary(e)[:300], flush=True); continue
        entries.append({"name": name, "run": lambda plan=plan: plan.run(q, packed, scales, qo, kvi)})
    for e in entries: e["us"] = []; e["run"]()  # each built and warm before the timed rounds
    for r in range(rounds):
        for e in entries[r % len(entries):] + entries[:r % len(entries)]:
            e["us"].append(sub.time_call_us(e["run"], q.device))
    ref_us = statistics.mean(entries[0]["us"])
    print(f"\n({b}, {n})", flush=True)
    rows = []
    for e in entries:
        m = statistics.mean(e["us"]); med = statistics.median(e["us"])
        print(f"  {e['name']:<36} {m:8.1f} mean {med:8.1f} median  79e9326/this {ref_us / m:.3f}", flush=True)
        rows.append({"name": e["name"], "mean_us": m, "median_us": med, "us": e["us"]})
    results.append({"batch": b, "kv_len": n, "rows": rows})
json.dump({"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": "python exp/tsweep.py " + " ".join(sys.argv[1:]), "device": torch.cuda.get_device_name(),
           "torch": torch.__version__, "triton": triton.__version__, "results": results}, open(out_path, "w"), indent=1)
