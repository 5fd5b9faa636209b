"""Invariants of the cost model, over random trees and shapes (hypothesis)."""


import msgspec
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cascade_plan import DEFAULT, IDEAL, Scenario, TreeNode, estimate, load_hardware, simple_tree
from cascade_plan.cost.cost_model import gpu_shape
from cascade_plan.cost.cost_params import with_overheads_scaled
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.run_load import tree_step_costs
from cascade_plan.inputs.model_spec import load_preset

MODELS = ["llama-3-8b", "llama-3-70b", "qwen2.5-7b", "mixtral-8x7b", "deepseek-v3", "codellama-13b"]
HW = ["h100-sxm", "h200", "a100-80gb", "l40s"]


def scenario(model, hw, tree, tp=1, kv="bf16"):
    return Scenario(name="t", model=load_preset(model), hardware=load_hardware(hw), kv_dtype=kv, weight_dtype="bf16",
                    tp=tp, prefix_caching=True, block_size=16, tree=tree)


def costs(scn, params):
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    return tree_step_costs(flatten(scn.tree), g, scn.model, scn.weight_dtype, scn.tp, params), g


leaves = st.builds(lambda t, c, s, o, p: TreeNode(tokens=t, copies=c, samples=s, output_tokens=o, private_tokens=p),
                   st.integers(0, 5000), st.integers(1, 4), st.integers(1, 64), st.integers(1, 300),
                   st.integers(0, 200))
trees = st.recursive(leaves, lambda kids: st.builds(
    lambda t, c, ch: TreeNode(tokens=t, copies=c, children=ch), st.integers(0, 20000), st.integers(1, 3),
    st.lists(kids, min_size=1, max_size=3)), max_leaves=5)


@settings(max_examples=60, deadline=None)
@given(tree=trees, model=st.sampled_from(MODELS), hw=st.sampled_from(HW), kv=st.sampled_from(["bf16", "fp8", "int4"]))
def test_cascade_reads_no_more_kv_than_per_sequence(tree, model, hw, kv):
    c, _ = costs(scenario(model, hw, tree, kv=kv), DEFAULT)
    kv_cascade = c.cas_prefix_bytes + c.cas_suffix_bytes
    assert np.all(kv_cascade <= c.ps_attention_bytes + 1e-6)


def test_merge_traffic_can_make_cascade_read_more_for_a_tiny_prefix():
    # 4 tokens shared by 2 sequences save 4 x 128 KiB but the merge moves 2 x 3 x 32 x 129 x 4 x 32 B = 3.2 MB:
    # the bytes reason cascade loses on short prefixes.
    c, _ = costs(scenario("llama-3-8b", "h100-sxm", simple_tree(4, 1, 2, 10)), DEFAULT)
    assert np.all(c.cas_attention_bytes > c.ps_attention_bytes)
    c, _ = costs(scenario("llama-3-8b", "h100-sxm", simple_tree(4, 1, 2, 10)), IDEAL)
    assert np.all(c.cas_attention_bytes < c.ps_attention_bytes)     # the seed's arithmetic has no merge traffic


@settings(max_examples=60, deadline=None)
@given(tree=trees, model=st.sampled_from(MODELS), hw=st.sampled_from(HW), overhead=st.floats(0, 5),
       ideal=st.booleans())
def test_step_time_is_at_least_each_roofline_term(tree, model, hw, overhead, ideal):
    params = IDEAL if ideal else with_overheads_scaled(DEFAULT, overhead)
    c, g = costs(scenario(model, hw, tree), params)
    bw, peak = g.hbm_bytes_per_s, g.attn_flop_per_s
    tol = 1 + 1e-12
    for step, terms in (
        (c.ps_step_s, [c.weight_s, c.ps_hbm_bytes / (bw * params.decode.bw_eff),
                       c.ps_flops / (peak * params.decode.flop_eff)]),
        (c.cas_step_s, [c.weight_s, c.cas_prefix_bytes / (bw * params.prefix.bw_eff),
                        c.cas_prefix_flops / (peak * params.prefix.flop_eff),
                        c.cas_suffix_bytes / (bw * params.suffix.bw_eff), c.cas_merge_s]),
    ):
        for term in terms:
            assert np.all(step * tol >= term)
    if params.step is None:   # the seed's single weights term
        assert np.all(c.weight_s * tol >= c.weight_bytes / (bw * params.gemm.bw_eff))
        assert np.all(c.weight_s * tol >= c.weight_flops / (g.gemm_flop_per_s * params.gemm.flop_eff))
    else:                     # GEMMs priced from StepParts: never under their own roofline (ratios >= 1)
        from cascade_plan.cost.step_terms import layer_gemms
        from cascade_plan.inputs.model_spec import load_preset

        gemm_bytes = sum(cnt * n * k * 2.0 for _, n, k, cnt in layer_gemms(load_preset(model), 1))
        assert np.all(c.weight_s * tol >= gemm_bytes / bw)
        assert np.all(c.weight_s * tol >= c.weight_flops / g.gemm_flop_per_s)
        assert np.all(c.glue_s > 0) and np.all(c.comm_s == 0)     # TP 1: no all-reduce


@settings(max_examples=80, deadline=None)
@given(model=st.sampled_from(MODELS), hw=st.sampled_from(HW), prefix=st.integers(1, 32768), groups=st.integers(1, 4),
       samples=st.integers(1, 200), output=st.integers(1, 400), private=st.integers(0, 500))
def test_more_sequences_sharing_never_lower_the_ideal_gain(model, hw, prefix, groups, samples, output, private):
    """In ideal mode the gain grows with the group, as long as adding a sequence to the group saves
    time: its prefix read (bytes at peak bandwidth) costs more than what it adds to the prefix pass
    (its FLOPs at peak, once compute-bound) plus its merge traffic. Below that, cascade is a loss anyway
    (MLA's 128 query heads per latent come close: its prefix pass is compute-bound from 2 sequences).
    Past one tile the prefix pass computes whole tiles of 128 query rows (sequences x query heads per KV
    head), so the sequence that opens a tile adds a whole tile's FLOPs. On a compute-bound prefix pass
    that can lower the gain, as it does on the GPU: Llama-3-8B on an A100, 1,518-token prefix, 128 -> 129
    sequences opens a fifth tile and lowers it by 0.5%. The property holds between tile edges. And once the
    weight GEMMs are compute-bound, each sequence adds the same GEMM time to both modes, which dilutes the
    gain: Llama-3-8B on an H100 from 96 to 97 sequences of a 1-token prefix (M = 291, past the ridge) lowers
    it by 6e-6."""
    from cascade_plan.cost.ops.tiles import PREFIX_TILE_ROWS, prefix_tile_rows

    base = scenario(model, hw, simple_tree(prefix, groups, samples, output, private))
    g = gpu_shape(base.model, base.hardware, "bf16", "bf16", 1)
    bw, peak = g.hbm_bytes_per_s, g.attn_flop_per_s
    tile_sequences = max(1.0, PREFIX_TILE_ROWS / (g.q_heads // g.kv_heads))
    saving = prefix * (g.kv_bytes_per_token / bw - tile_sequences * g.attn_flop_per_query_token / peak)
    assume(saving >= 0)                      # ideal mode moves no merge traffic
    rows_per_sequence = g.q_heads // g.kv_heads
    rows = np.array([samples, samples + 1]) * rows_per_sequence
    computed = prefix_tile_rows(rows)
    assume(computed[1] - computed[0] <= rows_per_sequence)    # the added sequence opens no new tile
    more = msgspec.structs.replace(base, tree=simple_tree(prefix, groups, samples + 1, output, private))
    a, b = estimate(base, IDEAL), estimate(more, IDEAL)
    assume(all(x.weight_s == y.weight_s for x, y in zip(a.steps, b.steps)))   # GEMMs still memory-bound
    assert b.run_speedup >= a.run_speedup * (1 - 1e-9)
    assert b.steps[0].speedup >= a.steps[0].speedup * (1 - 1e-9)


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(MODELS), hw=st.sampled_from(HW), prefix=st.integers(1, 65536),
       group=st.integers(2, 512), suffix=st.integers(0, 8192))
def test_ideal_cascade_never_loses_with_any_shared_prefix_and_group(model, hw, prefix, group, suffix):
    """With zero overheads cascade wins for every prefix > 0 and every group > 1 (ties only where
    even per-sequence decode is compute-bound, as MLA's can be: both then do the same FLOPs)."""
    from cascade_plan.cost.breakeven import sweep

    sp = sweep(scenario(model, hw, simple_tree(1, 1, 1, 1)), IDEAL, [prefix], [group], [suffix]).speedup
    assert sp.min() >= 1 - 1e-12
    if load_preset(model).attention == "gqa":
        assert sp.min() > 1


def test_fixed_overheads_make_cascade_lose_on_a_short_prefix():
    scn = scenario("llama-3-8b", "h100-sxm", simple_tree(64, 1, 4, 64))
    assert estimate(scn, with_overheads_scaled(DEFAULT, 1.0)).run_speedup < 1.0


def test_sequences_finish_at_their_output_length():
    tree = TreeNode(tokens=1000, children=[TreeNode(samples=4, output_tokens=10),
                                           TreeNode(samples=2, output_tokens=30)])
    c, _ = costs(scenario("llama-3-8b", "h100-sxm", tree), IDEAL)
    assert c.steps.size == 30
    assert list(c.active_seqs[[0, 9, 10, 29]]) == [6, 6, 2, 2]
    kvb = 131072
    assert c.ps_attention_bytes[0] == 6 * (1000 + 1) * kvb
    assert c.cas_suffix_bytes[10] == 2 * 11 * kvb


def test_two_level_tree_reads_each_node_once():
    tree = TreeNode(tokens=2000, children=[TreeNode(tokens=12000, copies=8, children=[
        TreeNode(tokens=60, copies=4, samples=16, output_tokens=512)])])
    c, _ = costs(scenario("llama-3-8b", "h200", tree), DEFAULT)
    kvb = 131072
    assert c.cas_prefix_bytes[0] == (2000 + 8 * 12000 + 32 * 60) * kvb
    assert c.ps_prefix_bytes[0] == 512 * (2000 + 12000 + 60) * kvb
    assert c.cas_levels[0] == 3
    assert c.cas_merge_bytes[0] == pytest.approx(3 * 512 * 3 * 32 * 129 * 4 * 32)


def test_l2_hits_only_lower_per_sequence_hbm_bytes():
    params = msgspec.structs.replace(IDEAL, l2_hit_max=0.5)
    small = scenario("llama-3-8b", "h200", simple_tree(256, 1, 32, 16))       # one layer's prefix: 1 MiB, fits L2
    c, _ = costs(small, params)
    redundant = 31 * 256 * 131072
    assert c.ps_hbm_bytes[0] == pytest.approx(c.ps_attention_bytes[0] - 0.5 * redundant)
    c0, _ = costs(small, IDEAL)
    assert np.all(c0.ps_hbm_bytes == c0.ps_attention_bytes)


def test_prefix_pass_computes_whole_tiles_of_query_rows():
    """One prompt's query rows per KV head (sequences x query heads per KV head) run in 128-row tiles once
    they exceed one: 320 rows (64 sequences of Qwen2.5-14B, groups of 5) compute as 384; a single tile is
    sized to its rows. The planner and the fit's features count the same FLOP; the reported FLOP stay useful."""
    from cascade_plan.calibration.fitting import features
    from cascade_plan.cost.cost_model import single_level_load, step_costs
    from cascade_plan.cost.cost_params import KernelParams
    from cascade_plan.cost.ops.tiles import prefix_tile_rows

    assert prefix_tile_rows([1, 112, 128, 129, 256, 320, 448, 2560]).tolist() == [1, 112, 128, 256, 256, 384, 512, 2560]
    cfg = dict(prefix_tokens=4096, n_groups=8, suffix_tokens=1, num_kv_heads=8, head_dim=128, kv_dtype="fp8")
    f5 = features("cascade_prefix", [dict(cfg, group_size=64, q_per_kv=5), dict(cfg, group_size=8, q_per_kv=5)])
    nominal = 8 * np.array([64, 8]) * 4096 * 4 * 128 * 40
    assert np.allclose(f5.flops / nominal, [384 / 320, 1.0])
    model, hw = load_preset("qwen2.5-7b"), load_hardware("h200")      # 28 query heads on 4 KV heads: G = 7
    g = gpu_shape(model, hw, "bf16", "bf16", 1)
    flop_bound = msgspec.structs.replace(IDEAL, prefix=KernelParams(bw_eff=1e12))
    for n, tiles in ((64, 512 / 448), (16, 1.0)):
        c = step_costs(single_level_load(4096, n, 4, 1), g, model, "bf16", 1, flop_bound)
        assert float(c.cas_prefix_flops) == pytest.approx(4 * n * 4096 * g.attn_flop_per_query_token)
        assert float(c.cas_prefix_s) == pytest.approx(float(c.cas_prefix_flops) * tiles / g.attn_flop_per_s)


def test_fa3_prefix_pass_tiles_every_query_head_apart():
    """FlashInfer's FA3 prefill (its automatic choice on Hopper for 16-bit KV) gives each query head whole
    128-row tiles of a prompt's sequences: 16 sequences compute as 128 rows per head, 8x the useful FLOP,
    however many query heads share a KV head. The fit's features and the planner count the same."""
    from cascade_plan.calibration.fitting import features
    from cascade_plan.cost.cost_model import single_level_load, step_costs
    from cascade_plan.cost.cost_params import KernelParams
    from cascade_plan.cost.ops.tiles import prefix_compute_factor, prefix_tile_factor

    readers = np.array([1, 16, 128, 129, 320])
    assert prefix_compute_factor(readers, 8, "q_head").tolist() == pytest.approx([128, 8, 1, 256 / 129, 384 / 320])
    assert prefix_compute_factor(readers, 8).tolist() == prefix_tile_factor(readers * 8).tolist()
    cfg = dict(prefix_tokens=2048, n_groups=32, group_size=16, suffix_tokens=16, num_kv_heads=4, q_per_kv=8,
               head_dim=128, kv_dtype="bf16")
    packed, per_head = features("cascade_prefix", [cfg]), features("cascade_prefix", [cfg], "q_head")
    assert per_head.flops[0] / packed.flops[0] == pytest.approx(8.0)       # 128 packed rows: one full tile
    model, hw = load_preset("qwen2.5-7b"), load_hardware("h200")
    g = gpu_shape(model, hw, "bf16", "bf16", 1)
    flop_bound = msgspec.structs.replace(IDEAL, prefix=KernelParams(bw_eff=1e12))
    load = single_level_load(4096, 16, 4, 1)
    a = step_costs(load, g, model, "bf16", 1, flop_bound)
    b = step_costs(load, g, model, "bf16", 1, msgspec.structs.replace(flop_bound, prefix_rows="q_head"))
    assert float(a.cas_prefix_flops) == float(b.cas_prefix_flops)          # the useful FLOP reported alike
    assert float(b.cas_prefix_s) == pytest.approx(float(a.cas_prefix_s) * 8)   # 16 rows per head of 128
