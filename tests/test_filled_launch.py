"""The batch-filled launch: where the probe's Triton decode runs a batch that fills the GPU alone unsplit in 128-token
tiles (cost/roofline.py filled_gain), read from the file's tune (calibration/launch_rules.py), fitted where the rows
show it (calibration/fitting.py fit_kernel) and priced the same way by the planner."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.calibration.calibration_file import find_committed, load_probe
from cascade_plan.calibration.fitting import FILLED_MIN_ROWS, features, fit_kernel, predict
from cascade_plan.calibration.launch_rules import filled_launch
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration_schema.kernel_fit import KernelFit
from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
from cascade_plan.cost.cost_params import KernelParams
from cascade_plan.cost.roofline import filled_gain
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import ModelSpec

H200 = load_hardware("h200")
RULE = (528, 256, 128)         # the H200 file's: 4 programs per SM x 132 SMs, past the 256-token short tile


def one_layer_model(kv_heads: int, g: int) -> ModelSpec:
    return ModelSpec(id="one-layer", source="test", num_layers=1, hidden_size=4096, num_q_heads=kv_heads * g,
                     num_kv_heads=kv_heads, head_dim=128, attention="gqa", kv_lora_rank=0, qk_rope_head_dim=0,
                     total_params=1, embedding_params=0, expert_params_per_layer=0, num_moe_layers=0, num_experts=0,
                     experts_per_token=0, sliding_window=None, alibi=False)


def test_the_gain_by_hand():
    k = KernelParams(filled_rows=528, filled_min_tokens=256, filled_tile_tokens=128, filled_gain=1.36)
    rows = np.array([527, 528, 2048, 2048, 2048, 4096])
    tokens = np.array([4224, 4224, 256, 257, 513, 4096])
    # below the rows, or a row within the short tile: 1; 4,224 tokens are 33 whole tiles; 257 take 3 (384);
    # 513 take 5 (640); 4,096 are 32
    want = [1.0, 1.36, 1.0, 1.36 * 257 / 384, 1.36 * 513 / 640, 1.36]
    assert np.asarray(filled_gain(k, rows, tokens)).tolist() == pytest.approx(want, rel=1e-12)
    assert filled_gain(KernelParams(), rows, tokens) == 1.0       # no such launch: the roofline as it was


def _synthetic(gain: float, seed: int = 0, bw: float = 2.0e12):
    """Decode rows over a grid of batches and contexts, timed as a kernel of bandwidth `bw` with a launch `gain`
    times faster where the batch fills the GPU (and a fixed 8 us), with 2% noise."""
    rng = np.random.default_rng(seed)
    cfgs = [{"prefix_tokens": p, "group_size": n, "n_groups": 1, "suffix_tokens": 128, "q_per_kv": 4,
             "num_kv_heads": 8, "head_dim": 128, "kv_dtype": "fp8", "page_size": 16}
            for n in (4, 16, 64, 128, 256, 1024) for p in (1024, 4096, 16384)]
    f = features("decode_dup", cfgs)
    rule = KernelFit(bw_bytes_per_s=bw, flop_per_s=1e15, overhead_s=8e-6, row_s=0.0, filled_rows=RULE[0],
                     filled_min_tokens=RULE[1], filled_tile_tokens=RULE[2], filled_gain=gain)
    t = predict(rule, f) * np.exp(rng.normal(0, 0.02, f.rows.size))
    return f, t


@settings(max_examples=8, deadline=None)
@given(gain=st.floats(1.2, 1.8), seed=st.integers(0, 1000))
def test_the_fit_recovers_a_planted_gain(gain, seed):
    f, t = _synthetic(gain, seed)
    fit = fit_kernel(f, t, 4.8e12, 9.9e14, RULE)
    assert (fit.filled_rows, fit.filled_min_tokens, fit.filled_tile_tokens) == RULE
    assert fit.filled_gain == pytest.approx(gain, rel=0.05)
    assert np.median(np.abs(predict(fit, f) / t - 1)) < 0.03


def test_no_gain_where_the_rows_do_not_show_one():
    # rows with no faster launch: the gain cannot cut the error by a fifth, so the fit keeps none; the launch's rule
    # stays (its rows stream whole tiles: 513 tokens cost as 640 do, at the roofline's own rate)
    f, t = _synthetic(1.0, seed=3)
    fit = fit_kernel(f, t, 4.8e12, 9.9e14, RULE)
    assert ((fit.filled_rows, fit.filled_min_tokens, fit.filled_tile_tokens), fit.filled_gain) == (RULE, 1.0)
    assert np.asarray(filled_gain(fit, [RULE[0]] * 2, [513, 640])).tolist() == pytest.approx([513 / 640, 1.0])
    # too few rows on one side: no gain fitted, however large
    f, t = _synthetic(1.5, seed=4)
    few = np.flatnonzero(f.rows >= RULE[0])[: FILLED_MIN_ROWS - 1].tolist() + np.flatnonzero(f.rows < RULE[0]).tolist()
    sub = msgspec.structs.replace(f, **{k: getattr(f, k)[few] for k in f.__struct_fields__})
    assert fit_kernel(sub, t[few], 4.8e12, 9.9e14, RULE).filled_gain == 1.0
    # no rule (FlashInfer's kernels): never
    f, t = _synthetic(1.5, seed=5)
    assert fit_kernel(f, t, 4.8e12, 9.9e14).filled_rows == 0


def test_the_rule_comes_from_the_files_tune(tmp_path):
    probe = find_committed(H200, "probe")
    assert filled_launch(probe, "triton") == RULE
    assert filled_launch(probe, "flashinfer") is None and filled_launch(probe, "flashinfer-fa2") is None
    doc = json.loads(open(probe.path).read())
    for change, want in (({"decode_block_n_large_batch": 64, "decode_stages_large_batch": 3}, None),
                         ({"target_programs_per_sm": 8}, (8 * 132, 256, 128)),
                         ({"decode_short_tokens": None}, None)):
        d = {**doc, "notes": {**doc["notes"], "tune": {**doc["notes"]["tune"], **change}}}
        path = tmp_path / "cal.json"
        path.write_text(json.dumps(d))
        assert filled_launch(load_probe(path), "triton") == want, change
    d = {**doc, "notes": {k: v for k, v in doc["notes"].items() if k != "tune"}}
    path.write_text(json.dumps(d))
    assert filled_launch(load_probe(path), "triton") is None


def test_the_shipped_fits():
    fits = find_committed(H200, "probe").fits.kv_dtypes
    t8 = fits["fp8"]["triton"]
    # fitted on probe 1.3's fp8 decode: 3 training rows in the launch, 12 below it
    assert (t8.decode_dup.filled_rows, t8.decode_dup.filled_min_tokens, t8.decode_dup.filled_tile_tokens) == RULE
    assert 1.3 < t8.decode_dup.filled_gain < 1.45
    # decode over shared pages fits its L2 terms on the same kernel; the suffix pass is that kernel too
    assert t8.decode_shared.filled_gain == t8.decode_dup.filled_gain == t8.suffix.filled_gain
    assert t8.prefix.filled_rows == 0
    # bf16 Triton (bandwidth-bound at 4.5 TB/s either way) shows no gain, but its launch streams whole tiles too;
    # FlashInfer's kernels take no such launch
    t16 = fits["bf16"]["triton"]
    assert all((getattr(t16, k).filled_rows, getattr(t16, k).filled_gain) == (RULE[0], 1.0)
               for k in ("decode_dup", "decode_shared", "suffix"))
    assert all(getattr(fits[kv]["flashinfer"], k).filled_rows == 0 for kv in ("bf16", "fp8")
               for k in ("decode_dup", "decode_shared", "suffix"))


@pytest.mark.parametrize("cfg", [(4096, 256, 1, 128, 8, 4), (512, 16, 64, 1, 2, 6), (512, 16, 64, 1024, 2, 6),
                                 (4096, 64, 1, 128, 8, 4), (4096, 64, 8, 1, 8, 5)])
def test_the_planner_prices_the_launch_as_the_fit_does(cfg):
    """One layer of the planner's fp8 Triton attention = the fit's prediction for the same configuration, in the
    launch (2,048 and 4,096 rows), in it with a partial last tile (513 tokens) and below it (512 rows)."""
    probe = find_committed(H200, "probe")
    params = msgspec.structs.replace(params_from_probe(probe, "triton", "fp8", H200), measured=None)
    fits = probe.fits.kv_dtypes["fp8"]["triton"]
    P, n, gr, S, hkv, g = cfg
    model = one_layer_model(hkv, g)
    c = {"prefix_tokens": P, "group_size": n, "n_groups": gr, "suffix_tokens": S, "q_per_kv": g,
         "num_kv_heads": hkv, "head_dim": 128, "kv_dtype": "fp8", "page_size": 16}
    costs = step_costs(single_level_load(P, n, gr, S), gpu_shape(model, H200, "fp8", "bf16", 1), model, "bf16", 1,
                       params, prefix_caching=True)
    l2 = probe.l2_bytes
    want_ps = predict(fits.decode_shared, features("decode_shared", [c], decode_rows=fits.decode_rows), l2)[0]
    assert float(costs.ps_attention_s) == pytest.approx(want_ps, rel=1e-6)
    want_suf = predict(fits.suffix, features("cascade_suffix", [c]), l2)[0]
    assert float(costs.cas_suffix_s) == pytest.approx(want_suf, rel=1e-6)


def test_an_imported_gpu_takes_the_launch_at_its_own_sm_count():
    from cascade_plan.calibration.aic.transfer import TransferRatios, transfer_fit

    suffix = msgspec.to_builtins(find_committed(H200, "probe").fits.kv_dtypes["fp8"]["triton"].suffix)
    moved = transfer_fit(suffix, TransferRatios(bandwidth=1.5, flop=2.0, fixed=0.8, l2=2.0, sm=148 / 132))
    # a B200's 148 SMs take 4 programs each at 592 rows; the gain and the tile are the kernel's
    assert moved["filled_rows"] == 592
    assert (moved["filled_gain"], moved["filled_tile_tokens"]) == (suffix["filled_gain"], suffix["filled_tile_tokens"])
    assert transfer_fit({**suffix, "filled_rows": 0}, TransferRatios(1.0, 1.0, 1.0, 1.0, sm=2.0))["filled_rows"] == 0


def test_calibrate_says_it_and_warns_of_mixed_kernel_versions(tmp_path):
    from typer.testing import CliRunner

    from cascade_plan.calibration.holdout import is_held_out
    from cascade_plan.calibration.row_provenance import mixed_version_lines, own_kernel_versions
    from cascade_plan.calibration_schema.attention import AttentionConfigDoc
    from cascade_plan.cli.app import app

    doc = json.loads(open(find_committed(H200, "probe").path).read())
    assert mixed_version_lines(doc) == []
    assert set(own_kernel_versions(doc)[("triton", "fp8")]) == {"1.3.0"}
    # rows of an older probe run among them (as the file held until 2026-12-05): one line per backend and dtype
    old = "2026-12-01T09:33:00Z"
    doc["notes"]["runs"].append({"created_utc": old, "probe_version": "1.1.0", "grid": {}})
    tagged = [m for m in doc["measurements"] if m["backend"] == "triton" and m["config"]["kv_dtype"] == "fp8"
              and not is_held_out(msgspec.convert(m["config"], AttentionConfigDoc))][:5]
    for m in tagged:
        m["run"] = old
    lines = mixed_version_lines(doc)
    assert len(lines) == 1 and lines[0].startswith("fp8 triton: rows of several probe versions")
    assert "1.1.0 (5 rows), 1.3.0 (85 rows)" in lines[0]        # the rows the fit trains on
    # held-out rows of another version (rollout starts, regimes) average nothing: no line
    held = [m for m in doc["measurements"] if m["backend"] == "triton" and m["config"]["kv_dtype"] == "bf16"
            and is_held_out(msgspec.convert(m["config"], AttentionConfigDoc))][:5]
    for m in held:
        m["run"] = old
    assert len(mixed_version_lines(doc)) == 1
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["calibrate", str(path)])
    assert res.exit_code == 0, res.output
    assert "warning: fp8 triton: rows of several probe versions" in res.output
    assert "fp8 triton: per-sequence decode of a batch that fills the GPU alone (528 sequence x KV head rows" in \
        res.output
    assert "bf16 triton: per-sequence decode of a batch that fills the GPU alone" in res.output
    assert "no faster than its roofline below that (the rows show no gain)" in " ".join(res.output.split())
