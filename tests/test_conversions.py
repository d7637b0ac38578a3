"""Each e2m1 -> bf16 conversion of submission.py (_words_to_bf16), bit for bit against the
reference's dequantization (reference.dequantize_mxfp4), for every byte of codes and every
e8m0 scale byte in the range the conversion is exact on, plus the special bytes 0 and 255.

The native conversion (gfx950) and the register pin (AMD) are inline asm; on a CPU they run
through tests/asm_emulation.py, whose instruction semantics are checked here too.
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
    sub.GFX950: (range(0, 255), "hip"),
}
PIN_PLATFORM = {1: "hip"}  # the register pin's asm (v_mov_b32)
ROWS, WORDS = 16, 8  # 16 tokens x 64 dims per launch


@triton.jit
def _convert_words(words_ptr, scales_ptr, out_ptr, ROWS: tl.constexpr, WORDS: tl.constexpr,
                   CONVERT: tl.constexpr, PIN: tl.constexpr, PURE: tl.constexpr):
    rows = tl.arange(0, ROWS)[:, None]
    words = tl.load(words_ptr + rows * WORDS + tl.arange(0, WORDS)[None, :])
    scales = tl.load(scales_ptr + rows * (WORDS // 4) + tl.arange(0, WORDS // 4)[None, :])
    values = sub._words_to_bf16(words, scales, ROWS, WORDS, CONVERT, PIN, PURE)
    tl.store(out_ptr + rows * (8 * WORDS) + tl.arange(0, 8 * WORDS)[None, :], values)


def convert(form, packed, scales):
    """The kernels' conversion (form: (convert, pin, pure)) of packed (ROWS, 32) bytes with
    scales (ROWS, 2) -> float32 values (ROWS, 64), the kernels' 2^-LOG2_SHIFT undone."""
    convert_id, pin, pure = form
    packed, scales = packed.to(DEVICE), scales.to(DEVICE)
    out = torch.empty((ROWS, 8 * WORDS), dtype=torch.bfloat16, device=DEVICE)
    _convert_words[(1,)](packed.view(torch.int32), scales, out, ROWS, WORDS, convert_id, pin, pure)
    return out.float().cpu() * 2.0 ** sub.LOG2_SHIFT[convert_id]


def forms():
    """The (conversion, pin, pure) forms the kernels call that can build here: the portable
    conversion with and without the pin (the BF16 family), the gfx950 one impure (the BF16
    family's tiles) and pure (the SCALED family's values)."""
    for convert_id, pin, pure in ((sub.PORTABLE, 0, False), (sub.PORTABLE, 1, False), (sub.GFX950, 0, False),
                                  (sub.GFX950, 0, True)):
        needs = {CONVERSIONS[convert_id][1], PIN_PLATFORM.get(pin)} - {None}
        if ON_GPU and needs - {PLATFORM}:
            continue
        yield pytest.param((convert_id, pin, pure), id=f"{sub.CONVERT_NAMES[convert_id]}-pin{pin}"
                                                       f"{'-pure' if pure else ''}")


def every_code_with(scale_bytes):
    """Each of the 256 code bytes in every scale block, scale_bytes cycled over the blocks."""
    packed = torch.arange(256, dtype=torch.uint8).reshape(8, 32).repeat(2, 1)  # 16 x 32 bytes
    blocks = torch.tensor(list(scale_bytes), dtype=torch.uint8)
    scales = blocks[torch.arange(ROWS * 2) % len(blocks)].reshape(ROWS, 2)
    return packed, scales


@pytest.mark.parametrize("form", list(forms()))
def test_bit_exact_over_the_exact_range(form):
    exact_bytes = CONVERSIONS[form[0]][0]
    for start in range(exact_bytes.start, exact_bytes.stop, 32):
        packed, scales = every_code_with(range(start, min(start + 32, exact_bytes.stop)))
        got = convert(form, packed, scales)
        want = ref.dequantize_mxfp4(packed, scales)
        assert torch.equal(got, want), f"scale bytes {start}..: {int((got != want).sum())} values differ"


@pytest.mark.parametrize("form", list(forms()))
def test_scale_byte_255_is_nan_and_0_is_2_pow_minus_127_or_below_it(form):
    packed, scales = every_code_with([255, 0])
    got = convert(form, packed, scales)
    want = ref.dequantize_mxfp4(packed, scales)
    nan_block = (scales.repeat_interleave(32, dim=1) == 255)
    assert bool(want[nan_block].isnan().all()) and bool(got[nan_block].isnan().all())
    zero_block = ~nan_block
    if form[0] == sub.GFX950:
        assert torch.equal(got[zero_block], want[zero_block])
    else:  # underflow: |value| * 2^-127 rounds toward 0 (documented at _scale_f32)
        assert bool((got[zero_block].abs() <= 2.0 ** -100).all())


# --- the emulator itself (CPU only: on a GPU the asm runs for real) ------------------------

cpu_only = pytest.mark.skipif(ON_GPU, reason="the asm emulator is the CPU stand-in for a GPU")


@cpu_only
def test_emulated_bf16_rounding_is_torchs():
    """The emulator's float -> bf16 rounding (what v_cvt_scalef32_pk_bf16_fp4's results go
    through): round to nearest even as torch, subnormals kept."""
    import asm_emulation as emu
    gen = torch.Generator().manual_seed(1)
    values = (torch.randn(4096, generator=gen) * 2.0 ** torch.randint(-140, 100, (4096,), generator=gen))
    want = values.to(torch.bfloat16)
    normal = want.float().abs() >= 2.0 ** -126  # torch's float32 step may double-round subnormals
    want_bits = want.view(torch.int16).numpy().astype(np.uint32) & 0xFFFF
    got = emu.float_to_bf16(values.double().numpy())
    assert np.array_equal(got[normal.numpy()], want_bits[normal.numpy()])
    assert emu.float_to_bf16(np.array([2.0 ** -133, 3 * 2.0 ** -134, 2.0 ** -135]))[0] == 1  # subnormals kept
    assert list(emu.float_to_bf16(np.array([3 * 2.0 ** -134, 2.0 ** -135]))) == [2, 0]  # ties to even


@cpu_only
def test_emulated_fp4_convert_selects_bytes_by_op_sel():
    import asm_emulation as emu
    word = np.array([0xF1_0A_72_3C], dtype=np.uint32)  # bytes 0x3C, 0x72, 0x0A, 0xF1
    one = np.array([np.float32(1.0)]).view(np.uint32)
    for byte_index, (low, high) in enumerate([(-2.0, 1.5), (1.0, 6.0), (-1.0, 0.0), (0.5, -6.0)]):
        bits = emu._cvt_scalef32_pk_bf16_fp4(word, one, [byte_index & 1, byte_index >> 1, 0])
        assert emu.bf16_to_float(bits & 0xFFFF)[0] == low and emu.bf16_to_float(bits >> 16)[0] == high
