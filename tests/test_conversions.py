"""Each e2m1 -> bf16 conversion of submission.py, bit for bit against the reference's
dequantization (reference.dequantize_mxfp4), for every byte of codes and every e8m0 scale
byte in the range the conversion is exact on, plus the special bytes 0 and 255.

The native conversions are inline asm; on a CPU they run through tests/asm_emulation.py,
whose instruction semantics are checked here too (against torch and the PTX manual).
"""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import reference as ref
import submission as sub

ON_GPU = torch.cuda.is_available()
DEVICE = torch.device("cuda" if ON_GPU else "cpu")
PLATFORM = sub._platform(DEVICE)
# conversion -> (e8m0 bytes it is exact on, the platform its asm builds on or None)
CONVERSIONS = {
    sub.PORTABLE: (range(16, 255), None),  # block exponents >= -111 (LOG2_SHIFT 14)
    sub.PTX_SM90: (range(66, 193), "cuda"),  # block exponents -61..65 (see PTX_WORD_PAIRS)
    sub.GFX950: (range(0, 255), "hip"),
}
ROWS, WORDS = 16, 8  # 16 tokens x 64 dims per launch


@triton.jit
def _convert_words(words_ptr, scales_ptr, out_ptr, ROWS: tl.constexpr, WORDS: tl.constexpr,
                   CONVERT: tl.constexpr, PIN: tl.constexpr):
    rows = tl.arange(0, ROWS)[:, None]
    words = tl.load(words_ptr + rows * WORDS + tl.arange(0, WORDS)[None, :])
    scales = tl.load(scales_ptr + rows * (WORDS // 4) + tl.arange(0, WORDS // 4)[None, :])
    values = sub._words_to_bf16(words, scales, ROWS, WORDS, CONVERT, PIN)
    tl.store(out_ptr + rows * (8 * WORDS) + tl.arange(0, 8 * WORDS)[None, :], values)


@triton.jit
def _convert_bytes(packed_ptr, scales_ptr, even_ptr, odd_ptr, ROWS: tl.constexpr, WIDTH: tl.constexpr,
                   CONVERT: tl.constexpr, PIN: tl.constexpr):
    rows = tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, WIDTH)[None, :]
    packed = tl.load(packed_ptr + rows * WIDTH + cols)
    scales = tl.load(scales_ptr + rows * (WIDTH // 16) + tl.arange(0, WIDTH // 16)[None, :])
    even, odd = sub._bytes_to_bf16(packed, scales, ROWS, WIDTH, CONVERT, PIN)
    tl.store(even_ptr + rows * WIDTH + cols, even)
    tl.store(odd_ptr + rows * WIDTH + cols, odd)


def convert(convert_id, layout, packed, scales):
    """The kernels' conversion of packed (ROWS, 32) bytes with scales (ROWS, 2) -> float32
    values (ROWS, 64), the kernels' 2^-LOG2_SHIFT undone."""
    packed, scales = packed.to(DEVICE), scales.to(DEVICE)
    if layout == sub.NATURAL:
        out = torch.empty((ROWS, 8 * WORDS), dtype=torch.bfloat16, device=DEVICE)
        _convert_words[(1,)](packed.view(torch.int32), scales, out, ROWS, WORDS, convert_id, 0)
    else:
        even = torch.empty((ROWS, 4 * WORDS), dtype=torch.bfloat16, device=DEVICE)
        odd = torch.empty_like(even)
        _convert_bytes[(1,)](packed, scales, even, odd, ROWS, 4 * WORDS, convert_id, 0)
        out = torch.stack((even, odd), dim=-1).reshape(ROWS, 8 * WORDS)
    return out.float().cpu() * 2.0 ** sub.LOG2_SHIFT[convert_id]


def forms():
    """(conversion, layout) pairs that exist and can build here."""
    for convert_id, (_, platform) in CONVERSIONS.items():
        if ON_GPU and platform not in (None, PLATFORM):
            continue
        for layout in (sub.NATURAL, sub.EVEN_ODD):
            if not (convert_id == sub.GFX950 and layout == sub.EVEN_ODD):  # gfx950 reads words
                yield pytest.param(convert_id, layout, id=f"{sub.CONVERT_NAMES[convert_id]}-"
                                                         f"{sub.LAYOUT_NAMES[layout].replace('/', '_')}")


def every_code_with(scale_bytes):
    """Each of the 256 code bytes in every scale block, scale_bytes cycled over the blocks."""
    packed = torch.arange(256, dtype=torch.uint8).reshape(8, 32).repeat(2, 1)  # 16 x 32 bytes
    blocks = torch.tensor(list(scale_bytes), dtype=torch.uint8)
    scales = blocks[torch.arange(ROWS * 2) % len(blocks)].reshape(ROWS, 2)
    return packed, scales


@pytest.mark.parametrize("convert_id, layout", list(forms()))
def test_bit_exact_over_the_exact_range(convert_id, layout):
    exact_bytes = CONVERSIONS[convert_id][0]
    for start in range(exact_bytes.start, exact_bytes.stop, 32):
        packed, scales = every_code_with(range(start, min(start + 32, exact_bytes.stop)))
        got = convert(convert_id, layout, packed, scales)
        want = ref.dequantize_mxfp4(packed, scales)
        assert torch.equal(got, want), f"scale bytes {start}..: {int((got != want).sum())} values differ"


@pytest.mark.parametrize("convert_id, layout", list(forms()))
def test_scale_byte_255_is_nan_and_0_is_2_pow_minus_127_or_below_it(convert_id, layout):
    packed, scales = every_code_with([255, 0])
    got = convert(convert_id, layout, packed, scales)
    want = ref.dequantize_mxfp4(packed, scales)
    nan_block = (scales.repeat_interleave(32, dim=1) == 255)
    assert bool(want[nan_block].isnan().all()) and bool(got[nan_block].isnan().all())
    zero_block = ~nan_block
    if convert_id == sub.GFX950:
        assert torch.equal(got[zero_block], want[zero_block])
    else:  # underflow: |value| * 2^-127 rounds toward 0 (documented at _scale_f32 / PTX)
        assert bool((got[zero_block].abs() <= 2.0 ** -100).all())


# --- the emulator itself (CPU only: on a GPU the asm runs for real) ------------------------

cpu_only = pytest.mark.skipif(ON_GPU, reason="the asm emulator is the CPU stand-in for a GPU")


@cpu_only
def test_emulated_bf16_multiply_rounds_as_torch():
    import asm_emulation as emu
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(4096, generator=gen).to(torch.bfloat16)
    b = (torch.randn(4096, generator=gen) * 2.0 ** torch.randint(-140, 100, (4096,), generator=gen)).to(torch.bfloat16)
    a_bits = a.view(torch.int16).numpy().astype(np.uint32) & 0xFFFF
    b_bits = b.view(torch.int16).numpy().astype(np.uint32) & 0xFFFF
    got = emu._mul_bf16x2(a_bits | (a_bits << 16), b_bits | (b_bits << 16))
    want = (a.double() * b.double()).to(torch.float32).to(torch.bfloat16)
    finite = torch.isfinite(want) & (want.float().abs() >= 2.0 ** -126)  # torch's float32 step may double-round subnormals
    want_bits = want.view(torch.int16).numpy().astype(np.uint32) & 0xFFFF
    assert np.array_equal((got & 0xFFFF)[finite.numpy()], want_bits[finite.numpy()])
    assert np.array_equal((got >> 16)[finite.numpy()], want_bits[finite.numpy()])
    assert emu.float_to_bf16(np.array([2.0 ** -133, 3 * 2.0 ** -134, 2.0 ** -135]))[0] == 1  # subnormals kept
    assert list(emu.float_to_bf16(np.array([3 * 2.0 ** -134, 2.0 ** -135]))) == [2, 0]  # ties to even


@cpu_only
def test_emulated_prmt_follows_the_ptx_manual():
    import asm_emulation as emu
    a, b = np.array([0x33221100], dtype=np.uint32), np.array([0x77665544], dtype=np.uint32)
    assert emu._prmt(a, b, 0x3210)[0] == 0x33221100
    assert emu._prmt(a, b, 0x7654)[0] == 0x77665544
    assert emu._prmt(a, b, 0x0123)[0] == 0x00112233
    signed = np.array([0x00008000 | 0x7F], dtype=np.uint32)
    assert emu._prmt(signed, b, 0x8989)[0] == 0x00FF00FF  # bit 3: replicate the byte's sign


@cpu_only
def test_emulated_fp4_convert_selects_bytes_by_op_sel():
    import asm_emulation as emu
    word = np.array([0xF1_0A_72_3C], dtype=np.uint32)  # bytes 0x3C, 0x72, 0x0A, 0xF1
    one = np.array([np.float32(1.0)]).view(np.uint32)
    for byte_index, (low, high) in enumerate([(-2.0, 1.5), (1.0, 6.0), (-1.0, 0.0), (0.5, -6.0)]):
        bits = emu._cvt_scalef32_pk_bf16_fp4(word, one, [byte_index & 1, byte_index >> 1, 0])
        assert emu.bf16_to_float(bits & 0xFFFF)[0] == low and emu.bf16_to_float(bits >> 16)[0] == high
