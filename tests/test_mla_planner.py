"""MLA measured and used: the probe's MLA rows at the query heads per GPU users run, fitted (decode over shared
pages, prefix pass, suffix pass + merge) and interpolated inside their grid; `probe --workload` on an MLA
workload plans its MLA shapes instead of refusing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from cascade_plan.cli.app import app

ROOT = Path(__file__).resolve().parents[1]
CAL = ROOT / "calibrations" / "h200-probe-2026-12-01.json"


@pytest.fixture(scope="module")
def doc():
    return json.loads(CAL.read_text())


@pytest.fixture(scope="module")
def probe():
    from cascade_plan.calibration.calibration_file import load_probe

    return load_probe(CAL)


def _estimate(*args) -> dict:
    res = CliRunner().invoke(app, ["estimate", *map(str, args), "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_tile_factor_by_hand():
    from cascade_plan.cost.ops.mla_attention import mla_tile_factor

    # one decoding sequence: 16 heads fill a quarter of a 64-row tile, 64 and 128 heads fill theirs
    assert mla_tile_factor([16, 32, 64, 128]).tolist() == [4.0, 2.0, 1.0, 1.0]
    # a prompt of 6 sequences x 16 heads = 96 rows runs as one 128-row tile (a cluster of two 64-row tiles)
    assert mla_tile_factor(96) == pytest.approx(128 / 96)
    assert mla_tile_factor(512) == 1.0


def test_mla_features_by_hand():
    from cascade_plan.calibration.mla_fit import mla_features

    c = {"prefix_tokens": 100, "group_size": 4, "n_groups": 2, "suffix_tokens": 10, "num_heads": 16,
         "kv_lora_rank": 512, "qk_rope_head_dim": 64, "kv_dtype": "bf16", "page_size": 16}
    d = mla_features("decode_mla", [c])
    assert d.bytes[0] == 8 * 110 * 1152                        # every sequence reads its whole context
    assert d.redundant_bytes[0] == 2 * 3 * 100 * 1152          # 3 re-reads of each prompt's prefix
    assert d.flops[0] == 8 * 110 * 2 * 1088 * 16 * 4           # QK (576) + PV (512), 16-head tiles of 64 rows
    p = mla_features("prefix_mla", [c])
    assert p.bytes[0] == 2 * 100 * 1152                        # each prompt once
    assert p.flops[0] == 8 * 100 * 2 * 1088 * 16               # 4 x 16 = 64 query rows: one full tile
    s = mla_features("suffix_mla", [{**c, "kv_dtype": "fp8"}])
    assert s.bytes[0] == 8 * 10 * 576                          # fp8 latent: one byte a value


def test_shipped_file_fits_mla_per_kv_dtype(doc):
    for kv in ("bf16", "fp8"):
        fits = doc["fitted"]["kv_dtypes"][kv]["flashinfer"]
        assert {"decode_mla", "prefix_mla", "suffix_mla"} <= set(fits)
    rows = doc["mla"]
    assert {r["config"]["num_heads"] for r in rows} == {16, 32, 64, 128}
    assert {r["config"]["kv_dtype"] for r in rows} == {"bf16", "fp8"}
    assert all(r["max_rel_err"] is None or r["max_rel_err"] < 1e-2 for r in rows)


def test_mla_fit_predicts_rows_it_never_saw(probe):
    """The held-out rows (a whole head count, a whole prefix, one in six of the rest): the whole-step
    targets (median 4%, worst 10%) are for whole steps; per kernel the cascade is within a few percent,
    the decode a little more."""
    from cascade_plan.calibration.mla_validation import mla_validation

    v = mla_validation(probe.mla, probe.fits, 60 * 2**20)["bf16"]["kernels"]
    assert v["cascade_total"]["held_out"]["n"] >= 40
    assert v["cascade_total"]["held_out"]["median"] < 0.035
    assert v["cascade_total"]["unseen_heads"]["median"] < 0.05
    assert v["decode_shared"]["held_out"]["median"] < 0.06


def test_deepseek_tp8_is_priced_from_measured_mla(doc):
    est = _estimate("deepseek-v3-grpo-tp8", "--hardware", "h200")
    assert est["attention_source"]["per_sequence"]["source"] == "measured (interpolated)"
    assert est["attention_source"]["cascade"]["source"] == "measured (interpolated)"
    assert est["go_no_go"]["judged"] and "Cannot judge" not in est["go_no_go"]["text"]
    assert "MLA" in est["calibration"]["label"]
    # the cascade's suffix pass is priced as MLA, not as GQA kernels (247 ms at the final step before)
    assert est["final_step"]["cascade"]["attention_s"] < 0.05
    # its error bars come from the whole MLA + MoE steps timed on the H200, and the verdict says so
    assert "whole MLA + MoE steps measured on the H200" in est["go_no_go"]["text"]


def test_a_measured_mla_row_is_returned_as_measured(doc, tmp_path):
    wl = tmp_path / "ds.yaml"
    wl.write_text("schema_version: 1\nname: ds-row\nmodel: deepseek-v3\nhardware: h200\nweight_dtype: fp8\ntp: 8\n"
                  "tree:\n  tokens: 4096\n  copies: 8\n  samples: 32\n  output_tokens: 2\n")
    est = _estimate(wl)
    row = next(r for r in doc["mla"] if r["kernel"] == "decode_shared" and r["config"]["num_heads"] == 16
               and r["config"]["prefix_tokens"] == 4096 and r["config"]["group_size"] == 32
               and r["config"]["n_groups"] == 8 and r["config"]["suffix_tokens"] == 1)
    assert est["first_step"]["per_sequence"]["attention_s"] == pytest.approx(61 * row["median_s"], rel=1e-9)


def test_fp8_latent_is_priced_from_fp8_rows():
    bf16 = _estimate("deepseek-v3-grpo-tp8", "--hardware", "h200")
    fp8 = _estimate("deepseek-v3-grpo-tp8", "--hardware", "h200", "--kv-dtype", "fp8")
    # measured: an fp8 latent decodes ~3x slower than bf16 on the H200 (never bf16 at half the bytes)
    assert fp8["first_step"]["per_sequence"]["attention_s"] > 2 * bf16["first_step"]["per_sequence"]["attention_s"]
    assert fp8["attention_source"]["per_sequence"]["source"].startswith("measured")


def test_probe_workload_plans_mla_shapes():
    from cascade_plan.cli.app import probe_plan_from_options
    from kernels_probe.steps.workload_probe import plan_from_json

    kw = {k: None for k in ("model", "prefix", "groups", "samples", "output_tokens", "private_tokens", "kv_dtype",
                            "weight_dtype", "tp")}
    plan = probe_plan_from_options("deepseek-v3-grpo-tp8", **kw)
    first, mid, final = plan.mla[:3]
    assert (first.prefix_tokens, first.group_size, first.n_groups, first.num_heads) == (6000, 32, 8, 16)
    assert [c.suffix_tokens for c in (first, mid, final)] == [1, 1024, 2048]
    assert {(c.group_size, c.prefix_tokens) for c in plan.mla[3:]} == {(16, 6000), (64, 6000), (32, 3008), (32, 12000)}
    assert plan.shape is None and not plan.attention
    # its routed experts (grouped GEMM rows around its 256 sequences) and its whole first / middle / final steps,
    # as one GPU's shard with the layers that fit one GPU (fp8 experts: 48 of 61 with the final step's latent)
    assert (plan.moe.experts, plan.moe.intermediate, plan.moe.tp) == (256, 256, 8) and 256 in plan.gemm_m
    assert [(p.position, p.suffix_tokens, p.batch) for p in plan.steps] == [
        ("first", 1, 256), ("middle", 1024, 256), ("final", 2048, 256)]
    assert 3 < plan.moe_step_layers < 61 and not any("moe_run" in n for n in plan.notes)
    assert plan_from_json(json.loads(json.dumps(plan.describe()))) == plan
    tp4 = probe_plan_from_options(None, **{**kw, "model": "deepseek-v3", "prefix": 1000, "samples": 8,
                                          "output_tokens": 64, "tp": 4, "groups": 1, "private_tokens": 0})
    assert {c.num_heads for c in tp4.mla} == {32}


def test_cli_probe_workload_accepts_mla(tmp_path):
    # the plan is derived and the GPU check fails after it, with one line (no CUDA here)
    res = CliRunner().invoke(app, ["probe", "--out", str(tmp_path / "c.json"), "--workload", "deepseek-v3-grpo-tp8"])
    assert "not measured yet" not in res.output and "Traceback" not in res.output
    assert not (tmp_path / "c.json").exists()


def test_mla_interpolation_between_rows_stays_between_them(probe):
    from cascade_plan.calibration.mla_fit import mla_measured

    fits = probe.fits.kv_dtypes["bf16"]["flashinfer"]
    m = mla_measured(probe.mla, "bf16", fits, 60 * 2**20)
    tab = m.table("cascade", (16, 1, 576))
    q = np.array([[8, 32, 6000, 1], [8, 32, 6000, 1500]], float)
    t = tab(q, np.ones(2))        # a flat fit: the rows' times interpolated, held within them
    lo = [95.1e-6, 169.8e-6]
    hi = [153.5e-6, 299.0e-6]
    assert np.all(t >= np.array(lo) * 0.999) and np.all(t <= np.array(hi) * 1.001)
