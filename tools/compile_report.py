"""Ahead-of-time compile report: every Triton kernel variant submission.py can launch for the
leaderboard cases (and the aiter path's fp8 quantization of Q, _q_fp8_kernel, in every form
q8_launches picks), built for MI355X (gfx950) and H200 (sm_90) on this machine, no GPU needed,
and a static time bound per leaderboard case for the variant the dispatch picks there.

    python tools/compile_report.py [--target gfx950|sm90|all] [--json PATH]
    python tools/compile_report.py --triton installed ...     # this Python's own Triton
    python tools/compile_report.py --triton DIR ...           # the Triton in DIR
    python tools/compile_report.py --candidates --json PATH   # the tuning candidates' other forms
    python tools/compile_report.py FILE [--cases 2x300] ...   # another submission file

FILE (default: this repository's submission.py): a file shaped like ours (a fork) gets this
report; any other (a competitor's own) gets the gfx950 builds its custom_kernel launches on
--cases, run on the gfx950 emulator (registers, spills, LDS, occupancy, matrix instructions,
instruction forms, wave instructions, each case's check).

It builds with the runner's Triton 3.6.0 unless --triton names another (tools/common.py,
run_with_triton: RUNNER_TRITON_DIR or .ci/triton-3.6.0, installed there on first use); its
first line names the Triton it built with.

One row per (target, kernel, constants): the Triton version, registers, spills, the LDS /
shared memory the launch allocates (compiled.metadata.shared: Triton allocates LDS
dynamically, so the ISA's group_segment_fixed_size reads 0 on AMD), occupancy, the matrix
instructions, and for the split kernels the main loop (the largest backward branch's body)
per KV element (token x 576 dims), counted across the whole program (all its waves/warps):
  gfx950: VALU lane-ops = VALU instructions (v_*, not v_mfma) x 64 lanes x waves / elements
          LDS bytes     = each ds_read*/ds_write* width x 64 lanes x waves (read2/write2 and
                          *2st64 twice their width, ds_read_b64_tr_b16 8 B per lane; global/
                          buffer loads straight to LDS by their width) / elements
          MFMA cycles   = SIMD cycles of the loop's v_mfma* (MFMA_CYCLES) x waves / elements
          prefetch      = a global/buffer load of the loop is still in flight at the
                          back-edge, or its result is first read in the next iteration with
                          matrix instructions issued in between (the next tile's loads go out
                          before the current tile's MFMAs)
  sm90:   SASS instructions = instructions x 32 threads x warps / elements
          shared bytes      = each LDS/STS/LDSM/LDGSTS width x 32 threads x warps / elements
  latency       = tools/isa_latency.py's counts of the build (row["latency"], the second table):
                  global round trips on one wave's chain from the start to the first matrix
                  instruction and per steady-state pass of the loop, the load groups per
                  pass, bytes of global loads outstanding per CU (SM) at the loop's matrix
                  instructions at the occupancy below, barriers per pass (gfx950 from the
                  amdgcn text, sm90 from the SASS control words' scoreboards)
Occupancy: gfx950 waves per SIMD = workgroups per CU x warps / 4, workgroups per CU limited
by registers (512 per lane per SIMD, at most 8 waves per SIMD) and LDS (160 KB per CU);
sm90 programs per SM limited by registers (65536 per SM), shared memory (228 KB per SM,
1 KB reserved per program) and 64 warps per SM.

Static bound of one case = max(HBM, LDS, issue) clock cycles per element x elements per CU
(batch x kv_len x 576 / CUs) / clock (the constants below; gfx950 from
AMD's CDNA4 documentation and its dense peaks, a prediction: nothing here ran on an MI355X):
  HBM   = 306 B per token / 576 dims = 0.531 B per element at the HBM bytes per clock per CU
  LDS   = LDS (shared) bytes per element / 128 B per clock per CU (SM)
  issue = gfx950: VALU lane-ops / 64 + MFMA SIMD cycles / 4 SIMDs (one instruction stream
          per wave issues both); sm90: SASS warp-instructions / 4 schedulers per SM
The case table gives, per leaderboard case, the variant the dispatch picks (submission.choose
with the target's architecture: the measured table where it has the case, else
predicted_choice; gfx950 also the BF16 family's default launch for comparison) and its bound.
sm_90 builds the portable forms the H200 runs (the BF16 family's portable conversion: no
NVIDIA-only form is left in submission.py).

gfx950 registers: the metadata's .vgpr_count is the TOTAL of the unified register file the
wave allocates: the arch VGPRs rounded up to 4 (.amdhsa_accum_offset) plus the AGPRs
(.agpr_count), e.g. NumVgprs 251 -> accum_offset 252, + 32 AGPRs = .vgpr_count 284 =
TotalNumVgprs = .amdhsa_next_free_vgpr; without AGPRs it equals NumVgprs. Checked for every
build (regs_check), occupancy uses it. The rows give vgpr (arch, the ISA's NumVgprs),
agpr and regs_total (.vgpr_count).
"""
import argparse
import contextlib
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
if __name__ == "__main__":  # before triton is imported
    from common import run_with_triton
    run_with_triton(__file__)


def _load_submission(path):
    """The submission file at `path` imported as the module `submission` (the one the report reads)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("submission", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["submission"] = module
    spec.loader.exec_module(module)
    return module


def _file_argument(argv):
    """The FILE of the command line (the one argument that is not an option or an option's value)."""
    taking_value = {"--target", "--json", "--triton", "--cases"}
    found, skip = [], False
    for word in argv:
        if skip or word.startswith("-"):
            skip = word in taking_value
            continue
        found.append(word)
    return found[0] if found else None


if __name__ == "__main__" and _file_argument(sys.argv[1:]):
    _load_submission(_file_argument(sys.argv[1:]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import submission as sub  # noqa: E402
from isa_latency import (_waitcnt, isa_latency_counts, loop_region, parse_amdgcn, release_order,  # noqa: E402
                         sass_latency_counts)
from fence_order import fused_fences  # noqa: E402
from common import add_triton_option, parse_cases  # noqa: E402
from lds_banks import BANK_MODELS, BOUND_MODELS, kernarg_offsets, lds_bank_counts, ring_hazards  # noqa: E402
from gfx950.asm import instruction_forms  # noqa: E402

# name -> (GPUTarget, architecture name in submission.py, compute units, platform)
TARGETS = {
    "gfx950": (GPUTarget("hip", "gfx950", 64), "gfx950", 256, "hip"),
    "sm90": (GPUTarget("cuda", 90, 32), "sm_90", 132, "cuda"),
}
LEADERBOARD_CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192),
                     (256, 1024), (256, 8192)]
ROOT = Path(__file__).resolve().parents[1]
HBM_BYTES_PER_ELEMENT = 306 / 576  # 288 B of fp4 codes + 18 B of e8m0 scales per token

# The machines' constants for the static bound.
#   constant                     MI355X (gfx950)            H200 (sm_90)
#   compute units                256 CUs                    132 SMs
#   clock                        2.4 GHz                    1.98 GHz
#   HBM                          8 TB/s (13.0 B/clk/CU)     the copy rate measured on the H200
#                                                           (read + write: 4.27 TB/s, the floors of
#                                                           results/h200_eval_benchmark_v10_table
#                                                           .json; datasheet 4.8 TB/s)
#   LDS / shared memory          128 B/clk/CU (CDNA3's;     128 B/clk/SM
#                                CDNA4 may read faster)
#   issue                        64 VALU lane-ops/clk/CU;   4 warp-instructions/clk/SM
#                                MFMA cycles / 4 SIMDs
#   registers                    512 per lane per SIMD,     65536 per SM, 64 warps per SM
#                                at most 8 waves per SIMD
#   LDS / shared capacity        160 KB per CU              228 KB per SM (1 KB per program
#                                                           reserved)
MI355X = {"units": 256, "clock_hz": 2.4e9, "hbm_bytes_per_s": 8e12, "lds_bytes_per_clk": 128,
          "valu_lanes_per_clk": 64, "simds": 4, "regs_per_lane": 512, "max_waves_per_simd": 8,
          "lds_bytes": 160 * 1024}
H200 = {"units": 132, "clock_hz": 1.98e9, "hbm_bytes_per_s": 4274.313686845467e9, "lds_bytes_per_clk": 128,
        "warp_instructions_per_clk": 4, "regs": 65536, "max_warps": 64, "shared_bytes": 228 * 1024,
        "shared_reserved": 1024}
# SIMD cycles of one gfx950 matrix instruction (gfx950.md: from the dense peaks, 512 bf16
# MACs per cycle per SIMD). The scaled one: 32 cycles with an fp8 operand (our e4m3 Q x e2m1
# K), 16 when both operands are fp4 (cbsz:4 blgp:4). Any other kind: its MACs at the bf16
# rate (MFMA_MACS_PER_CYCLE), marked "by MAC rate" in loop_mfma_per_wave.
MFMA_CYCLES = {
    "v_mfma_f32_16x16x32_bf16": 16,
    "v_mfma_scale_f32_16x16x128_f8f6f4": 32,
    "v_mfma_scale_f32_16x16x128_f8f6f4 fp4 x fp4": 16,
}
MFMA_MACS_PER_CYCLE = 512
# The split kernels' arguments (submission._launch_triton): the SCALED kernel reads the codes
# also as int32 words and writes the quantized Q (split q_bytes_split); the BF16 kernel neither.
_SPLIT_ARGUMENTS = {"q_ptr": "*bf16", "kv_ptr": "*u8", "kv_words_ptr": "*i32", "scale_ptr": "*u8",
                    "qo_indptr_ptr": "*i32", "kv_indptr_ptr": "*i32", "out_ptr": "*bf16", "part_acc_ptr": "*fp32",
                    "part_ml_ptr": "*fp32", "count_ptr": "*i32", "q8_ptr": "*u8", "qs_ptr": "*u8",
                    "q_bytes_split": "i32", "total_kv": "i32", "num_splits": "i32", "q_row_stride": "i32", "q_head_stride": "i32",
                    "kv_row_stride": "i32", "scale_row_stride": "i32", "qk_scale_log2": "fp32",
                    "value_scale": "fp32"}
SCALED_SIGNATURE = dict(_SPLIT_ARGUMENTS)
BF16_SIGNATURE = {k: v for k, v in _SPLIT_ARGUMENTS.items() if k not in ("kv_words_ptr", "q8_ptr", "qs_ptr",
                                                                           "q_bytes_split")}
# split kernel -> (the family it runs, its signature)
SPLIT_KERNELS = {"_scaled_split_kernel": ("SCALED_SCORES", SCALED_SIGNATURE),
                 "_bf16_split_kernel": ("BF16_SCORES", BF16_SIGNATURE)}
Q8_SIGNATURE = {"q_ptr": "*bf16", "kv_indptr_ptr": "*i32", "partials_ptr": "*fp32", "q8_ptr": "*u8",
                "scale_ptr": "*fp32", "page_len_ptr": "*i32", "batch": "i32", "num_partials": "i32",
                "q_row_stride": "i32", "q_head_stride": "i32"}
# The aiter path's fp8 quantization of Q (submission.q8_launches): every one-program block
# size (batch 1, 2, 3-4) and the two-launch form the larger leaderboard batches take.
Q8_BATCHES = (1, 2, 4, 32, 64, 256)
COMBINE_SIGNATURE = {"out_ptr": "*bf16", "part_acc_ptr": "*fp32", "part_ml_ptr": "*fp32", "num_splits": "i32",
                     "qk_scale_log2": "fp32", "value_scale": "fp32"}
# Integer arguments that are multiples of 16 in the leaderboard layout (the runtime marks
# them divisible by 16, as it marks 16-byte aligned pointers); the padded scale stride (24)
# and the trimmed one (18) are not; total_kv and num_splits are declared unspecialized.
ALIGNED_INTS = {"q_row_stride", "q_head_stride", "kv_row_stride"}


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
    """The distinct Launch values the dispatch picks for the leaderboard cases."""
    _, arch, num_sms, _ = TARGETS[target_name]
    launches = {sub.default_launch(b, n, num_sms) for b, n in LEADERBOARD_CASES}
    if arch in sub.SCALED_NATIVE:
        launches |= {sub.scaled_launch(b, n, num_sms) for b, n in LEADERBOARD_CASES}
    for choice in sub.MEASURED_DISPATCH.get(arch, {}).values():
        if choice.path == "triton":
            launches.add(sub.Launch.parse(choice))
    return sorted(launches)


def _build_spec(variant):
    """(kernel, signature, constexprs) of one standard-Triton split-kernel Variant, as
    submission._launch_triton launches it: the SCALED family's kernel or the BF16 family's
    (its merge decides the output; the split count is a runtime argument). The Gluon kernel's
    forms are compile_gluon's."""
    if variant.gluon:
        raise ValueError(f"{variant.describe()}: the Gluon kernel's builds are compile_gluon's")
    consts = {"BLOCK_N": variant.block_n, "CONVERT": variant.convert}
    merge = sub.fused_merge_constants(variant)
    if variant.scores == sub.SCALED_SCORES:
        return (sub._scaled_split_kernel, SCALED_SIGNATURE,
                {**consts, "SPLIT_TAIL": variant.split_tail, "MERGE": variant.merge,
                 "WAVE_FENCES": variant.wave_fences, "EARLY_TILE": variant.early_tile, **merge})
    return (sub._bf16_split_kernel, BF16_SIGNATURE,
            {**consts, "PIN": variant.pin, "SPLIT_TAIL": variant.split_tail, "MERGE": variant.merge,
             "WAVE_FENCES": variant.wave_fences, **merge})


def launches_per_call(variant):
    """Dependent launches one call makes in this variant: the split kernel, plus the
    combine kernel when it merges through it."""
    return 2 if variant.merge == sub.MERGE_COMBINE else 1


def kernel_variants(target_name):
    """(kernel, signature, constexprs, num_warps, num_stages) for every variant to build:
    every form the dispatched launches can run (fallbacks included), and for launches of
    several splits their FUSED form too (a first-call tuning candidate)."""
    _, arch, _, platform = TARGETS[target_name]
    seen = {}
    for launch in dispatched_launches(target_name):
        merges = {launch.merge} | ({sub.MERGE_FUSED} if launch.num_splits > 1 else set())
        for merge in sorted(merges):
            for variant in sub.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages,
                                            launch.scores, merge):
                fn, signature, consts = _build_spec(variant)
                seen.setdefault((fn.__name__, tuple(consts.items()), variant.num_warps, variant.num_stages),
                                (fn, signature, consts, variant.num_warps, variant.num_stages))
                if variant.merge == sub.MERGE_COMBINE:
                    for dims in (sub.V_HEAD_DIM, sub.COMBINE_DIMS_SPLIT):
                        consts = {"CHUNK": min(launch.num_splits, sub.COMBINE_MAX_CHUNK), "DIMS": dims}
                        seen.setdefault(("combine", tuple(consts.items())),
                                        (sub._mla_combine_kernel, COMBINE_SIGNATURE, consts, 4, 1))
    for batch in Q8_BATCHES:
        for phase, rows, _, num_warps in sub.q8_launches(batch):
            consts = {"ROWS": rows, "PHASE": int(phase)}
            seen.setdefault(("q8", tuple(consts.items())), (sub._q_fp8_kernel, Q8_SIGNATURE, consts, num_warps, 1))
    return list(seen.values())


def _loop_body(instructions, backward_target, matrix_prefix, innermost=False):
    """The (mnemonic, operands) of the main loop (isa_latency.loop_region: of the regions
    closed by a backward branch, the one with the most matrix instructions, the largest of
    those -- innermost: the smallest; a kernel's other loops, e.g. the FUSED merge's, hold
    none)."""
    region = loop_region(instructions, backward_target, matrix_prefix, innermost)
    return [(m, ops) for p, m, ops in instructions if region and region[0] <= p <= region[1]]


# ---------------------------------------------------------------------------------------
# gfx950
# ---------------------------------------------------------------------------------------

def _lds_bytes_per_lane(mnemonic, operands=""):
    """Bytes per lane one instruction moves through LDS (0: none)."""
    if mnemonic.startswith(("ds_read", "ds_write", "ds_load", "ds_store")):
        if mnemonic.startswith(("ds_read_b64_tr", "ds_load_tr")):
            return 8
        if mnemonic.startswith("ds_read_b96_tr"):
            return 12
        if "addtid" in mnemonic:
            return 4
        width = re.search(r"_[bui](\d+)", mnemonic)
        per_access = int(width[1]) // 8 if width else 4
        return per_access * (2 if re.search(r"(read|write|load|store)2", mnemonic) else 1)
    if mnemonic.startswith(("buffer_load", "global_load")) and ("lds" in mnemonic or re.search(r"\blds\b", operands)):
        width = re.search(r"dwordx(\d)", mnemonic)
        return 4 * (int(width[1]) if width else 1)
    return 0


def _mfma_kind(mnemonic, operands):
    fp4_x_fp4 = "f8f6f4" in mnemonic and "cbsz:4" in operands and "blgp:4" in operands
    return mnemonic + (" fp4 x fp4" if fp4_x_fp4 else "")


def _mfma_cycles(kind):
    if kind in MFMA_CYCLES:
        return MFMA_CYCLES[kind]
    m, n, k = (int(x) for x in re.search(r"(\d+)x(\d+)x(\d+)", kind).groups())
    return m * n * k / MFMA_MACS_PER_CYCLE


def loop_issue(body):
    """One wave's instruction issue per pass of the main loop, by class: VALU instructions (4 clocks each: a wave64
    instruction on a 16-lane SIMD), the MFMAs' SIMD clocks (MFMA_CYCLES), SALU instructions and s_nop clocks (1 each),
    LDS (ds_*) and vector memory instructions, the waits on LDS (s_waitcnt with lgkmcnt: tools/latency_model.py's
    in-order issue charges each one LDS round trip), the waits on vector memory, barriers."""
    found = Counter()
    for mnemonic, operands in body:
        if mnemonic.startswith("v_mfma"):
            found["mfma_clocks"] += _mfma_cycles(_mfma_kind(mnemonic, operands))
        elif mnemonic.startswith("v_"):
            found["valu"] += 1
        elif mnemonic.startswith("ds_"):
            found["lds"] += 1
        elif mnemonic.startswith(("buffer_", "global_", "flat_", "scratch_")):
            found["vmem"] += 1
        elif mnemonic == "s_waitcnt":
            counters = _waitcnt(operands)
            found["lgkm_waits"] += "lgkm" in counters
            found["vm_waits"] += "vm" in counters
        elif mnemonic == "s_nop":
            found["nop_clocks"] += int(operands, 0) + 1
        elif mnemonic == "s_barrier":
            found["barriers"] += 1
        elif mnemonic.startswith("s_"):
            found["salu"] += 1
    return {key: found[key] for key in ("valu", "mfma_clocks", "salu", "nop_clocks", "lds", "vmem", "lgkm_waits",
                                        "vm_waits", "barriers")}


def _registers_named(text):
    """Register numbers one operand names (v7, v[8:11]; AGPRs as 1000+n)."""
    found = set()
    for kind, low, high in re.findall(r"\b([va])\[(\d+):(\d+)\]", text):
        found |= {int(x) + (1000 if kind == "a" else 0) for x in range(int(low), int(high) + 1)}
    for kind, number in re.findall(r"\b([va])(\d+)\b", text):
        found.add(int(number) + (1000 if kind == "a" else 0))
    return found


def _prefetches(body):
    """Does the loop issue the next tile's global/buffer loads before its MFMAs?

    Yes when a load is still counted in vmcnt at the back-edge (gfx9 counts loads and
    stores in order), or when a load's destination is first read only after the
    back-edge with matrix instructions issued in between. Returns (prefetch, loads in the
    body, loads in flight at the back-edge)."""
    outstanding = []
    for mnemonic, operands in body:
        if mnemonic.startswith(("global_load", "buffer_load")):
            outstanding.append("load")
        elif mnemonic.startswith(("global_store", "buffer_store", "global_atomic", "buffer_atomic")):
            outstanding.append("store")
        elif mnemonic == "s_waitcnt" and "vmcnt" in operands:
            keep = int(re.search(r"vmcnt\((\d+)\)", operands)[1])
            outstanding = outstanding[len(outstanding) - keep:] if keep else []
    loads = [i for i, (m, ops) in enumerate(body) if m.startswith(("global_load", "buffer_load"))
             and not _lds_bytes_per_lane(m, ops)]
    wrapped_under_mfma = False
    for i in loads:
        destination = _registers_named(body[i][1].split(",")[0])
        mfma = 0
        for step in range(1, len(body)):
            mnemonic, operands = body[(i + step) % len(body)]
            parts = [p.strip() for p in operands.split(",")] if operands else []
            writes_first = parts and not mnemonic.startswith(("ds_write", "buffer_store", "global_store", "s_"))
            read = set().union(*[_registers_named(p) for p in (parts[1:] if writes_first else parts)], set())
            if destination & read or (writes_first and destination & _registers_named(parts[0])):
                break
            mfma += mnemonic.startswith("v_mfma")
        wrapped_under_mfma |= i + step >= len(body) and mfma > 0
    in_flight = outstanding.count("load")
    return wrapped_under_mfma or in_flight > 0, len(loads), in_flight


def _amdgcn_report(asm, shared, consts, num_warps, innermost=False):
    field = lambda name: int((re.search(rf"\.{name}:\s+(\d+)", asm) or [0, 0])[1])  # noqa: E731
    comment = lambda name: int((re.search(rf"; {name}: (\d+)", asm) or [0, 0])[1])  # noqa: E731
    directive = lambda name: int((re.search(rf"\.amdhsa_{name}\s+(\d+)", asm) or [0, 0])[1])  # noqa: E731
    labels, instructions = parse_amdgcn(asm)
    arch_vgpr, agpr, total = comment("NumVgprs"), field("agpr_count"), field("vgpr_count")
    # .vgpr_count = arch VGPRs aligned to 4 (= .amdhsa_accum_offset) + AGPRs (module doc)
    expected_total = directive("accum_offset") + agpr if agpr else arch_vgpr
    row = {"forms": instruction_forms(asm),  # every instruction form (gfx950 coverage: tools/gfx950/coverage.py)
           "vgpr": arch_vgpr, "agpr": agpr, "regs_total": total, "sgpr": field("sgpr_count"),
           "regs_check": total == expected_total == directive("next_free_vgpr")
           and directive("accum_offset") == -(-arch_vgpr // 4) * 4,
           "spills": field("vgpr_spill_count") + field("sgpr_spill_count"),
           "shared_bytes": shared, "isa_group_segment_fixed_size": field("group_segment_fixed_size"),
           "matrix_ops": len(re.findall(r"^\s*v_mfma\w*", asm, re.M)),
           "matrix_kinds": sorted(set(re.findall(r"^\s*(v_mfma\w*)", asm, re.M)))}
    waves_by_regs = min(MI355X["max_waves_per_simd"], MI355X["regs_per_lane"] // max(1, -(-total // 8) * 8))
    groups = min(MI355X["lds_bytes"] // shared if shared else 1 << 30, waves_by_regs * MI355X["simds"] // num_warps)
    row["waves_per_simd"] = groups * num_warps / MI355X["simds"]
    if "BLOCK_N" not in consts:
        return row
    row["latency"] = isa_latency_counts(asm, groups * num_warps, innermost=innermost)
    branch = lambda m, ops, pos: labels.get(ops) if m.startswith(("s_branch", "s_cbranch")) else None  # noqa: E731
    body = _loop_body(instructions, branch, "v_mfma", innermost)
    elements = consts["BLOCK_N"] * sub.QK_HEAD_DIM
    valu = [m for m, _ in body if m.startswith("v_") and not m.startswith("v_mfma")]
    mfma = Counter(_mfma_kind(m, ops) for m, ops in body if m.startswith("v_mfma"))
    lds = Counter(m for m, ops in body if _lds_bytes_per_lane(m, ops))
    lds_per_wave = sum(_lds_bytes_per_lane(m, ops) for m, ops in body) * 64
    prefetch, loads, in_flight = _prefetches(body)
    row.update(loop_valu=len(valu), loop_mfma=sum(mfma.values()),
               loop_valu_per_element=round(len(valu) * 64 * num_warps / elements, 2),
               loop_lds_bytes_per_element=round(lds_per_wave * num_warps / elements, 3),
               loop_mfma_cycles_per_element=round(sum(_mfma_cycles(k) * n for k, n in mfma.items())
                                                  * num_warps / elements, 4),
               loop_mfma_per_wave={k + ("" if k in MFMA_CYCLES else " (by MAC rate)"): n for k, n in mfma.items()},
               loop_scaled_mfma_per_wave=sum(n for k, n in mfma.items() if k.startswith("v_mfma_scale")),
               loop_lds_ops_per_wave=dict(lds), loop_prefetch=prefetch, loop_loads=loads,
               loop_loads_in_flight_at_backedge=in_flight,
               loop_native_converts=sum(m == "v_cvt_scalef32_pk_bf16_fp4" for m, _ in body),
               loop_issue=loop_issue(body),
               loop_top_valu=Counter(valu).most_common(8))
    banks = lds_bank_counts(asm, num_warps, innermost=innermost)
    row["lds_banks"] = {
        "models": banks["models"], "worst_model": banks["worst_model"], "unresolved": banks["unresolved"],
        "max_instruction_factor": banks["max_instruction_factor"],
        "instructions": [[r["mnemonic"], r["bytes_per_lane"]] + [round(r["cycles"][m] / r["ideal"][m], 2)
                                                                 for m in BANK_MODELS] for r in banks["instructions"]]}
    # LDS clocks per element: the worst bank model's cycles with conflicts (lds_banks), beside
    # the conflict-free byte count at 128 B per clock
    row["loop_lds_clocks_conflict_free_per_element"] = round(row["loop_lds_bytes_per_element"]
                                                             / MI355X["lds_bytes_per_clk"], 5)
    row["loop_lds_clocks_per_element"] = round(max(
        [banks["models"][model]["cycles_per_tile"] for model in BOUND_MODELS] or [0]) * num_warps / elements, 5)
    clocks = {"hbm": HBM_BYTES_PER_ELEMENT * MI355X["units"] * MI355X["clock_hz"] / MI355X["hbm_bytes_per_s"],
              "lds": max(row["loop_lds_clocks_per_element"], row["loop_lds_clocks_conflict_free_per_element"]),
              "issue": row["loop_valu_per_element"] / MI355X["valu_lanes_per_clk"]
              + row["loop_mfma_cycles_per_element"] / MI355X["simds"]}
    row["clocks_per_element"] = {k: round(v, 5) for k, v in clocks.items()}
    # the byte-count model issues 13-26 set their goals in (LDS at 128 B a clock, no conflicts)
    row["clocks_per_element_conflict_free"] = {**row["clocks_per_element"],
                                               "lds": row["loop_lds_clocks_conflict_free_per_element"]}
    return row


# ---------------------------------------------------------------------------------------
# sm_90
# ---------------------------------------------------------------------------------------

def _shared_bytes_per_thread(mnemonic):
    """Bytes per thread one SASS instruction moves through shared memory (0: none).
    LDSM (ldmatrix) .xN: N 8x8 b16 matrices per warp = 4 B per matrix per thread;
    LDGSTS (cp.async) writes shared memory."""
    if mnemonic.startswith("LDSM"):
        return 4 * int(mnemonic.rsplit(".", 1)[1])
    if mnemonic.split(".")[0] in ("LDS", "STS", "LDGSTS"):
        width = re.search(r"\.(32|64|128)(?=\.|$)", mnemonic)
        if width:
            return int(width[1]) // 8
        small = re.search(r"\.[US](8|16)(?=\.|$)", mnemonic)
        return int(small[1]) // 8 if small else 4
    return 0


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

    ptx_text = compiled.asm["ptx"]
    shared = compiled.metadata.shared
    regs = int(registers[1]) if registers else None
    row = {"registers": regs,
           "spills": int(spill_stores[1]) + int(spill_loads[1]) if spill_stores else None,
           "shared_bytes": shared,
           "matrix_ops": len(re.findall(r"^\s*(?:mma|wgmma)\.", ptx_text, re.M)),
           "matrix_kinds": sorted(set(re.findall(r"^\s*((?:mma|wgmma)\.[\w.]*)", ptx_text, re.M)))}
    if regs:
        warps_by_regs = H200["regs"] // (-(-regs * 32 // 256) * 256)
        row["programs_per_sm"] = min(H200["shared_bytes"] // (shared + H200["shared_reserved"]),
                                     min(warps_by_regs, H200["max_warps"]) // num_warps)
    if "BLOCK_N" not in consts:
        return row
    if regs:
        row["latency"] = sass_latency_counts(sass, row["programs_per_sm"] * num_warps)
    body = [m for m, _ in _loop_body(instructions, branch, "HMMA")]
    elements = consts["BLOCK_N"] * sub.QK_HEAD_DIM
    smem = Counter(m for m in body if _shared_bytes_per_thread(m))
    row.update(loop_sass=len(body), loop_mma=sum(m.startswith("HMMA") for m in body),
               loop_sass_per_element=round(len(body) * 32 * num_warps / elements, 2),
               loop_shared_bytes_per_element=round(sum(map(_shared_bytes_per_thread, body)) * 32 * num_warps
                                                   / elements, 3),
               loop_shared_ops_per_warp=dict(smem),
               loop_top_sass=Counter(body).most_common(8))
    clocks = {"hbm": HBM_BYTES_PER_ELEMENT * H200["units"] * H200["clock_hz"] / H200["hbm_bytes_per_s"],
              "lds": row["loop_shared_bytes_per_element"] / H200["lds_bytes_per_clk"],
              "issue": len(body) * num_warps / elements / H200["warp_instructions_per_clk"]}
    row["clocks_per_element"] = {k: round(v, 5) for k, v in clocks.items()}
    return row


# ---------------------------------------------------------------------------------------
# builds, and the bound per case
# ---------------------------------------------------------------------------------------

def fused_forms(target_name):
    """Every standard-Triton FUSED split-kernel build the dispatch or first-call tuning can
    launch on the target: the first form of the FUSED twin of each candidate of
    submission.candidate_groups over the leaderboard cases and of each dispatched launch of
    several splits -> {Variant: a split count it runs at}. The Gluon kernel's FUSED form is
    its own row (compile_gluon)."""
    _, arch, _, platform = TARGETS[target_name]
    forms = {}
    with _dispatching_as(target_name):
        choices = [c for case in LEADERBOARD_CASES
                   for _, group in sub.candidate_groups(*case, sub.torch.device("cpu")) for c in group]
    launches = [c for c in choices if c.path == "triton"] + dispatched_launches(target_name)
    for launch in launches:
        if launch.num_splits > 1:
            variant = sub.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages,
                                       launch.scores, sub.MERGE_FUSED)[0]
            if not variant.gluon:
                forms.setdefault(variant, launch.num_splits)
    return forms


def compile_one(target_name, fn, signature, consts, num_warps, num_stages) -> dict:
    target = TARGETS[target_name][0]
    src = ASTSource(fn=fn, signature=signature, constexprs=consts,
                    attrs=_attrs(fn, signature, target.backend))
    row = {"row": "variant", "target": target_name, "triton": triton.__version__, "kernel": fn.__name__,
           "num_warps": num_warps, "num_stages": num_stages, **consts}
    if "CONVERT" in consts:
        row["convert"] = sub.CONVERT_NAMES[consts["CONVERT"]]
    if fn.__name__ in SPLIT_KERNELS:
        row["family"] = sub.FAMILY_NAMES[getattr(sub, SPLIT_KERNELS[fn.__name__][0])]
    try:
        compiled = triton.compile(src, target=target, options={"num_warps": num_warps, "num_stages": num_stages})
    except Exception as exc:  # noqa: BLE001 - a failed build is a row, reported and tested
        return {**row, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
    if target.backend == "hip":
        row.update(_amdgcn_report(compiled.asm["amdgcn"], compiled.metadata.shared, consts, num_warps))
        if consts.get("MERGE") == sub.MERGE_FUSED:
            row["release"] = release_order(compiled.asm["amdgcn"])
            row["fused_fences"] = fused_fences(compiled.asm["amdgcn"], num_warps)
    else:
        row.update(_sass_report(compiled, consts, num_warps))
    return row


@contextlib.contextmanager
def _dispatching_as(target_name):
    """submission's dispatch functions answering as if on the target's device."""
    _, arch, num_sms, platform = TARGETS[target_name]
    saved = sub._arch, sub._platform, sub._num_sms
    sub._arch, sub._platform, sub._num_sms = (lambda device: arch), (lambda device: platform), (lambda device: num_sms)
    sub.STATE.predictions.clear()
    try:
        yield
    finally:
        sub._arch, sub._platform, sub._num_sms = saved
        sub.STATE.predictions.clear()


def _first_variant(target_name, launch):
    _, arch, _, platform = TARGETS[target_name]
    variant = sub.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages, launch.scores,
                               launch.merge)[0]
    return _build_spec(variant), variant


def case_rows(target_name, variant_rows, gluon_rows=()):
    """Per leaderboard case the static bound of: the dispatch's choice ("dispatched": on gfx950 the latency
    model's fastest form the emulator proved, the Gluon kernel where it is one: its bound from `gluon_rows`);
    on gfx950 also SCALED's launch ("scaled": the choice where no proven form is left) and the BF16 family's
    default launch ("bf16-default")."""
    _, arch, units, _ = TARGETS[target_name]
    machine = MI355X if target_name == "gfx950" else H200
    with _dispatching_as(target_name):
        choices = {case: sub.choose(*case, sub.torch.device("cpu")) for case in LEADERBOARD_CASES}
    rows = []
    for batch, kv_len in LEADERBOARD_CASES:
        launches = []
        choice = choices[(batch, kv_len)]
        if choice.path == "triton":
            launches.append(("dispatched", choice))
        if arch in sub.SCALED_NATIVE:
            launches.append(("scaled", sub.scaled_launch(batch, kv_len, units)))
            launches.append(("bf16-default", sub.default_launch(batch, kv_len, units)))
        for role, launch in launches:
            if launch.scores == sub.ONCE_SCORES and sub.variants_for(arch, TARGETS[target_name][3], launch.block_n,
                                                                     launch.num_warps, launch.num_stages, launch.scores,
                                                                     launch.merge)[0].gluon:
                rows.append(_gluon_case_row(batch, kv_len, launch, gluon_rows, role))
                continue
            (fn, _, consts), variant = _first_variant(target_name, launch)
            built = [r for r in variant_rows if r["target"] == target_name and r["kernel"] == fn.__name__
                     and r["num_warps"] == variant.num_warps and r["num_stages"] == variant.num_stages
                     and all(r.get(k) == v for k, v in consts.items())]
            row = {"row": "case", "target": target_name, "triton": triton.__version__, "batch": batch,
                   "kv_len": kv_len, "role": role, "choice": str(choice) if role == "dispatched" else None,
                   "kernel": fn.__name__, "family": sub.FAMILY_NAMES[variant.scores],
                   "convert": sub.CONVERT_NAMES[variant.convert], "BLOCK_N": variant.block_n,
                   "num_warps": variant.num_warps, "num_stages": variant.num_stages, "num_splits": launch.num_splits,
                   "merge": sub.MERGE_NAMES[variant.merge], "MERGE": variant.merge,
                   "launches": launches_per_call(variant),
                   "elements_per_unit": batch * kv_len * sub.QK_HEAD_DIM / units}
            clocks = built[0].get("clocks_per_element") if built else None
            if clocks:
                limiter = max(clocks, key=clocks.get)
                free = built[0].get("clocks_per_element_conflict_free")
                if free:
                    row["bound_conflict_free_us"] = round(max(free.values()) * row["elements_per_unit"]
                                                          / machine["clock_hz"] * 1e6, 2)
                row.update(clocks_per_element=clocks, limiter=limiter,
                           bound_us=round(clocks[limiter] * row["elements_per_unit"] / machine["clock_hz"] * 1e6, 2),
                           waves_per_simd=built[0].get("waves_per_simd"),
                           programs_per_sm=built[0].get("programs_per_sm"),
                           spills=built[0]["spills"])
            else:
                row["error"] = built[0].get("error", "no loop") if built else "variant not built"
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------
# the ONCE family's Gluon kernel (gfx950 only): its own rows
# ---------------------------------------------------------------------------------------
# Rows "gluon": submission._gluon_split_kernel built for gfx950 in each merge it has (DIRECT,
# COMBINE), analysed like a split-kernel variant with its innermost tile loop as the main loop
# (the kernel runs its tile loop a second time after a rare overflow, and the loop's masked
# copies of a last partial tile sit on a second back-edge), plus the memory instructions
# outside buffer operations (global_*, flat_*, scratch_*: there must be none) and whether the
# first tile's copy is issued before Q is quantized (the first v_cvt_scalef32_pk_fp8_f32). Rows
# "case" with role "gluon": the bound of each leaderboard case in submission.once_launch's
# split count.
GLUON_SIGNATURE = {"q_ptr": "*bf16", "kv_ptr": "*u8", "scale_ptr": "*u8", "qo_indptr_ptr": "*i32",
                   "kv_indptr_ptr": "*i32", "out_ptr": "*bf16", "part_acc_ptr": "*fp32", "part_ml_ptr": "*fp32",
                   "count_ptr": "*i32", "q8_ptr": "*u8", "qs_ptr": "*u8", "q_bytes_split": "i32", "total_kv": "i32",
                   "num_splits": "i32", "q_row_stride": "i32", "q_head_stride": "i32", "kv_row_stride": "i32",
                   "scale_row_words": "i32", "qk_scale_log2": "fp32"}
NON_BUFFER_MEMORY = ("global_", "flat_", "scratch_")


def isa_memory_facts(asm):
    """(the mnemonics of memory instructions outside buffer operations, whether the first
    global -> LDS copy comes before the first fp32 -> fp8 conversion of Q)."""
    _, instructions = parse_amdgcn(asm)
    outside = sorted({m for _, m, _ in instructions if m.startswith(NON_BUFFER_MEMORY)})
    first_copy = next((p for p, m, ops in instructions if m.startswith("buffer_load") and re.search(r"\blds\b", ops)),
                      None)
    first_quantize = next((p for p, m, _ in instructions if m.startswith("v_cvt_scalef32_pk_fp8_f32")), None)
    return outside, first_copy is not None and first_quantize is not None and first_copy < first_quantize


# the Gluon kernel's merges (None each in a file not shaped like ours: REPORT_NEEDS)
GLUON_MERGES = tuple(getattr(sub, name, None) for name in ("MERGE_DIRECT", "MERGE_COMBINE", "MERGE_FUSED"))


def compile_gluon(merge) -> dict:
    """One "gluon" row: _gluon_split_kernel for gfx950 in merge `merge`."""
    consts = {"BLOCK_N": sub.GL_BLOCK_N, "MERGE": merge}
    row = {"row": "gluon", "target": "gfx950", "triton": triton.__version__, "kernel": "_gluon_split_kernel",
           "family": sub.FAMILY_NAMES[sub.ONCE_SCORES], "convert": sub.CONVERT_NAMES[sub.GFX950],
           "num_warps": sub.GL_NUM_WARPS, "num_stages": 1, **consts}
    if sub.gl is None:
        return {**row, "error": f"Gluon unavailable: {sub.GLUON_ERROR}"}
    from triton.experimental.gluon._runtime import GluonASTSource
    fn = sub._gluon_split_kernel
    try:
        compiled = triton.compile(GluonASTSource(fn=fn, signature=GLUON_SIGNATURE, constexprs=consts,
                                                 attrs=_attrs(fn, GLUON_SIGNATURE, "hip")),
                                  target=TARGETS["gfx950"][0], options={"num_warps": sub.GL_NUM_WARPS})
    except Exception as exc:  # noqa: BLE001 - a failed build is a row, reported and tested
        return {**row, "error": f"{type(exc).__name__}: {exc}"[-2000:]}
    asm = compiled.asm["amdgcn"]
    row.update(_amdgcn_report(asm, compiled.metadata.shared, consts, sub.GL_NUM_WARPS, innermost=True))
    row["memory_ops_outside_buffers"], row["first_copy_before_q_quantized"] = isa_memory_facts(asm)
    if merge == sub.MERGE_FUSED:
        row["release"] = release_order(asm)
        row["fused_fences"] = fused_fences(asm, sub.GL_NUM_WARPS)
    hazards = ring_hazards(asm, sub.GL_NUM_WARPS, gluon_kernargs(asm))
    row["ring"] = {"reads": hazards["reads"], "copies": hazards["copies"], "raw": len(hazards["raw"]),
                   "war": len(hazards["war"]), "unresolved": len(hazards["unresolved"])}
    return row


# The Gluon kernel's integer arguments as a leaderboard call passes them (the ring's data flow
# and hazard checks need the copies' per-lane offsets, which multiply a row stride): the
# runner's layouts, 288-byte code rows and 24-byte (6-word) scale rows.
GLUON_ARGUMENTS = {"total_kv": 1 << 20, "num_splits": 1, "q_row_stride": 16 * 576,
                   "q_head_stride": 576, "kv_row_stride": 288, "scale_row_words": 6}


def gluon_kernargs(asm):
    """{kernel-argument byte offset: value} of GLUON_ARGUMENTS in the build `asm`."""
    offsets = kernarg_offsets(asm, list(GLUON_SIGNATURE))
    return {offsets[name]: value for name, value in GLUON_ARGUMENTS.items()}


def _gluon_case_row(batch, kv_len, launch, gluon_rows, role):
    """One case row of the Gluon kernel in `launch` (its merge's build among `gluon_rows`)."""
    built = [r for r in gluon_rows if r["MERGE"] == launch.merge and "error" not in r]
    row = {"row": "case", "target": "gfx950", "triton": triton.__version__, "batch": batch, "kv_len": kv_len,
           "role": role, "choice": str(launch), "kernel": "_gluon_split_kernel",
           "family": sub.FAMILY_NAMES[sub.ONCE_SCORES], "convert": sub.CONVERT_NAMES[sub.GFX950],
           "BLOCK_N": launch.block_n, "num_warps": launch.num_warps, "num_stages": launch.num_stages,
           "num_splits": launch.num_splits, "merge": sub.MERGE_NAMES[launch.merge], "MERGE": launch.merge,
           "launches": 2 if launch.merge == sub.MERGE_COMBINE else 1,
           "elements_per_unit": batch * kv_len * sub.QK_HEAD_DIM / MI355X["units"]}
    if built and built[0].get("clocks_per_element"):
        clocks = built[0]["clocks_per_element"]
        limiter = max(clocks, key=clocks.get)
        row.update(clocks_per_element=clocks, limiter=limiter,
                   bound_us=round(clocks[limiter] * row["elements_per_unit"] / MI355X["clock_hz"] * 1e6, 2),
                   hbm_us=round(clocks["hbm"] * row["elements_per_unit"] / MI355X["clock_hz"] * 1e6, 2),
                   waves_per_simd=built[0].get("waves_per_simd"), spills=built[0]["spills"])
    else:
        row["error"] = built[0].get("error", "no loop") if built else "gluon kernel not built"
    return row


def gluon_case_rows(gluon_rows):
    """Per leaderboard case the Gluon kernel's bound in once_launch's split count (its merge's build)."""
    return [_gluon_case_row(batch, kv_len, sub.once_launch(batch, kv_len, MI355X["units"]), gluon_rows, "gluon")
            for batch, kv_len in LEADERBOARD_CASES]


def candidate_variants(target_name):
    """The first form of every first-call tuning candidate (submission.ranked_candidates over the
    leaderboard cases) that kernel_variants does not build, in its spec: (kernel, signature,
    constexprs, num_warps, num_stages). The Gluon kernel's forms are the gluon rows."""
    _, arch, _, platform = TARGETS[target_name]
    built = {(fn.__name__, tuple(consts.items()), warps, stages)
             for fn, _, consts, warps, stages in kernel_variants(target_name)}
    with _dispatching_as(target_name):
        choices = [c for case in LEADERBOARD_CASES for c in sub.ranked_candidates(*case, sub.torch.device("cpu"))]
    found = {}
    for launch in (choice for choice in choices if choice.path == "triton"):
        variant = sub.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages, launch.scores,
                                   launch.merge)[0]
        if variant.gluon:
            continue
        fn, signature, consts = _build_spec(variant)
        key = (fn.__name__, tuple(consts.items()), variant.num_warps, variant.num_stages)
        if key not in built:
            found.setdefault(key, (fn, signature, consts, variant.num_warps, variant.num_stages))
    return list(found.values())


def candidate_report(target_names) -> list:
    """Rows "candidate": the builds of candidate_variants (what tools/latency_model.py predicts
    a tuning report's candidates from, beside the report's own variants)."""
    return [{**compile_one(name, *variant), "row": "candidate"} for name in target_names
            for variant in candidate_variants(name)]


def report(target_names) -> list:
    rows = []
    for name in target_names:
        variants = [compile_one(name, *variant) for variant in kernel_variants(name)]
        gluon_rows = [compile_gluon(merge) for merge in GLUON_MERGES] if name == "gfx950" else []
        rows += variants + case_rows(name, variants, gluon_rows)
        if gluon_rows:
            rows += gluon_rows + gluon_case_rows(gluon_rows)
    return rows


def merge_short(merge):
    """A merge's three letters in the tables ("-" for none)."""
    return {sub.MERGE_DIRECT: "dir", sub.MERGE_COMBINE: "cmb", sub.MERGE_FUSED: "fus"}.get(merge, "-")


def print_rows(rows):
    variants = [r for r in rows if r["row"] in ("variant", "gluon", "candidate")]
    print(f"{'target':<7} {'triton':<6} {'kernel':<31} {'convert':<9} {'BN':>3} {'pin':>3} {'mrg':>3} "
          f"{'warps':>5} {'stg':>3} {'regs':>14} {'spills':>6} {'LDS/shm':>7} {'occ':>4} {'mma':>4} "
          f"{'loop/el':>7} {'LDS B/el':>8} {'MFMA/4':>7} {'pf':>3}  matrix per wave per tile")
    for r in variants:
        kernel = r["kernel"] + (f":{r['family']}" if "family" in r else "")
        convert = r.get("convert", f"R{r['ROWS']} P{r['PHASE']}" if "PHASE" in r else "-")  # _q_fp8_kernel
        head = (f"{r['target']:<7} {r['triton']:<6} {kernel:<31} {convert:<9} "
                f"{r.get('BLOCK_N', '-'):>3} {r.get('PIN', '-'):>3} {merge_short(r.get('MERGE')):>3} "
                f"{r['num_warps']:>5} {r['num_stages']:>3}")
        if "error" in r:
            print(f"{head} BUILD FAILED: {r['error'].splitlines()[-1][:200]}")
            continue
        gfx = r["target"] == "gfx950"
        regs = f"v{r['vgpr']}+a{r['agpr']}={r['regs_total']}" if gfx else str(r["registers"])
        occupancy = r.get("waves_per_simd") if gfx else r.get("programs_per_sm")
        per_element = r.get("loop_valu_per_element", r.get("loop_sass_per_element", "-"))
        lds = r.get("loop_lds_bytes_per_element", r.get("loop_shared_bytes_per_element", "-"))
        mfma = round(r["loop_mfma_cycles_per_element"] / 4, 4) if "loop_mfma_cycles_per_element" in r else "-"
        prefetch = {True: "yes", False: "no"}.get(r.get("loop_prefetch"), "-")
        matrix = r.get("loop_mfma_per_wave") or (f"{r['loop_mma']} HMMA/warp" if "loop_mma" in r
                                                 else ",".join(r["matrix_kinds"]))
        print(f"{head} {regs:>14} {r['spills']:>6} {r['shared_bytes']:>7} {occupancy:>4} {r['matrix_ops']:>4} "
              f"{per_element:>7} {lds:>8} {mfma:>7} {prefetch:>3}  {matrix}")
    print("\nloop/el: gfx950 VALU lane-ops, sm90 SASS thread-instructions per KV element; LDS B/el: LDS (sm90: "
          "shared) bytes per element; MFMA/4: MFMA SIMD cycles per element / 4 SIMDs; occ: waves per SIMD "
          "(gfx950), programs per SM (sm90); pf: next tile's loads issued before the MFMAs")
    print_latency_rows(variants)
    print_bank_rows(variants)
    for r in (r for r in variants if r["row"] == "gluon" and "error" not in r):
        print(f"gluon {merge_short(r['MERGE'])}: memory instructions outside buffer operations: "
              f"{', '.join(r['memory_ops_outside_buffers']) or 'none'}; first tile's copy before Q is quantized: "
              f"{'yes' if r['first_copy_before_q_quantized'] else 'no'}"
              + (f"; release ordered: {'yes' if r['release']['ordered'] else 'NO'}" if "release" in r else ""))
    cases = [r for r in rows if r["row"] == "case"]
    for target in dict.fromkeys(r["target"] for r in cases):
        machine = "MI355X, a prediction" if target == "gfx950" else "H200"
        print(f"\nstatic bound per case, {target} ({machine}), Triton {cases[0]['triton']}: "
              "max(HBM, LDS, issue) clk/element x elements per CU / clock")
        print(f"{'case':<12} {'role':<13} {'variant':<46} {'splits':>6} {'lnch':>4} {'hbm':>7} {'lds':>7} {'issue':>7} "
              f"{'limit':>5} {'bound us':>9}")
        for r in (r for r in cases if r["target"] == target):
            variant = (f"{r['family']} {r['convert']} BN{r['BLOCK_N']} w{r['num_warps']} s{r['num_stages']} "
                       f"{r['merge']}")
            head = (f"{str((r['batch'], r['kv_len'])):<12} {r['role']:<13} {variant:<46} {r['num_splits']:>6} "
                    f"{r['launches']:>4}")
            if "bound_us" not in r:
                print(f"{head} {r.get('error', '')[:80]}")
                continue
            c = r["clocks_per_element"]
            print(f"{head} {c['hbm']:>7.4f} {c['lds']:>7.4f} {c['issue']:>7.4f} {r['limiter']:>5} "
                  f"{r['bound_us']:>9.1f}")


def latency_line(counts):
    """The latency columns of one split-kernel build (isa_latency's counts)."""
    head = f"{counts['round_trips_to_first_mma']:>6} {counts.get('round_trips_to_first_mma_kernargs_uncached', '-'):>4}"
    if "round_trips_per_tile" not in counts:
        return f"{head} (no loop)"
    return (f"{head} {counts['round_trips_per_tile']:>8} {counts['load_groups_per_tile']:>6} "
            f"{counts['bytes_in_flight_per_unit'] / 1024:>9.1f} {counts['max_bytes_in_flight_per_unit'] / 1024:>7.1f} "
            f"{counts['load_bytes_per_tile_per_unit'] / 1024:>8.1f} {counts['barriers_per_tile']:>5}")


def print_bank_rows(variants):
    """Every gfx950 split build's LDS bank conflicts (tools/lds_banks.py), per bank model."""
    models = list(BANK_MODELS)
    print("\nLDS bank conflicts per gfx950 split build (tools/lds_banks.py): main-loop LDS clocks per wave per "
          "tile with conflicts / conflict-free (x: their ratio), per bank model, and the worst instruction's ratio")
    print(f"{'kernel':<24} {'convert':<9} {'BN':>3} {'mrg':>3} {'warps':>5} {'stg':>3} "
          + " ".join(f"{model:>26}" for model in models) + f" {'worst instr':>11} {'unres':>5}")
    for r in variants:
        if "lds_banks" not in r:
            continue
        banks = r["lds_banks"]
        cells = [f"{m['cycles_per_tile']:>7.0f}/{m['ideal_per_tile']:<6.0f} x{m['factor']:<5.2f}".rjust(26)
                 for m in (banks["models"][model] for model in models)]
        kernel = r["kernel"] + f":{r['family']}"
        print(f"{kernel:<24} {r['convert']:<9} {r['BLOCK_N']:>3} {merge_short(r['MERGE']):>3} {r['num_warps']:>5} "
              f"{r['num_stages']:>3} " + " ".join(cells)
              + f" {max(banks['max_instruction_factor'].values()):>11.2f} {len(banks['unresolved']):>5}")
    for r in (r for r in variants if r.get("fused_fences")):
        fences = r["fused_fences"]
        print(f"fused {r['kernel']}:{r['family']} BN{r['BLOCK_N']} w{r['num_warps']} s{r['num_stages']}: write-back in "
              f"{fences['release_waves']} wave(s); every wave invalidates before the merge's loads: "
              f"{'yes' if fences['acquire_in_every_wave'] else 'NO'}; merge loads before its wait: "
              f"{'yes' if fences['merge_loads_before_wait'] else 'no'} ({fences['merge_loops']} loop(s), "
              f"{fences['merge_splits_per_pass']} split(s) a pass); count broadcast by "
              f"{'/'.join(fences['count_broadcast']) or '-'}")
    for r in (r for r in variants if r.get("ring")):
        ring = r["ring"]
        print(f"ring {r['kernel']} {merge_short(r['MERGE'])}: {ring['reads']} reads and {ring['copies']} copies in "
              f"6 passes: {ring['raw']} read(s) before their tile's copies retired in every wave, {ring['war']} "
              f"copy(ies) before every wave finished reading the slot, {ring['unresolved']} unresolved")


def print_latency_rows(variants):
    """The split kernels' latency counts (tools/isa_latency.py defines them)."""
    print(f"\nlatency counts per split-kernel build (tools/isa_latency.py): round trips (RT) of global memory "
          f"on one wave's chain, bytes of global loads outstanding per CU (sm90: SM) at the loop's matrix "
          f"instructions")
    print(f"{'target':<7} {'kernel':<24} {'convert':<9} {'BN':>3} {'mrg':>3} {'warps':>5} {'stg':>3} {'occ':>4} "
          f"{'RT>mma':>6} {'+arg':>4} {'RT/tile':>8} {'groups':>6} {'flight KB':>9} {'max KB':>7} {'tile KB':>8} "
          f"{'bar':>5}")
    for r in variants:
        if "latency" not in r:
            continue
        kernel = r["kernel"] + f":{r['family']}"
        occupancy = r.get("waves_per_simd") if r["target"] == "gfx950" else r.get("programs_per_sm")
        print(f"{r['target']:<7} {kernel:<24} {r['convert']:<9} {r['BLOCK_N']:>3} {merge_short(r['MERGE']):>3} "
              f"{r['num_warps']:>5} {r['num_stages']:>3} {occupancy:>4} {latency_line(r['latency'])}")
    print("RT>mma: round trips from the program's start to its first matrix instruction (+arg: with every scalar "
          "load of a kernel argument one too); RT/tile: per steady-state pass of the main loop; groups: distinct "
          "issue times of one pass's global loads (1 = issued together); flight KB: average outstanding at the "
          "loop's matrix instructions per CU (SM) at the occupancy (occ: waves per SIMD, programs per SM), max KB "
          "the largest; tile KB: global-load bytes the CU's waves issue per pass; bar: barriers per pass")


# What the full report reads of a submission file: a file without these (a competitor's own) gets
# the launched-builds report instead.
REPORT_NEEDS = ("variants_for", "Launch", "ranked_candidates", "candidate_groups", "q8_launches",
                "_scaled_split_kernel", "_bf16_split_kernel", "MERGE_FUSED", "FAMILY_NAMES")


def shaped_like_ours(module):
    """Whether the full report can read `module` (this repository's submission.py, or a fork of it)."""
    return all(hasattr(module, name) for name in REPORT_NEEDS)


def launched_report(module, cases):
    """Rows "launched": each distinct gfx950 build the file's custom_kernel launches on `cases`
    ([(batch, kv_len, seed)], CPU inputs; its Triton and Gluon launches run on the gfx950 emulator,
    tools/gfx950), with its registers, spills, LDS, occupancy, matrix instructions and instruction
    forms, the wave instructions it ran, and each case's check (the runner's rule; a launch that
    failed on the emulator fails the case, even where the file caught the error)."""
    import reference
    import torch
    from gfx950 import dispatch
    dispatch.install(None)
    rows, seen = [], {}
    for batch, kv_len, seed in cases:
        data = reference.generate_input(batch, 1, kv_len, seed, device=torch.device("cpu"))
        dispatch.take_record()
        try:
            good, message = reference.check_implementation(data, module.custom_kernel(data))
            verdict = "pass" if good else f"fail: {message.splitlines()[0]}"
        except Exception as exc:  # noqa: BLE001 - the case's row says it
            verdict = f"fail: {' '.join(f'{type(exc).__name__}: {exc}'.split())}"
        record = dispatch.take_record()
        if record["failures"]:   # a failed launch the file caught (and answered otherwise) fails the case too
            verdict = f"fail: EmulationError: {record['failures'][0]}"
        for built, (_, instructions) in zip(record["builds"], record["launches"]):
            key = (built.name, built.asm)
            if key not in seen:
                seen[key] = {"row": "launched", "target": "gfx950", "triton": built.triton, "kernel": built.name,
                             "num_warps": built.num_warps, "cases": [], "wave_instructions": 0,
                             **_amdgcn_report(built.asm, built.shared, {}, built.num_warps)}
                rows.append(seen[key])
            seen[key]["wave_instructions"] += instructions
            seen[key]["cases"].append(f"{batch}x{kv_len}")
        rows.append({"row": "case", "target": "gfx950", "batch": batch, "kv_len": kv_len, "verdict": verdict,
                     "failures": record["failures"]})
    return rows


def print_launched_rows(rows, name):
    launched = [r for r in rows if r["row"] == "launched"]
    print(f"the gfx950 builds {name}'s custom_kernel launched and ran to the end on the gfx950 emulator (Triton "
          f"{launched[0]['triton'] if launched else '-'})")
    print(f"{'kernel':<32} {'warps':>5} {'regs':>14} {'spills':>6} {'LDS':>7} {'occ':>4} {'mma':>4} {'forms':>5} "
          f"{'wave instr':>11}  cases")
    for r in launched:
        regs = f"v{r['vgpr']}+a{r['agpr']}={r['regs_total']}"
        print(f"{r['kernel']:<32} {r['num_warps']:>5} {regs:>14} {r['spills']:>6} {r['shared_bytes']:>7} "
              f"{r['waves_per_simd']:>4} {r['matrix_ops']:>4} {len(r['forms']):>5} {r['wave_instructions']:>11,}  "
              f"{','.join(dict.fromkeys(r['cases']))}")
    for r in (r for r in rows if r["row"] == "case"):
        print(f"case {r['batch']}x{r['kv_len']}: {r['verdict']}")
    print("occ: waves per SIMD (registers and LDS); mma: matrix instructions; forms: distinct instruction forms "
          "(tools/gfx950/coverage.py lists which the emulator's corpus validates)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="The columns, the counts and the bound: tools/compile_report.py's "
                                            "docstring; docs/performance.md reads them.")
    parser.add_argument("file", nargs="?", metavar="FILE",
                        help="the submission file to report on (default: this repository's submission.py); one "
                             "shaped like it (a fork) gets the full report, any other the gfx950 builds its "
                             "custom_kernel launches on --cases, run on the gfx950 emulator")
    parser.add_argument("--cases", metavar="BATCHxKV_LEN,...", default="2x300",
                        help="the cases a file not shaped like ours runs (default 2x300: the emulator is slow)")
    parser.add_argument("--target", choices=[*TARGETS, "all"], default="all",
                        help="gfx950 (the MI355X), sm90 (the H200) or all (default)")
    parser.add_argument("--json", metavar="PATH", help="also write every row as JSON here")
    parser.add_argument("--candidates", action="store_true",
                        help="only the first-call tuning candidates' forms the report does not build (rows "
                             "'candidate', for tools/latency_model.py)")
    add_triton_option(parser)
    args = parser.parse_args()
    if not shaped_like_ours(sub):
        if args.target == "sm90" or args.candidates:
            parser.error(f"{args.file} is not shaped like this repository's submission.py: only its gfx950 builds "
                         "are reported (--target gfx950 or all, no --candidates)")
        rows = launched_report(sub, parse_cases(args.cases))
        print_launched_rows(rows, Path(args.file).name)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        return 1 if any(r["row"] == "case" and r["verdict"] != "pass" for r in rows) else 0
    targets = list(TARGETS) if args.target == "all" else [args.target]
    rows = candidate_report(targets) if args.candidates else report(targets)
    print_rows(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    failed = [r for r in rows if r["row"] in ("variant", "gluon", "candidate") and "error" in r
              and not r["error"].startswith("Gluon unavailable")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
