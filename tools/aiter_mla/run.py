"""aiter's two FP8 MLA decode code objects run on the gfx950 emulator, checked against float64
attention on the same fp8 data; with --write, results/aiter_mla_emulated.json and
results/aiter_mla_forms.json (the objects' instruction forms beside the corpus table).

    AITER_ASM_DIR=.../aiter/hsa python tools/aiter_mla/run.py [--write] [--glue]

--glue also runs `MLA_PATH=aiter MLA_EMULATE=gfx950 python eval.py test` in a copy of the checkout:
on 2 x 300 and 3 x 600 tokens as it is and with the KV scale left out of our glue (the verdict),
and on tests_cpu.txt (17-300 tokens: under 196 tokens aiter's metadata divides by zero, as gfx950 code
does it: tools/aiter_mla/metadata.py).
"""
import argparse
import collections
import datetime
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from aiter_mla import findings as findings_module  # noqa: E402
from aiter_mla.launch import AITER_COMMIT, HOW_TO_GET, OBJECTS, asm_dir, mla_decode_stage1, object_path, sha256  # noqa: E402
from aiter_mla.metadata import get_mla_metadata_info_v1, get_mla_metadata_v1  # noqa: E402
from aiter_mla.reduce import mla_reduce_v1, stage2  # noqa: E402
from gfx950.asm import form_of  # noqa: E402
from gfx950.codeobject import CodeObject  # noqa: E402

FP8 = torch.float8_e4m3fn
HEADS, DIM, V_DIM = 16, 576, 512
SM_SCALE = 1.0 / DIM ** 0.5
# small cases: several splits, uneven lengths (>= 196 tokens a sequence for several splits in the persistent metadata)
PERSISTENT_CASES = ((400, 250), (1000,), (300, 520, 210))
SHORT_CASES = ((17, 100, 195), (1, 16, 64))   # under 196 tokens: one split each (the metadata divides by 0)
NON_PERSISTENT_CASES = (((300, 130), 2), ((500,), 3), ((257, 64, 900), 4))
# an fp8 result: |error| <= 2^-4 sum_i p_i |v_i| (P rounded to e4m3 before the value product: half an ulp of
# 3 mantissa bits) + 2^-8 |ref| (the bf16 output's rounding)
P_ROUNDING, OUT_ROUNDING = 2.0 ** -4, 2.0 ** -8
# forms no Triton build emits, checked on hand-written amdgcn (tests/test_gfx950_aiter_forms.py)
HAND_CHECKED = (("row_newbcast", "test_dpp_row_newbcast_gives_each_row_its_lane"),
                ("s_set_gpr_idx", "test_gpr_idx_offsets_src0_until_it_is_turned_off"),
                ("v_cvt_pk_fp8_f32", "test_cvt_pk_fp8_f32_rounds_to_nearest_even_into_the_selected_word"),
                ("v_mfma_f32_16x16x32_fp8_fp8", "test_mfma_16x16x32_fp8_fp8_is_the_product_of_its_operands"),
                *((form, "test_routine_scalar_and_integer_forms_of_aiters_decode")
                  for form in ("s_cmp_eq_i32", "s_cmp_le_u32", "s_cmpk_eq_u32", "s_min_u32", "s_sub_u32",
                               "v_add_u32_e64", "v_mul_i32_i24_e64", "v_mul_u32_u24_e64")))
GLUE_CASES = "batchsize: 2; qseqlen: 1; kvseqlen: 300; seed: 201\nbatchsize: 3; qseqlen: 1; kvseqlen: 600; seed: 202\n"
GLUE_BUG = ("kv_scale=kv_scale,", "kv_scale=torch.ones_like(kv_scale),")   # the KV scale left out of our glue


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def make_case(lengths, seed):
    """fp8 Q (batch, 16, 576), KV (tokens, 576), their per-tensor scales, kv_indptr."""
    generator = torch.Generator().manual_seed(seed)
    kv_indptr = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    total = int(kv_indptr[-1])
    q = (torch.randn(len(lengths), HEADS, DIM, generator=generator) * 8).to(FP8)
    kv = (torch.randn(total, DIM, generator=generator) * 8).to(FP8)
    return q, kv, torch.tensor([1 / 8.0]), torch.tensor([1 / 16.0]), kv_indptr


def check(out, q, kv, q_scale, kv_scale, kv_indptr):
    """-> (max |error|, max |error| / the fp8 bound) against float64 attention on the same fp8 data."""
    queries = q.double() * q_scale.double()
    worst_error = worst_ratio = 0.0
    for b in range(len(kv_indptr) - 1):   # a sequence at a time: float64 keys of (256, 8192) would take 10 GB
        k = kv[kv_indptr[b]:kv_indptr[b + 1]].double() * kv_scale.double()
        p = torch.softmax(queries[b] @ k.T * SM_SCALE, dim=-1)
        ref = p @ k[:, :V_DIM]
        error = (out[b].double() - ref).abs()
        bound = P_ROUNDING * (p @ k[:, :V_DIM].abs()) + OUT_ROUNDING * ref.abs()
        worst_error = max(worst_error, float(error.max()))
        worst_ratio = max(worst_ratio, float((error / bound).max()))
    return worst_error, worst_ratio


def run_persistent(lengths, seed, findings, detectors=True):
    q, kv, q_scale, kv_scale, kv_indptr = make_case(lengths, seed)
    batch, total = len(lengths), int(kv_indptr[-1])
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32)
    buffers = [torch.empty(shape, dtype=torch.int64 if dtype == torch.uint64 else dtype)
               for shape, dtype in get_mla_metadata_info_v1(batch, 1, HEADS, FP8, FP8, False, False, 32, True)]
    meta, work_indptr, work_info, reduce_indptr, final_map, partial_map = buffers
    page_lens = kv_indptr[1:] - kv_indptr[:-1]
    get_mla_metadata_v1(qo_indptr, kv_indptr, page_lens, HEADS, 1, True, meta, work_info, work_indptr, reduce_indptr,
                        final_map, partial_map, page_size=1, kv_granularity=16, max_seqlen_qo=1, uni_seqlen_qo=1,
                        fast_mode=False, max_split_per_batch=32, intra_batch_mode=True)
    logits = torch.full((partial_map.shape[0], 1, HEADS, V_DIM), float("nan"))
    lse = torch.full((partial_map.shape[0], 1, HEADS, 1), float("nan"))
    out = torch.zeros(batch, HEADS, V_DIM, dtype=torch.bfloat16)
    launch = mla_decode_stage1(q, kv.view(total, 1, 1, DIM), qo_indptr, kv_indptr, torch.arange(total, dtype=torch.int32),
                               page_lens, None, meta, work_indptr, work_info, 1, 1, 1, SM_SCALE, logits, lse, out,
                               q_scale, kv_scale, detectors=detectors, findings=findings)
    mla_reduce_v1(logits, lse, reduce_indptr, final_map, partial_map, 1, out)
    splits = (reduce_indptr[1:batch + 1] - reduce_indptr[:batch]).tolist()
    return launch, out, (q, kv, q_scale, kv_scale, kv_indptr), splits


def run_non_persistent(lengths, splits, seed, findings, detectors=True):
    q, kv, q_scale, kv_scale, kv_indptr = make_case(lengths, seed)
    batch, total = len(lengths), int(kv_indptr[-1])
    qo_indptr = torch.arange(batch + 1, dtype=torch.int32)
    splits_indptr = torch.arange(0, (batch + 1) * splits, splits, dtype=torch.int32)
    logits = torch.full((batch, splits, HEADS, V_DIM), float("nan"))
    lse = torch.full((batch, splits, HEADS, 1), float("nan"))
    out = torch.zeros(batch, HEADS, V_DIM, dtype=torch.bfloat16)
    launch = mla_decode_stage1(q, kv.view(total, 1, 1, DIM), qo_indptr, kv_indptr, torch.arange(total, dtype=torch.int32),
                               kv_indptr[1:] - kv_indptr[:-1], splits_indptr, None, None, None, 1, 1, 1, SM_SCALE,
                               logits, lse, out, q_scale, kv_scale, detectors=detectors, findings=findings)
    stage2(logits, lse, out, kv_indptr, splits_indptr)
    return launch, out, (q, kv, q_scale, kv_scale, kv_indptr), [splits] * batch


def object_forms(persistent):
    code = CodeObject(object_path(persistent))
    program = code.program()
    return collections.Counter(form_of(i) for i in program.instructions), len(program.instructions)


def forms_report():
    """{form: {"objects": {file: count}, "corpus_cases": [the corpus cases that ran it (Triton 3.6.0 builds)],
    "aiter_forms_tests": [tests/test_gfx950_aiter_forms.py's hand-written checks of it]}}."""
    coverage = json.loads((ROOT / "results" / "gfx950_coverage.json").read_text())
    ran = collections.defaultdict(list)
    for case, entry in coverage["cases"].items():
        for form in entry.get("forms", []):
            ran[form].append(case)
    rows = {}
    for persistent in (False, True):
        forms, _ = object_forms(persistent)
        for form, count in forms.items():
            hand = [test for mark, test in HAND_CHECKED if mark in form]
            row = rows.setdefault(form, {"objects": {}, "corpus_cases": sorted(ran.get(form, [])),
                                         "aiter_forms_tests": hand})
            row["objects"][OBJECTS[persistent].rsplit("/", 1)[-1]] = count
    return rows


def write_forms(date):
    forms = forms_report()
    unchecked = sorted(f for f, row in forms.items() if not row["corpus_cases"] and not row["aiter_forms_tests"])
    (ROOT / "results" / "aiter_mla_forms.json").write_text(json.dumps(
        {"date": date, "command": "AITER_ASM_DIR=<aiter>/hsa python tools/aiter_mla/run.py --forms",
         "aiter_commit": AITER_COMMIT, "forms_count": len(forms), "run_by_no_check_but_aiters_decode": unchecked,
         "forms": forms}, indent=1, sort_keys=True) + "\n")
    print(f"{len(forms)} forms; {len(unchecked)} run by no corpus case or hand-written check: {unchecked}")


def glue_runs():
    """eval.py test under MLA_PATH=aiter MLA_EMULATE=gfx950 in a copy of the checkout: as it is,
    and with the KV scale left out of our glue -> {name: (exit code, its last lines)}."""
    out = {}
    for name, bug, cases in (("as is", None, "cases.txt"), ("KV scale left out", GLUE_BUG, "cases.txt"),
                             ("tests_cpu.txt (17-300 tokens)", None, "tests_cpu.txt")):
        with tempfile.TemporaryDirectory(prefix="aiter-glue-") as tmp:
            copy = Path(tmp) / "repo"
            shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".cache", ".ci", "__pycache__"))
            if bug:
                path = copy / "submission.py"
                text = path.read_text()
                if text.count(bug[0]) != 1:
                    raise RuntimeError(f"the glue's {bug[0]!r} is not in submission.py once")
                path.write_text(text.replace(*bug))
            (copy / "cases.txt").write_text(GLUE_CASES)
            env = {**os.environ, "MLA_PATH": "aiter", "MLA_EMULATE": "gfx950"}
            result = subprocess.run([sys.executable, "eval.py", "test", cases], cwd=copy, env=env,
                                    capture_output=True, text=True, timeout=900)
            lines = [line for line in result.stdout.splitlines() if line.startswith(("test.", "check"))]
            out[name] = {"exit": result.returncode, "lines": lines}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write results/aiter_mla_emulated.json and _forms.json")
    parser.add_argument("--forms", action="store_true", help="only write results/aiter_mla_forms.json")
    parser.add_argument("--glue", action="store_true", help="also run eval.py on our glue (as is, KV scale left out)")
    options = parser.parse_args()
    if asm_dir() is None:
        print(HOW_TO_GET)
        return 2
    if options.forms:
        write_forms(datetime.date.today().isoformat())
        return 0
    runs, ok = [], True
    plans = [("persistent", lengths, None) for lengths in PERSISTENT_CASES + SHORT_CASES] + \
            [("non-persistent", lengths, splits) for lengths, splits in NON_PERSISTENT_CASES]
    for seed, (kind, lengths, splits) in enumerate(plans, 1):
        findings = findings_module.Findings()
        started = time.time()
        error = None
        try:
            if kind == "persistent":
                launch, out, data, used = run_persistent(lengths, seed, findings)
            else:
                launch, out, data, used = run_non_persistent(lengths, splits, seed, findings)
            worst, ratio = check(out, *data)
            right = ratio <= 1.0
        except Exception as exc:  # noqa: BLE001 - recorded: the emulator's verdict is the result
            error, right, worst, ratio, launch, used = f"{type(exc).__name__}: {exc}", False, None, None, None, None
        ok &= right
        kinds = collections.Counter()
        for row in findings.rows():
            kinds[row["kind"]] += row["count"]
        row = {"object": OBJECTS[kind == "persistent"].rsplit("/", 1)[-1], "lengths": list(lengths), "splits": used,
               "grid": list(launch.grid) if launch else None, "wave_instructions": launch.instructions if launch else None,
               "max_abs_error": worst, "error_over_fp8_bound": ratio, "right": right, "error": error,
               "accepted_findings": dict(kinds), "findings": findings.rows(), "seconds": round(time.time() - started, 1)}
        runs.append(row)
        print(f"{row['object']} {lengths} splits {used}: {'right' if right else 'WRONG'} (max error {worst}, "
              f"{ratio} of the fp8 bound), {row['wave_instructions']} wave instructions, findings {dict(kinds)}"
              + (f" ERROR {error}" if error else ""), flush=True)
    glue = glue_runs() if options.glue else None
    if glue:
        for name, result in glue.items():
            print(f"glue {name}: exit {result['exit']}: " + " | ".join(result["lines"][-3:]))
    if options.write:
        files = {OBJECTS[p]: sha256(object_path(p)) for p in (False, True)}
        record = {
            "date": datetime.date.today().isoformat(), "command": "AITER_ASM_DIR=<aiter>/hsa python tools/aiter_mla/run.py "
            "--write" + (" --glue" if options.glue else ""), "device": f"CPU ({platform.machine()}), the gfx950 emulator",
            "versions": {"python": platform.python_version(), "torch": torch.__version__, "aiter": AITER_COMMIT,
                         "rocm-llvm-python": _version("rocm-llvm-python")},
            "aiter_commit": AITER_COMMIT, "files_sha256": files,
            "assumptions": {
                "LOCKSTEP": findings_module.ASSUMPTION_LOCKSTEP, "LDS_LATENCY": findings_module.ASSUMPTION_LDS_LATENCY,
                "STRIDE_WITHOUT_INDEX": "a buffer descriptor with a stride but neither idxen, swizzle nor add_tid is "
                "range-checked as a raw buffer, in bytes against num_records (aiter reads its page indices through "
                "a stride-4 descriptor sized to the split's tokens x 4 bytes)",
                "DENORMALS_KEPT": "the code objects' descriptors ask for fp32 denormals flushed (float_denorm_mode_32 "
                "0); the emulator keeps them (not modelled)",
                **{f"accepted {kind}": text for kind, text in findings_module.KINDS.items()}},
            "metadata_findings": [
                "aiter f3be04a's intra-batch metadata (v1_0_device.cuh:69-70 get_local_splits, integer_divide_ceil) "
                "gives a sequence under 196 tokens 0 splits and divides by it: undefined in C++; gfx950 code divides "
                "without trapping (LLVM's AMDGPU expansion: x / 0 = x + 1), so the sequence is one split over all its "
                "tokens; the stand-in divides as that expansion does (metadata.sdiv32_gfx950, checked against a gfx950 "
                "build of the same arithmetic on the emulator)",
                "an empty sequence is taken as one token (kv_end = max(kv_end, kv_begin + 1)): it reads one token "
                "past its range; the stand-in stops there by name (MetadataEmptySequence)"],
            "runs": runs, "glue": glue, "all_right": ok}
        (ROOT / "results" / "aiter_mla_emulated.json").write_text(json.dumps(record, indent=1) + "\n")
        write_forms(record["date"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
