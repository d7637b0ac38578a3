"""The aiter path's plumbing, through a test double with aiter's signatures at commit f3be04a
(the runner's build; submission.AITER_COMMIT).

The double's parameters are checked against the recorded f3be04a signatures (names and
order), it checks argument shapes, dtypes and contiguity, records every metadata build, and
computes the a8w8 math from exactly the arguments it is given, so a wrong scale, indptr or
buffer shows up in the output. Where real aiter imports (ROCm), the real thing is tested too.
"""
import inspect
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import reference as ref
import submission

HAS_REAL_AITER = submission.STATE.aiter is not None
# The double's tests run where the Triton quantization of Q runs: the interpreter, or a GPU.
DEVICE = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


# aiter f3be04a (2026-03-04): parameter names in order (read off the aiter sources of that commit).
F3BE04A_SIGNATURES = {
    "get_mla_metadata_info_v1": ["batch_size", "max_seqlen_qo", "num_head_qo", "q_dtype", "kv_dtype",
                                 "is_sparse", "fast_mode", "num_kv_splits", "intra_batch_mode"],
    "get_mla_metadata_v1": ["qo_indptr", "kv_indptr", "kv_last_page_len", "num_heads_per_head_k",
                            "num_heads_k", "is_causal", "work_metadata", "work_info_set", "work_indptr",
                            "reduce_indptr", "reduce_final_map", "reduce_partial_map", "page_size",
                            "kv_granularity", "max_seqlen_qo", "uni_seqlen_qo", "fast_mode", "topk",
                            "max_split_per_batch", "intra_batch_mode", "dtype_q", "dtype_kv"],
    "mla_decode_fwd": ["q", "kv_buffer", "o", "qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_lens",
                       "max_seqlen_q", "page_size", "nhead_kv", "sm_scale", "logit_cap", "num_kv_splits",
                       "num_kv_splits_indptr", "work_meta_data", "work_indptr", "work_info_set",
                       "reduce_indptr", "reduce_final_map", "reduce_partial_map", "q_scale", "kv_scale",
                       "intra_batch_mode"],
}


class FakeAiter:
    def __init__(self):
        self.fills = []  # kv lengths each metadata build saw
        self.decodes = 0

    def api(self):
        return {"mla_decode_fwd": self.mla_decode_fwd, "metadata_info": self.metadata_info,
                "metadata_fill": self.metadata_fill, "fp8": torch.float8_e4m3fn}

    def metadata_info(self, batch_size, max_seqlen_qo, num_head_qo, q_dtype, kv_dtype, is_sparse,
                      fast_mode=True, num_kv_splits=32, intra_batch_mode=False):
        assert (max_seqlen_qo, num_head_qo, is_sparse) == (1, 16, False)
        assert q_dtype == kv_dtype == torch.float8_e4m3fn
        return [((batch_size + 1,), torch.int32)] + [((batch_size * num_kv_splits,), torch.int32)] * 5

    def metadata_fill(self, qo_indptr, kv_indptr, kv_last_page_len, num_heads_per_head_k, num_heads_k,
                      is_causal, work_metadata, work_info_set, work_indptr, reduce_indptr,
                      reduce_final_map, reduce_partial_map, page_size=1, kv_granularity=16, max_seqlen_qo=-1,
                      uni_seqlen_qo=-1, fast_mode=True, topk=-1, max_split_per_batch=-1, intra_batch_mode=False,
                      dtype_q=None, dtype_kv=None):
        assert (num_heads_per_head_k, num_heads_k, page_size, max_seqlen_qo) == (16, 1, 1, 1)
        assert torch.equal(kv_last_page_len, kv_indptr[1:] - kv_indptr[:-1])
        work_metadata.copy_(kv_indptr)  # what the decode checks it was built from
        self.fills.append(kv_last_page_len.tolist())

    def mla_decode_fwd(self, q, kv_buffer, o, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens,
                       max_seqlen_q, page_size=1, nhead_kv=1, sm_scale=None, logit_cap=0.0,
                       num_kv_splits=None, num_kv_splits_indptr=None, work_meta_data=None,
                       work_indptr=None, work_info_set=None, reduce_indptr=None, reduce_final_map=None,
                       reduce_partial_map=None, q_scale=None, kv_scale=None, intra_batch_mode=False):
        total_kv = kv_buffer.shape[0]
        assert q.dtype == kv_buffer.dtype == torch.float8_e4m3fn and q.shape[1:] == (16, 576)
        assert q.is_contiguous(), "mla_decode_fwd reads q as a dense array"
        assert kv_buffer.shape == (total_kv, 1, 1, 576) and o.dtype == torch.bfloat16
        assert o.shape == (q.shape[0], 16, 512) and max_seqlen_q == 1 and (page_size, nhead_kv) == (1, 1)
        assert torch.equal(kv_indices, torch.arange(total_kv, dtype=torch.int32, device=kv_indices.device))
        assert torch.equal(work_meta_data, kv_indptr), "metadata is stale for these lengths"
        assert q_scale.shape == kv_scale.shape == (1,) and intra_batch_mode
        kv = kv_buffer.reshape(total_kv, 576).float() * kv_scale
        o.copy_(ref.attention_fp32(q.float() * q_scale, kv, qo_indptr, kv_indptr, sm_scale))
        self.decodes += 1


@pytest.fixture
def fake(fresh_plans, monkeypatch):
    double = FakeAiter()
    monkeypatch.setattr(submission.STATE, "aiter", double.api())
    monkeypatch.setenv("MLA_PATH", "aiter")
    return double


pytestmark_double = pytest.mark.skipif(HAS_REAL_AITER, reason="real aiter present: tested for real below")


def aiter_plans():
    return [plan for plan in submission.STATE.plans.values() if isinstance(plan, submission._AiterPlan)]


@pytestmark_double
@pytest.mark.parametrize("batch", [3, 6])  # Q quantized in one launch / in two
def test_aiter_path_plumbing_gives_the_a8w8_answer(fake, batch):
    data = ref.generate_input(batch, 1, 64, seed=41, device=DEVICE)
    out = submission.custom_kernel(data)
    assert fake.decodes == 1 and fake.fills == [[64] * batch]
    assert torch.equal(out, ref.emulated_a8w8(data))
    assert [plan.quantizer for plan in aiter_plans()] == ["triton"]  # its self-check passed
    assert len(submission.q8_launches(batch)) == (1 if batch <= 4 else 2)


@pytestmark_double
def test_metadata_rebuilt_when_lengths_may_change(fake):
    a = ref.generate_input(3, 1, 64, seed=42, kv_lens=[64, 10, 30], device=DEVICE)
    submission.custom_kernel(a)
    submission.custom_kernel(a)  # same kv_indptr object, unmodified: metadata reused
    assert fake.fills == [[64, 10, 30]]
    b = ref.generate_input(3, 1, 64, seed=43, kv_lens=[30, 64, 10], device=DEVICE)
    assert b[1]["fp8"][0].shape == a[1]["fp8"][0].shape  # same plan (same shapes) ...
    out = submission.custom_kernel(b)  # ... but new lengths: rebuilt
    assert fake.fills[-1] == [30, 64, 10]
    assert torch.equal(out, ref.emulated_a8w8(b))
    b[3][1:] = torch.tensor([20, 40, 104], dtype=torch.int32)  # in place: version counter moves
    submission.custom_kernel(b)
    assert fake.fills[-1] == [20, 20, 64] and len(fake.fills) == 3


@pytestmark_double
def test_aiter_path_needs_the_fp8_cache(fake):
    data = ref.generate_input(2, 1, 32, seed=44, device=DEVICE)
    del data[1]["fp8"]
    with pytest.raises(ValueError, match="kv_data is missing key 'fp8'"):
        submission.custom_kernel(data)


def test_the_double_has_the_f3be04a_signatures():
    assert submission.AITER_COMMIT == "f3be04a"
    double = FakeAiter()
    for name, method in (("get_mla_metadata_info_v1", double.metadata_info),
                         ("get_mla_metadata_v1", double.metadata_fill), ("mla_decode_fwd", double.mla_decode_fwd)):
        assert list(inspect.signature(method).parameters) == F3BE04A_SIGNATURES[name], name


def test_the_emulated_aiter_has_the_f3be04a_signatures():
    """tools/aiter_mla's stand-in (aiter's code objects on the gfx950 emulator) takes what aiter takes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    from aiter_mla import standin
    api = standin.api()
    for name, key in (("get_mla_metadata_info_v1", "metadata_info"), ("get_mla_metadata_v1", "metadata_fill"),
                      ("mla_decode_fwd", "mla_decode_fwd")):
        names = list(inspect.signature(api[key]).parameters)
        assert names[:len(F3BE04A_SIGNATURES[name])] == F3BE04A_SIGNATURES[name], name


@pytest.mark.skipif(not HAS_REAL_AITER, reason="needs aiter on a ROCm GPU")
def test_real_aiter_python_signatures_start_like_f3be04a():
    from aiter.mla import mla_decode_fwd
    names = list(inspect.signature(mla_decode_fwd).parameters)
    assert names[:len(F3BE04A_SIGNATURES["mla_decode_fwd"])] == F3BE04A_SIGNATURES["mla_decode_fwd"]


@pytestmark_double
def test_non_contiguous_q_reaches_aiter_contiguous(fake):
    data = ref.generate_input(2, 1, 32, seed=46, device=DEVICE)
    wide = torch.zeros((2, 16, 640), dtype=torch.bfloat16, device=DEVICE)
    wide[..., :576] = data[0]
    q = wide[..., :576]
    assert not q.is_contiguous()
    out = submission.custom_kernel((q,) + tuple(data[1:]))
    assert torch.equal(out, ref.emulated_a8w8(data))


def test_dispatch_on_gfx950_with_aiter(fresh_plans, monkeypatch):
    """Predicted: Triton everywhere while a native variant works (the SCALED family, then the
    BF16 one); the seed's rule (aiter above 64k tokens) once both are broken, and on an
    architecture with no native conversion; a measured table overrides both. (No form proven on the emulator:
    tests/test_dispatch.py holds the proven dispatch.)"""
    monkeypatch.setattr(submission, "EMULATOR_PROVEN", frozenset())
    monkeypatch.setattr(submission.STATE, "aiter", FakeAiter().api())
    monkeypatch.setattr(submission, "_arch", lambda device: "gfx950")
    monkeypatch.setattr(submission.STATE, "failed_variants", set())
    monkeypatch.delenv("MLA_PATH", raising=False)
    cpu = torch.device("cpu")
    cases = [(b, n) for b in (4, 32, 64, 256) for n in (1024, 8192)]
    assert all(submission.choose(b, n, cpu).path == "triton" for b, n in cases)
    for b, n in cases:  # the native variant of every predicted launch failed, in both families
        launch = submission.default_launch(b, n, submission._num_sms(cpu))
        submission.STATE.failed_variants.add(submission.variants_for("gfx950", "hip", launch.block_n,
                                                               launch.num_warps, 1, launch.scores, launch.merge)[0])
        scaled = submission.scaled_launch(b, n, submission._num_sms(cpu))
        submission.STATE.failed_variants.add(submission.variants_for("gfx950", "hip", scaled.block_n, scaled.num_warps,
                                                               scaled.num_stages, scaled.scores, scaled.merge)[0])
    submission.STATE.predictions.clear()
    chosen = {case: submission.choose(*case, cpu) for case in cases}
    assert [k for k, v in chosen.items() if v == submission.AITER_LAUNCH] == [(32, 8192), (64, 8192), (256, 1024), (256, 8192)]
    monkeypatch.setitem(submission.MEASURED_DISPATCH, "gfx950", {(4, 1024): "aiter",
                                                                  (256, 8192): "bf16 t64 w4 s8 st2 combine"})
    assert submission.choose(4, 1024, cpu) == submission.AITER_LAUNCH
    assert submission.choose(256, 8192, cpu) == submission.Launch(64, 4, 8, 1, 0, submission.MERGE_COMBINE)  # hip: 1 stage
    monkeypatch.setattr(submission, "_arch", lambda device: "gfx942")  # no native conversion: the portable one
    submission.STATE.predictions.clear()
    assert submission.choose(4, 1024, cpu).path == "triton" and submission.choose(256, 8192, cpu) == submission.AITER_LAUNCH
    monkeypatch.setenv("MLA_PATH", "triton")
    monkeypatch.setattr(submission, "_arch", lambda device: "gfx950")
    assert submission.choose(4, 1024, cpu).path == "triton"


def test_aiter_absence_is_reported_not_fatal():
    if HAS_REAL_AITER:
        pytest.skip("aiter is present")
    assert submission.STATE.aiter_error  # why aiter is not used, e.g. "not a ROCm GPU"


@pytest.mark.skipif(not HAS_REAL_AITER, reason="needs aiter on a ROCm GPU")
@pytest.mark.parametrize("batch, kv_len", [(32, 8192), (256, 1024)])
def test_real_aiter_path(fresh_plans, monkeypatch, batch, kv_len):
    monkeypatch.setenv("MLA_PATH", "aiter")
    data = ref.generate_input(batch, 1, kv_len, seed=45)
    ok, message = ref.check_implementation(data, submission.custom_kernel(data))
    assert ok, message


# --- Q to fp8 in Triton (submission.quantize_q_fp8) against its torch twin -------------------

E4M3 = torch.float8_e4m3fn
CPU = torch.device("cpu")


def triton_q8(q, kv_indptr=None):
    """quantize_q_fp8 into fresh buffers (on DEVICE) -> (q8 bytes, scale, page lengths) on the CPU."""
    batch = q.shape[0]
    if kv_indptr is None:
        kv_indptr = torch.arange(batch + 1, dtype=torch.int32) * 5
    q8 = torch.full((batch, 16, 576), 0x7F, dtype=torch.uint8, device=DEVICE).view(E4M3)  # NaN: unwritten shows
    scale = torch.full((1,), float("nan"), device=DEVICE)
    page_len = torch.full((batch,), -1, dtype=torch.int32, device=DEVICE)
    submission.quantize_q_fp8(q.to(DEVICE), kv_indptr.to(DEVICE), q8, scale, page_len,
                              torch.full((batch,), float("nan"), device=DEVICE))
    return q8.view(torch.uint8).cpu(), scale.cpu(), page_len.cpu()


def twin_q8(q):
    q8, scale = submission._quantize_fp8_per_tensor(q, E4M3)
    return q8.view(torch.uint8), scale


def bf16_bits(bits):
    return torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def e4m3_ties(values):
    """How many of `values` (float32) lie exactly halfway between two e4m3 neighbours."""
    grid = torch.arange(0, 0x7F, dtype=torch.uint8).view(E4M3).float()  # 0 .. 448, sorted
    magnitude = values.abs().flatten()
    inside = magnitude < 448
    upper = torch.searchsorted(grid, magnitude[inside], right=True).clamp(max=grid.numel() - 1)
    lower = upper - 1
    return int((magnitude[inside] == (grid[lower] + grid[upper]) / 2).sum())


def q8_cases():
    """name -> Q (bf16): random ones at many magnitudes and the edge values."""
    gen = torch.Generator().manual_seed(1606)

    def randn(batch, times=1.0):
        return (torch.randn(batch, 16, 576, generator=gen) * times).to(torch.bfloat16)
    cases = {f"randn x{times:g} batch {batch}": randn(batch, times)
             for batch in (1, 4, 5) for times in (1e-30, 1e-5, 1.0, 300.0, 1e30)}
    cases["heavy tails"] = (torch.randn(6, 16, 576, generator=gen) ** 5).to(torch.bfloat16)
    signs = torch.randint(0, 2, (4, 16, 576), generator=gen) * 2 - 1
    cases["every exponent"] = (signs * torch.exp2(torch.randint(-60, 60, (4, 16, 576), generator=gen).float()
                                                  + torch.rand(4, 16, 576, generator=gen))).to(torch.bfloat16)
    bits = torch.randint(-(1 << 15), 1 << 15, (5, 16, 576), generator=gen, dtype=torch.int32).to(torch.int16)
    finite = bits.view(torch.bfloat16)
    cases["random bit patterns"] = torch.where(finite.isfinite(), finite, torch.zeros((), dtype=torch.bfloat16))
    q = randn(4)
    q[1, 3, 7] = 448.0 * 4  # amax exactly representable: scale exactly 4
    cases["amax 4 x 448"] = q
    q = randn(2)
    q[1, 5, 100] = -50.0  # the largest magnitude is negative
    cases["negative maximum"] = q
    q = randn(5)
    q[4, 15, 575] = -1000.0  # ... in the last element
    cases["negative maximum, last element"] = q
    cases["zeros"] = torch.zeros(3, 16, 576, dtype=torch.bfloat16)
    cases["negative zeros"] = -torch.zeros(1, 16, 576, dtype=torch.bfloat16)
    cases["amax under 1e-12 (clamped)"] = randn(2, 1e-14)
    cases["amax at the clamp"] = torch.full((1, 16, 576), submission.Q8_AMAX_FLOOR.value, dtype=torch.bfloat16)
    for batch in (1, 4, 7):  # every bf16 value of e4m3's range, ties included, scale 1/16
        cases[f"edge case batch {batch}"] = submission.q8_edge_case(batch, CPU)
    edge = submission.q8_edge_case(4, CPU)
    cases["edge case x 2^20, negated"] = -edge * 2.0 ** 20
    cases["edge case x 3 (ties, scale 3 / 16)"] = (edge.float() * 3).to(torch.bfloat16)
    cases["uniform"] = (torch.rand(3, 16, 576, generator=gen) * 2 - 1).to(torch.bfloat16)
    wide = torch.randn(3, 16, 640, generator=gen).to(torch.bfloat16)
    cases["non-contiguous rows"] = wide[..., :576]
    cases["heads outermost"] = randn(5).transpose(0, 1).contiguous().transpose(0, 1)
    return cases


Q8_CASES = q8_cases()


@pytest.mark.parametrize("name", list(Q8_CASES))
def test_triton_q8_is_the_torch_twin_bit_for_bit(name):
    """The Triton quantization (interpreter) gives the twin's e4m3 bytes and float32 scale,
    and the twin is the reference's quantize_fp8; the page lengths come out too."""
    q = Q8_CASES[name]
    batch = q.shape[0]
    kv_indptr = torch.cumsum(torch.tensor([0] + [3 * b + 1 for b in range(batch)]), 0).to(torch.int32)
    q8, scale, page_len = triton_q8(q, kv_indptr)
    twin_bytes, twin_scale = twin_q8(q)
    assert scale.dtype == torch.float32 and scale.shape == (1,)
    assert torch.equal(scale, twin_scale), (scale, twin_scale)
    mismatch = (q8 != twin_bytes).nonzero()
    assert mismatch.numel() == 0, f"{len(mismatch)} bytes differ, first at {mismatch[0].tolist()}"
    reference_q8, reference_scale = ref.quantize_fp8(q, E4M3)
    assert torch.equal(twin_bytes, reference_q8.view(torch.uint8)) and torch.equal(twin_scale, reference_scale)
    assert torch.equal(page_len, kv_indptr[1:] - kv_indptr[:-1])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter reads the patched global at run time")
def test_the_token_maxima_are_reduced_in_steps(monkeypatch):
    """More token maxima than one reduction step takes (batch > 256 on the GPU; here a step
    of 2 for 5 tokens, the interpreter reading the global at run time): the scale is still
    that of the largest of all, wherever it is."""
    import triton.language as tl
    monkeypatch.setattr(submission, "Q8_PARTIALS_BLOCK", tl.constexpr(2))
    for token in (0, 2, 4):
        q = torch.randn(5, 16, 576, generator=torch.Generator().manual_seed(token)).to(torch.bfloat16)
        q[token, 7, 300] = -77.0
        q8, scale, _ = triton_q8(q)
        assert torch.equal(scale, twin_q8(q)[1]) and torch.equal(q8, twin_q8(q)[0]), token


def test_the_edge_cases_reach_every_rounding_case():
    """The edge cases do what they claim: e4m3 ties (under scales 1/16 and 3/16), subnormals,
    both signs, saturation at 448, zeros."""
    for name, expected_scale in (("edge case batch 4", 1 / 16), ("edge case x 3 (ties, scale 3 / 16)", 3 / 16)):
        q = Q8_CASES[name]
        _, scale = twin_q8(q)
        assert scale.item() == expected_scale
        ratio = (q / scale.to(torch.bfloat16)).float()
        assert e4m3_ties(ratio) >= 200, name
        assert (ratio.abs() == 448).any() and ((ratio.abs() < 2.0 ** -6) & (ratio != 0)).any()
        assert (ratio < 0).any() and (ratio == 0).any()
    q = Q8_CASES["amax 4 x 448"]
    assert twin_q8(q)[1].item() == 4.0


def test_the_reciprocal_gives_the_quotients_bf16():
    """The kernel multiplies by float32(1 / scale) where torch divides: for every finite bf16 q
    and every bf16 scale significand (at four scale exponents) the two round to the same bf16.
    And torch on a GPU divides by 448 as a multiply by float32(1 / 448): the same bf16 scale
    as the division for every bf16 amax."""
    values = torch.arange(0, 0x7F80, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    values = torch.cat([values, -values])
    for exponent in (-40, -7, 0, 5):
        for significand in range(128, 256):
            scale = torch.tensor(significand * 2.0 ** (exponent - 7))
            quotient = values / scale
            same = (values * (1.0 / scale)).to(torch.bfloat16).view(torch.int16) == \
                quotient.to(torch.bfloat16).view(torch.int16)
            assert bool((same | ~quotient.isfinite()).all()), (exponent, significand)
    amax = values[: values.numel() // 2]
    assert torch.equal((amax / 448.0).to(torch.bfloat16), (amax * torch.tensor(1 / 448.0)).to(torch.bfloat16))


class DeviceWork(TorchDispatchMode):
    """Counts what would each be one device launch on a GPU: torch operators other than views
    and allocations, and Triton launches (submission._launch_kernel); aiter's calls apart.
    Operators issued inside a Triton launch (the interpreter) or the aiter double are not ours."""

    def __init__(self):
        super().__init__()
        self.torch_ops, self.triton, self.aiter, self.paused = [], 0, [], 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused and not func.is_view and func.__name__.split(".")[0] not in ("empty", "empty_strided"):
            self.torch_ops.append(str(func))
        return func(*args, **(kwargs or {}))

    def opaque(self, name, call):
        def run(*args, **kwargs):
            if name == "triton":
                self.triton += 1
            else:
                self.aiter.append(name)
            self.paused += 1
            try:
                return call(*args, **kwargs)
            finally:
                self.paused -= 1
        return run

    def launches(self):
        return len(self.torch_ops) + self.triton


@pytest.fixture
def counted(fake, monkeypatch):
    """The aiter path through the double, its launches counted."""
    work = DeviceWork()
    monkeypatch.setattr(submission, "_launch_kernel", work.opaque("triton", submission._launch_kernel))
    api = dict(submission.STATE.aiter)
    for name in ("metadata_fill", "mla_decode_fwd"):
        api[name] = work.opaque(name, api[name])
    monkeypatch.setattr(submission.STATE, "aiter", api)
    return work


@pytestmark_double
@pytest.mark.parametrize("batch, triton_launches", [(4, 1), (5, 2)])
def test_launches_per_call_on_the_aiter_path(counted, batch, triton_launches):
    """Our launches per call besides aiter's: the Triton quantization's 1 (batch <= 4) or 2,
    page lengths included, against the torch twin's 8 for Q plus 1 for the page lengths when
    the metadata is rebuilt (every call in the ranked mode: a fresh kv_indptr each time)."""
    first = ref.generate_input(batch, 1, 40, seed=48, device=DEVICE)
    fresh = ref.generate_input(batch, 1, 40, seed=49, device=DEVICE)
    submission.custom_kernel(first)  # builds the plan and checks the Triton quantization: untimed
    (plan,) = aiter_plans()
    assert plan.quantizer == "triton"
    counts = {}
    for quantizer in ("triton", "torch"):
        plan.quantizer = quantizer
        for name, data in (("fresh input", fresh), ("same input", fresh), ("fresh input again", first)):
            counted.torch_ops, counted.triton, counted.aiter = [], 0, []
            with counted:
                out = submission.custom_kernel(data)
            assert torch.equal(out, ref.emulated_a8w8(data)), (quantizer, name)
            counts[quantizer, name] = (counted.launches(), tuple(counted.aiter))
    with_metadata, without = ("metadata_fill", "mla_decode_fwd"), ("mla_decode_fwd",)
    assert counts["triton", "fresh input"] == counts["triton", "fresh input again"] == (triton_launches, with_metadata)
    assert counts["triton", "same input"] == (triton_launches, without)
    assert counts["torch", "fresh input"] == counts["torch", "fresh input again"] == (9, with_metadata)
    assert counts["torch", "same input"] == (8, without)


@pytestmark_double
def test_a_wrong_triton_quantization_falls_back_to_the_twin(fake, monkeypatch):
    """The plan's first run checks quantize_q_fp8 against the twin (as on the GPU, where the
    interpreter's rounding is not the hardware's): wrong bytes or a failed build -> one
    warning, the twin from then on, the answer unchanged."""
    monkeypatch.setattr(submission.STATE, "warned", set())
    real = submission.quantize_q_fp8

    def one_byte_off(q, kv_indptr, q8, *rest):
        real(q, kv_indptr, q8, *rest)
        q8.view(torch.uint8)[0, 0, 0] += 1
    monkeypatch.setattr(submission, "quantize_q_fp8", one_byte_off)
    data = ref.generate_input(2, 1, 32, seed=50, device=DEVICE)
    with pytest.warns(RuntimeWarning, match="Triton fp8 quantization of Q for aiter failed"):
        out = submission.custom_kernel(data)
    assert [plan.quantizer for plan in aiter_plans()] == ["torch"]
    assert torch.equal(out, ref.emulated_a8w8(data))
    submission.STATE.plans.clear()

    def fails_to_build(*args):
        raise submission.KernelLaunchError("CompilationError: at 3:4")
    monkeypatch.setattr(submission, "quantize_q_fp8", fails_to_build)
    monkeypatch.setattr(submission.STATE, "warned", set())
    with pytest.warns(RuntimeWarning, match="CompilationError"):
        out = submission.custom_kernel(data)
    assert [plan.quantizer for plan in aiter_plans()] == ["torch"]
    assert torch.equal(out, ref.emulated_a8w8(data))


@pytestmark_double
def test_first_call_tuning_times_aiter_with_its_metadata_rebuilt(fake, monkeypatch):
    """In the ranked mode every timed call has a fresh input, so aiter rebuilds its metadata
    on every call; first-call tuning must time it so: one build on the untimed first run, one
    more on every timed run, none on the call's own run after."""
    monkeypatch.delenv("MLA_PATH")
    monkeypatch.setenv("MLA_TUNE", "1")
    monkeypatch.setattr(submission.STATE, "tuned", {})
    monkeypatch.setattr(submission.STATE, "tune_log", submission.fresh_tune_log())
    monkeypatch.setattr(submission, "ranked_candidates", lambda batch, kv_len, device: [submission.AITER_LAUNCH])
    monkeypatch.setattr(submission, "TUNE_ROUNDS", 3)
    monkeypatch.setattr(submission, "TUNE_CASE_TIMING_S", 1e9)
    monkeypatch.setattr(submission, "TUNE_CASE_WALL_S", 1e9)
    data = ref.generate_input(3, 1, 64, seed=51, device=DEVICE)
    out = submission.custom_kernel(data)
    assert submission.STATE.tune_log["cases"][0]["pick"] == submission.AITER_LAUNCH
    # decodes: the build (aiter's first run), the candidate's first run, 3 timed, the
    # pick's kernel times, the call itself; metadata: the build and each timed run
    assert len(fake.fills) == 1 + 3 and fake.decodes == 1 + 1 + 3 + 1 + 1
    assert torch.equal(out, ref.emulated_a8w8(data))


class RaisesAtCallTime(FakeAiter):
    """aiter whose decode raises on every call (a kernel it cannot load, say)."""

    def mla_decode_fwd(self, *args, **kwargs):
        self.decodes += 1
        raise RuntimeError("HIP error: invalid device function")


class MovedApi(FakeAiter):
    """aiter whose decode no longer takes intra_batch_mode (an API that moved)."""

    def mla_decode_fwd(self, q, kv_buffer, o, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens,
                       max_seqlen_q, page_size=1, nhead_kv=1, sm_scale=None, logit_cap=0.0,
                       num_kv_splits=None, num_kv_splits_indptr=None, work_meta_data=None,
                       work_indptr=None, work_info_set=None, reduce_indptr=None, reduce_final_map=None,
                       reduce_partial_map=None, q_scale=None, kv_scale=None):
        raise AssertionError("never called: the glue checks the signature first")


@pytestmark_double
@pytest.mark.parametrize("double", [RaisesAtCallTime, MovedApi], ids=["raises", "moved-api"])
def test_aiter_failing_at_call_time_is_one_warning_and_the_triton_result(fresh_plans, monkeypatch, double):
    """Outside tuning (the table picks aiter), aiter raising at call time, or its API having
    moved, is one warning and the Triton chain from then on, with the right answer."""
    stand_in = double()
    monkeypatch.setattr(submission.STATE, "aiter", stand_in.api())
    monkeypatch.setattr(submission.STATE, "warned", set())
    monkeypatch.delenv("MLA_PATH", raising=False)
    monkeypatch.setitem(submission.MEASURED_DISPATCH, submission._arch(DEVICE), {(2, 40): "aiter"})
    data = ref.generate_input(2, 1, 40, seed=47, device=DEVICE)
    with pytest.warns(RuntimeWarning, match="aiter failed .*every case runs on Triton from now on") as record:
        out = submission.custom_kernel(data)
        again = submission.custom_kernel(data)
    assert len([w for w in record if "aiter failed" in str(w.message)]) == 1
    assert submission.STATE.aiter is None and stand_in.decodes <= 1
    expected = ref.exact_attention(data)
    for result in (out, again):
        assert bool(((result.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())
    if double is MovedApi:
        message = str(record[0].message)
        assert "aiter.mla.mla_decode_fwd does not take the arguments the glue passes (got an unexpected keyword " \
               "argument 'intra_batch_mode'" in message and "its signature: (q, kv_buffer, o," in message


@pytestmark_double
def test_a_moved_api_is_a_failed_tuning_candidate_with_its_signature(fresh_plans, monkeypatch):
    monkeypatch.setattr(submission.STATE, "aiter", MovedApi().api())
    monkeypatch.setattr(submission.STATE, "warned", set())
    monkeypatch.setattr(submission.STATE, "tuned", {})
    monkeypatch.setattr(submission.STATE, "tune_log", submission.fresh_tune_log())
    monkeypatch.setattr(submission, "ranked_candidates", lambda batch, kv_len, device: [submission.AITER_LAUNCH])
    monkeypatch.delenv("MLA_PATH", raising=False)
    monkeypatch.setenv("MLA_TUNE", "1")
    data = ref.generate_input(2, 1, 40, seed=48, device=DEVICE)
    with pytest.warns(RuntimeWarning, match="aiter failed"):
        out = submission.custom_kernel(data)  # no candidate ran: the prediction (Triton)
    report = submission.tuning_report()
    assert "failed aiter: AiterSignatureError: aiter.mla.mla_decode_fwd does not take the arguments" in report
    assert "its signature: (q, kv_buffer, o, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens" in report
    expected = ref.exact_attention(data)
    assert bool(((out.float() - expected).abs() <= 8e-3 + 2e-2 * expected.abs()).all())


def test_the_aiter_commit_is_read_from_the_installed_version(monkeypatch):
    import importlib.metadata
    monkeypatch.setattr(importlib.metadata, "version",
                        lambda name: "0.1.10.dev57+ga722aff38" if name == "amd-aiter" else "0")
    assert submission.aiter_commit_found() == "a722aff38 (from the version 0.1.10.dev57+ga722aff38)"

    def not_installed(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    monkeypatch.setitem(sys.modules, "aiter", None)  # no checkout to read either
    assert submission.aiter_commit_found() == "unknown"
