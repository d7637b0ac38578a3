"""aiter's FP8 MLA decode (AMD's gfx950 code objects) on the gfx950 emulator (tools/aiter_mla).

The work partition (our Python following aiter f3be04a's v1_0 metadata) is held to what the
kernel relies on everywhere. The rest needs aiter's code objects, which are not in this
repository: with AITER_ASM_DIR naming aiter's hsa/ directory, the loader reads both objects, each
runs right on small cases (several splits, uneven lengths) against float64 attention on the same
fp8 data, and our glue runs through the stand-in; without it those tests skip with one line.
docs/aiter_mla_emulated.md says what is assumed.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from aiter_mla import metadata  # noqa: E402
from aiter_mla.launch import HOW_TO_GET, asm_dir  # noqa: E402

needs_asm = pytest.mark.skipif(asm_dir() is None, reason=HOW_TO_GET)
FP8 = torch.float8_e4m3fn


def fill(lengths, max_splits=32):
    batch = len(lengths)
    kv_indptr = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
    buffers = [torch.full(shape, -7, dtype=torch.int64 if dtype == torch.uint64 else dtype)
               for shape, dtype in metadata.get_mla_metadata_info_v1(batch, 1, 16, FP8, FP8, False, False,
                                                                     max_splits, True)]
    meta, work_indptr, work_info, reduce_indptr, final_map, partial_map = buffers
    metadata.get_mla_metadata_v1(torch.arange(batch + 1, dtype=torch.int32), kv_indptr, kv_indptr[1:] - kv_indptr[:-1],
                                 16, 1, True, meta, work_info, work_indptr, reduce_indptr, final_map, partial_map,
                                 page_size=1, kv_granularity=16, max_seqlen_qo=1, uni_seqlen_qo=1, fast_mode=False,
                                 max_split_per_batch=max_splits, intra_batch_mode=True)
    return kv_indptr.tolist(), buffers


@pytest.mark.parametrize("lengths", [[196], [400, 250], [1000, 197, 5000, 390], [8192] * 3, [300] * 300])
def test_partition_covers_every_token_once_with_splits_in_order(lengths):
    kv_indptr, (meta, work_indptr, work_info, reduce_indptr, final_map, partial_map) = fill(lengths)
    works = int(work_indptr[-1])
    indptr = work_indptr.tolist()
    assert indptr[0] == 0 and indptr == sorted(indptr) and len(indptr) == metadata.CU_COUNT + 1
    rows = work_info[:works].tolist()
    for b in range(len(lengths)):
        first, end = reduce_indptr[b].item(), reduce_indptr[b + 1].item()
        mine = rows[first:end]
        assert [r[0] for r in mine] == [b] * len(mine) and mine, "a sequence's splits are one run, in order"
        starts, ends = [r[4] for r in mine], [r[5] for r in mine]
        assert starts[0] == kv_indptr[b] and ends[-1] == kv_indptr[b + 1], "every token of the sequence ..."
        assert starts[1:] == ends[:-1] and all(s < e for s, e in zip(starts, ends)), "... once, splits in order"
        assert all(r[6] == kv_indptr[b + 1] - r[5] for r in mine), "kv_offset: the tokens after the split"
        partial = [r[1] for r in mine]
        assert partial == ([-1] if len(mine) == 1 else list(range(first, end))), "partial rows"
        assert partial_map[first:end].tolist() == partial and final_map[b].tolist() == [b, b + 1]
    assert int(reduce_indptr[-1]) == works
    assert meta.tolist() == [work_indptr.data_ptr(), work_info.data_ptr()]


def test_partition_below_196_tokens_stops_by_name():
    with pytest.raises(metadata.MetadataDivideByZero, match="196"):
        fill([400, 195])
    with pytest.raises(metadata.MetadataDivideByZero, match="sequence 0 has 0 tokens"):
        fill([0, 400])


def test_metadata_bad_input():
    with pytest.raises(TypeError, match="seqlens_kv_indptr"):
        metadata.get_mla_metadata_v1(torch.arange(2, dtype=torch.int32), torch.tensor([0, 300]),
                                     torch.tensor([300], dtype=torch.int32), 16, 1, True, *[torch.empty(1)] * 6,
                                     fast_mode=False, max_split_per_batch=32, intra_batch_mode=True, uni_seqlen_qo=1)


@needs_asm
@pytest.mark.parametrize("persistent", [False, True])
def test_code_object_loads_with_every_form_implemented(persistent):
    from aiter_mla.launch import load_kernel, object_path
    code, kernel = load_kernel(object_path(persistent))
    assert kernel.unsupported == [] and kernel.entry is not None
    d = code.descriptor
    assert (d["group_segment_fixed_size"], d["user_sgpr_kernarg_segment_ptr"], d["system_sgpr_workgroup_id_z"]) == \
        (163840, 1, 1)
    assert code.metadata["wavefront_size"] == 64
    # the metadata note's arguments sit where asm_mla.cu's KernelArgs puts its fields: one every 16 bytes, in order
    from aiter_mla.launch import FIELD_BYTES, KERNEL_ARGS
    offsets = [arg["offset"] for arg in code.kernargs if arg["name"] != "pad"]
    assert offsets == [FIELD_BYTES * i for i in range(len(offsets))] and len(offsets) in (len(KERNEL_ARGS) - 1,
                                                                                            len(KERNEL_ARGS))
    assert any(".Lpc_" in line and line.endswith(":") for line in code.text.splitlines()), "branch targets labelled"


@needs_asm
@pytest.mark.parametrize("case", [("persistent", lengths, None) for lengths in ((400, 250), (1000,), (300, 520, 210))]
                         + [("non-persistent", lengths, splits)
                            for lengths, splits in (((300, 130), 2), ((500,), 3), ((257, 64, 900), 4))],
                         ids=lambda case: f"{case[0]}-{'x'.join(map(str, case[1]))}")
def test_decode_object_right_on_small_cases(case):
    from aiter_mla import findings, run
    kind, lengths, splits = case
    found = findings.Findings()
    if kind == "persistent":
        launch, out, data, used = run.run_persistent(lengths, 7, found)
        assert max(used) > 1, "several splits"
    else:
        launch, out, data, used = run.run_non_persistent(lengths, splits, 7, found)
    _, ratio = run.check(out, *data)
    assert ratio <= 1.0, f"error {ratio:.2f} x the fp8 bound"
    assert {row["kind"] for row in found.rows()} <= set(findings.KINDS)


@needs_asm
def test_eval_runs_our_aiter_glue_on_the_emulated_objects(tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("batchsize: 2; qseqlen: 1; kvseqlen: 300; seed: 201\n")
    env = {**os.environ, "MLA_PATH": "aiter", "MLA_EMULATE": "gfx950"}
    result = subprocess.run([sys.executable, "eval.py", "test", str(cases)], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert "check: pass" in result.stdout, result.stdout[-2000:]
    assert "aiter mla_a8w8_qh16_qseqlen1_gqaratio16_ps 1 launch" in result.stdout, "the case names aiter's decode"
