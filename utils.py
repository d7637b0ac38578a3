"""Helpers with the leaderboard's utils.py names and signatures (set_seed, get_device,
verbose_allclose, verbose_allequal, match_reference, make_match_reference, clear_l2_cache,
clear_l2_cache_large), so the runner's eval.py and reference.py work beside it.

Runs on AMD (ROCm torch), NVIDIA (CUDA torch) and on a bare CPU. verbose_allclose and
match_reference give the runner's verdict on every input (tests/test_correctness_rule.py holds
them beside stand-ins of the runner's functions); their messages say more (the share of
mismatches, the largest error, the second stage's ratio). The runner's flush allocates 64 GB
per call; clear_l2_cache_large writes as many bytes through a preallocated buffer.
"""
import random

import numpy as np
import torch


def set_seed(seed: int = 42) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def get_device(use_cuda: bool = True) -> torch.device:
    """The GPU when torch sees one (CUDA or ROCm both appear as 'cuda'), else the CPU."""
    if use_cuda and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def is_gpu_available() -> bool:
    return torch.cuda.is_available()


def _stage_1_mismatches(received, expected, rtol, atol) -> tuple:
    """verbose_allclose's rule on tensors of one shape -> (bool mask of the mismatched
    elements, the largest finite error as a float, NaN when there is none)."""
    diff = torch.abs(received.to(torch.float32) - expected.to(torch.float32))
    tolerance = atol + rtol * torch.abs(expected)  # expected's dtype: bf16 rounds it
    mismatched = diff > tolerance
    for same_kind in (torch.isnan, torch.isposinf, torch.isneginf):
        mismatched |= same_kind(received) ^ same_kind(expected)
    finite = torch.isfinite(diff)
    return mismatched, (float(diff[finite].max().item()) if bool(finite.any()) else float("nan"))


@torch.no_grad()
def verbose_allclose(received: torch.Tensor, expected: torch.Tensor, rtol: float = 1e-05,
                     atol: float = 1e-08, max_print: int = 5) -> tuple[bool, list[str]]:
    """The runner's element-wise check: every element must match (the first stage of
    match_reference).

    An element mismatches when |received - expected| > atol + rtol * |expected|, the
    difference taken in float32 and the tolerance in expected's own dtype (for bf16 it is
    rounded to bf16, as the runner computes it), or when exactly one of the two is NaN, +inf
    or -inf. Both NaN, or both the same infinity, is not a mismatch here.
    Returns (ok, lines): the count and share of mismatches, the first `max_print` of them
    with their index and both values (`ERROR at (i, j, k): output X, reference Y`; the
    runner's line gives the two values unlabelled), and the largest finite error.
    """
    if received.shape != expected.shape:
        return False, [f"SIZE MISMATCH: received {tuple(received.shape)}, expected {tuple(expected.shape)}"]
    mismatched, max_error = _stage_1_mismatches(received, expected, rtol, atol)
    num_mismatched = int(mismatched.count_nonzero().item())
    if num_mismatched == 0:
        return True, [f"Maximum error: {max_error:.6g}"]
    lines = [f"Number of mismatched elements: {num_mismatched} "
             f"({num_mismatched / mismatched.numel():.4%} of {mismatched.numel()})"]
    for index in torch.nonzero(mismatched)[:max_print]:
        i = tuple(index.tolist())
        lines.append(f"ERROR at {i}: output {received[i].item():.6g}, reference {expected[i].item():.6g}")
    if num_mismatched > max_print:
        lines.append(f"... and {num_mismatched - max_print} more mismatched elements.")
    lines.append(f"Maximum error: {max_error:.6g}")
    return False, lines


def isclose_mismatch_ratio(output: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> float:
    """The runner's second stage for MLA: the share of elements where torch.isclose(output,
    expected, rtol, atol) is False, computed in the tensors' own dtype (bf16: the difference
    and the tolerance are rounded to bf16; NaN where both are NaN counts as a mismatch, the
    same infinity on both sides does not), and the share itself as float32, as the runner
    divides (so exactly 5% reads as 0.0500000007, above 0.05). torch.isclose raises when the
    dtypes differ, as in the runner."""
    mismatched = ~torch.isclose(output, expected, rtol=rtol, atol=atol)
    return (mismatched.sum() / output.numel()).item()


def is_mla_case(data) -> bool:
    """The runner's test for an MLA input, which alone gets the second stage: a tuple of at
    least 5 whose fifth item is a config dict with the MLA head-geometry keys."""
    mla_keys = {"num_heads", "num_kv_heads", "qk_head_dim", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim"}
    return isinstance(data, tuple) and len(data) >= 5 and isinstance(data[4], dict) and mla_keys <= data[4].keys()


@torch.no_grad()
def verbose_allequal(received: torch.Tensor, expected: torch.Tensor,
                     max_print: int = 5) -> tuple[bool, list[str]]:
    if received.shape != expected.shape:
        return False, ["SIZE MISMATCH"]
    mismatched = torch.not_equal(received, expected)
    num_mismatched = int(mismatched.count_nonzero().item())
    if num_mismatched == 0:
        return True, []
    lines = [f"Number of mismatched elements: {num_mismatched}"]
    for index in torch.nonzero(mismatched)[:max_print]:
        i = tuple(index.tolist())
        lines.append(f"ERROR at {i}: output {received[i]}, reference {expected[i]}")
    return False, lines


# The runner joins its message lines with a backslash and an n (two characters), so that
# the message stays on its one protocol line.
MESSAGE_SEPARATOR = "\\n"


def match_reference(data, output, reference, rtol: float = 1e-05, atol: float = 1e-08,
                    tol_err_ratio: float = 0.05) -> tuple[bool, str]:
    """The runner's default check_implementation: compare `output` with `reference(data)`.

    Stage 1: verbose_allclose (every element within tolerance). Only if it fails, and the
    input is an MLA case (is_mla_case) and the shapes agree, stage 2: the case still passes
    when isclose_mismatch_ratio(...) <= tol_err_ratio (the runner's MLA rule, aligned with
    aiter's tests). The verdict is the runner's on every input; where the runner's
    torch.isclose raises (an output dtype other than the reference's, failing stage 1),
    this returns a fail naming it. A fail's lines are joined with MESSAGE_SEPARATOR, as the
    runner's; a pass is one line that reads as one, `pass (...)`: the stage that passed it, for
    stage 2 the share of elements it found outside and the share it allows, and the largest
    error (no mismatch listing).
    """
    expected = reference(data)
    good, lines = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    if good:
        max_error = _stage_1_mismatches(output, expected, rtol, atol)[1]
        return True, (f"pass (the runner's rule, stage 1: every element within {atol} + {rtol}|ref|; "
                      f"maximum error {max_error:.6g})")
    if is_mla_case(data) and output.shape == expected.shape:
        if output.dtype != expected.dtype:
            lines.append(f"output dtype {output.dtype} is not the reference's {expected.dtype}: the runner's "
                         f"torch.isclose raises here (its worker fails)")
            return False, MESSAGE_SEPARATOR.join(lines)
        ratio = isclose_mismatch_ratio(output, expected, rtol, atol)
        if ratio <= tol_err_ratio:
            max_error = _stage_1_mismatches(output, expected, rtol, atol)[1]
            return True, (f"pass (the runner's rule, stage 2: {ratio:.2%} of the elements not torch.isclose "
                          f"at rtol={rtol}, atol={atol}, at most {tol_err_ratio * 100:g}% allowed; "
                          f"maximum error {max_error:.6g})")
        lines.append(f"mismatch_ratio={ratio:.6f} by torch.isclose (allowed {tol_err_ratio})")
    return good, MESSAGE_SEPARATOR.join(lines)


def make_match_reference(reference, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)
    return wrapped


_cache_flush_buffer = None
# The runner flushes with torch.randn((16000, 1024, 1024)): 65.5 GB written, ~16 ms of GPU
# work queued right before the start event. Host time inside custom_kernel shorter than
# that is hidden from the events, so the flush writes as many bytes (through a smaller
# buffer) to keep timings comparable with the runner's.
RUNNER_FLUSH_BYTES = 16000 * 1024 * 1024 * 4


def cache_flush_bytes(device: torch.device) -> int:
    """Bytes written to evict the GPU's caches: 4x the last-level cache, at least 1 GiB.

    The floor covers MI355X, whose 256 MB Infinity Cache is not in `L2_cache_size`.
    """
    props = torch.cuda.get_device_properties(device)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or 0)
    return max(4 * l2_bytes, 1 << 30)


def clear_l2_cache_large() -> None:
    """Evict the GPU caches between timed runs, and keep the GPU as busy as the runner does.

    Overwrites a preallocated buffer (4x the last-level cache, at least 1 GiB; allocated
    once, where the runner allocates 64 GB each time) until RUNNER_FLUSH_BYTES are written,
    so the work queued ahead of the start event lasts as long as the runner's flush and
    host time inside the call is hidden the same way (measured: a 1 GiB flush alone exposed
    100-200 us of host time in leaderboard mode, results/h200_leaderboard_probe_4.json).
    On a CPU-only machine this does nothing.
    """
    global _cache_flush_buffer
    if not torch.cuda.is_available():
        return
    if _cache_flush_buffer is None:
        device = torch.device("cuda", torch.cuda.current_device())
        _cache_flush_buffer = torch.empty(cache_flush_bytes(device) // 4, dtype=torch.int32,
                                          device=device)
    passes = -(-RUNNER_FLUSH_BYTES // (_cache_flush_buffer.numel() * 4))
    for _ in range(passes):
        _cache_flush_buffer.fill_(random.randrange(1 << 30))


clear_l2_cache = clear_l2_cache_large  # the runner's smaller flush has this name
