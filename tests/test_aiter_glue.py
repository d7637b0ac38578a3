"""The aiter path's plumbing, through a test double with aiter's signatures at commit f3be04a
(the runner's build; submission.AITER_COMMIT).

The double's parameters are checked against the recorded f3be04a signatures (names and
order), it checks argument shapes, dtypes and contiguity, records every metadata build, and
computes the a8w8 math from exactly the arguments it is given, so a wrong scale, indptr or
buffer shows up in the output. Where real aiter imports (ROCm), the real thing is tested too.
"""
import inspect

import pytest
import torch

import reference as ref
import submission

HAS_REAL_AITER = submission.AITER is not None


# aiter f3be04a (2026-03-04): parameter names in order (../shared/notes/leaderboard.md).
F3BE04A_SIGNATURES = {
    "get_mla_metadata_info_v1": ["batch_size", "max_seqlen_qo", "num_head_qo", "q_dtype", "kv_dtype",
                                 "is_sparse", "fast_mode", "num_kv_splits", "intra_batch_mode"],
    "get_mla_metadata_v1": ["qo_indptr", "kv_indptr", "kv_last_page_len", "num_heads_per_head_k",
                            "num_heads_k", "is_causal", "work_metadata", "work_info_set", "work_indptr",
                            "reduce_indptr", "reduce_final_map", "reduce_partial_map", "page_size",
                            "kv_granularity", "max_seqlen_qo", "uni_seqlen_qo", "fast_mode",
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
                      reduce_final_map, reduce_partial_map, *, page_size, kv_granularity, max_seqlen_qo,
                      uni_seqlen_qo, fast_mode, max_split_per_batch, intra_batch_mode, dtype_q, dtype_kv):
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
        assert torch.equal(kv_indices, torch.arange(total_kv, dtype=torch.int32))
        assert torch.equal(work_meta_data, kv_indptr), "metadata is stale for these lengths"
        assert q_scale.shape == kv_scale.shape == (1,) and intra_batch_mode
        kv = kv_buffer.reshape(total_kv, 576).float() * kv_scale
        o.copy_(ref.attention_fp32(q.float() * q_scale, kv, qo_indptr, kv_indptr, sm_scale))
        self.decodes += 1


@pytest.fixture
def fake(fresh_plans, monkeypatch):
    double = FakeAiter()
    monkeypatch.setattr(submission, "AITER", double.api())
    monkeypatch.setenv("MLA_PATH", "aiter")
    return double


pytestmark_double = pytest.mark.skipif(HAS_REAL_AITER, reason="real aiter present: tested for real below")


@pytestmark_double
def test_aiter_path_plumbing_gives_the_a8w8_answer(fake):
    data = ref.generate_input(3, 1, 64, seed=41, device=torch.device("cpu"))
    out = submission.custom_kernel(data)
    assert fake.decodes == 1 and fake.fills == [[64, 64, 64]]
    assert torch.equal(out, ref.emulated_a8w8(data))


@pytestmark_double
def test_metadata_rebuilt_when_lengths_may_change(fake):
    a = ref.generate_input(3, 1, 64, seed=42, kv_lens=[64, 10, 30], device=torch.device("cpu"))
    submission.custom_kernel(a)
    submission.custom_kernel(a)  # same kv_indptr object, unmodified: metadata reused
    assert fake.fills == [[64, 10, 30]]
    b = ref.generate_input(3, 1, 64, seed=43, kv_lens=[30, 64, 10], device=torch.device("cpu"))
    assert b[1]["fp8"][0].shape == a[1]["fp8"][0].shape  # same plan (same shapes) ...
    out = submission.custom_kernel(b)  # ... but new lengths: rebuilt
    assert fake.fills[-1] == [30, 64, 10]
    assert torch.equal(out, ref.emulated_a8w8(b))
    b[3][1:] = torch.tensor([20, 40, 104], dtype=torch.int32)  # in place: version counter moves
    submission.custom_kernel(b)
    assert fake.fills[-1] == [20, 20, 64] and len(fake.fills) == 3


@pytestmark_double
def test_aiter_path_needs_the_fp8_cache(fake):
    data = ref.generate_input(2, 1, 32, seed=44, device=torch.device("cpu"))
    del data[1]["fp8"]
    with pytest.raises(ValueError, match="kv_data is missing key 'fp8'"):
        submission.custom_kernel(data)


def test_the_double_has_the_f3be04a_signatures():
    assert submission.AITER_COMMIT == "f3be04a"
    double = FakeAiter()
    for name, method in (("get_mla_metadata_info_v1", double.metadata_info),
                         ("get_mla_metadata_v1", double.metadata_fill), ("mla_decode_fwd", double.mla_decode_fwd)):
        assert list(inspect.signature(method).parameters) == F3BE04A_SIGNATURES[name], name


@pytest.mark.skipif(not HAS_REAL_AITER, reason="needs aiter on a ROCm GPU")
def test_real_aiter_python_signatures_start_like_f3be04a():
    from aiter.mla import mla_decode_fwd
    names = list(inspect.signature(mla_decode_fwd).parameters)
    assert names[:len(F3BE04A_SIGNATURES["mla_decode_fwd"])] == F3BE04A_SIGNATURES["mla_decode_fwd"]


@pytestmark_double
def test_non_contiguous_q_reaches_aiter_contiguous(fake):
    data = ref.generate_input(2, 1, 32, seed=46, device=torch.device("cpu"))
    wide = torch.zeros((2, 16, 640), dtype=torch.bfloat16)
    wide[..., :576] = data[0]
    q = wide[..., :576]
    assert not q.is_contiguous()
    out = submission.custom_kernel((q,) + tuple(data[1:]))
    assert torch.equal(out, ref.emulated_a8w8(data))


def test_dispatch_on_gfx950_with_aiter(fresh_plans, monkeypatch):
    """Predicted: Triton everywhere while a native variant works (the SCALED family, then the
    BF16 one); the seed's rule (aiter above 64k tokens) once both are broken; a measured
    table overrides both."""
    monkeypatch.setattr(submission, "AITER", FakeAiter().api())
    monkeypatch.setattr(submission, "_arch", lambda device: "gfx950")
    monkeypatch.setattr(submission, "FAILED_VARIANTS", set())
    monkeypatch.delenv("MLA_PATH", raising=False)
    cpu = torch.device("cpu")
    cases = [(b, n) for b in (4, 32, 64, 256) for n in (1024, 8192)]
    assert all(submission.choose(b, n, cpu)[0] == "triton" for b, n in cases)
    for b, n in cases:  # the native variant of every predicted launch failed, in both families
        launch = submission.default_launch(b, n, submission._num_sms(cpu))
        submission.FAILED_VARIANTS.add(submission.variants_for("gfx950", "hip", launch.block_n,
                                                               launch.num_warps, 1, launch.scores, launch.merge)[0])
        scaled = submission.scaled_launch(b, n, submission._num_sms(cpu))
        submission.FAILED_VARIANTS.add(submission.variants_for("gfx950", "hip", scaled.block_n, scaled.num_warps,
                                                               scaled.num_stages, scaled.scores, scaled.merge)[0])
    submission._cached_prediction.cache_clear()
    chosen = {case: submission.choose(*case, cpu) for case in cases}
    assert [k for k, v in chosen.items() if v == ("aiter",)] == [(32, 8192), (64, 8192), (256, 1024), (256, 8192)]
    monkeypatch.setitem(submission.MEASURED_DISPATCH, "gfx950", {(4, 1024): ("aiter",),
                                                                  (256, 8192): ("triton", 64, 4, 8, 2)})
    assert submission.choose(4, 1024, cpu) == ("aiter",)
    assert submission.choose(256, 8192, cpu) == ("triton", 64, 4, 8, 1, 0, submission.MERGE_COMBINE)  # hip: 1 stage
    monkeypatch.setattr(submission, "_arch", lambda device: "sm_90")
    monkeypatch.setitem(submission.MEASURED_DISPATCH, "sm_90", {})
    submission._cached_prediction.cache_clear()
    assert submission.choose(256, 8192, cpu)[0] == "triton"  # aiter only where a rule says
    monkeypatch.setenv("MLA_PATH", "triton")
    monkeypatch.setattr(submission, "_arch", lambda device: "gfx950")
    assert submission.choose(4, 1024, cpu)[0] == "triton"


def test_aiter_absence_is_reported_not_fatal():
    if HAS_REAL_AITER:
        pytest.skip("aiter is present")
    assert submission.AITER_ERROR  # why aiter is not used, e.g. "not a ROCm GPU"


@pytest.mark.skipif(not HAS_REAL_AITER, reason="needs aiter on a ROCm GPU")
@pytest.mark.parametrize("batch, kv_len", [(32, 8192), (256, 1024)])
def test_real_aiter_path(fresh_plans, monkeypatch, batch, kv_len):
    monkeypatch.setenv("MLA_PATH", "aiter")
    data = ref.generate_input(batch, 1, kv_len, seed=45)
    ok, message = ref.check_implementation(data, submission.custom_kernel(data))
    assert ok, message
