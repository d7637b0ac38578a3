"""Ahead-of-time compile report: every Triton kernel of submission.py, at the launch constants
its dispatch really uses, built for MI355X (gfx950) and H200 (sm_90) on this machine.

    python tools/compile_report.py [--target gfx950|sm90|all] [--json PATH]

Prints one row per (target, kernel, constants): registers (gfx950: VGPR/AGPR/SGPR), spills,
shared memory / LDS bytes and the matrix instructions in the code (MFMA on gfx950,
mma/wgmma on sm_90). No GPU needed: triton.compile with a GPUTarget, ptxas -v for sm_90.
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import submission as sub  # noqa: E402

# name -> (GPUTarget, compute units the dispatch plans for, submission platform)
TARGETS = {
    "gfx950": (GPUTarget("hip", "gfx950", 64), 256, "hip"),
    "sm90": (GPUTarget("cuda", 90, 32), 132, "cuda"),
}
LEADERBOARD_CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192),
                     (256, 1024), (256, 8192)]

SPLIT_SIGNATURE = {"ptr_table": "*i64", "q_ptr": "*bf16", "kv_ptr": "*u8", "scale_ptr": "*u8",
                   "qo_indptr_ptr": "*i32", "kv_indptr_ptr": "*i32", "out_ptr": "*bf16",
                   "part_acc_ptr": "*fp32", "part_ml_ptr": "*fp32", "total_kv": "i32",
                   "q_row_stride": "i32", "q_head_stride": "i32", "kv_row_stride": "i32",
                   "scale_row_stride": "i32", "qk_scale_log2": "fp32"}
COMBINE_SIGNATURE = {"ptr_table": "*i64", "out_ptr": "*bf16", "part_acc_ptr": "*fp32",
                     "part_ml_ptr": "*fp32"}
# Integer arguments that are multiples of 16 in the leaderboard layout (the runtime marks
# them divisible by 16, as it marks 16-byte aligned pointers); the padded scale stride (24)
# and the trimmed one (18) are not.
ALIGNED_INTS = {"total_kv", "q_row_stride", "q_head_stride", "kv_row_stride"}


def _attrs(fn, signature, backend):
    attrs = {}
    for name, kind in signature.items():
        spec = []
        if kind.startswith("*") or name in ALIGNED_INTS:
            spec.append(["tt.divisibility", 16])
        if kind.startswith("*") and backend == "hip":
            spec.append(["tt.pointer_range", 32])  # tensors under 2 GB: buffer loads
        if spec:
            attrs[(fn.arg_names.index(name),)] = spec
    return attrs


def kernel_variants(target_name):
    """Distinct (kernel, constexprs, options) the dispatch launches for the leaderboard cases."""
    _, num_sms, platform = TARGETS[target_name]
    seen = {}
    for batch, kv_len in LEADERBOARD_CASES:
        config = sub._triton_launch_config(batch, kv_len, num_sms, platform)
        num_splits, num_warps, num_stages = config.num_splits, config.num_warps, config.num_stages
        for from_table in (True, False):
            consts = {"NUM_SPLITS": num_splits, "BLOCK_N": config.block_n, "PTRS_FROM_TABLE": from_table,
                      "SCORES_DOT_SCALED": config.scores_dot_scaled, "PIN": sub.PIN_BY_PLATFORM[platform]}
            key = ("split", tuple(consts.items()), num_warps, num_stages)
            seen.setdefault(key, (sub._mla_split_kernel, SPLIT_SIGNATURE, consts, num_warps, num_stages))
            if num_splits > 1:
                consts = {"NUM_SPLITS": num_splits, "PTRS_FROM_TABLE": from_table}
                key = ("combine", tuple(consts.items()), 4, 1)
                seen.setdefault(key, (sub._mla_combine_kernel, COMBINE_SIGNATURE, consts, 4, 1))
    return list(seen.values())


def _ptxas_report(ptx: str) -> dict:
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.ptx"
        path.write_text(ptx)
        result = subprocess.run([get_ptxas(90).path, "-v", "--gpu-name=sm_90a", str(path),
                                 "-o", str(Path(tmp) / "k.cubin")], capture_output=True, text=True)
    text = result.stdout + result.stderr
    registers = re.search(r"Used (\d+) registers", text)
    spill_stores = re.search(r"(\d+) bytes spill stores", text)
    spill_loads = re.search(r"(\d+) bytes spill loads", text)
    return {"registers": int(registers[1]) if registers else None,
            "spill_bytes": int(spill_stores[1]) + int(spill_loads[1]) if spill_stores else None}


def _amdgcn_field(asm: str, field: str) -> int:
    match = re.search(rf"\.{field}:\s+(\d+)", asm)
    return int(match[1]) if match else 0


def compile_one(target_name, fn, signature, consts, num_warps, num_stages) -> dict:
    target = TARGETS[target_name][0]
    src = ASTSource(fn=fn, signature=signature, constexprs=consts,
                    attrs=_attrs(fn, signature, target.backend))
    compiled = triton.compile(src, target=target,
                              options={"num_warps": num_warps, "num_stages": num_stages})
    row = {"target": target_name, "kernel": fn.__name__, "num_warps": num_warps,
           "num_stages": num_stages, **{k: v for k, v in consts.items()}}
    if target.backend == "hip":
        asm = compiled.asm["amdgcn"]
        row.update(vgpr=_amdgcn_field(asm, "vgpr_count"), agpr=_amdgcn_field(asm, "agpr_count"),
                   sgpr=_amdgcn_field(asm, "sgpr_count"),
                   spills=_amdgcn_field(asm, "vgpr_spill_count") + _amdgcn_field(asm, "sgpr_spill_count"),
                   shared_bytes=_amdgcn_field(asm, "group_segment_fixed_size"),
                   matrix_ops=len(re.findall(r"^\s*v_mfma\w*", asm, re.M)),
                   matrix_kinds=sorted(set(re.findall(r"^\s*(v_mfma\w*)", asm, re.M))))
    else:
        ptx = compiled.asm["ptx"]
        report = _ptxas_report(ptx)
        row.update(registers=report["registers"], spills=report["spill_bytes"],
                   shared_bytes=compiled.metadata.shared,
                   matrix_ops=len(re.findall(r"^\s*(?:mma|wgmma)\.", ptx, re.M)),
                   matrix_kinds=sorted(set(re.findall(r"^\s*((?:mma|wgmma)\.[\w.]*)", ptx, re.M))))
    return row


def report(target_names) -> list:
    rows = []
    for name in target_names:
        for fn, signature, consts, num_warps, num_stages in kernel_variants(name):
            rows.append(compile_one(name, fn, signature, consts, num_warps, num_stages))
    return rows


def print_rows(rows):
    print(f"{'target':<7} {'kernel':<20} {'splits':>6} {'BN':>3} {'table':>5} {'warps':>5} "
          f"{'regs':>14} {'spills':>6} {'shared':>7} {'mma':>5}  instructions")
    for r in rows:
        regs = (f"v{r['vgpr']}/a{r['agpr']}/s{r['sgpr']}" if r["target"] == "gfx950" else str(r["registers"]))
        print(f"{r['target']:<7} {r['kernel']:<20} {r['NUM_SPLITS']:>6} {r.get('BLOCK_N', '-'):>3} "
              f"{str(r['PTRS_FROM_TABLE'])[0]:>5} {r['num_warps']:>5} {regs:>14} {r['spills']:>6} "
              f"{r['shared_bytes']:>7} {r['matrix_ops']:>5}  {','.join(r['matrix_kinds'])}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = report(list(TARGETS) if args.target == "all" else [args.target])
    print_rows(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
