"""The quantizers of reference.py: hand-computed MXFP4 bytes and scales, round trips, layouts, fp8."""
import pytest
import torch

import reference as ref


def block(values):
    """One 32-element block: the given leading values, zeros after."""
    row = torch.zeros(32, dtype=torch.float32)
    row[: len(values)] = torch.tensor(values, dtype=torch.float32)
    return row


def quantize_block(values):
    packed, scales = ref.quantize_mxfp4(block(values).reshape(1, 32))
    codes = torch.stack((packed[0] & 0xF, packed[0] >> 4), dim=-1).reshape(32)
    return int(scales[0, 0]), codes.tolist()


@pytest.mark.parametrize("values, scale_byte, leading_codes", [
    # all zeros: log2(0) = -inf clamps to exponent -127 (byte 0), every code 0
    ([0.0], 0, [0, 0]),
    # amax 6 -> bits + 0x200000 keep 4.0 -> e = 2 - 2 = 0 (byte 127): values map 1:1
    ([6.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5, 0.0], 127, [7, 6, 5, 4, 3, 2, 1, 0]),
    # negatives set bit 3
    ([-6.0, -0.5, -1.0], 127, [15, 9, 10]),
    # ties round away from zero on the dropped bit: 1.25 -> 1.5, 2.5 -> 3, 5 -> 6, 0.25 -> 0.5
    ([6.0, 1.25, 2.5, 5.0, 0.25], 127, [7, 3, 5, 7, 1]),
    # just under a tie rounds down: 1.2 -> 1.0, 0.24 -> 0
    ([6.0, 1.2, 0.24], 127, [7, 2, 0]),
    # amax 7.5 rounds the amax up to 8 -> e = 1 (byte 128); 7.5/2 = 3.75 -> 4 (code 6)
    ([7.5, 1.0], 128, [6, 1]),
    # amax 100 -> 64 -> e = 4 (byte 131): 100/16 = 6.25 saturates at 6, 6/16 -> 0.5, -3/16 -> -0
    ([100.0, 6.0, -3.0], 131, [7, 1, 8]),
    # tiny values: amax 2^-100 -> e = -102 (byte 25)
    ([2.0 ** -100, 2.0 ** -101], 25, [6, 4]),
])
def test_mxfp4_hand_computed_blocks(values, scale_byte, leading_codes):
    scale, codes = quantize_block(values)
    assert scale == scale_byte
    assert codes[: len(leading_codes)] == leading_codes
    assert all(code in (0, 8) for code in codes[len(values):])  # the zero tail


def test_mxfp4_packs_even_index_in_low_nibble():
    packed, _ = ref.quantize_mxfp4(block([6.0, 1.0]).reshape(1, 32))
    assert int(packed[0, 0]) == 7 | (2 << 4)


def test_mxfp4_round_trip_error_on_random_data():
    torch.manual_seed(0)
    x = torch.randn(512, 576, dtype=torch.bfloat16).float()
    packed, scales = ref.quantize_mxfp4(x)
    assert packed.shape == (512, 288) and scales.shape == (512, 18)
    back = ref.dequantize_mxfp4(packed, scales)
    blocks = x.reshape(512, 18, 32)
    # e2m1 steps are at most 2 units of the block scale (between 4 and 6): error <= 1 unit,
    # and the scale is at most amax / 4 (amax rounded down to a power of two, / 4)
    bound = blocks.abs().amax(-1, keepdim=True) / 4
    assert bool(((back.reshape(512, 18, 32) - blocks).abs() <= bound + 1e-12).all())
    relative = (back - x).norm() / x.norm()
    assert 0.05 < relative < 0.2  # a real 4-bit quantizer, neither exact nor broken


def test_dequantize_reads_e8m0_nan_and_torch_dtypes():
    packed, scales = ref.quantize_mxfp4(torch.ones(2, 32))
    scales[1, 0] = 255
    values = ref.dequantize_mxfp4(packed.view(ref.PACKED_DTYPE), scales.view(ref.SCALE_DTYPE))
    assert bool((values[0] == 1.0).all()) and bool(values[1].isnan().all())


@pytest.mark.parametrize("layout, padding", [("padded", None), ("padded", 0xFF), ("padded", "random"),
                                             ("trimmed", None)])
def test_scale_layouts(layout, padding):
    data = ref.generate_input(3, 1, 100, seed=5, scale_layout=layout, scale_padding=padding)
    packed, scales = data[1]["mxfp4"]
    assert packed.shape == (300, 1, 288) and packed.dtype == ref.PACKED_DTYPE
    assert scales.dtype == ref.SCALE_DTYPE
    raw = scales.view(torch.uint8)
    if layout == "trimmed":
        assert raw.shape == (300, 18) and raw.is_contiguous()
    else:
        assert raw.shape == (512, 24)
        expected_pad = {None: 0, 0xFF: 255}.get(padding)
        if expected_pad is not None:
            assert bool((raw[300:] == expected_pad).all()) and bool((raw[:300, 18:] == expected_pad).all())
    reference_scales = ref.generate_input(3, 1, 100, seed=5, scale_layout="trimmed")[1]["mxfp4"][1]
    assert torch.equal(raw[:300, :18], reference_scales.view(torch.uint8))
    with pytest.raises(ValueError, match="scale layout"):
        ref.layout_mxfp4_scales(raw[:300, :18], "sideways")


def test_fp8_quantizer_matches_its_definition():
    torch.manual_seed(1)
    x = torch.randn(64, 1, 576, dtype=torch.bfloat16) * 3
    q8, scale = ref.quantize_fp8(x, torch.float8_e4m3fn)
    assert q8.dtype == torch.float8_e4m3fn and scale.dtype == torch.float32 and scale.shape == (1,)
    bf16_scale = (x.abs().amax() / 448.0)  # bf16 arithmetic, as the runner
    assert scale.item() == bf16_scale.float().item()
    assert q8.float().abs().max().item() == 448.0  # the amax element lands on finfo.max
    assert ((q8.float() * scale - x.float()).abs() <= x.float().abs() * 2 ** -3 + scale).all()


def test_generate_input_layout_and_variable_lengths():
    q, kv_data, qo_indptr, kv_indptr, config = ref.generate_input(3, 1, 50, seed=2, kv_lens=[7, 0, 50])
    assert q.shape == (3, 16, 576) and q.dtype == torch.bfloat16
    assert kv_data["bf16"].shape == (57, 1, 576)
    assert kv_data["fp8"][0].shape == (57, 1, 576)
    assert kv_indptr.tolist() == [0, 7, 7, 57] and qo_indptr.tolist() == [0, 1, 2, 3]
    assert kv_indptr.dtype == qo_indptr.dtype == torch.int32
    assert config["kv_seq_len"] == 50 and config["batch_size"] == 3
    with pytest.raises(ValueError, match="kv_lens"):
        ref.generate_input(2, 1, 5, seed=1, kv_lens=[1, 2, 3])


def test_generate_input_is_seeded_and_not_zero():
    a = ref.generate_input(2, 1, 40, seed=9)
    b = ref.generate_input(2, 1, 40, seed=9)
    c = ref.generate_input(2, 1, 40, seed=10)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert a[0].abs().mean() > 0.5 and a[1]["bf16"].abs().mean() > 0.5
