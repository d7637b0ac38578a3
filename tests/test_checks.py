"""What the first-use checks check: the binary that runs (the self-check's synthetic input is
laid out like the real call's, and the integer arguments whose values differ between the two
are not specialized), and the real input's own output on a stated sample of sequences.
On a GPU, tools/count_binaries.py proves the first point end to end (one binary per kernel
after a call in a fresh process with an empty Triton cache)."""
import ast
from pathlib import Path

import pytest
import torch

import reference as ref

ROOT = Path(__file__).resolve().parents[1]


def test_the_split_and_combine_kernels_do_not_specialize_the_values_that_differ():
    """total_kv (batch x kv_len against the synthetic 2 x (2 BLOCK_N + 5)), num_splits (1 is
    a constant to Triton) and q_bytes_split (0 on a checked call, -1 on a timed one) must not
    pick the binary; the strides and pointers do, and the synthetic input copies their classes
    (next test). The Gluon kernel is defined inside an `if`: the whole tree is walked."""
    tree = ast.parse((ROOT / "submission.py").read_text())
    split_kernel = {"total_kv", "num_splits", "q_bytes_split"}
    wanted = {"_scaled_split_kernel": split_kernel, "_gluon_split_kernel": split_kernel,
              "_bf16_split_kernel": {"total_kv", "num_splits"}, "_mla_combine_kernel": {"num_splits"}}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            keywords = {k.arg: ast.literal_eval(k.value) for d in node.decorator_list if isinstance(d, ast.Call)
                        for k in d.keywords}
            assert set(keywords.get("do_not_specialize", ())) == wanted.pop(node.name), node.name
    assert not wanted


@pytest.mark.parametrize("shape, strides, offset", [((4, 16, 576), (9216, 576, 1), 0),
                                                     ((4, 16, 576), (20000, 600, 1), 0),
                                                     ((6, 24), (24, 1), 0), ((6, 18), (18, 1), 0),
                                                     ((6, 1, 288), (290, 290, 1), 1)])
def test_the_synthetic_input_copies_strides_and_alignment(fresh_plans, shape, strides, offset):
    """Same strides (Triton specializes the stride arguments on their values) and the same
    16-byte alignment class of the address (it specializes pointers on that)."""
    dtype = torch.bfloat16 if len(shape) == 3 and shape[-1] == 576 else torch.uint8
    storage = torch.zeros(10_000_000, dtype=dtype)
    template = storage.as_strided(shape, strides, offset)
    values = torch.arange(2 * int(torch.tensor(shape[1:]).prod())).reshape(2, *shape[1:]).to(dtype)
    copy = fresh_plans._laid_out_like(values, template)
    assert copy.stride() == template.stride() and torch.equal(copy, values)
    assert (copy.data_ptr() % 16 == 0) == (template.data_ptr() % 16 == 0)


@pytest.mark.parametrize("batch, expected", [(1, [0]), (5, [0, 1, 2, 3, 4]), (8, list(range(8))),
                                             (256, [0, 36, 73, 109, 146, 182, 219, 255])])
def test_the_first_call_is_checked_on_every_sequence_or_a_spread_sample(fresh_plans, batch, expected):
    assert fresh_plans.check_sample(batch) == expected


def test_each_check_is_logged_with_its_cost(fresh_plans):
    """A plan's first call runs the synthetic self-check and the check of its own output,
    and the time each took is kept (first-call tuning reports their sum)."""
    before = len(fresh_plans.STATE.check_log)
    fresh_plans.custom_kernel(ref.generate_input(2, 1, 40, seed=81))
    logged = fresh_plans.STATE.check_log[before:]
    assert [what for _, what, _, _ in logged] == ["self-check (synthetic input)", "check of the first call's output"]
    assert all(seconds > 0 and verdict is None for _, _, seconds, verdict in logged)


def test_the_combine_dims_follow_the_plans_batch_not_the_synthetic_one(fresh_plans, monkeypatch):
    """The combine kernel's DIMS constexpr is fixed by the plan's real batch (whole rows
    once batch x 16 programs fill the SMs) and the self-check launches that, not what the
    synthetic input's batch of 3 would give."""
    sub = fresh_plans
    assert sub.combine_dims(32, 132) == sub.V_HEAD_DIM and sub.combine_dims(4, 132) == sub.COMBINE_DIMS_SPLIT
    monkeypatch.setattr(sub, "_num_sms", lambda device: 64)  # batch 5: whole rows (80 programs); 3 would halve them
    seen = []
    real = sub._attention

    def spy(variant, num_splits, q, *rest, **kwargs):
        seen.append((q.shape[0], rest[-2]))
        return real(variant, num_splits, q, *rest, **kwargs)
    monkeypatch.setattr(sub, "_attention", spy)
    monkeypatch.setitem(sub.MEASURED_DISPATCH, "cpu", {(5, 40): "bf16 t16 w4 s2 st1 combine"})
    sub.custom_kernel(ref.generate_input(5, 1, 40, seed=82))
    assert [d for _, d in seen] == [sub.V_HEAD_DIM] * 2 and [b for b, _ in seen] == [3, 5]  # check, call


LEADERBOARD_CASES = [(4, 1024), (4, 8192), (32, 1024), (32, 8192), (64, 1024), (64, 8192), (256, 1024),
                     (256, 8192)]
# architecture -> (Triton target, compute units, platform)
TARGETS = {"gfx950": (("hip", "gfx950", 64), 256, "hip"), "sm_90": (("cuda", 90, 32), 132, "cuda")}


def _binder(kernel, target):
    """Triton's own argument binder of `kernel` for `target`: (*args, **constants) ->
    (bound args, specialization, options), the key its binary cache is looked up by."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend
    from triton.runtime.jit import JITFunction, create_function_from_signature
    jit = kernel if isinstance(kernel, JITFunction) else JITFunction(kernel.fn, **kernel.kwargs)
    return create_function_from_signature(jit.signature, jit.params, make_backend(GPUTarget(*target)))


@pytest.mark.parametrize("arch", list(TARGETS))
def test_the_self_check_launches_the_binary_the_call_launches(fresh_plans, monkeypatch, arch):
    """For every variant the eight leaderboard cases can run on the runner's gfx950 and the
    H200's sm_90 (the dispatch's choice and every first-call tuning candidate, each with its
    fallback order), Triton's specialization of the self-check's launches (synthetic input
    laid out like the real one) equals that of the call's own: the same binary is checked and
    run. Nothing runs: the launches are captured. A value dropped from do_not_specialize
    (total_kv is 4 x kv_len here, 4 x BLOCK_N + 10 in the check) fails it."""
    sub = fresh_plans
    target, units, platform = TARGETS[arch]
    monkeypatch.setattr(sub, "_arch", lambda device: arch)
    monkeypatch.setattr(sub, "_num_sms", lambda device: units)
    monkeypatch.setattr(sub, "_platform", lambda device: platform)
    monkeypatch.setattr(sub, "check_output", lambda *args, **kwargs: None)
    captured = []
    monkeypatch.setattr(sub, "_launch_kernel", lambda kernel, grid, args, constants, what:
                        captured.append((kernel, args, constants)))
    binders = {}

    def keys(launches):
        found = {}
        for kernel, args, constants in launches:
            binder = binders.setdefault(id(kernel), _binder(kernel, target))
            _, specialization, options = binder(*args, **constants)
            found[kernel.fn.__name__ if hasattr(kernel, "fn") else kernel.__name__] = (specialization, options)
        return found
    checked = 0
    for batch, kv_len in LEADERBOARD_CASES:
        total_kv = batch * kv_len
        q = torch.empty((batch, sub.NUM_HEADS, sub.QK_HEAD_DIM), dtype=torch.bfloat16)
        packed = torch.empty((total_kv, 1, sub.PACKED_ROW_BYTES), dtype=torch.uint8)  # never touched
        for scales in (torch.empty((total_kv, sub.SCALE_COLS), dtype=torch.uint8),
                       torch.empty((-(-total_kv // 256) * 256, 24), dtype=torch.uint8)):  # trimmed, padded
            indptr = torch.arange(batch + 1, dtype=torch.int32)
            choices = {sub.choose(batch, kv_len, q.device), *sub.ranked_candidates(batch, kv_len, q.device)}
            seen = set()
            for launch in sorted(c for c in choices if c.path == "triton"):
                plan = sub._TritonPlan(batch, launch, q.device, 1 / 24)
                out = torch.empty((batch, sub.NUM_HEADS, sub.V_HEAD_DIM), dtype=torch.bfloat16)
                for variant in plan.variants:
                    if (variant, launch.num_splits, plan.combine_dims) in seen:
                        continue
                    seen.add((variant, launch.num_splits, plan.combine_dims))
                    captured.clear()
                    sub.self_check(variant, launch.num_splits, (q, packed, scales), 1 / 24, plan.combine_dims)
                    check = keys(captured)
                    captured.clear()
                    sub._attention(variant, launch.num_splits, q, packed, scales, indptr, indptr * kv_len, out,
                                   plan.scratch, 1 / 24, plan.combine_dims, sub.Q_BYTES_TIMED)
                    assert check == keys(captured), (arch, batch, kv_len, variant.describe())
                    checked += 1
    assert checked > 100


@pytest.mark.parametrize("num_splits", [1, 2, 32])
def test_the_synthetic_input_drives_the_once_familys_second_pass(fresh_plans, num_splits):
    """Sequence 2 of the self-check's input, in the ONCE family's split of it (two whole tiles
    per split): a score in split 0's second tile exceeds the first tile's maximum of its token
    group (the Gluon kernel's warp) and head by far more than ONCE_OVERFLOW_LOG2 in p, so every
    variant of the family runs its second pass on the check (issue 29: on the runner, before a
    real call relies on it). Computed here in float32 on the dequantized data."""
    import submission as sub
    q, packed, scales, _, kv_indptr = sub._synthetic_case(sub.GL_BLOCK_N, num_splits, (
        torch.zeros(1, 16, 576, dtype=torch.bfloat16), torch.zeros(1, 1, 288, dtype=torch.uint8),
        torch.zeros(1, 24, dtype=torch.uint8)))
    first, last = kv_indptr[2:4].tolist()
    tiles = (last - first) // sub.GL_BLOCK_N
    assert (last - first) % sub.GL_BLOCK_N == 0 and tiles == 2 * num_splits
    _, _, q_dequantized = sub.quantize_q_reference(q[2:3])
    table = torch.tensor(sub.E2M1_VALUES)
    rows = packed.reshape(-1, 288)[first:first + 2 * sub.GL_BLOCK_N].long()
    keys = table[torch.stack((rows & 15, rows >> 4), -1).reshape(rows.shape[0], 576)]
    keys = keys * torch.exp2(scales[first:first + 2 * sub.GL_BLOCK_N, :18].float() - 127).repeat_interleave(32, 1)
    scores = q_dequantized[0] @ keys.T  # (16 heads, 2 tiles)
    group = (torch.arange(sub.GL_BLOCK_N) // 16) % sub.ONCE_GROUPS  # a token's group in its tile
    gap = max(float((scores[:, sub.GL_BLOCK_N:][:, group == g].max(1).values
                     - scores[:, :sub.GL_BLOCK_N][:, group == g].max(1).values).max()) for g in range(sub.ONCE_GROUPS))
    assert gap * (1 / 24) * sub.LOG2E > 2 * sub.ONCE_OVERFLOW_LOG2, gap


@pytest.fixture
def twin_for_gluon(fresh_plans, monkeypatch):
    """The Gluon kernel's launch replaced by its standard-Triton twin's (tests/once_twin.py),
    so that a Gluon variant's self-check runs here -> the twin's module; its kernels rebuilt
    afterwards (a compiled kernel keeps the globals it was built with)."""
    import once_twin
    from test_fallback import forget_compiled_kernels
    monkeypatch.setattr(fresh_plans, "_launch_gluon", once_twin.launch)
    yield once_twin
    monkeypatch.undo()
    forget_compiled_kernels(once_twin)


@pytest.mark.parametrize("merge, num_splits", [("direct", 1), ("combine", 2), ("fused", 2)])
def test_the_self_check_fails_a_once_variant_without_its_second_pass(twin_for_gluon, monkeypatch, merge,
                                                                    num_splits):
    """The Gluon kernel's data flow (its twin) passes the self-check in every merge; with the
    second pass switched off (its threshold out of reach) p overflows on sequence 2 and the
    self-check fails it."""
    import submission as sub
    from test_fallback import forget_compiled_kernels, synthetic_like
    convert = sub.PORTABLE if torch.cuda.is_available() else sub.GFX950  # gfx950's asm: emulated on a CPU only
    variant = sub.Variant(convert, 0, sub.GL_BLOCK_N, sub.GL_NUM_WARPS, 1, False, sub.ONCE_SCORES,
                          getattr(sub, f"MERGE_{merge.upper()}"), gluon=True)
    assert sub.self_check(variant, num_splits, synthetic_like(), 1 / 24, sub.V_HEAD_DIM) is None
    monkeypatch.setattr(twin_for_gluon, "ONCE_OVERFLOW_LOG2_C", sub.tl.constexpr(1e30))
    forget_compiled_kernels(twin_for_gluon)
    verdict = sub.self_check(variant, num_splits, synthetic_like(), 1 / 24, sub.V_HEAD_DIM)
    assert verdict is not None and "max error inf" in verdict, verdict
