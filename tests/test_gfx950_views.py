"""A tensor argument's device address on the gfx950 emulator is its data_ptr(): a view's storage
offset included, its readable extent the whole allocation (tools/gfx950/__init__.py).

One small kernel, scores[m, n] = sum_k q[m, k] kv[n, k] with every stride an argument, reads Q and
KV and writes the output through views of larger buffers: row slices, column blocks, transposed
and expanded views. Every view starts inside its storage (an address of the storage's start would
read and write other rows), and each answer is held to torch's; an output view leaves the rest of
its buffer untouched. A read of the storage past the view stays legal (the allocation), a read past
the allocation does not.
"""
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gfx950  # noqa: E402

M, N, K = 8, 16, 32


STRIDES = ["stride_qm", "stride_qk", "stride_kvn", "stride_kvk", "stride_om", "stride_on"]


@triton.jit(do_not_specialize=STRIDES)  # one build for every view (each is 16-byte aligned)
def scores_kernel(q_ptr, kv_ptr, out_ptr, stride_qm, stride_qk, stride_kvn, stride_kvk, stride_om, stride_on,
                  M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    """q (M, K), kv (N, K), out (M, N) float32 at any strides; one program."""
    rows = tl.arange(0, M)
    cols = tl.arange(0, N)
    dims = tl.arange(0, K)
    q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :] * stride_qk)
    kv = tl.load(kv_ptr + cols[:, None] * stride_kvn + dims[None, :] * stride_kvk)
    scores = tl.sum(q[:, None, :] * kv[None, :, :], axis=2)
    tl.store(out_ptr + rows[:, None] * stride_om + cols[None, :] * stride_on, scores)


def numbers(*shape, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


# Views of shape (rows, K) (Q, KV) or (M, N) (output), each into a larger buffer, starting past
# its storage's first element.
def row_slice(rows, cols, seed):
    return numbers(rows + 5, cols, seed=seed)[3:3 + rows]


def column_block(rows, cols, seed):
    return numbers(rows, 3 * cols, seed=seed)[:, cols:2 * cols]


def transposed(rows, cols, seed):
    return numbers(cols + 4, rows, seed=seed)[4:].t()


def expanded(rows, cols, seed):
    return numbers(3, cols, seed=seed)[2].expand(rows, cols)


INPUT_VIEWS = {"row slice": row_slice, "column block": column_block, "transposed": transposed,
               "expanded": expanded}
OUTPUT_VIEWS = {"row slice": row_slice, "column block": column_block, "transposed": transposed}


def run(q, kv, out):
    gfx950.emulate(scores_kernel, (1,), q, kv, out, *q.stride(), *kv.stride(), *out.stride(), M=M, N=N, K=K,
                   num_warps=1)


@pytest.mark.parametrize("role", ["Q", "KV"])
@pytest.mark.parametrize("view", INPUT_VIEWS)
def test_an_input_view_is_read_from_its_own_elements(role, view):
    q = INPUT_VIEWS[view](M, K, seed=1) if role == "Q" else numbers(M, K, seed=1)
    kv = INPUT_VIEWS[view](N, K, seed=2) if role == "KV" else numbers(N, K, seed=2)
    assert (q if role == "Q" else kv).storage_offset() > 0
    out = torch.full((M, N), float("nan"))
    run(q, kv, out)
    torch.testing.assert_close(out, q @ kv.t(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("view", OUTPUT_VIEWS)
def test_an_output_view_is_written_in_its_own_elements(view):
    q, kv = numbers(M, K, seed=3), numbers(N, K, seed=4)
    out = OUTPUT_VIEWS[view](M, N, seed=5)
    assert out.storage_offset() > 0
    buffer = torch.empty(0).set_(out.untyped_storage())   # the whole allocation, flat
    before = buffer.clone()
    run(q, kv, out)
    torch.testing.assert_close(out, q @ kv.t(), rtol=1e-5, atol=1e-5)
    mine = torch.zeros_like(buffer, dtype=torch.bool)
    mine.as_strided(out.shape, out.stride(), out.storage_offset()).fill_(True)
    assert torch.equal(buffer[~mine], before[~mine]), "the output's buffer changed outside the view"


def test_a_view_may_read_its_allocation_but_not_past_it():
    """KV as the last rows of its buffer with a row stride one row longer than the buffer's: the last
    row's read runs past the allocation (a fault naming kv_ptr); as the first rows it stays inside."""
    buffer = numbers(N + 1, K, seed=6)
    q, out = numbers(M, K, seed=7), torch.empty(M, N)
    inside = buffer[:N]
    gfx950.emulate(scores_kernel, (1,), q, inside, out, *q.stride(), K + 1, 1, *out.stride(), M=M, N=N, K=K,
                   num_warps=1)   # rows N-1 .. end of the allocation: inside it
    past = buffer[1:]
    with pytest.raises(gfx950.EmulationError, match="outside kv_ptr"):
        gfx950.emulate(scores_kernel, (1,), q, past, out, *q.stride(), K + 1, 1, *out.stride(), M=M, N=N, K=K,
                       num_warps=1)
