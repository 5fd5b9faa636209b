"""The probe's own cascade prefix pass, priced by its busiest program (own_kernel_prefix, cost/ops/prefix_programs.py):
its launch by hand; the rule a calibration keeps only where it gives back every cascade row's recorded prefix launch;
the fit and the planner pricing the pass alike; and on the H100 run of probe 1.8.0 (benchmarks/raw/
device-2026-12-06e), the held-out error of Triton's prefix pass with the busiest program against the whole prefix."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import msgspec
import numpy as np
import pytest

from cascade_plan.calibration.calibration_file import ProbeData
from cascade_plan.calibration.fitting import features, predict_kind
from cascade_plan.calibration.holdout import is_held_out
from cascade_plan.calibration.launch_rules import page_block_rule
from cascade_plan.calibration.probe_fit import calibrate
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration_schema.kernel_fit import BackendFit
from cascade_plan.cost.cost_model import gpu_shape, single_level_load
from cascade_plan.cost.ops import cascade_prefix
from cascade_plan.cost.ops.context import StepContext
from cascade_plan.cost.ops.page_blocks import PageBlocks
from cascade_plan.cost.ops.prefix_programs import prefix_program
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset
from cascade_plan.own_kernel_prefix import prefix_launch, program_tile_tokens
from cascade_plan.own_kernel_tune import DEFAULT_TUNE

RUN = Path(__file__).resolve().parents[1] / "benchmarks" / "raw" / "device-2026-12-06e" / "probe-1.8.0.json.gz"


def _doc() -> dict:
    return json.loads(gzip.open(RUN).read())


def _fitted(doc: dict) -> ProbeData:
    probe = ProbeData(Path(RUN.name.removesuffix(".gz")), doc)
    return ProbeData(probe.path, {**doc, "fitted": calibrate(probe)})


@pytest.fixture(scope="module")
def run() -> ProbeData:
    return _fitted(_doc())


def test_the_busiest_program_by_hand():
    """H100 (132 SMs). 16 sequences x 8 query heads of one KV head at 1K: 128 rows, one 128-row tile; one program per
    split, 2 per SM wanted (264 splits) but at least 256 tokens each: 4 splits of 256; 256 x 128 / 64 = 512.
    With 4 query heads per KV head and 8 KV heads the tile is 64 rows: 256. At 4K, 16 splits of 256."""
    assert prefix_launch(16, 8, 1, 1, 1024, 132) == (128, 1, 4, 256)
    assert program_tile_tokens(16, 8, 1, 1, 1024, 132) == 512.0
    assert program_tile_tokens(16, 4, 8, 1, 1024, 132) == 256.0
    assert prefix_launch(64, 8, 8, 1, 4096, 132)[:3] == (128, 4, 8)      # 512 rows: 4 tiles x 8 heads = 32 items
    rule = PageBlocks(132, DEFAULT_TUNE)
    got = prefix_program(rule, np.array([16, 16]), np.array([8, 4]), np.array([1, 8]), 1, np.array([1024, 0]))
    assert got.tolist() == [512.0, 0.0]
    assert prefix_program(None, 16, 8, 1, 1, np.array([1024.0])).tolist() == [1024.0]   # no rule: the prefix


def test_the_rule_holds_only_where_it_gives_back_every_prefix_launch(run):
    rule, line = page_block_rule(run, "triton", "bf16")
    assert rule is not None and "every row's recorded launch" in line
    doc = copy.deepcopy(run.decoded)
    row = next(m for m in doc["measurements"] if m["backend"] == "triton" and m["kernel"] == "cascade_prefix"
               and m["config"]["kv_dtype"] == "bf16")
    row["launch"]["prefix_splits"] = [s + 1 for s in row["launch"]["prefix_splits"]]
    rule, line = page_block_rule(ProbeData(run.path, doc), "triton", "bf16")
    assert rule is None and "prefix-pass launch" in line


def test_the_busiest_program_cuts_the_held_out_error_of_the_prefix_pass(run):
    """Held out: every 1-KV-head configuration among them (the fit trains on 8 KV heads alone), where the pass runs
    128-row tiles over few programs and the whole-prefix bound put it 32-37% low."""
    doc = _doc()
    doc["notes"]["tune"]["decode_page_group"] = 2     # a tune the rows refute: no rule, the whole prefix
    plain = _fitted(doc)
    rows = [r for r in run.select("triton", "cascade_prefix", None, "bf16") if is_held_out(r.config)]
    cfgs, t = [r.config for r in rows], np.array([r.timed_s for r in rows])

    def errors(p: ProbeData) -> np.ndarray:
        fits = msgspec.convert(p.fits.kv_dtypes["bf16"]["triton"], BackendFit)
        return np.abs(predict_kind(fits, "prefix", cfgs, p.l2_bytes) / t - 1)

    new, old = errors(run), errors(plain)
    assert msgspec.convert(plain.fits.kv_dtypes["bf16"]["triton"], BackendFit).page_blocks is None
    assert len(rows) >= 40
    assert np.median(new) < np.median(old) and np.percentile(new, 90) < 0.16 < np.percentile(old, 90)
    assert new.max() < 0.3 < old.max()


@pytest.mark.parametrize("model_name,tp,prefix,n", [("llama-3-8b", 1, 1024, 16), ("llama-3-8b", 1, 4096, 64),
                                                    ("llama-3-70b", 8, 1024, 16)])
def test_the_planner_prices_the_prefix_pass_as_the_fit_does(run, model_name, tp, prefix, n):
    """A layer of the model at one of the probe's shapes (Llama-3-70B at TP 8: one KV head, 8 query heads per GPU):
    the planner's prefix-pass op, per layer, is the fit's prediction at that configuration."""
    hw, model = load_hardware("h100-sxm"), load_preset(model_name)
    params = msgspec.structs.replace(params_from_probe(run, "triton", "bf16", hw), measured=None)
    assert params.page_blocks is not None
    fits = msgspec.convert(run.fits.kv_dtypes["bf16"]["triton"], BackendFit)
    g = gpu_shape(model, hw, "bf16", "bf16", tp)
    row = next(r for r in run.select("triton", "cascade_prefix", None, "bf16")
               if (r.config.prefix_tokens, r.config.group_size, r.config.n_groups, r.config.suffix_tokens,
                   r.config.q_per_kv, r.config.num_kv_heads) == (prefix, n, 1, 128, g.q_heads // g.kv_heads,
                                                                   g.kv_heads))
    load = single_level_load(prefix, n, 1, 128)
    ctx = StepContext(model, tp, "bf16", load.active_seqs, g.hbm_bytes_per_s, g.gemm_flop_per_s, params.step, params,
                      g, load, True)
    op = cascade_prefix.cost(ctx)
    assert op is not None
    fitted = predict_kind(fits, "prefix", [row.config], run.l2_bytes)[0]
    assert float(op.time_s) / model.num_layers == pytest.approx(fitted, rel=1e-6)
    busiest = program_tile_tokens(n, g.q_heads // g.kv_heads, g.kv_heads, 1, prefix, 132)
    assert features("cascade_prefix", [row.config], page_blocks=params.page_blocks).longest_tokens.tolist() == [busiest]
    assert row.timed_s == pytest.approx(fitted, rel=0.3)
