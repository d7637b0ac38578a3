"""AOT static report for the gfx950 candidates (no GPU): builds each variant with Triton 3.6.0
(the runner's) and 3.9.0 (this machine's), one subprocess per Triton, and prints per variant
registers, LDS allocation, waves/SIMD and, for the main loop (the largest backward branch),
per KV element (token x 576 dims, summed over the workgroup's waves):
  LDS B    = sum of ds_read*/ds_write* widths x 64 lanes x waves (2x for read2/write2,
             ds_read_b64_tr_* = 8 B/lane, global/buffer ...lds loads = their width)
  MFMA clk = issue cycles of the v_mfma* per SIMD (16x16x32 bf16: 16; scaled 16x16x128: 32
             with an fp8 operand, 16 fp4 x fp4; others by MAC rate), reported raw and /4
  VALU     = VALU instructions (v_*, not v_mfma) x 64 lanes
and whether global/buffer loads stay in flight across the loop's back-edge (prefetch).
Static bound per case = max(HBM 0.0408, LDS/128, VALU/64 + MFMA/4) clk per element x
elements per CU (batch*kv*576/256) / 2.4 GHz.

    python explore/gfx950/aot_report.py [--tritons 3.6,3.9] [--only NAME,...] [--json out.json]
"""
import argparse
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TRITON_PATHS = {"3.6": str(ROOT / ".ci" / "triton-3.6.0"), "3.9": None}
CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192), (256, 1024), (256, 8192)]
CUS, CLOCK_HZ = 256, 2.4e9
HBM_CLK_PER_ELEM = 0.0408  # 306 B/token / 576 dims = 0.531 B at 13.0 B/clk/CU
LDS_B_PER_CLK = 128.0
VALU_LANES_PER_CLK = 64.0
SIMDS = 4

# name -> (kernel module, kernel, constexprs, num_warps, num_stages)
VARIANTS = {
    "baseline": ("submission", "_mla_split_kernel",
                 {"BLOCK_N": 64, "CONVERT": 2, "LAYOUT": 0, "PIN": 0, "DIRECT_OUT": False}, 4, 1),
}
for _bn, _w, _st in ((64, 8, 1), (64, 8, 2), (128, 8, 2), (32, 4, 1)):
    for _rope in (0, 2):
        VARIANTS[f"s_bn{_bn}_w{_w}_r{_rope}_v2" + ("_st2" if _st == 2 else "")] = (
            "kernels", "mla_split_scaled", {"BLOCK_N": _bn, "ROPE": _rope, "VALUES": 2, "CONVERT": 2}, _w, _st)
for _bn, _w in ((64, 4), (128, 4), (128, 8), (64, 2)):
    for _rope in (0, 1, 2):
        for _values in (0, 1, 2):
            VARIANTS[f"s_bn{_bn}_w{_w}_r{_rope}_v{_values}"] = (
                "kernels", "mla_split_scaled",
                {"BLOCK_N": _bn, "ROPE": _rope, "VALUES": _values, "CONVERT": 2}, _w, 1)

SIGNATURES = {
    "_mla_split_kernel": {"q_ptr": "*bf16", "kv_ptr": "*u8", "scale_ptr": "*u8", "qo_indptr_ptr": "*i32",
                          "kv_indptr_ptr": "*i32", "out_ptr": "*bf16", "part_acc_ptr": "*fp32",
                          "part_ml_ptr": "*fp32", "total_kv": "i32", "num_splits": "i32",
                          "q_row_stride": "i32", "q_head_stride": "i32", "kv_row_stride": "i32",
                          "scale_row_stride": "i32", "qk_scale_log2": "fp32", "value_scale": "fp32"},
    "mla_split_scaled": {"q8_ptr": "*u8", "qs_ptr": "*u8", "kv_ptr": "*u8", "scale_ptr": "*u8",
                         "qo_indptr_ptr": "*i32", "kv_indptr_ptr": "*i32", "part_acc_ptr": "*fp32",
                         "part_ml_ptr": "*fp32", "q_bf16_ptr": "*bf16", "total_kv": "i32",
                         "num_splits": "i32", "kv_row_stride": "i32", "scale_row_stride": "i32",
                         "qk_scale_log2": "fp32"},
}
ALIGNED_INTS = {"total_kv", "q_row_stride", "q_head_stride", "kv_row_stride"}


# ---------------------------------------------------------------------------------------
# worker: runs under one Triton, builds, dumps asm + metadata
# ---------------------------------------------------------------------------------------

def worker(names, out_dir):
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(HERE))
    import importlib
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    target = GPUTarget("hip", "gfx950", 64)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        module, kname, consts, warps, stages = VARIANTS[name]
        fn = getattr(importlib.import_module(module), kname)
        sig = SIGNATURES[kname]
        attrs = {}
        for arg, kind in sig.items():
            spec = []
            if kind.startswith("*") or arg in ALIGNED_INTS:
                spec.append(["tt.divisibility", 16])
            if kind.startswith("*"):
                spec.append(["tt.pointer_range", 32])
            if spec:
                attrs[(fn.arg_names.index(arg),)] = spec
        meta = {"name": name, "triton": triton.__version__, "num_warps": warps, "num_stages": stages,
                "consts": consts}
        try:
            src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
            compiled = triton.compile(src, target=target, options={"num_warps": warps, "num_stages": stages})
            (out_dir / f"{name}.s").write_text(compiled.asm["amdgcn"])
            meta["shared"] = compiled.metadata.shared
        except Exception as exc:  # noqa: BLE001 - a failed build is a row
            meta["error"] = f"{type(exc).__name__}: {exc}"[-1500:]
        (out_dir / f"{name}.json").write_text(json.dumps(meta))
        print(name, "error" if "error" in meta else "ok", flush=True)


# ---------------------------------------------------------------------------------------
# analysis (any Python)
# ---------------------------------------------------------------------------------------

def _lds_bytes(m):
    """Bytes per lane one ds_* / ...lds instruction moves through LDS (0: not an LDS access)."""
    if m.startswith(("ds_read", "ds_write", "ds_load", "ds_store")):
        if "addtid" in m:
            return 4
        w = re.search(r"_(?:b|u|i)(\d+)", m)
        if m.startswith(("ds_read_b64_tr", "ds_load_tr")):
            return 8
        if m.startswith("ds_read_b96_tr"):
            return 12
        bits = int(w[1]) if w else 32
        return bits // 8 * (2 if ("read2" in m or "write2" in m) else 1)
    if m.startswith(("buffer_load", "global_load")) and "lds" in m:
        w = re.search(r"dwordx(\d)", m)
        return 4 * (int(w[1]) if w else 1)
    return 0


def _mfma_cycles(m, ops):
    """Issue cycles per SIMD of one MFMA (see module doc)."""
    shape = re.search(r"(\d+)x(\d+)x(\d+)", m)
    M, N, K = (int(x) for x in shape.groups())
    macs = M * N * K
    if "f8f6f4" in m:
        cbsz = re.search(r"cbsz:(\d)", ops)
        blgp = re.search(r"blgp:(\d)", ops)
        a_fp4 = bool(cbsz) and cbsz[1] == "4"
        b_fp4 = bool(blgp) and blgp[1] == "4"
        return macs / (2048 if (a_fp4 and b_fp4) else 1024)
    if "bf16" in m or "f16" in m:
        return macs / 512
    if re.search(r"_(fp8|bf8|i8)", m):
        return macs / 1024
    return macs / 128  # f32


def _regs(text):
    """VGPR numbers named by one operand (v7, v[8:11]); AGPRs as 1000+n."""
    out = set()
    for kind, lo, hi in re.findall(r"\b([va])\[(\d+):(\d+)\]", text):
        out |= {int(x) + (1000 if kind == "a" else 0) for x in range(int(lo), int(hi) + 1)}
    for kind, n in re.findall(r"\b([va])(\d+)\b", text):
        out.add(int(n) + (1000 if kind == "a" else 0))
    return out


def analyse(asm, meta):
    field = lambda n: int((re.search(rf"\.{n}:\s+(\d+)", asm) or [0, 0])[1])  # noqa: E731
    labels, ins = {}, []
    for line in asm.splitlines():
        text = line.split(";")[0].strip()
        lab = re.match(r"^(\.LBB\w+):", text)
        if lab:
            labels[lab[1]] = len(ins)
        elif text and not text.startswith(".") and not text.endswith(":"):
            m, _, ops = text.partition(" ")
            ins.append((m, ops.strip()))
    best = None
    for pos, (m, ops) in enumerate(ins):
        if m.startswith(("s_branch", "s_cbranch")) and ops in labels and labels[ops] < pos:
            body_mfma = sum(x.startswith("v_mfma") for x, _ in ins[labels[ops]:pos + 1])
            if best is None or body_mfma > best[2]:
                best = (labels[ops], pos, body_mfma)
    warps = meta["num_warps"]
    bn = meta["consts"]["BLOCK_N"]
    elems = bn * 576
    arch_v = int((re.search(r"; NumVgprs: (\d+)", asm) or [0, 0])[1])
    row = {"vgpr": arch_v, "agpr": field("agpr_count"), "regs_total": field("vgpr_count"),
           "sgpr": field("sgpr_count"),
           "spills": field("vgpr_spill_count") + field("sgpr_spill_count"), "lds_alloc": meta["shared"],
           "mfma_kinds": sorted(set(re.findall(r"^\s*(v_mfma\w*)", asm, re.M)))}
    regs_g = -(-row["regs_total"] // 8) * 8
    by_regs = min(8, 512 // max(regs_g, 1))
    wg_per_cu = (160 * 1024) // meta["shared"] if meta["shared"] else 99
    by_lds = wg_per_cu * warps // SIMDS
    row["waves_simd"] = min(by_regs, by_lds) if min(by_regs, by_lds) > 0 else 0
    row["waves_by"] = f"regs {by_regs}, lds {by_lds}"
    if best is None:
        row["loop"] = None
        return row
    body = ins[best[0]:best[1] + 1]
    lds = Counter()
    mfma = Counter()
    mfma_clk = 0.0
    valu = Counter()
    for m, ops in body:
        b = _lds_bytes(m)
        if b:
            lds[m] += 1
        if m.startswith("v_mfma"):
            key = m + (" fp4xfp4" if "cbsz:4" in ops and "blgp:4" in ops else
                       (" (fp8 operand)" if "f8f6f4" in m else ""))
            mfma[key] += 1
            mfma_clk += _mfma_cycles(m, ops)
        elif m.startswith("v_"):
            valu[m] += 1
    lds_bytes = sum(_lds_bytes(m) * n for m, n in lds.items())
    # in-flight analysis: vmcnt counts global/buffer loads and stores in order (gfx9)
    outstanding = []  # 'L' load / 'S' store
    mfma_under_load = 0
    for m, ops in body:
        if m.startswith(("global_load", "buffer_load")):
            outstanding.append("L")
        elif m.startswith(("global_store", "buffer_store", "global_atomic", "buffer_atomic")):
            outstanding.append("S")
        elif m == "s_waitcnt" and "vmcnt" in ops:
            n = int(re.search(r"vmcnt\((\d+)\)", ops)[1])
            outstanding = outstanding[len(outstanding) - n:] if n < len(outstanding) else outstanding
            if n == 0:
                outstanding = []
        elif m.startswith("v_mfma") and "L" in outstanding:
            mfma_under_load += 1
    # overlap: MFMAs issued between each KV/scale load and the first instruction that reads
    # its destination (following the back-edge): >= 1 means the load runs under matrix work
    overlaps = []
    nbody = len(body)
    for i, (m, ops) in enumerate(body):
        if not m.startswith(("global_load", "buffer_load")) or "lds" in m:
            continue
        dst = _regs(ops.split(",")[0])
        n_mfma = 0
        for step in range(1, 2 * nbody):
            m2, ops2 = body[(i + step) % nbody]
            parts = [p.strip() for p in ops2.split(",")] if ops2 else []
            writes_first = not m2.startswith(("ds_write", "buffer_store", "global_store", "s_"))
            reads = set().union(*[_regs(p) for p in (parts[1:] if writes_first else parts)]) if parts else set()
            if dst & reads:
                break
            if m2.startswith("v_mfma"):
                n_mfma += 1
            if writes_first and parts and dst & _regs(parts[0]):
                break
        overlaps.append((m, n_mfma, step >= nbody - i))
    loads_in_loop = sum(m.startswith(("global_load", "buffer_load")) for m, _ in body)
    row["loop"] = {
        "instructions": len(body),
        "lds_per_elem": lds_bytes * 64 * warps / elems,
        "lds_ops_per_wave": dict(lds),
        "mfma_per_wave": dict(mfma),
        "mfma_clk_per_elem_raw": mfma_clk * warps / elems,
        "valu_per_elem": sum(valu.values()) * 64 * warps / elems,
        "valu_top": valu.most_common(10),
        "loads_per_wave": loads_in_loop,
        "loads_in_flight_at_backedge": outstanding.count("L"),
        "mfma_issued_with_loads_in_flight": mfma_under_load,
        "load_overlap": overlaps,
        "prefetch": any(n > 0 and wrapped for _, n, wrapped in overlaps) or outstanding.count("L") > 0,
        "loads_under_mfma": sum(n > 0 for _, n, _ in overlaps),
    }
    L = row["loop"]
    issue = L["valu_per_elem"] / VALU_LANES_PER_CLK + L["mfma_clk_per_elem_raw"] / SIMDS
    per_elem = max(HBM_CLK_PER_ELEM, L["lds_per_elem"] / LDS_B_PER_CLK, issue)
    L["clk_per_elem"] = {"hbm": HBM_CLK_PER_ELEM, "lds": L["lds_per_elem"] / LDS_B_PER_CLK, "issue": issue}
    L["bound_us"] = {f"{b},{n}": per_elem * b * n * 576 / CUS / CLOCK_HZ * 1e6 for b, n in CASES}
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tritons", default="3.6,3.9")
    ap.add_argument("--only", default="")
    ap.add_argument("--json", default=str(HERE / "aot_results.json"))
    ap.add_argument("--worker", nargs=2, metavar=("NAMES", "OUTDIR"))
    ap.add_argument("--no-build", action="store_true", help="analyse the asm already in asm/")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0].split(","), args.worker[1])
        return 0
    names = [n for n in (args.only.split(",") if args.only else VARIANTS) if n]
    results = []
    for tv in args.tritons.split(","):
        out_dir = HERE / "asm" / tv
        if not args.no_build:
            env = dict(os.environ)
            env.pop("TRITON_INTERPRET", None)
            if TRITON_PATHS[tv]:
                env["PYTHONPATH"] = TRITON_PATHS[tv] + os.pathsep + env.get("PYTHONPATH", "")
            for n in names:  # one process per variant: an LLVM error aborts the process
                (out_dir / f"{n}.json").unlink(missing_ok=True)
                r = subprocess.run([sys.executable, __file__, "--worker", n, str(out_dir)], env=env,
                                   capture_output=True, text=True)
                if not (out_dir / f"{n}.json").exists():
                    out_dir.mkdir(parents=True, exist_ok=True)
                    (out_dir / f"{n}.json").write_text(json.dumps({
                        "name": n, "triton": tv, "num_warps": VARIANTS[n][3], "consts": VARIANTS[n][2],
                        "error": (r.stderr or r.stdout)[-1500:] or f"worker exit {r.returncode}"}))
        for n in names:
            mp = out_dir / f"{n}.json"
            if not mp.exists():
                continue
            meta = json.loads(mp.read_text())
            row = {"name": n, "triton": meta["triton"], "warps": meta["num_warps"], **meta["consts"]}
            if "error" in meta:
                row["error"] = meta["error"]
            else:
                row.update(analyse((out_dir / f"{n}.s").read_text(), meta))
            results.append(row)
    print_table(results)
    Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def print_table(rows):
    print(f"{'variant':<26} {'tri':<5} {'regs v/a/tot':>12} {'sp':>3} {'LDS':>6} {'w/S':>3} {'LDS B':>6} "
          f"{'VALU':>5} {'MFMA':>6} {'pf':>7} {'b256x8k':>7} {'b4x1k':>6} {'b32x1k':>6} {'b64x8k':>6}  mfma/wave")
    for r in rows:
        head = f"{r['name']:<26} {r['triton'][:5]:<5}"
        if "error" in r:
            print(f"{head} BUILD FAILED: {r['error'].strip().splitlines()[-1][:150]}")
            continue
        L = r.get("loop")
        if not L:
            print(f"{head} no loop found")
            continue
        b = L["bound_us"]
        print(f"{head} {r['vgpr']:>4}/{r['agpr']:>3}/{r['regs_total']:<3} {r['spills']:>3} {r['lds_alloc']:>6} {r['waves_simd']:>3} "
              f"{L['lds_per_elem']:>6.2f} {L['valu_per_elem']:>5.2f} {L['mfma_clk_per_elem_raw'] / 4:>6.4f} "
              f"{('y' if L['prefetch'] else 'n') + str(L['loads_under_mfma']) + '/' + str(L['loads_per_wave']):>7} {b['256,8192']:>7.1f} {b['4,1024']:>6.2f} "
              f"{b['32,1024']:>6.2f} {b['64,8192']:>6.1f}  {L['mfma_per_wave']}")


if __name__ == "__main__":
    sys.exit(main())
