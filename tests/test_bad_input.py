"""Every bad input gets a ValueError / TypeError that names the argument and what was expected."""
import pytest
import torch

import reference as ref


@pytest.fixture
def good(fresh_plans):
    return ref.generate_input(2, 1, 40, seed=31)


def replace(data, index, value):
    items = list(data)
    items[index] = value
    return tuple(items)


def with_config(data, **changes):
    return replace(data, 4, {**data[4], **changes})


def with_kv(data, key, value):
    kv_data = dict(data[1])
    if value is None:
        del kv_data[key]
    else:
        kv_data[key] = value
    return replace(data, 1, kv_data)


CASES = {
    "not a tuple": (lambda d: list(d)[:4], TypeError, "data must be the tuple"),
    "q dtype": (lambda d: replace(d, 0, d[0].float()), TypeError, "q must have dtype torch.bfloat16"),
    "q not a tensor": (lambda d: replace(d, 0, d[0].tolist()), TypeError, "q must be a torch.Tensor"),
    "q heads": (lambda d: replace(d, 0, d[0][:, :8]), ValueError, r"q must have shape \(batch_size=2, 16, 576\)"),
    "q dims": (lambda d: replace(d, 0, d[0][..., :512]), ValueError, "q must have shape"),
    "q 2-D": (lambda d: replace(d, 0, d[0].reshape(2, -1)), ValueError, "q must be 3-D"),
    "q rows vs batch": (lambda d: replace(d, 0, d[0][:1]), ValueError, "q must have shape"),
    "q_seq_len": (lambda d: with_config(d, q_seq_len=4), ValueError, r"config\['q_seq_len'\] must be 1"),
    "num_heads": (lambda d: with_config(d, num_heads=32), ValueError, r"config\['num_heads'\] must be 16"),
    "kv heads": (lambda d: with_config(d, num_kv_heads=2), ValueError, r"config\['num_kv_heads'\] must be 1"),
    "missing config key": (lambda d: replace(d, 4, {k: v for k, v in d[4].items() if k != "v_head_dim"}),
                           ValueError, "config is missing key 'v_head_dim'"),
    "batch mismatch": (lambda d: with_config(d, batch_size=3), ValueError, "q must have shape"),
    "sm_scale": (lambda d: with_config(d, sm_scale=float("nan")), ValueError, "sm_scale"),
    "indptr dtype": (lambda d: replace(d, 3, d[3].long()), TypeError, "kv_indptr must have dtype torch.int32"),
    "indptr length": (lambda d: replace(d, 3, d[3][:2]), ValueError, "kv_indptr must have batch_size \\+ 1 = 3 entries"),
    "qo_indptr length": (lambda d: replace(d, 2, d[2][:1]), ValueError, "qo_indptr must have"),
    "missing mxfp4": (lambda d: with_kv(d, "mxfp4", None), ValueError, "kv_data is missing key 'mxfp4'"),
    "mxfp4 not a pair": (lambda d: with_kv(d, "mxfp4", d[1]["mxfp4"][0]), TypeError, r"kv_data\['mxfp4'\] must be the pair"),
    "packed dtype": (lambda d: with_kv(d, "mxfp4", (d[1]["mxfp4"][0].view(torch.uint8).float(), d[1]["mxfp4"][1])),
                     TypeError, r"kv_data\['mxfp4'\]\[0\] must have dtype"),
    "packed width": (lambda d: with_kv(d, "mxfp4", (d[1]["mxfp4"][0][..., :256], d[1]["mxfp4"][1])),
                     ValueError, r"kv_data\['mxfp4'\]\[0\] must be \(total_kv, 1, 288\)"),
    "scales too few rows": (lambda d: with_kv(d, "mxfp4", (d[1]["mxfp4"][0], d[1]["mxfp4"][1][:79])),
                            ValueError, r"kv_data\['mxfp4'\]\[1\] must cover \(total_kv=80, 18\)"),
    "scales too few cols": (lambda d: with_kv(d, "mxfp4", (d[1]["mxfp4"][0], d[1]["mxfp4"][1][:, :16])),
                            ValueError, r"must cover \(total_kv=80, 18\)"),
    "scales 1-D": (lambda d: with_kv(d, "mxfp4", (d[1]["mxfp4"][0], d[1]["mxfp4"][1].reshape(-1))),
                   ValueError, r"kv_data\['mxfp4'\]\[1\] must be 2-D"),
    "kv_data not a dict": (lambda d: replace(d, 1, list(d[1].values())), TypeError, "kv_data must be a dict"),
    "config not a dict": (lambda d: replace(d, 4, None), TypeError, "config must be a dict"),
    "kv_indptr decreasing": (lambda d: replace(d, 3, torch.tensor([0, 50, 40], dtype=torch.int32, device=d[3].device)),
                             ValueError, r"kv_indptr must be non-decreasing; kv_indptr\[1\] = 50 > kv_indptr\[2\] = 40"),
    "kv_indptr past the cache": (lambda d: replace(d, 3, d[3] * 2), ValueError, r"kv_indptr must lie in \[0, total_kv=80\]"),
    "qo_indptr values": (lambda d: replace(d, 2, d[2] * 2), ValueError, r"qo_indptr must be 0, 1, ..., batch_size"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_raises_a_named_error(good, fresh_plans, name):
    make_bad, error, pattern = CASES[name]
    with pytest.raises(error, match=pattern):
        fresh_plans.custom_kernel(make_bad(good))


def test_value_checks_every_call_with_mla_check(good, fresh_plans, monkeypatch):
    """A key's later calls skip the host value check; MLA_CHECK=1 (read on a key's first call: a
    timed call reads no environment) keeps no plan for the key, so every call checks."""
    fresh_plans.custom_kernel(good)  # the plan exists: later calls skip the host value check
    bad = replace(good, 3, torch.tensor([0, 50, 40], dtype=torch.int32, device=good[3].device))
    assert bool(fresh_plans.custom_kernel(bad)[1].isnan().all())
    fresh_plans.STATE.plans.clear()
    monkeypatch.setenv("MLA_CHECK", "1")
    fresh_plans.custom_kernel(good)
    with pytest.raises(ValueError, match="non-decreasing"):
        fresh_plans.custom_kernel(bad)


def test_forcing_an_unknown_or_unavailable_path(good, fresh_plans, monkeypatch):
    monkeypatch.setenv("MLA_PATH", "cuda")
    with pytest.raises(ValueError, match="MLA_PATH must be one of"):
        fresh_plans.custom_kernel(good)
    if fresh_plans.STATE.aiter is None:
        monkeypatch.setenv("MLA_PATH", "aiter")
        with pytest.raises(ValueError, match="aiter is unavailable"):
            fresh_plans.custom_kernel(good)


@pytest.mark.gpu
def test_tensors_on_different_devices(good, fresh_plans):
    with pytest.raises(ValueError, match="kv_indptr is on cpu"):
        fresh_plans.custom_kernel(replace(good, 3, good[3].cpu()))
