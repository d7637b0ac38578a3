"""Ahead-of-time compile report: every Triton kernel variant submission.py can launch for the
leaderboard cases, built for MI355X (gfx950) and H200 (sm_90) on this machine, no GPU needed.

    python tools/compile_report.py [--target gfx950|sm90|all] [--json PATH]
    PYTHONPATH=/path/to/triton-3.6.0 python tools/compile_report.py ...   # another Triton

One row per (target, kernel, constants): the Triton version, registers (gfx950:
VGPR/AGPR/SGPR), spills, LDS / shared bytes, the matrix instructions, and for the split
kernel the instructions of its main loop (the largest backward branch's body) per KV
element converted, across the whole program:
  gfx950: VALU lane-ops per element = VALU instructions x 64 lanes x waves / (BLOCK_N x 576)
  sm90:   SASS instructions per element = instructions x 32 threads x warps / (BLOCK_N x 576)
The variants are every split-kernel variant the fallback order can reach (native
conversion, pinned portable, plain portable) at the tile shapes the dispatch uses for the
leaderboard cases (the prediction plus any measured table for that architecture).
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import submission as sub  # noqa: E402

# name -> (GPUTarget, architecture name in submission.py, compute units, platform)
TARGETS = {
    "gfx950": (GPUTarget("hip", "gfx950", 64), "gfx950", 256, "hip"),
    "sm90": (GPUTarget("cuda", 90, 32), "sm_90", 132, "cuda"),
}
LEADERBOARD_CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192),
                     (256, 1024), (256, 8192)]

SPLIT_SIGNATURE = {"q_ptr": "*bf16", "kv_ptr": "*u8", "scale_ptr": "*u8", "qo_indptr_ptr": "*i32",
                   "kv_indptr_ptr": "*i32", "out_ptr": "*bf16", "part_acc_ptr": "*fp32",
                   "part_ml_ptr": "*fp32", "total_kv": "i32", "num_splits": "i32",
                   "q_row_stride": "i32", "q_head_stride": "i32", "kv_row_stride": "i32",
                   "scale_row_stride": "i32", "qk_scale_log2": "fp32", "value_scale": "fp32"}
COMBINE_SIGNATURE = {"out_ptr": "*bf16", "part_acc_ptr": "*fp32", "part_ml_ptr": "*fp32",
                     "qk_scale_log2": "fp32", "value_scale": "fp32"}
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


def dispatched_launches(target_name):
    """The distinct SplitLaunch values the dispatch picks for the leaderboard cases."""
    _, arch, num_sms, _ = TARGETS[target_name]
    launches = {sub.default_launch(b, n, num_sms) for b, n in LEADERBOARD_CASES}
    for choice in sub.MEASURED_DISPATCH.get(arch, {}).values():
        if choice[0] == "triton":
            launches.add(sub.SplitLaunch(*choice[1:]))
    return sorted(launches)


def kernel_variants(target_name):
    """(kernel, signature, constexprs, num_warps, num_stages) for every variant to build."""
    _, arch, _, platform = TARGETS[target_name]
    seen = {}
    for launch in dispatched_launches(target_name):
        for variant in sub.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages):
            consts = {"BLOCK_N": variant.block_n, "CONVERT": variant.convert, "LAYOUT": variant.layout, "PIN": variant.pin,
                      "SPLIT_TAIL": variant.split_tail, "DIRECT_OUT": launch.num_splits == 1}
            seen.setdefault(("split", tuple(consts.items()), variant.num_warps, variant.num_stages),
                            (sub._mla_split_kernel, SPLIT_SIGNATURE, consts, variant.num_warps,
                             variant.num_stages))
        if launch.num_splits > 1:
            consts = {"NUM_SPLITS": launch.num_splits}
            seen.setdefault(("combine", tuple(consts.items())),
                            (sub._mla_combine_kernel, COMBINE_SIGNATURE, consts, 4, 1))
    return list(seen.values())


def _loop_body(instructions, backward_target):
    """The instructions of the largest region closed by a backward branch.

    instructions: (position, mnemonic, operands); backward_target(mnemonic, operands,
    position) -> the position the branch jumps back to, or None.
    """
    best = None
    for position, mnemonic, operands in instructions:
        target = backward_target(mnemonic, operands, position)
        if target is not None and target < position and (best is None or position - target > best[1] - best[0]):
            best = (target, position)
    return [m for p, m, _ in instructions if best and best[0] <= p <= best[1]]


def _amdgcn_report(asm, consts, num_warps):
    field = lambda name: int((re.search(rf"\.{name}:\s+(\d+)", asm) or [0, 0])[1])  # noqa: E731
    labels, instructions = {}, []
    for line in asm.splitlines():
        text = line.split(";")[0].strip()
        label = re.match(r"^(\.LBB\w+):", text)
        if label:
            labels[label[1]] = len(instructions)
        elif text and not text.startswith(".") and not text.endswith(":"):
            mnemonic, _, operands = text.partition(" ")
            instructions.append((len(instructions), mnemonic, operands.strip()))
    branch = lambda m, ops, pos: labels.get(ops) if m.startswith(("s_branch", "s_cbranch")) else None  # noqa: E731
    body = _loop_body(instructions, branch)
    valu = [m for m in body if m.startswith("v_") and not m.startswith("v_mfma")]
    row = {"vgpr": field("vgpr_count"), "agpr": field("agpr_count"), "sgpr": field("sgpr_count"),
           "spills": field("vgpr_spill_count") + field("sgpr_spill_count"),
           "shared_bytes": field("group_segment_fixed_size"),
           "matrix_ops": len(re.findall(r"^\s*v_mfma\w*", asm, re.M)),
           "matrix_kinds": sorted(set(re.findall(r"^\s*(v_mfma\w*)", asm, re.M)))}
    if "BLOCK_N" in consts:
        row.update(loop_valu=len(valu), loop_mfma=sum(m.startswith("v_mfma") for m in body),
                   loop_valu_per_element=round(len(valu) * 64 * num_warps / (consts["BLOCK_N"] * sub.QK_HEAD_DIM), 2),
                   loop_native_converts=sum(m == "v_cvt_scalef32_pk_bf16_fp4" for m in body),
                   loop_top_valu=Counter(valu).most_common(8))
    return row


def _sass_report(compiled, consts, num_warps):
    from triton.backends.nvidia.compiler import get_ptxas
    ptxas = Path(get_ptxas(90).path)
    with tempfile.TemporaryDirectory() as tmp:
        ptx, cubin = Path(tmp) / "k.ptx", Path(tmp) / "k.cubin"
        ptx.write_text(compiled.asm["ptx"])
        result = subprocess.run([str(ptxas), "-v", "--gpu-name=sm_90a", str(ptx), "-o", str(cubin)],
                                capture_output=True, text=True)
        sass = subprocess.run([str(ptxas.parent / "cuobjdump"), "-sass", str(cubin)],
                              capture_output=True, text=True).stdout
    text = result.stdout + result.stderr
    registers = re.search(r"Used (\d+) registers", text)
    spill_stores = re.search(r"(\d+) bytes spill stores", text)
    spill_loads = re.search(r"(\d+) bytes spill loads", text)
    instructions = []
    for line in sass.splitlines():
        match = re.search(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*)", line)
        if match:
            instructions.append((int(match[1], 16), match[2], match[3]))

    def branch(mnemonic, operands, position):
        target = re.search(r"0x([0-9a-f]+)", operands) if mnemonic == "BRA" else None
        return int(target[1], 16) if target else None

    body = _loop_body(instructions, branch)
    ptx_text = compiled.asm["ptx"]
    row = {"registers": int(registers[1]) if registers else None,
           "spills": int(spill_stores[1]) + int(spill_loads[1]) if spill_stores else None,
           "shared_bytes": compiled.metadata.shared,
           "matrix_ops": len(re.findall(r"^\s*(?:mma|wgmma)\.", ptx_text, re.M)),
           "matrix_kinds": sorted(set(re.findall(r"^\s*((?:mma|wgmma)\.[\w.]*)", ptx_text, re.M)))}
    if "BLOCK_N" in consts:
        row.update(loop_sass=len(body), loop_mma=sum(m.startswith("HMMA") for m in body),
                   loop_sass_per_element=round(len(body) * 32 * num_warps / (consts["BLOCK_N"] * sub.QK_HEAD_DIM), 2),
                   loop_top_sass=Counter(body).most_common(8))
    return row


def compile_one(target_name, fn, signature, consts, num_warps, num_stages) -> dict:
    target = TARGETS[target_name][0]
    src = ASTSource(fn=fn, signature=signature, constexprs=consts,
                    attrs=_attrs(fn, signature, target.backend))
    row = {"target": target_name, "triton": triton.__version__, "kernel": fn.__name__,
           "num_warps": num_warps, "num_stages": num_stages, **consts}
    if "CONVERT" in consts:
        row["convert"] = sub.CONVERT_NAMES[consts["CONVERT"]]
    try:
        compiled = triton.compile(src, target=target,
                                  options={"num_warps": num_warps, "num_stages": num_stages})
    except Exception as exc:  # noqa: BLE001 - a failed build is a row, reported and tested
        return {**row, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
    if target.backend == "hip":
        row.update(_amdgcn_report(compiled.asm["amdgcn"], consts, num_warps))
    else:
        row.update(_sass_report(compiled, consts, num_warps))
    return row


def report(target_names) -> list:
    return [compile_one(name, *variant) for name in target_names for variant in kernel_variants(name)]


def print_rows(rows):
    print(f"{'target':<7} {'triton':<6} {'kernel':<20} {'convert':<9} {'BN':>3} {'pin':>3} {'out':>3} "
          f"{'warps':>5} {'stg':>3} {'regs':>14} {'spills':>6} {'shared':>7} {'mma':>5} {'loop/elem':>9}  instructions")
    for r in rows:
        head = (f"{r['target']:<7} {r['triton']:<6} {r['kernel']:<20} {r.get('convert', '-'):<9} "
                f"{r.get('BLOCK_N', '-'):>3} {r.get('PIN', '-'):>3} {str(r.get('DIRECT_OUT', '-'))[0]:>3} "
                f"{r['num_warps']:>5} {r['num_stages']:>3}")
        if "error" in r:
            print(f"{head} BUILD FAILED: {r['error'].splitlines()[-1][:200]}")
            continue
        regs = f"v{r['vgpr']}/a{r['agpr']}/s{r['sgpr']}" if r["target"] == "gfx950" else str(r["registers"])
        per_element = r.get("loop_valu_per_element", r.get("loop_sass_per_element", "-"))
        print(f"{head} {regs:>14} {r['spills']:>6} {r['shared_bytes']:>7} {r['matrix_ops']:>5} "
              f"{per_element:>9}  {','.join(r['matrix_kinds'])}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = report(list(TARGETS) if args.target == "all" else [args.target])
    print_rows(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
