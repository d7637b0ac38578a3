"""Plan once, run many: custom_kernel's steady-state call is the input's key, its plan, and the
plan's recorded launches; everything else (validation, the choice, tuning, the checks) happens on
a key's first call (docs/design.md, "Plan once, run many").

The call count is taken with sys.setprofile in the interpreter: every call of a Python function
defined in submission.py from custom_kernel's entry to the first kernel launch (Triton's
`kernel[grid]`), with its depth among submission.py's frames; torch and builtins are not counted.
"""
import os
import sys

import pytest
import torch

import reference as ref

CALLS_BEFORE_LAUNCH = 8  # the bound (issue 44): at most 8 calls of submission.py's functions
DEPTH_BEFORE_LAUNCH = 4  # at most 4 deep


def profile_call(sub, data):
    """-> ([(function name, depth)] of submission.py's calls before the first launch, environment reads)."""
    own = os.path.abspath(sub.__file__)
    triton_dir = os.path.dirname(os.path.abspath(sub.triton.__file__)) + os.sep
    calls, environment_reads, launched = [], [], []
    read_code = os.environ.__class__.__getitem__.__code__

    def depth(frame):
        count = 0
        while frame is not None:
            count += os.path.abspath(frame.f_code.co_filename) == own
            frame = frame.f_back
        return count

    def profiler(frame, event, arg):
        if event != "call" or launched:
            return
        code = frame.f_code
        if code.co_filename.startswith(triton_dir) and code.co_name == "__getitem__":
            launched.append(code.co_name)
        elif os.path.abspath(code.co_filename) == own:
            calls.append((code.co_name, depth(frame)))
        elif code is read_code:
            environment_reads.append(frame.f_locals.get("key"))

    sys.setprofile(profiler)
    try:
        sub.custom_kernel(data)
    finally:
        sys.setprofile(None)
    assert launched, "no kernel launch seen"
    return calls, environment_reads


def test_a_timed_call_makes_few_shallow_calls_and_reads_no_environment(fresh_plans):
    """After a key's first call, a call with the same key makes at most 8 calls of submission.py's
    functions before its first launch, at most 4 deep, and reads no environment variable; the
    first call (planning) makes many more (the counter counts)."""
    sub = fresh_plans
    data = ref.generate_input(3, 1, 70, seed=90)
    first_calls, first_reads = profile_call(sub, data)
    calls, reads = profile_call(sub, data)
    assert len(first_calls) > CALLS_BEFORE_LAUNCH and first_reads  # planning: validation, choice, checks
    assert len(calls) <= CALLS_BEFORE_LAUNCH, calls
    assert max(depth for _, depth in calls) <= DEPTH_BEFORE_LAUNCH, calls
    assert not reads, reads
    assert calls[0] == ("custom_kernel", 1)


def test_the_timed_call_replays_the_checked_launches(fresh_plans, monkeypatch):
    """The steady-state call launches exactly what the key's checked first call launched (the same
    kernels, grids, constexprs and fixed arguments: one binary), with the call's own tensors."""
    sub = fresh_plans
    data = ref.generate_input(3, 1, 70, seed=91)
    launches = []
    real = sub._launch_kernel

    def spy(kernel, grid, args, constants, what):
        launches.append((kernel, grid, [a if not isinstance(a, torch.Tensor) else (a.data_ptr(), a.dtype)
                                        for a in args], constants))
        return real(kernel, grid, args, constants, what)

    sub.custom_kernel(data)
    plan = sub.STATE.plans[sub.input_key(*data)]
    monkeypatch.setattr(sub, "_launch_kernel", spy)
    again = (data[0].clone(), data[1], data[2], data[3], data[4])  # another q of the same layout
    out = sub.custom_kernel(again)
    assert [(kernel, grid, constants) for kernel, grid, _, constants in launches] == \
        [(kernel, grid, constants) for kernel, grid, _, _, constants, _ in plan.launches]
    assert launches[0][2][0] == (again[0].data_ptr(), torch.bfloat16)  # the call's q, not the first one's
    torch.testing.assert_close(out.float(), ref.exact_attention(again), atol=8e-3, rtol=2e-2)


def test_the_key_fixes_layout_and_config(fresh_plans):
    """A layout or config a plan did not see is a new key (planned and checked again), never run
    through another input's plan: another sm_scale, q strides, or a misaligned scale buffer."""
    sub = fresh_plans
    data = ref.generate_input(2, 1, 40, seed=92)
    q, kv_data, qo_indptr, kv_indptr, config = data
    key = sub.input_key(*data)
    wide = torch.zeros((q.shape[0], q.shape[1], q.shape[2] + 8), dtype=q.dtype)[..., :q.shape[2]]
    wide.copy_(q)
    packed, scales = kv_data["mxfp4"]
    shifted = torch.zeros(scales.numel() + 1, dtype=scales.dtype)[1:].view(scales.shape)
    shifted.copy_(scales)
    others = [(q, kv_data, qo_indptr, kv_indptr, {**config, "sm_scale": config["sm_scale"] * 2}),
              (wide, kv_data, qo_indptr, kv_indptr, config),
              (q, {**kv_data, "mxfp4": (packed, shifted)}, qo_indptr, kv_indptr, config)]
    assert len({key, *(sub.input_key(*other) for other in others)}) == 1 + len(others)


def test_state_reset_is_one_call(fresh_plans):
    """STATE.reset() empties every piece of mutable state a call leaves behind."""
    sub = fresh_plans
    sub.custom_kernel(ref.generate_input(2, 1, 40, seed=93))
    assert sub.STATE.plans and sub.STATE.check_log
    state = sub.STATE
    state.failed_variants.add("a variant")
    state.tuned["a case"] = state.predictions["a case"] = state.machine["a device"] = None
    state.tune_log["cases"].append("a case")
    sub.STATE.reset()
    assert not (sub.STATE.plans or sub.STATE.check_log or sub.STATE.failed_variants or sub.STATE.tuned
                or sub.STATE.predictions or sub.STATE.machine or sub.STATE.tune_log["cases"])


@pytest.mark.parametrize("check", ["1", None])
def test_mla_check_checks_the_values_of_every_call(fresh_plans, monkeypatch, check):
    """MLA_CHECK=1 (read on a key's first call): no plan is kept for the key, so every call checks
    its indptr values (a bad kv_indptr is a ValueError); without it the second call is not checked."""
    sub = fresh_plans
    if check:
        monkeypatch.setenv("MLA_CHECK", check)
    data = ref.generate_input(2, 1, 40, seed=94)
    sub.custom_kernel(data)
    bad = data[3].clone()
    bad[1] = bad[2] + 1  # decreasing: a value error, same layout
    bad_data = (data[0], data[1], data[2], bad, data[4])
    if check:
        with pytest.raises(ValueError, match="non-decreasing"):
            sub.custom_kernel(bad_data)
    else:
        assert sub.input_key(*bad_data) in sub.STATE.plans


def test_a_launch_reading_a_tensor_of_its_own_is_never_replayed(fresh_plans, monkeypatch):
    """A launch whose arguments hold a tensor that is neither the call's nor the plan's scratch
    (here the split kernel handed a copy of q made inside the launch path) cannot be replayed
    with the next call's tensors: the plan keeps launching through the planning path, and the
    next call, on another q, is right."""
    sub = fresh_plans
    real = sub._launch_kernel

    def copies_q(kernel, grid, args, constants, what):
        if args[0].dtype == torch.bfloat16 and args[0].dim() == 3 and args[0].shape[1] == sub.NUM_HEADS:
            args = (args[0].clone(), *args[1:])
        return real(kernel, grid, args, constants, what)

    monkeypatch.setattr(sub, "_launch_kernel", copies_q)
    data = ref.generate_input(3, 1, 70, seed=95)
    sub.custom_kernel(data)
    plan = sub.STATE.plans[sub.input_key(*data)]
    assert plan.variant is not None and plan.launches is None
    again = (torch.randn_like(data[0].float()).to(torch.bfloat16), *data[1:])
    out = sub.custom_kernel(again)
    torch.testing.assert_close(out.float(), ref.exact_attention(again), atol=8e-3, rtol=2e-2)


@pytest.mark.parametrize("path", ["replayed", "unrecorded"])
def test_only_a_checked_call_writes_the_q_bytes(fresh_plans, monkeypatch, path):
    """The SCALED family's split 0 writes Q's e4m3 bytes (check_output compares them) on a key's
    checked first call only: a timed call, replayed or launched through _attention (a plan whose
    launches could not be recorded), leaves the scratch's q8 / qs as it found them, and is right."""
    sub = fresh_plans
    data = ref.generate_input(2, 1, 40, seed=96)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, sub._arch(data[0].device), {(2, 40): "scaled t64 w4 s2 st1 combine"})
    sub.custom_kernel(data)
    plan = sub.STATE.plans[sub.input_key(*data)]
    assert plan.variant.scores == sub.SCALED_SCORES and plan.launches
    q8, qs, _ = sub.quantize_q_reference(data[0])
    assert torch.equal(plan.scratch.q8.view(q8.shape), q8) and torch.equal(plan.scratch.qs.view(qs.shape), qs)
    if path == "unrecorded":
        plan.launches = None
    for written in (plan.scratch.q8, plan.scratch.qs):
        written.view(torch.uint8).fill_(0x5A)
    again = (torch.randn_like(data[0].float()).to(torch.bfloat16), *data[1:])
    out = sub.custom_kernel(again)
    assert all(bool((written.view(torch.uint8) == 0x5A).all()) for written in (plan.scratch.q8, plan.scratch.qs))
    expected = ref.exact_attention((sub.quantize_q_reference(again[0])[2], *again[1:]))
    torch.testing.assert_close(out.float(), expected, atol=8e-3, rtol=2e-2)
