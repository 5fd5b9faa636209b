"""A shape the fit never saw takes its level from its own rows (cost/ops/shape_anchor.py): hand arithmetic for the
coordinates and the regression, properties of the anchored ratio, and the planner's use of it on the shipped H200
file (a head-dim-64 step outside the rows' grid is the fit times the rows' ratio; a core shape keeps the fit)."""

import math

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
from cascade_plan.cost.ops.attention import MeasuredAttention, single_level
from cascade_plan.cost.ops.shape_anchor import (
    ANCHORED,
    BANDWIDTH,
    MAX_DISTANCE,
    SUFFIX_SHARE_UNITS,
    anchor_coords,
    anchored_layer_s,
    anchored_ratio,
    passes_ratio,
    untrained_reach,
)
from cascade_plan.inputs.model_spec import ModelSpec

H200 = load_hardware("h200")


def test_coordinates_by_hand():
    # 64 groups x 16 sequences, 512-token prefix, 16-token suffix
    p = np.array([[64, 16, 512, 16]])
    seqs, ctx = 1024, 528
    decode = anchor_coords(p, "per_sequence")[0]
    assert decode == pytest.approx([math.log2(seqs), 4.0, math.log2(ctx), SUFFIX_SHARE_UNITS * 16 / 528])
    # the cascade reads each prefix once per group: suffix share = 1024 x 16 / (64 x 512 + 1024 x 16) = 1/3
    cascade = anchor_coords(p, "cascade")[0]
    assert cascade[3] == pytest.approx(SUFFIX_SHARE_UNITS / 3)


def test_one_row_gives_its_ratio_and_two_equidistant_rows_their_geometric_mean():
    rows = np.array([[1, 64, 4096, 0], [1, 256, 4096, 0]], float)
    assert anchored_ratio(rows[:1], np.array([1.3]), rows[:1], "per_sequence")[0] == pytest.approx(1.3)
    # 128 sequences lie one unit from both (a factor of two each way)
    q = np.array([[1, 128, 4096, 0]])
    assert anchored_ratio(rows, np.array([1.2, 0.8]), q, "per_sequence")[0] == pytest.approx(math.sqrt(1.2 * 0.8))


def test_the_nearer_row_weighs_more_by_a_gaussian_of_distance_over_its_square():
    rows = np.array([[64, 1, 4096, 0], [512, 1, 4096, 0]], float)     # 1 and 2 units from 128 sequences
    q = np.array([[128, 1, 4096, 0]])
    d1, d2 = 1 / (2 * BANDWIDTH**2), 4 / (2 * BANDWIDTH**2)
    w1, w2 = 1 / d1, math.exp(-(d2 - d1)) / d2
    want = math.exp((w1 * math.log(2.0) + w2 * math.log(0.5)) / (w1 + w2))
    assert anchored_ratio(rows, np.array([2.0, 0.5]), q, "per_sequence")[0] == pytest.approx(want)


def test_at_a_row_the_ratio_is_that_rows_even_beside_others():
    rows = np.array([[64, 16, 1024, 128], [64, 16, 1024, 0], [64, 16, 512, 1024], [32, 16, 2048, 16]], float)
    ratios = np.array([1.3, 0.9, 1.1, 0.7])
    assert anchored_ratio(rows, ratios, rows, "cascade") == pytest.approx(ratios, rel=1e-9)


def test_a_query_beyond_the_reach_of_every_row_keeps_the_fit():
    rows = np.array([[8, 1, 4096, 0]], float)          # more groups of one sequence: one axis moves
    just_in = np.array([[8 * 2 ** (MAX_DISTANCE - 0.01), 1, 4096, 0]])
    too_far = np.array([[8 * 2 ** (MAX_DISTANCE + 0.01), 1, 4096, 0]])
    assert anchored_ratio(rows, np.array([1.5]), just_in, "per_sequence")[0] == pytest.approx(1.5)
    assert math.isnan(anchored_ratio(rows, np.array([1.5]), too_far, "per_sequence")[0])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.3, 3.0), min_size=1, max_size=6),
       st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(8, 16), st.integers(0, 12)))
def test_the_ratio_stays_within_the_rows_ratios(ratios, q):
    rows = np.array([[1, 2 ** i, 4096, 128 * i] for i in range(len(ratios))], float)
    query = np.array([[2 ** q[0], 2 ** q[1], 2 ** q[2], 2 ** q[3]]], float)
    r = anchored_ratio(rows, np.array(ratios), query, "per_sequence")[0]
    assert math.isnan(r) or min(ratios) * (1 - 1e-9) <= r <= max(ratios) * (1 + 1e-9)


def test_which_rows_anchor_which_queries():
    pts = np.array([[1, 8, 4096, 128], [1, 8, 131072, 128], [1, 8, 4096, 8192]], float)
    q = np.array([[1, 8, 8192, 256], [1, 8, 131072, 1], [1, 8, 2048, 6000]], float)
    # a shape the fit never saw: every row, every query
    use, rows = untrained_reach(pts, np.zeros(3, bool), None, q)
    assert use.all() and rows.all()
    # a core shape whose fit trained up to a 64K prefix and 4K suffix: only queries past that, from rows past it
    use, rows = untrained_reach(pts, np.array([True, False, False]), np.array([64, 1024, 65536, 4096.0]), q)
    assert use.tolist() == [False, True, True] and rows.tolist() == [False, True, True]
    # nothing untrained past the reach: nothing anchored
    use, rows = untrained_reach(pts[:1], np.array([True]), np.array([64, 1024, 65536, 4096.0]), q)
    assert not use.any()


def test_rows_without_training_flags_or_fit_are_never_anchored():
    shape = (4, 8, 128)
    plain = MeasuredAttention("x", "bf16", {"per_sequence": [(shape, (1, 8, 4096, 0), 1e-4, 1e-4)]})
    assert plain.anchor_rows("per_sequence", shape) is None
    no_fit = MeasuredAttention("x", "bf16", {"per_sequence": [(shape, (1, 8, 4096, 0), 1e-4, None, False)]})
    assert no_fit.anchor_rows("per_sequence", shape) is None
    m = MeasuredAttention("x", "bf16", {"per_sequence": [(shape, (1, 8, 4096, 0), 2e-4, 1e-4, False)]})
    sl = single_level(single_level_load(4096, 16, 1, 64))        # 16 sequences: not bracketed by the one row
    t = anchored_layer_s(m, "per_sequence", shape, sl, np.array(5e-5), np.full(sl.valid.shape, np.nan))
    assert float(t) == pytest.approx(1e-4)                          # the fit (50 us) times the row's ratio (2)
    # a point the rows bracket is theirs, not anchored
    t = anchored_layer_s(m, "per_sequence", shape, sl, np.array(5e-5), np.full(sl.valid.shape, 3e-5))
    assert np.isnan(t).all()


# Qwen2.5-0.5B's attention (14 query heads over 2 KV heads, head dim 64): a shape of the probe's regimes grid, none of
# whose rows trained the fit.
def layer_model(name: str, q_heads: int, kv_heads: int, head_dim: int) -> ModelSpec:
    return ModelSpec(id=name, source="test", num_layers=1, hidden_size=q_heads * head_dim, num_q_heads=q_heads,
                     num_kv_heads=kv_heads, head_dim=head_dim, attention="gqa", kv_lora_rank=0, qk_rope_head_dim=0,
                     total_params=1, embedding_params=0, expert_params_per_layer=0, num_moe_layers=0, num_experts=0,
                     experts_per_token=0, sliding_window=None, alibi=False)


D64 = layer_model("d64", 14, 2, 64)


@pytest.fixture(scope="module")
def params():
    probe = find_committed(H200)
    assert probe is not None
    return params_from_probe(probe, "flashinfer", "bf16", H200, D64)


def _cost(params, prefix, group, groups, suffix, model=D64):
    sh = gpu_shape(model, H200, "bf16", "bf16", 1)
    return step_costs(single_level_load(prefix, group, groups, suffix), sh, model, "bf16", 1, params)


def test_an_unbracketed_step_of_an_untrained_shape_is_the_fit_scaled_to_its_rows(params):
    # 32 groups of 16 at a 1K prefix and 256-token suffixes: no rows bracket it
    c = _cost(params, 1024, 16, 32, 256)
    assert float(c.ps_measured) == 0.0
    fitted = _cost(msgspec.structs.replace(params, measured=None), 1024, 16, 32, 256)
    rows = params.measured.anchor_rows("per_sequence", (7, 2, 64))
    assert rows is not None and not rows[2].any()
    want = anchored_ratio(rows[0], rows[1], np.array([[32, 16, 1024, 256]]), "per_sequence")[0]
    assert float(c.ps_attention_s) == pytest.approx(float(fitted.ps_attention_s) * want, rel=1e-9)
    assert want != pytest.approx(1.0, abs=0.02)       # the rows put this shape's level off the fit's
    assert ANCHORED in c.ps_outside[0]


def test_a_core_shape_inside_the_fits_training_keeps_the_fit():
    probe = find_committed(H200)
    core = layer_model("core", 32, 8, 128)
    p = params_from_probe(probe, "flashinfer", "bf16", H200, core)
    c = _cost(p, 3000, 24, 3, 300, core)
    fitted = _cost(msgspec.structs.replace(p, measured=None), 3000, 24, 3, 300, core)
    assert float(c.ps_measured) == 0.0 and float(c.ps_attention_s) == float(fitted.ps_attention_s)
    assert not any(ANCHORED in w for w in c.ps_outside)


def test_the_prefix_pass_is_anchored_by_its_own_work():
    # the prefix pass reads no suffix: its coordinates drop it (context = prefix, suffix share 0)
    p = np.array([[64, 16, 512, 16]])
    assert anchor_coords(p, "cascade_prefix")[0] == pytest.approx([10.0, 4.0, 9.0, 0.0])


def test_a_cascade_anchored_pass_by_pass_by_hand():
    # one row at 64 groups x 16, 1K prefix, 128-token suffix: prefix pass measured 85 us against a fitted 72.5,
    # the whole cascade 228 against 211 (rest: 143 / 138.5)
    row = np.array([[64, 16, 1024, 128]], float)
    pre_r, rest_r, tot_r = 85 / 72.5, (228 - 85) / (211 - 72.5), 228 / 211
    # at the row: the fitted passes times their ratios give the measured cascade back
    r = passes_ratio(row, np.array([tot_r]), row, np.array([pre_r]), np.array([rest_r]), row,
                     np.array([211.0]), np.array([72.5]))[0]
    assert r * 211 == pytest.approx(228)
    # a first step (no suffix: the fitted cascade is its prefix pass) takes the prefix pass's ratio, not the whole's
    q = np.array([[32, 16, 2048, 1]], float)      # the same prefix work per layer, one unit away in sequences
    r = passes_ratio(row, np.array([tot_r]), row, np.array([pre_r]), np.array([rest_r]), q,
                     np.array([90.0]), np.array([90.0]))[0]
    assert r == pytest.approx(pre_r)
    # a query the rest dominates mixes the two by the fitted passes' shares
    r = passes_ratio(row, np.array([tot_r]), row, np.array([pre_r]), np.array([rest_r]), row,
                     np.array([200.0]), np.array([50.0]))[0]
    assert r == pytest.approx((50 * pre_r + 150 * rest_r) / 200)
    # no prefix row with a rest beside it: the whole cascade's ratio
    r = passes_ratio(row, np.array([tot_r]), row, np.array([pre_r]), np.array([np.nan]), q,
                     np.array([90.0]), np.array([90.0]))[0]
    assert r == pytest.approx(tot_r)


TRITON_D256 = layer_model("gemma-2-2b-attention", 8, 4, 256)


def test_a_first_step_of_an_untrained_shape_is_anchored_pass_by_pass():
    # Triton at head dim 256 (8 query heads over 4 KV heads), 16 prompts of 2K tokens x 16 samples, first step: no
    # rows bracket it (the shape's rollout starts are 32 and 64 prompts), so each pass takes its own rows' level
    probe = find_committed(H200)
    p = params_from_probe(probe, "triton", "bf16", H200, TRITON_D256)
    c = _cost(p, 2048, 16, 16, 1, TRITON_D256)
    fitted = _cost(msgspec.structs.replace(p, measured=None), 2048, 16, 16, 1, TRITON_D256)
    assert float(c.cas_measured) == 0.0 and float(c.cas_anchored) == 1.0
    shape = (2, 4, 256)
    pts, pre_r, rest_r, trained = p.measured.pass_anchor_rows(shape)
    tot = p.measured.anchor_rows("cascade", shape)
    q = np.array([[16, 16, 2048, 1]], float)
    fit_tot, fit_pre = float(fitted.cas_attention_s), float(fitted.cas_prefix_s)
    want = passes_ratio(tot[0], tot[1], pts, pre_r, rest_r, q, np.array([fit_tot]), np.array([fit_pre]))[0]
    assert float(c.cas_attention_s) == pytest.approx(fit_tot * want, rel=1e-9)
    # a row with no suffix has no rest to compare (its rest is the merge alone): only rows with a suffix give one
    assert np.all(np.isnan(rest_r[pts[:, 3] == 0])) and np.isfinite(rest_r[pts[:, 3] > 0]).any()


def test_a_first_step_on_a_rollout_start_row_is_that_rows_one_page_suffix():
    # 32 prompts of 2K tokens x 16 samples at head dim 256: the probe's row with a 16-token suffix (one page each)
    # prices the first step, one private token each, whose suffix pass reads that page
    probe = find_committed(H200)
    p = params_from_probe(probe, "triton", "bf16", H200, TRITON_D256)
    c = _cost(p, 2048, 16, 32, 1, TRITON_D256)
    assert float(c.cas_measured) == 1.0
    row = [m for m in probe.select("triton", "cascade_total", None, "bf16")
           if (m.config.head_dim, m.config.prefix_tokens, m.config.n_groups, m.config.suffix_tokens)
           == (256, 2048, 32, 16)]
    assert len(row) == 1
    # the row's time, and the new token's K/V write, which the probe's cascade rows do not time
    assert float(c.cas_attention_s) / TRITON_D256.num_layers == pytest.approx(row[0].timed_s, rel=0.02)
