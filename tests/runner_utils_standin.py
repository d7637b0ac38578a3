"""A stand-in for the leaderboard runner's utils.py, written from its description (not copied):
the same names and signatures, and the check computed the way the runner computes it.

    verbose_allclose(received, expected, rtol, atol, max_print) -> (ok, lines)
        every element must match: |received - expected| > atol + rtol * |expected| is a
        mismatch, the difference in float32 and the tolerance in expected's dtype; so is
        NaN, +inf or -inf on exactly one side.
    match_reference(data, output, reference, rtol, atol, tol_err_ratio=0.05) -> (ok, message)
        verbose_allclose; if it fails and data is an MLA input (a tuple of at least 5 whose
        fifth item is a config dict with the MLA head keys) and the shapes agree: the share
        of elements where torch.isclose(output, expected, rtol, atol) is False (in the
        tensors' own dtype), as a tensor sum divided by numel, passes when <= tol_err_ratio.
        Lines are joined by a backslash and an n.

tests/test_correctness_rule.py holds our utils.py and reference.py to these; and
tests/test_harness_interop.py uses this file as the runner's utils.py beside our others.
"""
import random

import torch

MLA_CONFIG_KEYS = {"num_heads", "num_kv_heads", "qk_head_dim", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim"}


def set_seed(seed=42):
    random.seed(seed)
    torch.manual_seed(seed)


def get_device(use_cuda=True):
    return torch.device("cuda" if use_cuda and torch.cuda.is_available() else "cpu")


@torch.no_grad()
def verbose_allclose(received, expected, rtol=1e-05, atol=1e-08, max_print=5):
    if received.shape != expected.shape:
        return False, ["SIZE MISMATCH"]
    difference = (received.to(torch.float32) - expected.to(torch.float32)).abs()
    allowed = atol + rtol * expected.abs()  # stays in expected's dtype
    bad = difference > allowed
    bad = bad | torch.logical_xor(received.isnan(), expected.isnan())
    bad = bad | torch.logical_xor(received.isposinf(), expected.isposinf())
    bad = bad | torch.logical_xor(received.isneginf(), expected.isneginf())
    count = int(bad.sum())
    if count:
        return False, [f"Number of mismatched elements: {count}"]
    return True, [f"Maximum error: {difference.max()}"]


@torch.no_grad()
def verbose_allequal(received, expected, max_print=5):
    count = int((received != expected).sum())
    return count == 0, [f"Number of mismatched elements: {count}"] if count else []


def _mla_input(data):
    return (isinstance(data, tuple) and len(data) >= 5 and isinstance(data[4], dict)
            and MLA_CONFIG_KEYS.issubset(data[4].keys()))


def match_reference(data, output, reference, rtol=1e-05, atol=1e-08, tol_err_ratio=0.05):
    expected = reference(data)
    good, lines = verbose_allclose(output, expected, rtol=rtol, atol=atol)
    if not good and _mla_input(data) and output.shape == expected.shape:
        not_close = torch.logical_not(torch.isclose(output, expected, rtol=rtol, atol=atol))
        share = (not_close.sum() / output.numel()).item()  # an integer tensor / numel: float32
        if share <= tol_err_ratio:
            return True, f"warning: mismatch_ratio={share:.6f}"
    return good, "\\n".join(lines)


def make_match_reference(reference, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)
    return wrapped


def clear_l2_cache():
    pass


def clear_l2_cache_large():
    pass
