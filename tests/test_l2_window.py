"""The L2 parameters of per-sequence decode over shared pages mean what they say:
a window is fitted only where the data show hits falling, and the shipped H200 probe shows none."""


import msgspec
import numpy as np
import pytest

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.fitting import features, fit_l2, predict
from cascade_plan.calibration.holdout import is_held_out
from cascade_plan.calibration.probe_fit import _xy
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration_schema.kernel_fit import KernelFit

L2 = 62914560          # the H200's 60 MiB
BASE = KernelFit(bw_bytes_per_s=4.4e12, flop_per_s=420e12, overhead_s=9e-6, row_s=2e-9, token_latency_s=4e-10)


def _configs(seed=3, n=160):
    rng = np.random.default_rng(seed)
    return [{"prefix_tokens": int(rng.choice([256, 1024, 4096, 16384, 32768])),
             "group_size": int(rng.choice([4, 16, 64, 256])), "n_groups": int(rng.choice([1, 4, 16])),
             "suffix_tokens": int(rng.choice([0, 128, 1024])), "q_per_kv": 4, "num_kv_heads": 8, "head_dim": 128,
             "kv_dtype": "bf16", "page_size": 16} for _ in range(n)]


def _synthetic(window):
    f = features("decode_shared", _configs())
    true = msgspec.structs.replace(BASE, l2_hit_max=0.5, l2_window_bytes=window, l2_bytes_per_s=9e12)
    t = predict(true, f, L2) * np.exp(np.random.default_rng(1).normal(0, 0.01, f.bytes.size))
    return f, t


def test_flat_hits_give_no_window_and_record_the_measured_range():
    f, t = _synthetic(None)                                   # hits never fall
    got = fit_l2(BASE, f, t, L2)
    assert got.l2_window_bytes is None
    assert got.l2_measured_up_to_bytes == f.layer_prefix_bytes[f.redundant_bytes > 0].max()
    assert got.l2_hit_max == pytest.approx(0.5, abs=0.03)


def test_a_fall_inside_the_data_is_fitted():
    f, t = _synthetic(8e7)                                    # hits fall beyond 80 MB of prefix per layer
    got = fit_l2(BASE, f, t, L2)
    assert got.l2_window_bytes == pytest.approx(8e7, rel=0.3)
    assert got.l2_hit_max == pytest.approx(0.5, abs=0.05)


@pytest.fixture(scope="module")
def probe():
    return find_committed(load_hardware("h200"))


@pytest.mark.parametrize("backend,variant", [("triton", None), ("flashinfer", "tensor_cores")])
def test_shipped_probe_shows_no_fall_up_to_4x_the_l2(probe, backend, variant):
    fit = msgspec.convert(probe.fitted["kv_dtypes"]["bf16"][backend]["decode_shared"], KernelFit)
    assert fit.l2_window_bytes is None and fit.l2_hit_max > 0.3
    assert fit.l2_measured_up_to_bytes == 256 * 2**20 > 4 * L2
    # the Llama-3-8B layer shape (G = 4, 8 KV heads) the window claim was made on: the coverage rows' other
    # shapes (MHA, G = 5/7/16) carry larger fit errors of their own that no window changes
    rows = [r for r in probe.select(backend, "decode_shared", variant, "bf16") if not is_held_out(r.config)
            and r.config.q_per_kv == 4 and r.config.num_kv_heads == 8]
    f, t = _xy(rows, "decode_shared")

    def worst(window):
        return np.abs(predict(msgspec.structs.replace(fit, l2_window_bytes=window), f, L2) / t - 1).max()

    # Hits that stopped once one layer's prefix outgrew the L2 would fit the measurements far worse.
    assert worst(L2) > 2 * worst(None)
    # ... while any window beyond the data is indistinguishable from none: it cannot be fitted.
    assert worst(1.26e9) == pytest.approx(worst(None))


def test_planner_applies_no_fall(probe):
    p = params_from_probe(probe, "flashinfer", "bf16", load_hardware("h200"))
    assert p.l2_window_bytes is None and p.l2_hit_max > 0.5
    # hits do not fall with the shared prefix per layer: the same share at 16 MiB and at 16 GiB
    from cascade_plan.cost.cost_model import l2_hit_fraction

    assert l2_hit_fraction(p, [2**24, 2**34], L2).tolist() == [p.l2_hit_max] * 2
