"""aiter's FP8 MLA decode (AMD's gfx950 code objects) on the gfx950 emulator (tools/aiter_mla).

The work partition (our Python following aiter f3be04a's v1_0 metadata) is held to what the
kernel relies on everywhere. The rest needs aiter's code objects, which are not in this
repository: with AITER_ASM_DIR naming aiter's hsa/ directory, the loader reads both objects, each
runs right on small cases (several splits, uneven lengths) against float64 attention on the same
fp8 data, and our glue runs through the stand-in; without it those tests skip with one line.
docs/aiter_mla_emulated.md says what is assumed.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

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


@pytest.mark.parametrize("lengths", [[196], [400, 250], [1000, 197, 5000, 390], [8192] * 3, [300] * 300,
                                     [17, 195, 400, 1, 16], [64] * 4])
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


@pytest.mark.parametrize("tokens", [1, 15, 16, 17, 63, 64, 180, 195])
def test_partition_below_196_tokens_is_one_split_over_the_sequence(tokens):
    """aiter's metadata gives these 0 splits and divides by 0 (v1_0_device.cuh:70); gfx950 code
    divides without trapping (x / 0 = x + 1), which makes the payload the sequence's block count
    (2 for one block) and the sequence one split over all of it."""
    kv_indptr, (meta, work_indptr, work_info, reduce_indptr, final_map, partial_map) = fill([400, tokens, 250])
    rows = work_info[:int(work_indptr[-1])].tolist()
    assert [row for row in rows if row[0] == 1] == [[1, -1, 1, 2, 400, 400 + tokens, 0, 0]]
    blocks = -(-tokens // 16)
    assert metadata.integer_divide_ceil(blocks, 0) == (blocks if blocks > 1 else 2)


def test_sdiv32_gfx950_truncates_and_divides_by_zero_as_llvm_expands_it():
    generator = torch.Generator().manual_seed(3)
    xs = torch.randint(-2 ** 31, 2 ** 31 - 1, (400,), generator=generator).tolist() + list(range(-40, 41))
    ys = torch.randint(-2 ** 31, 2 ** 31 - 1, (400,), generator=generator).tolist() + list(range(-40, 41))
    for x, y in zip(xs, ys):
        if y and (x, y) != (-2 ** 31, -1):
            assert metadata.sdiv32_gfx950(x, y) == int(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1), (x, y)
    assert [metadata.sdiv32_gfx950(x, 0) for x in (0, 1, 2, 12, 195, -3)] == [2, 2, 3, 13, 196, -4]
    with pytest.raises(ValueError, match="int32"):
        metadata.sdiv32_gfx950(2 ** 31, 1)


def test_partition_of_an_empty_sequence_stops_by_name():
    with pytest.raises(metadata.MetadataEmptySequence, match="sequence 0 has 0 tokens"):
        fill([0, 400])


# aiter v1_0_device.cuh:64-76 (f3be04a) on one wave: the kernel the test below builds for gfx950
@triton.jit
def _v1_0_splits(seqlen_ptr, out_ptr, num_splits, num_splits_per_cu, n, GRANULARITY: tl.constexpr,
                 BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    seqlen = tl.load(seqlen_ptr + i, mask=i < n, other=1)
    blocks = (seqlen + GRANULARITY - 1) // GRANULARITY
    splits = tl.minimum(tl.minimum(seqlen // 196, num_splits_per_cu), num_splits)
    payload = (blocks + splits - 1) // splits            # ck_tile::integer_divide_ceil: C's int32 division
    split_local = (blocks + payload - 1) // payload
    tail = seqlen % (payload * GRANULARITY)
    tl.store(out_ptr + i * 3, payload, mask=i < n)
    tl.store(out_ptr + i * 3 + 1, split_local, mask=i < n)
    tl.store(out_ptr + i * 3 + 2, tail, mask=i < n)


@needs_asm
def test_divide_by_zero_model_is_what_a_gfx950_build_computes():
    """The v1_0 split arithmetic (get_local_splits, payload, split_local, tail) built for gfx950 by the
    runner's Triton (whose LLVM expands a division as ROCm's does) and run on the emulator, for every
    length 1-256: its payload, splits and tail are the model's. Gated with the other aiter checks: it builds
    a kernel (seconds)."""
    import gfx950

    lengths = torch.arange(1, 257, dtype=torch.int32)
    out = torch.full((256, 3), -7, dtype=torch.int32)
    gfx950.emulate(_v1_0_splits, (1,), lengths, out, 32, 64, 256, GRANULARITY=16, BLOCK=256, num_warps=4)
    expected = []
    for tokens in lengths.tolist():
        blocks = -(-tokens // 16)
        payload = metadata.integer_divide_ceil(blocks, min(tokens // 196, 64, 32))
        expected.append([payload, metadata.integer_divide_ceil(blocks, payload), tokens % (payload * 16)])
    assert out.tolist() == expected
    assert all(row[1] == 1 for row in expected[:195]), "under 196 tokens: one split"


def test_the_committed_traces_are_whole_launch_records_with_their_provenance():
    """results/aiter_mla_trace_b*_kv*.json (tools/aiter_mla/trace.py): (4, 1024) and (32, 1024) at least; each
    checked right, with device, versions, date and command, a row per workgroup of the persistent grid whose
    instructions add up to the launch's, the busy ones as many as the partition's work items."""
    from aiter_mla import trace
    paths = sorted((ROOT / "results").glob("aiter_mla_trace_b*_kv*.json"))
    shapes = set()
    for path in paths:
        result = json.loads(path.read_text())
        shape = (result["shape"]["batch"], result["shape"]["kv_len"])
        shapes.add(shape)
        assert path.name == f"aiter_mla_trace_b{shape[0]}_kv{shape[1]}.json"
        assert all(result[key] for key in ("device", "versions", "date", "command", "object_sha256"))
        assert f"trace.py {shape[0]} {shape[1]}" in result["command"] and result["right"]
        assert result["error_over_fp8_bound"] <= 1.0
        record = result["launch_record"]
        assert record["grid"] == [metadata.CU_COUNT, 1, 1] and len(record["workgroups"]) == metadata.CU_COUNT
        assert sum(sum(row["wave_instructions"].values()) for row in record["workgroups"]) == record["wave_instructions"]
        assert trace.summarize(record) == result["summary"]
        assert result["summary"]["workgroups_with_work"] == min(result["partition"]["work_items"], metadata.CU_COUNT)
        assert len(result["partition"]["splits_per_sequence"]) == shape[0]
        assert result["public_mi355x_us"] == trace.PUBLIC_US[shape]
    assert {(4, 1024), (32, 1024)} <= shapes
    assert trace.table_rows(paths).count("\n") == len(paths) - 1


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
@pytest.mark.parametrize("lengths", [(17, 17), (1, 16, 100, 195)], ids=lambda lengths: "x".join(map(str, lengths)))
def test_persistent_decode_right_below_196_tokens(lengths):
    from aiter_mla import findings, run
    found = findings.Findings()
    launch, out, data, used = run.run_persistent(lengths, 7, found)
    assert used == [1] * len(lengths)
    _, ratio = run.check(out, *data)
    assert ratio <= 1.0, f"error {ratio:.2f} x the fp8 bound"


@needs_asm
def test_an_aiter_launch_goes_to_the_launch_record(tmp_path, monkeypatch):
    from aiter_mla import findings, run
    monkeypatch.setenv("GFX950_RECORD", str(tmp_path / "record.jsonl"))
    launch, _, _, _ = run.run_persistent((300, 17), 3, findings.Findings())
    line, = (tmp_path / "record.jsonl").read_text().splitlines()
    record = json.loads(line)
    assert record == launch.record and record["wave_instructions"] == launch.instructions
    assert "mla_a8w8_qh16_qseqlen1_gqaratio16_ps" in record["kernel"] and len(record["workgroups"]) == metadata.CU_COUNT
    assert sum(bool(row["bytes_written"]) for row in record["workgroups"]) == 2, "one split each: two busy workgroups"


@needs_asm
def test_eval_runs_our_aiter_glue_on_the_emulated_objects(tmp_path):
    cases = tmp_path / "cases.txt"
    cases.write_text("batchsize: 2; qseqlen: 1; kvseqlen: 300; seed: 201\n")
    env = {**os.environ, "MLA_PATH": "aiter", "MLA_EMULATE": "gfx950"}
    result = subprocess.run([sys.executable, "eval.py", "test", str(cases)], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=600)
    assert "check: pass" in result.stdout, result.stdout[-2000:]
    assert "aiter mla_a8w8_qh16_qseqlen1_gqaratio16_ps 1 launch" in result.stdout, "the case names aiter's decode"
