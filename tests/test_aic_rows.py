"""AIConfigurator's per-sequence decode rows, shipped in imported files and interpolated inside their
grid: the encoding keeps every kept row to 4 digits, the planner returns a row exactly at its grid
point and the geometric mean of two neighbours halfway (in log context) between them, falls back to the
fit outside, and labels which one priced the step."""

import json

import numpy as np
import pytest

from cascade_plan.calibration.aic.rows import (
    KEEP_Q_PER_KV,
    decode_measured,
    encode_rows,
)
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
from cascade_plan.cost.coverage import attention_sources
from cascade_plan.cost.ops.attention import (
    FITTED,
    MEASURED_AIC,
    measured_layer_s,
    private_level,
)
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset


def _cfg(b, ctx, q=4, h=8):
    return {"prefix_tokens": ctx, "group_size": 1, "n_groups": b, "suffix_tokens": 0, "q_per_kv": q,
            "num_kv_heads": h, "head_dim": 128, "kv_dtype": "bf16"}


# Fixture rows in decode_rows()' form (AIConfigurator's batch_size, isl + step, latency): batch 1 and 2
# at contexts 1024 and 4096; batch 2 at 4096 missing (the table trims where a layer's cache is full);
# one shape of 3 query heads per KV head, which the import does not keep.
ROWS = ([_cfg(1, 1024), _cfg(1, 4096), _cfg(2, 1024), _cfg(3, 1024, q=3)],
        np.array([10e-6, 40e-6, 12.34567e-6, 99e-6]))


def test_rows_are_encoded_once_per_shape_to_four_digits():
    doc = encode_rows({"bf16": ROWS}, "vllm_flash_attn_fa3", "fixture.parquet")
    assert doc["sequences"] == [1, 2] and doc["context_tokens"] == [1024, 4096]   # q=3's batch 3 not kept
    assert 3 not in KEEP_Q_PER_KV and list(doc["kv_dtypes"]["bf16"]) == ["4/8/128"]
    assert doc["kv_dtypes"]["bf16"]["4/8/128"] == [[10.0, 40.0], [12.35, None]]


def _interp(doc, b, ctx):
    m = decode_measured({"decode_rows": doc}, "flashinfer", "bf16", None, 50e6)
    return measured_layer_s(m, "per_sequence_dup", (4, 8, 128), private_level(single_level_load(0, b, 1, ctx)))


def test_a_row_is_itself_and_between_rows_the_geometric_mean():
    doc = encode_rows({"bf16": ROWS}, "k", "t")
    assert float(_interp(doc, 1, 1024)) == pytest.approx(10e-6)
    assert float(_interp(doc, 1, 2048)) == pytest.approx(np.sqrt(10e-6 * 40e-6))    # halfway in log context: 20 us
    assert float(_interp(doc, 2, 1024)) == pytest.approx(12.35e-6)
    assert np.isnan(float(_interp(doc, 2, 2048)))      # batch 2 has no row at 4096: not bracketed
    assert np.isnan(float(_interp(doc, 1, 8192)))      # beyond the grid


def _h100(model="llama-3-8b"):
    hw = load_hardware("h100-sxm")
    m = load_preset(model)
    return hw, m, params_from_probe(find_committed(hw, source="aic"), None, "bf16", hw, m)


def _one(params, hw, m, batch, ctx, prefix=0, prefix_caching=False):
    g = gpu_shape(m, hw, "bf16", "bf16", 1)
    load = single_level_load(prefix, batch, 1, ctx)
    return g, step_costs(load, g, m, "bf16", 1, params, prefix_caching=prefix_caching)


def test_shipped_rows_price_the_step_at_a_grid_point_and_say_so():
    hw, m, params = _h100()
    assert params.measured is not None and params.measured.label == MEASURED_AIC
    doc = find_committed(hw, source="aic").doc["decode_rows"]
    b, ctx = doc["sequences"].index(8), doc["context_tokens"].index(1024)
    row_s = doc["kv_dtypes"]["bf16"]["4/8/128"][b][ctx] * 1e-6           # Llama-3-8B at TP 1: 4 q per KV, 8 KV
    g, c = _one(params, hw, m, 8, 1024)
    assert float(c.ps_measured) == 1.0
    assert float(c.ps_attention_s) == pytest.approx(g.layers * row_s, rel=1e-9)  # the row, K/V write included
    src = attention_sources(c, np.ones(1), params)
    assert src["per_sequence"]["source"] == MEASURED_AIC
    assert src["cascade"]["source"].startswith(FITTED) and "no cascade kernels" in src["cascade"]["outside"]


def test_outside_the_rows_and_over_shared_pages_the_fit_prices_it_and_says_why():
    hw, m, params = _h100()
    _, c = _one(params, hw, m, 8, 200_000)                    # beyond the 131,072-token rows
    assert float(c.ps_measured) == 0.0 and "context tokens 200,000" in c.ps_outside[0]
    _, shared = _one(params, hw, m, 8, 64, prefix=1024, prefix_caching=True)
    assert float(shared.ps_measured) == 0.0 and "private pages only" in shared.ps_outside[0]
    _, private = _one(params, hw, m, 8, 1024, prefix_caching=True)   # nothing shared: pages are private
    assert float(private.ps_measured) == 1.0


def test_estimate_json_names_aiconfigurators_rows(tmp_path):
    from cli_support import estimate_json_and_text

    wl = tmp_path / "private.yaml"
    wl.write_text("schema_version: 1\nmodel: llama-3-8b\nhardware: h100-sxm\nprefix_caching: false\n"
                  "tree:\n  tokens: 1024\n  samples: 8\n  output_tokens: 64\n")
    d, text = estimate_json_and_text(wl)
    assert MEASURED_AIC in json.dumps(d, ensure_ascii=False)
    assert "AIConfigurator's rows, interpolated" in text


@pytest.mark.parametrize("corrupt, field", [
    (lambda d: d["decode_rows"]["kv_dtypes"]["bf16"]["4/8/128"].pop(), "4/8/128"),       # one sequences row short
    (lambda d: d["decode_rows"]["kv_dtypes"]["bf16"].update({"4x8": [[1.0]]}), "4x8"),   # not a shape
    (lambda d: d["decode_rows"]["kv_dtypes"]["bf16"]["4/8/128"][0].__setitem__(0, -1.0), "bf16.4/8/128"),
    (lambda d: d["mla_decode_rows"]["kv_dtypes"]["bf16"]["16"].pop(), "mla_decode_rows.kv_dtypes.bf16.16"),
    (lambda d: d["mla_decode_rows"]["kv_dtypes"]["bf16"].update({"16/1": [[1.0]]}), "16/1"),
    (lambda d: d["mla_decode_rows"]["kv_dtypes"]["bf16"]["16"][0].__setitem__(0, -1.0), "mla_decode_rows"),
])
def test_a_malformed_decode_rows_block_is_one_error_line(tmp_path, corrupt, field):
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    doc = find_committed(load_hardware("h100-sxm"), source="aic").doc
    doc = json.loads(json.dumps(doc))
    corrupt(doc)
    path = tmp_path / "h100-sxm-aic-vllm.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["estimate", "rl-rollouts-64", "--calibration", str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert field in res.output and len(res.output.strip().splitlines()) <= 3, res.output
