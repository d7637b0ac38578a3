"""Reference math: float32 attention per segment, the a8w8 emulation, the runner's check."""
import math
import re

import pytest
import torch

import reference as ref


def naive_attention(q, kv, qo_indptr, kv_indptr, sm_scale):
    """Per query row, per head, in float64: the definition."""
    out = torch.zeros(q.shape[0], q.shape[1], 512, dtype=torch.float64)
    for b in range(len(kv_indptr) - 1):
        keys = kv[kv_indptr[b]: kv_indptr[b + 1]].double()
        for row in range(qo_indptr[b], qo_indptr[b + 1]):
            for head in range(q.shape[1]):
                if keys.shape[0]:
                    w = torch.softmax(keys @ q[row, head].double() * sm_scale, 0)
                    out[row, head] = w @ keys[:, :512]
    return out


@pytest.mark.parametrize("kv_lens", [None, [5, 0, 33]])
def test_attention_fp32_matches_the_definition(kv_lens):
    data = ref.generate_input(3, 1, 33, seed=3, kv_lens=kv_lens, device=torch.device("cpu"))
    q, kv_data, qo_indptr, kv_indptr, config = data
    kv = ref.dequantize_kv(kv_data, "mxfp4")
    got = ref.attention_fp32(q.float(), kv, qo_indptr, kv_indptr, config["sm_scale"])
    want = naive_attention(q.float(), kv, qo_indptr.tolist(), kv_indptr.tolist(), config["sm_scale"])
    assert torch.allclose(got.double(), want, atol=1e-5, rtol=1e-5)


def test_exact_bf16_attention_is_the_definition():
    data = ref.generate_input(2, 1, 40, seed=4, device=torch.device("cpu"))
    q, kv_data, qo_indptr, kv_indptr, config = data
    want = naive_attention(q.float(), kv_data["bf16"].reshape(-1, 576).float(), qo_indptr.tolist(),
                           kv_indptr.tolist(), config["sm_scale"])
    assert torch.allclose(ref.exact_attention(data, "bf16").double(), want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kv_format, max_rel", [("fp8", 0.1), ("mxfp4", 0.35)])
def test_exact_attention_formats_are_close_to_bf16(kv_format, max_rel):
    """The quantized caches give attention near the bf16 one, and not equal to it."""
    data = ref.generate_input(2, 1, 200, seed=4, device=torch.device("cpu"))
    got = ref.exact_attention(data, kv_format)
    bf16 = ref.exact_attention(data, "bf16")
    rel = ((got - bf16).norm() / bf16.norm()).item()
    assert 1e-3 < rel < max_rel


def test_emulated_a8w8_is_the_fp8_math():
    """The a8w8 emulation against the definition in float64: Q and KV through fp8 (per
    tensor, scale amax / 448 in bf16 arithmetic), softmax attention, bf16 out."""
    data = ref.generate_input(2, 1, 300, seed=6, device=torch.device("cpu"))
    q, kv_data, qo_indptr, kv_indptr, config = data
    emulated = ref.emulated_a8w8(data)
    assert emulated.dtype == torch.bfloat16 and emulated.shape == (2, 16, 512)
    q_scale = (q.abs().amax() / 448.0).to(torch.bfloat16)  # bf16, as the reference quantizes
    q8 = (q / q_scale).clamp(-448, 448).to(torch.float8_e4m3fn)
    kv8, kv_scale = kv_data["fp8"]
    want = naive_attention(q8.double() * q_scale.double(), kv8.reshape(-1, 576).double() * kv_scale.double(),
                           qo_indptr.tolist(), kv_indptr.tolist(), config["sm_scale"])
    assert torch.allclose(emulated.double(), want, atol=2e-3, rtol=1e-2)
    # and the quantization is there: it differs from bf16 attention, by a little
    diff = (emulated.float() - ref.exact_attention(data, "bf16")).abs().max()
    assert 2e-3 < diff < 0.05


def test_check_implementation_accepts_exact_mxfp4_attention():
    data = ref.generate_input(4, 1, 256, seed=8, device=torch.device("cpu"))
    ok, message = ref.check_implementation(data, ref.exact_attention(data).to(torch.bfloat16))
    assert ok and message.startswith("pass (the runner's rule, stage ") and "for information" not in message
    ok, message = ref.check_implementation(data, ref.exact_attention(data).to(torch.bfloat16), verbose=True)
    assert ok and "outside the leaderboard task README's rtol" in message, message


def test_check_implementation_rejects_a_wrong_answer_with_details():
    data = ref.generate_input(2, 1, 64, seed=8, device=torch.device("cpu"))
    wrong = ref.exact_attention(data).to(torch.bfloat16)
    wrong[:, :8] += 1.0  # half of the heads off by 1
    ok, message = ref.check_implementation(data, wrong)
    assert not ok
    assert "mismatched elements" in message and "ERROR at (0, 0," in message and "Maximum error" in message
    assert re.search(r"ERROR at \(0, 0, \d+\): output -?[0-9.e+-]+, reference -?[0-9.e+-]+", message), message
    ok, message = ref.check_implementation(data, wrong.float())
    assert not ok and "bfloat16" in message
    ok, message = ref.check_implementation(data, wrong[:1])
    assert not ok and "SIZE MISMATCH" in message


def test_check_allows_five_percent_mismatches_and_no_more():
    data = ref.generate_input(2, 1, 64, seed=8, device=torch.device("cpu"))
    good = ref.ref_kernel(data)
    n = good.numel()
    for count, expect in ((math.floor(0.05 * n), True), (math.floor(0.05 * n) + 1, False)):
        out = good.clone().reshape(-1)
        out[:count] += 5.0
        ok, message = ref.check_implementation(data, out.reshape(good.shape))
        assert ok is expect, message


def test_the_reference_in_parts_is_the_reference_in_one_piece(monkeypatch):
    """generate_input, dequantize_kv, exact_attention and the a8w8 emulation work on at most
    KV_ROWS_AT_ONCE KV rows at a time (the leaderboard's (256, 8192) case fits in 8 GB): with 100
    rows at once over uneven sequences (one longer than 100, one empty), every byte and every
    float is the same as in one piece."""
    lens = [37, 250, 1, 0, 130, 64]

    def everything(rows_at_once):
        monkeypatch.setattr(ref, "KV_ROWS_AT_ONCE", rows_at_once)
        data = ref.generate_input(6, 2, 0, seed=7, kv_lens=lens, device=torch.device("cpu"))
        kv_data = data[1]
        tensors = [kv_data["bf16"], kv_data["fp8"][0].view(torch.uint8), kv_data["fp8"][1],
                   kv_data["mxfp4"][0].view(torch.uint8), kv_data["mxfp4"][1].view(torch.uint8)]
        tensors += [ref.dequantize_kv(kv_data, kv_format) for kv_format in ("bf16", "fp8", "mxfp4")]
        tensors += [ref.exact_attention(data, kv_format) for kv_format in ("bf16", "fp8", "mxfp4")]
        return tensors + [ref.emulated_a8w8(data)]
    in_parts, whole = everything(100), everything(1 << 40)
    for index, (part, one) in enumerate(zip(in_parts, whole)):
        assert part.shape == one.shape and torch.equal(part, one), index
    assert in_parts[-2].abs().amax() > 0.1   # not all zero: the parts' answers were compared, not zeros
