"""AIConfigurator's MoE layer rows on imported GPUs: which rows an import keeps (the shipped MoE presets'
expert shapes, block-scaled fp8 before per-tensor, one table per TP, dtype and routing), the planner pricing
the routed experts from them exactly at a measured token count and saying so, and malformed rows as one
error line."""

from __future__ import annotations

import copy
import json

import msgspec
import numpy as np
import pytest
from typer.testing import CliRunner

from cascade_plan.calibration.aic.moe_import import moe_rows
from cascade_plan.calibration.calibration_file import ProbeData, find_committed
from cascade_plan.calibration.moe_rows import aic_moe_tables
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration_schema.imported import MoeRowDoc, MoeSkewDoc
from cascade_plan.cli.app import app
from cascade_plan.cost.moe_table import MEASURED_AIC, table_for
from cascade_plan.cost.ops import moe as moe_op
from cascade_plan.cost.ops.context import StepContext
from cascade_plan.errors import InputError
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset

from cli_support import estimate_json_and_text

MIXTRAL = load_preset("mixtral-8x7b")


def _cols(rows: list[dict]) -> dict:
    keys = rows[0].keys()
    return {k: np.array([r[k] for r in rows]) for k in keys}


def test_rows_kept_per_shape_tp_dtype_and_routing():
    rows = []
    for tp in (1, 2, 3):
        for dtype, kern, scale in (("bfloat16", "triton_bf16", 2.0), ("fp8", "cutlass", 9.0),
                                   ("fp8_block", "triton", 1.0)):
            for dist in ("balanced", "power_law_1.2"):
                for tok in (1, 8, 64):
                    rows.append(dict(moe_dtype=dtype, num_tokens=tok, hidden_size=4096, inter_size=14336, topk=2,
                                     num_experts=8, moe_tp_size=tp, moe_ep_size=1, distribution=dist,
                                     kernel_source=kern, latency=scale * (0.1 + tok / 1000) / tp))
    rows.append(dict(rows[0], moe_ep_size=2, latency=99.0))                   # expert parallel: not the planner's
    rows.append(dict(rows[0], hidden_size=1024, latency=99.0))                # not a preset's shape
    got = moe_rows(_cols(rows))
    keys = {(r["tp"], r["dtype"], r["aic_dtype"], r["routing"]) for r in got}
    # TP 1, 2, 4 and 8 only (TP 3 is not kept), expert parallelism 1, fp8 from the block-scaled rows
    assert keys == {(tp, d, a, r) for tp in (1, 2) for d, a in (("bf16", "bfloat16"), ("fp8", "fp8_block"))
                    for r in ("balanced",)}      # the power-law routings are another skew (moe_import.ROUTINGS)
    one = next(r for r in got if (r["tp"], r["dtype"], r["routing"]) == (2, "fp8", "balanced"))
    assert one["intermediate"] == 7168 and one["m"] == [1, 8, 64] and one["kernel"] == "triton"
    assert one["seconds"] == pytest.approx([(0.1 + t / 1000) / 2 * 1e-3 for t in (1, 8, 64)], rel=1e-3)


def test_the_imported_h200_file_prices_deepseek_experts_from_its_rows():
    aic = find_committed(load_hardware("h200"), source="aic")
    model = load_preset("deepseek-v3")
    params = params_from_probe(aic, None, "bf16", load_hardware("h200"), model)
    table = table_for(params.step.moe, model, 8, "fp8")
    assert table is not None and table.origin == "aic" and table.source_dtype == "fp8_block"
    i = table.m.index(256.0)
    hw = load_hardware("h200")
    op = moe_op.cost(StepContext(model, 8, "fp8", np.array([256.0]), hw.hbm_bytes_per_s, hw.flop_per_s("fp8"),
                                 params.step))
    assert op.time_s[0] == pytest.approx(model.num_moe_layers * table.seconds[i])      # a measured M: the row
    src = moe_op.source(model, 8, "fp8", [256.0], [1.0], params.step)
    assert src["measured_share"] == 1.0 and src["source"].startswith(MEASURED_AIC) and "fp8_block" in src["source"]
    # a shape AIConfigurator has no rows of (bf16 DeepSeek experts): the GEMM model, as before
    assert moe_op.source(model, 8, "bf16", [256.0], [1.0], params.step)["measured_share"] == 0.0


def test_malformed_moe_rows_are_one_error_line(tmp_path):
    doc = copy.deepcopy(find_committed(load_hardware("h100-sxm"), source="aic").doc)
    good = doc["moe_rows"]
    with pytest.raises(InputError, match="ascending"):
        aic_moe_tables(msgspec.convert([dict(good[0], m=good[0]["m"][::-1])], list[MoeRowDoc]), "x.json")
    with pytest.raises(InputError, match="hidden") as e:       # the typed read names the row and the field
        _ = ProbeData("x.json", {"moe_rows": [{k: v for k, v in good[0].items() if k != "hidden"}]}).moe_rows
    assert e.value.field == "moe_rows[0]"
    doc["moe_rows"][0]["seconds"][0] = -1.0
    path = tmp_path / "h100-sxm-aic-vllm.json"
    path.write_text(json.dumps(doc))
    res = CliRunner().invoke(app, ["estimate", "deepseek-v3-grpo-tp8", "--hardware", "h100-sxm", "--calibration",
                                   str(path)])
    assert res.exit_code == 2 and "Traceback" not in res.output and "moe_rows[0]" in res.output


def _mixtral_parts(tables, skews=()):
    from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS

    return msgspec.structs.replace(DEFAULT_STEP_PARTS, moe=tuple(tables), moe_skew=tuple(skews))


def _table(routing, seconds, origin="probe"):
    from cascade_plan.cost.moe_table import MoeTable

    return MoeTable(hidden=4096, intermediate=14336, experts=8, top_k=2, dtype="bf16", m=(16.0, 64.0),
                    seconds=seconds, routing=routing, origin=origin)


def _layer_s(parts, routing, m):
    hw = load_hardware("h200")
    parts = msgspec.structs.replace(parts, moe_routing=routing)
    op = moe_op.cost(StepContext(MIXTRAL, 1, "bf16", np.array([m]), hw.hbm_bytes_per_s, hw.dense_bf16_flop_per_s,
                                 parts))
    return op.time_s[0] / MIXTRAL.num_moe_layers, moe_op.source(MIXTRAL, 1, "bf16", [m], [1.0], parts)


def test_skewed_routing_from_skewed_rows_else_the_measured_ratio_else_balanced_with_a_note():
    from cascade_plan.calibration.moe_rows import skew_ratios

    bal, skw = _table("balanced", (400e-6, 600e-6)), _table("skewed", (200e-6, 450e-6))
    # balanced by default: the skewed rows are not used
    t, src = _layer_s(_mixtral_parts([bal, skw]), "balanced", 16)
    assert t == pytest.approx(400e-6) and "routing" not in src
    # the calibration's own skewed rows
    t, src = _layer_s(_mixtral_parts([bal, skw]), "skewed", 64)
    assert t == pytest.approx(450e-6) and "skewed routing" in src["source"] and src["routing"] == "skewed"
    # a GPU with balanced rows only (an import): balanced x the probe's ratio (0.5 at 16, 0.75 at 64)
    (ratio,) = skew_ratios([bal, skw], "probe.json")
    assert ratio["ratio"] == pytest.approx([0.5, 0.75]) and ratio["source"] == "probe.json"
    from cascade_plan.calibration.moe_rows import _skews

    aic = _table("balanced", (300e-6, 500e-6), origin="aic")
    parts = _mixtral_parts([aic], _skews(msgspec.convert([ratio], list[MoeSkewDoc]), None))
    t, src = _layer_s(parts, "skewed", 64)
    assert t == pytest.approx(500e-6 * 0.75)
    t, src = _layer_s(parts, "skewed", 32)          # the ratio interpolated in log2 M: 0.625 halfway
    assert t / _layer_s(parts, "balanced", 32)[0] == pytest.approx(0.625)
    assert "ratio the probe measured" in src["routing_note"] and "probe.json" in src["routing_note"]
    # neither: balanced, and the output says so
    t, src = _layer_s(_mixtral_parts([aic]), "skewed", 64)
    assert t == pytest.approx(500e-6) and "priced as balanced" in src["routing_note"]


def test_a_workload_says_its_routing_and_the_json_carries_it(tmp_path):
    wl = tmp_path / "ds.yaml"
    wl.write_text("schema_version: 1\nmodel: deepseek-v3\nhardware: h100-sxm\ntp: 8\nweight_dtype: fp8\n"
                  "moe_routing: skewed\ntree:\n  tokens: 2048\n  samples: 64\n  output_tokens: 32\n")
    skewed, text = estimate_json_and_text(wl)
    src = skewed["moe_source"]
    assert src["routing"] == "skewed" and "h200-probe" in src["routing_note"]
    bal = CliRunner().invoke(app, ["estimate", str(wl), "--moe-routing", "balanced", "--json"])
    d = json.loads(bal.stdout)
    assert "routing" not in d["moe_source"] and d["run"]["per_sequence_s"] > skewed["run"][
        "per_sequence_s"]                            # the probe's skewed router touches fewer experts
    assert "skewed routing" in text
    bad = tmp_path / "bad.yaml"
    bad.write_text(wl.read_text().replace("skewed", "zipf"))
    res = CliRunner().invoke(app, ["estimate", str(bad)])
    assert res.exit_code == 2 and "moe_routing" in res.output and "Traceback" not in res.output
