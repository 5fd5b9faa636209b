"""The decode step as a list of ops: every op module in the registry has the one interface (cost/ops/registry.py),
a step's op list adds up to its totals, the fits and the planner count an attention kernel's bytes and FLOP
alike, and `estimate --json` lists each mode's ops."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import msgspec
import numpy as np
import pytest

from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.fitting import features
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.cost.cost_model import ATTENTION_OPS, CASCADE_RULES, gpu_shape, single_level_load, step_costs
from cascade_plan.cost.cost_params import DEFAULT, IDEAL, KernelParams
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.ops.base import OpCost
from cascade_plan.cost.ops.context import BOTH, StepContext
from cascade_plan.cost.ops.registry import OP_MODULES, ops
from cascade_plan.cost.ops.tiles import decode_compute_factor, prefix_compute_factor
from cascade_plan.cost.run_load import tree_run_costs
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import ModelSpec, load_preset
from cascade_plan.inputs.workload import load_scenario
from tests.cli_support import estimate_json_and_text

OPS_DIR = Path(__file__).resolve().parents[1] / "cascade_plan" / "cost" / "ops"
H200 = load_hardware("h200")
TERMS = ("gemm", "glue", "comm", "attention")


@cache
def h200_params(source: str, backend: str | None):
    probe = find_committed(H200, source=source)
    assert probe is not None
    return params_from_probe(probe, backend, "bf16", H200)


def param_sets():
    """Every kind of parameters a step is priced with: the seed's, the defaults, the probe's backends (triton's
    passes overlap 46%), AIConfigurator's (the K/V append on its own)."""
    return [IDEAL, DEFAULT, h200_params("probe", "flashinfer"), h200_params("probe", "triton"),
            h200_params("aic", None)]


def contexts():
    """Contexts over dense, MoE and MLA models, TP 1 and 8, with and without prefix caching, shared and not."""
    out = []
    loads = [single_level_load(np.array([0.0, 4096.0, 4096.0]), np.array([1.0, 1.0, 64.0]), 2.0,
                               np.array([128.0, 128.0, 1024.0]))]
    for model_id, tp in (("llama-3-8b", 1), ("llama-3-70b", 8), ("mixtral-8x7b", 2), ("deepseek-v3", 8)):
        model = load_preset(model_id)
        g = gpu_shape(model, H200, "bf16", "bf16", tp)
        for params in param_sets():
            for load in loads:
                for caching in (True, False):
                    out.append(StepContext(model, tp, "bf16", load.active_seqs, g.hbm_bytes_per_s, g.gemm_flop_per_s,
                                           params.step, params, g, load, caching))
    return out


def test_every_registered_op_has_the_interface_and_costs_nothing_negative():
    mods = ops()
    assert [m.__name__.rsplit(".", 1)[1] for m in mods] == list(OP_MODULES)
    assert len({m.NAME for m in mods}) == len(mods)
    for m in mods:
        assert isinstance(m.NAME, str) and m.MODES and set(m.MODES) <= set(BOTH), m.__name__
        assert m.TERM in TERMS and m.COMPOSED in ("dense", "moe", None), m.__name__
        assert callable(m.cost)
    priced = {m.NAME: 0 for m in mods}
    for ctx in contexts():
        for m in mods:
            op = m.cost(ctx)
            if op is None:
                continue
            priced[m.NAME] += 1
            assert isinstance(op, OpCost) and op.name == m.NAME
            for field in ("bytes", "flops", "time_s"):
                x = np.asarray(getattr(op, field), float)
                assert np.all(np.isfinite(x)) and np.all(x >= 0), (m.NAME, field)
    assert all(priced.values()), priced      # every op priced on some context (none returns None throughout)


def test_every_op_module_is_registered():
    """A module of cost/ops/ with `cost(ctx)` is an op: one line in OP_MODULES, or the step never prices it."""
    found = set()
    for path in OPS_DIR.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "cost" and [a.arg for a in node.args.args] == ["ctx"]:
                found.add(path.stem)
    assert found == set(OP_MODULES)


def _sums(c, overlap: float = 0.0):
    for mode, ops_, total in (("per_sequence", c.ps_ops, c.ps_step_s), ("cascade", c.cas_ops, c.cas_step_s)):
        assert ops_, mode
        got = sum(np.broadcast_to(np.asarray(op.time_s, float), np.shape(total)) for op in ops_)
        np.testing.assert_allclose(got, total, rtol=1e-12, atol=0, err_msg=mode)
        assert all(np.all(np.asarray(op.time_s) >= 0) for op in ops_), mode      # every number of the JSON >= 0
    names = {op.name for op in c.ps_ops}
    assert "decode" in names and not names & {"cascade_prefix", "kv_append", *CASCADE_RULES}
    cas = {op.name for op in c.cas_ops}
    assert {"cascade_prefix", "cascade_suffix", "cascade_merge"} <= cas and "decode" not in cas
    # the attention ops are the fields every caller reads
    by = {op.name: op for op in c.cas_ops}
    if overlap:     # passes run concurrently: each its share of their joint time, never more than alone
        assert np.all(by["cascade_prefix"].time_s <= c.cas_prefix_s * (1 + 1e-12))
    else:
        np.testing.assert_array_equal(by["cascade_prefix"].time_s, c.cas_prefix_s)
    np.testing.assert_array_equal(by["cascade_merge"].bytes, c.cas_merge_bytes)
    np.testing.assert_array_equal({op.name: op for op in c.ps_ops}["decode"].time_s, c.ps_attention_s)


def test_op_lists_add_up_to_the_step_totals():
    for ctx in contexts():
        assert ctx.params is not None and ctx.load is not None and ctx.shape is not None
        _sums(step_costs(ctx.load, ctx.shape, ctx.model, ctx.weight_dtype, ctx.tp, ctx.params, ctx.prefix_caching),
              ctx.params.prefix_suffix_overlap)


def test_op_lists_add_up_over_a_whole_run_in_several_chunks(monkeypatch):
    """Runs are priced in chunks of steps, each op's arrays joined like the other fields."""
    import cascade_plan.cost.run_load as run_load

    scn = load_scenario("rl-rollouts-64")
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    params = h200_params("probe", "flashinfer")
    whole = tree_run_costs(flatten(scn.tree), g, scn.model, scn.weight_dtype, scn.tp, params)
    monkeypatch.setattr(run_load, "CHUNK_ELEMENTS", 64)
    chunked = tree_run_costs(flatten(scn.tree), g, scn.model, scn.weight_dtype, scn.tp, params)
    _sums(chunked.costs, params.prefix_suffix_overlap)
    assert [op.name for op in chunked.costs.cas_ops] == [op.name for op in whole.costs.cas_ops]
    for a, b in zip(whole.costs.cas_ops, chunked.costs.cas_ops):
        np.testing.assert_array_equal(a.time_s, b.time_s)


def test_a_cascade_whose_passes_overlap_lists_each_pass_at_its_share_of_their_joint_time():
    params = h200_params("probe", "triton")
    assert params.prefix_suffix_overlap > 0.3
    model = load_preset("llama-3-8b")
    g = gpu_shape(model, H200, "bf16", "bf16", 1)
    c = step_costs(single_level_load(4096.0, 64.0, 2.0, 1024.0), g, model, "bf16", 1,
                   msgspec.structs.replace(params, measured=None))
    by = {op.name: op for op in c.cas_ops}
    pre, suf = float(by["cascade_prefix"].time_s), float(by["cascade_suffix"].time_s)
    assert pre < float(c.cas_prefix_s) and suf < float(c.cas_suffix_s)       # less than each alone ...
    assert pre / suf == pytest.approx(float(c.cas_prefix_s / c.cas_suffix_s), rel=1e-12)   # ... in their proportion
    passes = pre + suf + float(by["cascade_merge"].time_s)
    assert float(c.cas_attention_s) == pytest.approx(passes + float(by["kv_append"].time_s), rel=1e-12)


def one_layer_model(kv_heads: int, g: int, head_dim: int = 128) -> ModelSpec:
    return ModelSpec(id="one-layer", source="test", num_layers=1, hidden_size=4096, num_q_heads=kv_heads * g,
                     num_kv_heads=kv_heads, head_dim=head_dim, attention="gqa", kv_lora_rank=0, qk_rope_head_dim=0,
                     total_params=1, embedding_params=0, expert_params_per_layer=0, num_moe_layers=0, num_experts=0,
                     experts_per_token=0, sliding_window=None, alibi=False)


CONFIGS = [(4096, 64, 1, 128, 8, 4, 128, "bf16"), (1024, 16, 4, 1024, 8, 8, 128, "fp8"),
           (32768, 4, 1, 1, 1, 8, 64, "bf16"), (256, 256, 1, 4096, 2, 6, 256, "fp8"),
           (2 ** 20, 512, 16, 2 ** 16, 8, 4, 128, "bf16")]      # tokens x bytes past 2^53: the rounding agrees too


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("rows", [("kv_head", "q_head"), ("q_head", "kv_head")])
def test_the_fits_and_the_attention_ops_count_one_layer_alike(cfg, rows):
    """One layer of the planner's attention ops (GQA) against the fits' features of the same configuration: the
    same bytes and the same FLOP (the fits' as computed, the ops' useful x the kernels' padding)."""
    P, n, gr, S, hkv, G, d, kv = cfg
    prefix_rows, decode_rows = rows
    model = one_layer_model(hkv, G, d)
    g = gpu_shape(model, H200, kv, "bf16", 1)
    params = msgspec.structs.replace(DEFAULT, prefix_rows=prefix_rows, decode_rows=decode_rows, l2_hit_max=0.0,
                                     decode_dup=KernelParams())
    cfgs = [{"prefix_tokens": P, "group_size": n, "n_groups": gr, "suffix_tokens": S, "q_per_kv": G,
             "num_kv_heads": hkv, "head_dim": d, "kv_dtype": kv, "page_size": 16}]
    load = single_level_load(P, n, gr, S)
    for caching, kernel in ((False, "decode_dup"), (True, "decode_shared")):
        c = step_costs(load, g, model, "bf16", 1, params, prefix_caching=caching)
        f = features(kernel, cfgs, prefix_rows, decode_rows)
        assert float(c.ps_attention_bytes) == f.bytes[0]
        assert float(c.ps_flops) * float(decode_compute_factor(G, decode_rows)) == f.flops[0]
        assert float(c.cas_prefix_bytes) == f.layer_prefix_bytes[0]
    c = step_costs(load, g, model, "bf16", 1, params)
    pre, suf, mer = (features(k, cfgs, prefix_rows, decode_rows)
                     for k in ("cascade_prefix", "cascade_suffix", "cascade_merge"))
    assert float(c.cas_prefix_bytes) == pre.bytes[0]
    assert float(c.cas_prefix_flops) * float(prefix_compute_factor(n, G, prefix_rows)) == pre.flops[0]
    assert float(c.cas_suffix_bytes) == suf.bytes[0] and float(c.cas_suffix_flops) == suf.flops[0]
    assert float(c.cas_merge_bytes) == mer.bytes[0]


def test_estimate_json_lists_each_modes_ops():
    doc, text = estimate_json_and_text("rl-rollouts-64", "--hardware", "h200")
    for label in ("first_step", "middle_step", "final_step"):
        step = doc[label]
        assert {"gemm_s", "glue_s", "comm_s", "weight_s"} <= set(step)        # today's keys stay
        for mode in ("per_sequence", "cascade"):
            m = step[mode]
            assert {"attention_s", "step_s", "breakdown", "attention_source"} <= set(m)
            assert m["ops"] and all(set(op) == {"name", "bytes", "flops", "time_s", "source"} for op in m["ops"])
            assert sum(op["time_s"] for op in m["ops"]) == pytest.approx(m["step_s"], rel=1e-12)
            attention = [op for op in m["ops"] if op["name"] in ATTENTION_OPS]
            assert attention and all(op["source"] == m["attention_source"] for op in attention)
        names = [op["name"] for op in step["cascade"]["ops"]]
        assert names[:3] == ["gemm", "lm_head", "glue"] and "cascade_prefix" in names and "decode" not in names
        assert step["cascade"]["ops"][0] == step["per_sequence"]["ops"][0]       # the same GEMMs in both modes
    assert "The step as its operations" in text and "cascade_prefix │ cascade │" in text


def test_an_op_the_fit_puts_below_a_nanosecond_reads_so():
    from cascade_plan.render.step_table import fmt_op_seconds
    from cascade_plan.units import fmt_seconds

    assert fmt_op_seconds(6.06e-14) == "< 1 ns"
    assert fmt_op_seconds(0.0) == fmt_seconds(0.0) and fmt_op_seconds(2.17e-3) == fmt_seconds(2.17e-3)
