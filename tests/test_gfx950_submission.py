"""submission.py's MI355X binaries run on the gfx950 emulator before the runner sees them.

Every kernel here is the gfx950 build of the runner's Triton 3.6.0, launched by
submission.py's own code (tools/gfx950/dispatch.py: launches on CPU tensors go to the
emulator, and the module dispatches as on the MI355X), with every detector on: an access
outside a tensor, an LDS race, a read of a register never written, a hang; and global
memory behind 8 L2s, one per XCD. CI runs one small case per family and merge (below);
the full matrix, every variant the MI355X can pick on every case, is
`python tools/gfx950/matrix.py --write` (docs/gfx950_emulator.md).
"""
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gfx950  # noqa: E402
from gfx950 import dispatch, mla  # noqa: E402

import reference as ref  # noqa: E402


@pytest.fixture(scope="module")
def sub():
    module = mla.mi355x_submission()
    yield module
    dispatch.uninstall()


@pytest.fixture(scope="module")
def variants(sub):
    return mla.mi355x_variants(sub)


def pick(variants, sub, family, merge, gluon=None, block_n=None, first=True):
    """The first variant (in describe order) of a family and merge the MI355X can pick."""
    for variant in variants:
        if (sub.FAMILY_NAMES[variant.scores] == family and sub.MERGE_NAMES[variant.merge] == merge
                and (gluon is None or variant.gluon == gluon) and (block_n is None or variant.block_n == block_n)):
            return variant
    raise AssertionError(f"no {family}/{merge} variant among {len(variants)}")


def test_the_proven_forms_are_the_matrixs_and_it_ran_todays_kernels(sub, variants):
    """submission.py's EMULATOR_PROVEN (what predicted_choice picks from) is what tools/gfx950/matrix.py writes
    from results/gfx950_matrix.json: the variants every run of which was right; every variant the MI355X can
    pick is in the matrix; and the matrix ran the kernels submission.py has now (a kernel or a constant it
    names changed since: rerun the matrix)."""
    import json
    from gfx950 import matrix
    results = json.loads(matrix.RESULT.read_text())
    assert results["kernels_sha256"] == matrix.kernels_fingerprint(sub), \
        "kernels changed: run tools/gfx950/matrix.py --write"
    assert {row["variant"] for row in results["runs"]} >= {v.describe() for v in variants}
    assert sub.EMULATOR_PROVEN == frozenset(matrix.proven(results["runs"], variants))
    assert f"{matrix.PROVEN_BEGIN}\n" in Path(sub.__file__).read_text()


def test_a_variant_is_proven_by_every_run_of_it_right():
    from types import SimpleNamespace
    from gfx950 import matrix
    a, b, c = (SimpleNamespace(describe=lambda name=name: name) for name in "abc")
    rows = [{"variant": "a", "verdict": "right"}, {"variant": "a", "verdict": "right"},
            {"variant": "b", "verdict": "right"}, {"variant": "b", "verdict": "wrong: head 3"}]
    assert matrix.proven(rows, [a, b, c]) == ["a"]  # b: one run wrong; c: never run


def test_the_fingerprint_follows_kernels_and_the_constants_they_name(sub, monkeypatch):
    from gfx950 import matrix
    before = matrix.kernels_fingerprint(sub)
    monkeypatch.setattr(sub, "predicted_choice", lambda *args: "host code")
    assert matrix.kernels_fingerprint(sub) == before
    monkeypatch.setattr(sub, "GL_SCALE_WORDS", sub.GL_SCALE_WORDS + 1)
    assert matrix.kernels_fingerprint(sub) != before
    monkeypatch.undo()
    assert matrix.kernels_fingerprint(sub) == before

    @triton.jit
    def another_tiles(x):
        pass
    monkeypatch.setattr(sub, "_gl_tiles", another_tiles)
    assert matrix.kernels_fingerprint(sub) != before


# One case per family and merge: uneven sequences (a single token, a partial tile, several
# tiles), the runner's padded scale layout with 0xFF padding, 2 splits where they merge.
CI_LENGTHS = [1, 129, 300]
CI_SPLITS = {"direct": 1, "combine": 2, "fused": 2}
# ("scaled", "fused", False, 64): 4 waves sum the merge's splits across waves (its race: tests below)
FAMILY_MERGES = [("scaled", "direct", False, 128), ("scaled", "combine", False, 64), ("scaled", "fused", False, 128),
                 ("scaled", "fused", False, 64), ("bf16", "direct", False, None), ("bf16", "combine", False, 64),
                 ("once", "direct", True, None), ("once", "combine", True, None), ("once", "fused", True, None)]


def ci_input(seed=11):
    return mla.reference_input(CI_LENGTHS, seed)


@pytest.mark.parametrize("family,merge,gluon,block_n", FAMILY_MERGES,
                         ids=[f"{f}-{m}{'-gluon' if g else ''}{f'-t{n}' if n else ''}" for f, m, g, n in FAMILY_MERGES])
def test_each_family_and_merge_on_the_emulator(sub, variants, family, merge, gluon, block_n):
    variant = pick(variants, sub, family, merge, gluon, block_n)
    data = ci_input()
    out = mla.run_variant(sub, variant, data, CI_SPLITS[merge])
    assert mla.wrong(sub, variant, data, out) is None, variant.describe()


# Issue 43's edges of the split and tile bounds, in 2 splits of 128-token tiles: 128 tokens end
# the first split's tile exactly and leave the second split empty (lo == hi); 129 give it one row;
# 256 end each split exactly at its tile; 257 give the second split its first tile's first row; 385
# give it a second tile of one row (SCALED's EARLY_TILE runs a split's first tile masked, so its bound
# of full tiles shows from the second tile on). A last single token gives the 385 a row past their end.
EDGE_LENGTHS = [128, 129, 256, 257, 385, 1]


def _edge_input(seed=14):
    """EDGE_LENGTHS with loud rows at the edges. Q is +1 in dim 0 for even sequences, -1 for odd ones, 0
    elsewhere; K's dim 0 is 0 but in two kinds of row: each sequence's first row scores +10.7 (in sm_scale
    units times log2 e: e^10.7 the weight of an ordinary row) for the sequence BEFORE it and -10.7 for its
    own, so a row read past a sequence's end swamps that answer; and each split's first row in its own
    sequence scores +5.5 (about the weight of all the others), so a row both splits count, or neither,
    moves the answer by about a third."""
    import math
    q, kv_data, qo_indptr, kv_indptr, config = mla.reference_input(EDGE_LENGTHS, seed)
    total = sum(EDGE_LENGTHS)
    generator = torch.Generator().manual_seed(seed)
    kv = (torch.rand((total, 576), generator=generator) * 2 - 1).to(torch.bfloat16)
    kv[:, 0] = 0
    sign = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(len(EDGE_LENGTHS))])
    per_unit = 1 / config["sm_scale"]  # K's dim 0 for a score of 1 (Q's dim 0 is +-1)
    starts = [sum(EDGE_LENGTHS[:i]) for i in range(len(EDGE_LENGTHS))]
    for i, (start, length) in enumerate(zip(starts, EDGE_LENGTHS)):
        if i:
            kv[start, 0] = sign[i - 1] * 10.7 * per_unit
        if length > 128:  # the second split's first row (2 splits of whole 128-token tiles)
            kv[start + 128 * math.ceil(math.ceil(length / 128) / 2), 0] = sign[i] * 5.5 * per_unit
    packed, scales = ref.quantize_mxfp4(kv)
    scales = ref.layout_mxfp4_scales(scales, "padded", 0xFF, generator)
    kv_data = {**kv_data, "bf16": kv.reshape(total, 1, 576),
               "mxfp4": (packed.view(ref.PACKED_DTYPE).reshape(total, 1, 288), scales.view(ref.SCALE_DTYPE))}
    q = torch.zeros_like(q)
    q[:, :, 0] = sign[:, None]
    return q, kv_data, qo_indptr, kv_indptr, config


@pytest.mark.parametrize("family,merge,gluon", [("scaled", "combine", False), ("once", "combine", True)],
                         ids=["scaled-combine-t128-tail", "once-combine-gluon"])
def test_rows_ending_at_a_tile_and_one_past(sub, variants, family, merge, gluon):
    """Sequences ending exactly at a tile's end and one row past it, in 2 splits (EDGE_LENGTHS, loud rows at
    the edges: _edge_input): both sides of each edge right, in the SCALED form with full tiles unmasked and a
    masked tail, and in the Gluon kernel."""
    variant = next(v for v in variants if sub.FAMILY_NAMES[v.scores] == family and sub.MERGE_NAMES[v.merge] == merge
                   and v.gluon == gluon and v.block_n == 128 and (gluon or v.split_tail))
    data = _edge_input()
    out = mla.run_variant(sub, variant, data, 2)
    assert mla.wrong(sub, variant, data, out) is None, variant.describe()


@pytest.mark.parametrize("order", ["reverse", "shuffle:3"])
def test_fused_merges_whatever_order_the_programs_run(sub, variants, order):
    """The last program to arrive merges: any order of the programs (and their XCDs) gives the answer."""
    variant = pick(variants, sub, "scaled", "fused", block_n=128)
    data = ci_input(seed=12)
    dispatch.install(sub, order=order)
    try:
        out = mla.run_variant(sub, variant, data, 4)
    finally:
        dispatch.install(sub)
    assert mla.wrong(sub, variant, data, out) is None


def test_the_self_check_input_takes_the_gluon_kernels_second_pass(sub, variants):
    """submission.self_check's synthetic case (every code, a key far above the first tile's
    maximum, full-width scale rows) passes the Gluon kernel as the runner's first call runs it."""
    variant = pick(variants, sub, "once", "combine", gluon=True)
    data = ci_input()
    q, packed, scales, *_ = mla.operands(sub, data)
    assert sub.self_check(variant, 2, (q, packed, scales), data[4]["sm_scale"], 512) is None


@pytest.mark.parametrize("q_bytes_split", ["checked", "timed"])
def test_gluon_writes_the_q_bytes_on_checked_calls_only(sub, variants, q_bytes_split):
    """The Gluon kernel's split 0 writes Q's e4m3 bytes, bit for bit quantize_q_reference's, on
    a checked call (Q_BYTES_CHECKED: a self-check, a plan's first run); a timed call
    (Q_BYTES_TIMED, as a plan's replays launch) leaves the scratch as it found it. Both right."""
    variant = pick(variants, sub, "once", "combine", gluon=True)
    data = ci_input(seed=13)
    scratch = sub.make_scratch(data[0].shape[0], 2, data[0].device, [variant])
    for written in (scratch.q8, scratch.qs):
        written.view(torch.uint8).fill_(0x5A)
    checked = q_bytes_split == "checked"
    out = mla.run_variant(sub, variant, data, 2, sub.Q_BYTES_CHECKED if checked else sub.Q_BYTES_TIMED, scratch)
    assert mla.wrong(sub, variant, data, out) is None
    q8, qs, _ = sub.quantize_q_reference(data[0])
    if checked:
        assert torch.equal(scratch.q8.view(q8.shape), q8) and torch.equal(scratch.qs.view(qs.shape), qs)
    else:
        assert all(bool((written.view(torch.uint8) == 0x5A).all()) for written in (scratch.q8, scratch.qs))


def test_the_kv_tensor_is_read_to_its_last_byte_only(sub, variants):
    """The Gluon kernel on a KV tensor with nothing after it in memory: every copy stays inside
    it (its rope copy once read the 32 bytes after the last row: the emulator's bounds, an
    allocation's, stop that)."""
    variant = pick(variants, sub, "once", "direct", gluon=True)
    data = ref.generate_input(1, 1, 7, 5, device=torch.device("cpu"))
    q, kv_data, *rest = data
    packed, scales = kv_data["mxfp4"]
    exact = {"mxfp4": (packed.clone(), scales.clone()), **{k: v for k, v in kv_data.items() if k != "mxfp4"}}
    assert exact["mxfp4"][0].untyped_storage().nbytes() == 7 * 288
    data = (q, exact, *rest)
    assert mla.wrong(sub, variant, data, mla.run_variant(sub, variant, data, 1)) is None


def test_the_combine_kernel_alone(sub):
    """_mla_combine_kernel merging 4 splits' partials (one of them empty) of 2 sequences."""
    rng = np.random.default_rng(4)
    batch, splits = 2, 4
    acc = torch.from_numpy(rng.standard_normal((batch, splits, 16, 512)).astype(np.float32))
    ml = torch.from_numpy(rng.standard_normal((batch, splits, 2, 16)).astype(np.float32))
    ml[:, :, 1] = ml[:, :, 1].abs() + 0.5
    ml[1, 2] = torch.tensor([float("-inf"), 0.0])[:, None]   # an empty split: m -inf, l 0
    out = torch.zeros(batch, 16, 512, dtype=torch.bfloat16)
    qk_scale_log2 = 1.3
    gfx950.emulate(sub._mla_combine_kernel, (batch, 16, 1), out, acc, ml, splits, qk_scale_log2, 1.0,
                   CHUNK=splits, DIMS=512, num_warps=4)
    m, l = ml[:, :, 0].double() * qk_scale_log2, ml[:, :, 1].double()
    weight = torch.exp2(m - m.amax(1, keepdim=True))
    merged = (weight[..., None] * acc.double()).sum(1) / (weight * l).sum(1)[..., None]
    assert torch.allclose(out.double(), merged, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("batch", [4, 300])
def test_aiters_q_quantization(sub, batch):
    """_q_fp8_kernel in one pass (4 tokens) and in two (300: amax, then quantize), on the edge case
    q8_edge_case makes: the bytes, scale and page lengths of its torch twin, bit for bit."""
    q = sub.q8_edge_case(batch, torch.device("cpu"))
    kv_indptr = torch.arange(batch + 1, dtype=torch.int32) * 5
    q8 = torch.zeros(batch, 16, 576, dtype=torch.uint8)
    scale = torch.zeros(1, dtype=torch.float32)
    page_len = torch.zeros(batch, dtype=torch.int32)
    partials = torch.zeros(batch * 16, dtype=torch.float32)
    sub.quantize_q_fp8(q, kv_indptr, q8, scale, page_len, partials)
    twin, twin_scale = sub._quantize_fp8_per_tensor(q, torch.float8_e4m3fn)
    assert torch.equal(q8, twin.view(torch.uint8)) and torch.equal(scale, twin_scale)
    assert torch.equal(page_len, torch.full((batch,), 5, dtype=torch.int32))


def test_the_machine_probes(sub):
    """The probes' kernels: a launch of nothing, a 5-hop chase (loads and atomic adds of 0), a copy."""
    gfx950.emulate(sub._probe_empty_kernel, (1,), num_warps=4)
    region, order = sub._chase_chain(4096, 128, 7, torch.device("cpu"))
    for atomic in (0, 1):
        end = torch.full((1,), -1, dtype=torch.int32)
        gfx950.emulate(sub._probe_chase_kernel, (1,), region, end, order[0], 5, atomic, 0, region.numel() - 1)
        assert int(end) == order[5]
    src = torch.arange(2 * 256, dtype=torch.int32)
    dst = torch.zeros_like(src)
    gfx950.emulate(sub._probe_copy_kernel, (2,), src, dst, BLOCK=256)
    assert torch.equal(src, dst)


def test_a_call_runs_as_on_the_mi355x(sub, fresh_plans):
    """custom_kernel on a small case: the dispatch of 256 CUs picks its variant, the self-check
    and the first call's check run it, and the answer holds (what `MLA_EMULATE=gfx950 python
    eval.py test` does per case)."""
    data = ref.generate_input(2, 1, 300, 3, device=torch.device("cpu"))
    out = fresh_plans.custom_kernel(data)
    choice = fresh_plans.choose(2, 300, torch.device("cpu"))
    launch = choice
    variant = fresh_plans.launch_variants(launch, torch.device("cpu"))[0]
    assert [v for v, what, _, verdict in fresh_plans.STATE.check_log[-2:]] == [variant, variant]
    assert all(verdict is None for *_, verdict in fresh_plans.STATE.check_log[-2:])
    assert mla.wrong(fresh_plans, variant, data, out) is None


def test_eval_py_test_checks_the_mi355x_binaries(tmp_path):
    """`MLA_EMULATE=gfx950 python eval.py test CASES` runs submission.py's gfx950 builds on the
    emulator (GFX950_LOG lists them) and checks them against the reference."""
    import os
    import subprocess
    cases = tmp_path / "cases.txt"
    cases.write_text("# one small case\nbatchsize: 2; qseqlen: 1; kvseqlen: 300; seed: 3\n")
    log = tmp_path / "launches.jsonl"
    env = {**os.environ, "MLA_EMULATE": "gfx950", "GFX950_LOG": str(log)}
    result = subprocess.run([sys.executable, "eval.py", "test", str(cases)], cwd=mla.ROOT, env=env,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0 and "check: pass" in result.stdout, result.stdout + result.stderr[-2000:]
    assert "MLA_EMULATE=gfx950" in result.stderr
    kernels = {line.split('"kernel": "')[1].split('"')[0] for line in log.read_text().splitlines()}
    # the MI355X's families (a CPU's dispatch picks the portable BF16 form)
    assert kernels & {"_scaled_split_kernel", "_gluon_split_kernel"}, kernels


def test_all_forms_runs_every_form_tuning_would_time_for_any_shape(sub, tmp_path):
    """`eval.py test --all-forms` under MLA_EMULATE: for a shape that is not a leaderboard case (its dispatch
    picks SCALED), every form first-call tuning would time on the MI355X runs, the Gluon kernel among them,
    each named on stdout with the kernels it ran and its verdict."""
    import os
    import re
    import subprocess
    cases = tmp_path / "cases.txt"
    cases.write_text("batchsize: 1; qseqlen: 1; kvseqlen: 17; seed: 3\n")
    env = {**os.environ, "MLA_EMULATE": "gfx950"}
    result = subprocess.run([sys.executable, "eval.py", "test", str(cases), "--all-forms"], cwd=mla.ROOT, env=env,
                            capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0 and "check: pass" in result.stdout, result.stdout + result.stderr[-2000:]
    forms = mla.tuning_forms(sub, 1, 17)
    named = re.findall(r"^test\.0\.form\.\d+: (.*), (\d+) split\(s\)$", result.stdout, re.M)
    assert named == [(variant.describe(), str(splits)) for variant, splits in forms], result.stdout
    assert result.stdout.count(".verdict: right") == len(forms) and any(v.gluon for v, _ in forms)
    assert re.search(r"^test\.0\.form\.\d+\.emulated: _gluon_split_kernel 1 launch", result.stdout, re.M)


def test_mla_emulate_takes_gfx950_only(tmp_path):
    import os
    import subprocess
    env = {**os.environ, "MLA_EMULATE": "gfx942"}
    result = subprocess.run([sys.executable, "eval.py", "test"], cwd=mla.ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 2 and "the emulator runs gfx950 only" in result.stderr


def _second_pass_edge_input(q_value, hot=130, length=300, seed=21):
    """One sequence of `length` tokens whose scores are q_value x K's dim 0: 0 for every token but `hot`
    (in the second tile: 256, MXFP4 code 4.0 at scale 2^6), so the Gluon kernel's score gap over the first
    tile's maximum is 256 q_value sm_scale log2(e); Q is q_value in dim 0 (exact in e4m3), 0 elsewhere;
    K's other dims random (the values)."""
    import math
    q, kv_data, qo_indptr, kv_indptr, config = mla.reference_input([length], seed)
    generator = torch.Generator().manual_seed(seed)
    kv = (torch.rand((length, 576), generator=generator) * 2 - 1).to(torch.bfloat16)
    kv[:, 0] = 0
    kv[hot, 0] = 256
    packed, scales = ref.quantize_mxfp4(kv)
    scales = ref.layout_mxfp4_scales(scales, "padded", 0xFF, generator)
    kv_data = {**kv_data, "bf16": kv.reshape(length, 1, 576),
               "mxfp4": (packed.view(ref.PACKED_DTYPE).reshape(length, 1, 288), scales.view(ref.SCALE_DTYPE))}
    q = torch.zeros_like(q)
    q[:, :, 0] = q_value
    gap_log2 = 256 * q_value * config["sm_scale"] * math.log2(math.e)
    return (q, kv_data, qo_indptr, kv_indptr, config), gap_log2


def test_the_gluon_second_pass_at_its_threshold(sub, variants):
    """The second pass's score gap just below its edge (ONCE_OVERFLOW_LOG2, 16) and just above it (15.4 and
    17.3): above, and only above, the tiles run again (the launch executes that many more wave instructions);
    both answers right. A threshold moved off its edge (issue 43: 8x) fails here, not only near fp32's 2^128."""
    variant = pick(variants, sub, "once", "direct", gluon=True)
    executed = {}
    for q_value in (1.0, 1.125):
        data, gap = _second_pass_edge_input(q_value)
        dispatch.take_record()
        out = mla.run_variant(sub, variant, data, 1)
        assert mla.wrong(sub, variant, data, out) is None, (q_value, gap)
        executed[gap] = sum(n for name, n in dispatch.take_record()["launches"] if name == "_gluon_split_kernel")
    below, above = sorted(executed)
    assert 0.9 * sub.ONCE_OVERFLOW_LOG2 < below < sub.ONCE_OVERFLOW_LOG2 < above < 1.1 * sub.ONCE_OVERFLOW_LOG2
    assert executed[above] > 1.25 * executed[below], executed   # the second pass: every tile again (+38%)


def test_a_module_without_the_dispatch_hooks_is_refused_by_name():
    """tools/gfx950/dispatch.py makes a module dispatch as on the MI355X through its _arch, _platform, _num_sms and
    STATE: a module that lacks one (a renamed hook) fails loudly, never runs with its own dispatch."""
    import types
    with pytest.raises(AttributeError, match="lacks _num_sms, STATE: it cannot be made to dispatch as on the MI355X"):
        dispatch._as_mi355x(types.SimpleNamespace(__name__="fork", _arch=None, _platform=None))


def test_a_competitors_own_module_without_any_hook_dispatches_as_it_is_written():
    """A competitor's own file has none of our hooks: the emulator runs its launches, its module is left as it is."""
    import types
    own = types.SimpleNamespace(__name__="submission", custom_kernel=len)
    installed = dict(dispatch._INSTALLED)
    dispatch._as_mi355x(own)
    assert vars(own) == {"__name__": "submission", "custom_kernel": len}
    assert dispatch._INSTALLED == installed
