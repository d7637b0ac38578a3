"""submission.py's kernels on the emulator: the variants the MI355X can pick, one variant
run on one input through submission's own launch code, and the answer it must give.

    sub = mi355x_submission()                     # submission, dispatching as on the MI355X
    for variant, splits in mi355x_variants(sub).items(): ...
    out = run_variant(sub, variant, data, num_splits, order=None)
    problem = wrong(sub, variant, data, out)      # None, or what disagreed

The variants: every first form (and, with fallbacks=True, every fallback form) of the
launches predicted_choice and candidate_groups produce for the eight leaderboard cases on
gfx950 (256 CUs), with the split counts those launches use. The answer: float32 attention
on the same MXFP4 data, with Q as the variant quantizes it (e4m3 per 32 dims for the
SCALED and ONCE families), within 8e-3 + 2e-2 |exact| per element and 5e-3 relative L2.
"""
import sys
from pathlib import Path

import torch

from . import dispatch

ROOT = Path(__file__).resolve().parents[2]
LEADERBOARD_CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192), (256, 1024), (256, 8192)]
ATOL, RTOL, REL_L2 = 8e-3, 2e-2, 5e-3


def mi355x_submission():
    """submission.py imported, its launches on the emulator and its dispatch as gfx950's."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import submission
    dispatch.install(submission)
    return submission


def mi355x_variants(sub, fallbacks=True):
    """{Variant: sorted split counts} over the eight leaderboard cases on gfx950."""
    device = torch.device("cpu")
    found = {}
    for batch, kv_len in LEADERBOARD_CASES:
        choices = [sub.predicted_choice(batch, kv_len, device, dispatch.NUM_CUS)]
        choices += [c for _, group in sub.candidate_groups(batch, kv_len, device) for c in group]
        for choice in choices:
            if choice.path != "triton":
                continue
            launch = choice
            forms = sub.launch_variants(launch, device)
            for variant in forms if fallbacks else forms[:1]:
                found.setdefault(variant, set()).add(launch.num_splits)
    return {variant: sorted(splits) for variant, splits in sorted(found.items(), key=lambda item: item[0].describe())}


def tuning_forms(sub, batch, kv_len):
    """[(variant, split count)] of every form first-call tuning would time for (batch, kv_len) on the
    MI355X: the first form of each Triton choice it ranks (its prediction first), for any shape, not only
    the dispatched one (eval.py test --all-forms). `sub`: mi355x_submission(). The one place the
    emulator's tools name submission.py's tuning internals."""
    device = torch.device("cpu")
    forms = {}
    for choice in sub.ranked_candidates(batch, kv_len, device):
        if choice.path == "triton":
            launch = choice
            forms.setdefault((sub.launch_variants(launch, device)[0], launch.num_splits), None)
    return list(forms)


def reference_input(lengths, seed, scale_layout="padded", scale_padding=0xFF):
    """The leaderboard's input for sequences of `lengths` tokens (reference.generate_input)."""
    import reference
    return reference.generate_input(len(lengths), 1, max(lengths), seed, scale_layout=scale_layout,
                                    scale_padding=scale_padding, kv_lens=list(lengths), device=torch.device("cpu"))


def operands(sub, data):
    """(q, packed (total_kv, 1, 288) uint8, scales uint8, qo_indptr, kv_indptr, sm_scale) of an
    input: the views submission's plan passes its kernels."""
    q, kv_data, qo_indptr, kv_indptr, config = data
    packed, scales = sub._mxfp4_operands(kv_data, q.device)
    return q, packed.view(torch.uint8), scales.view(torch.uint8), qo_indptr, kv_indptr, config["sm_scale"]


def run_variant(sub, variant, data, num_splits, q_bytes_split=None, scratch=None):
    """One call of `variant` at `num_splits` on `data` through submission._attention (its
    launches on the emulator) -> out (batch, 16, 512) bf16. q_bytes_split: a timed call's
    (sub.Q_BYTES_TIMED, as a plan's replays launch) unless given; scratch: made here unless
    given (its q8 / qs then hold the Q bytes a checked call's split 0 wrote)."""
    q, packed, scales, qo_indptr, kv_indptr, sm_scale = operands(sub, data)
    batch = q.shape[0]
    out = torch.full((batch, sub.NUM_HEADS, sub.V_HEAD_DIM), float("nan"), dtype=torch.bfloat16)
    if scratch is None:
        scratch = sub.make_scratch(batch, num_splits, q.device, [variant])
    dims = sub.combine_dims(batch, dispatch.NUM_CUS)
    sub._attention(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, sm_scale, dims,
                   sub.Q_BYTES_TIMED if q_bytes_split is None else q_bytes_split)
    return out


def expected(sub, variant, data):
    """Float32 attention on the MXFP4 data, Q quantized as the variant's family does."""
    import reference
    q = data[0]
    if variant.scores != sub.BF16_SCORES:
        q = sub.quantize_q_reference(q)[2]
    return reference.exact_attention((q, *data[1:]))


def wrong(sub, variant, data, out):
    """None when `out` is `variant`'s right answer on `data`, else what disagreed."""
    exact = expected(sub, variant, data)
    if not bool(torch.isfinite(out).all()):
        return f"{int((~torch.isfinite(out)).sum())} elements not finite"
    error = (out.float() - exact).abs()
    bad = error > ATOL + RTOL * exact.abs()
    rel_l2 = float(error.norm() / exact.norm())
    if bool(bad.any()) or rel_l2 > REL_L2:
        return (f"{int(bad.sum())} of {bad.numel()} elements outside {ATOL} + {RTOL} |exact| (max error "
                f"{float(error.max()):.3g}), relative L2 {rel_l2:.3g}")
    return None
