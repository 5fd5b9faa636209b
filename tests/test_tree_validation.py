"""Three-level tree rows are priced as the planner prices a workload's tree (one layer, step 1), never fitted and
never interpolated; a two-level row priced that way is the two-level pricing exactly."""

from __future__ import annotations

import msgspec
import pytest

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.holdout import is_tree
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.calibration.tree_validation import layer_model, predict_tree_row, tree_of
from cascade_plan.cost.cost_model import step_costs
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.step_shape import gpu_shape, single_level_load

H200 = load_hardware("h200")


@pytest.fixture(scope="module")
def probe():
    return find_committed(H200)


def test_a_two_level_row_priced_as_a_tree_is_the_two_level_pricing(probe):
    rows = [r for r in probe.measurements if r.kernel == "cascade_total" and r.config.suffix_tokens > 0
            and not is_tree(r.config)][::97]
    assert len(rows) >= 5 and not any(is_tree(r.config) for r in rows)
    for r in rows:
        c = r.config
        m = layer_model(c)
        for backend in ("triton", "flashinfer"):
            got = predict_tree_row(probe, backend, c, H200)
            params = params_from_probe(probe, backend, c.kv_dtype, H200, m)
            want = step_costs(single_level_load(c.prefix_tokens, c.group_size, c.n_groups, c.suffix_tokens),
                              gpu_shape(m, H200, c.kv_dtype, "bf16", 1), m, "bf16", 1, params)
            assert got["per_sequence"] == pytest.approx(float(want.ps_attention_s), rel=1e-12)
            assert got["cascade"] == pytest.approx(float(want.cas_attention_s), rel=1e-12)


def test_the_tree_of_a_row_has_its_levels_tokens_and_sequences(probe):
    """A tree row (root 2,048 tokens; 4 prefixes of 1,024 under it, 16 sequences each, 128-token suffixes): two shared
    levels, every sequence under the root, the suffix its own at step 1 (127 private prompt tokens + 1 generated)."""

    class Tree(msgspec.Struct, frozen=True):     # a row config with a root, as the probe's tree rows carry it
        root_tokens: int
        prefix_tokens: int
        group_size: int
        n_groups: int
        suffix_tokens: int

    cfg = Tree(root_tokens=2048, prefix_tokens=1024, group_size=16, n_groups=4, suffix_tokens=128)
    assert is_tree(cfg) and not is_tree(probe.measurements[0].config)
    flat = flatten(tree_of(cfg))
    nodes = sorted(zip(flat.node_level.tolist(), flat.node_tokens.tolist(), flat.node_instances.tolist()))
    assert nodes == [(0, 2048, 1), (1, 1024, 4)]
    assert flat.leaf_seqs.tolist() == [64] and flat.leaf_private.tolist() == [127] and flat.leaf_output.tolist() == [1]


def test_validate_trees_scores_tree_rows_against_the_planner_and_the_fits_never_see_them(probe, tmp_path):
    """Tree rows planted in a copy of the shipped file at 1.25x the planner's time: validate_trees reports -20% for
    each kernel, and the fits and the planner's measured tables are what they were without them."""
    import json

    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.calibration.measured_grid import measured_grid
    from cascade_plan.calibration.tree_validation import validate_trees
    from cascade_plan.calibration_schema.attention import AttentionConfigDoc

    doc = json.loads(json.dumps(probe.doc))
    doc["measurements"] = [m for m in doc["measurements"] if not (m["config"].get("root_tokens") or 0)]
    planted = []
    for root, prefix in ((2048, 1024), (4096, 4096)):
        cfg = {"prefix_tokens": prefix, "group_size": 16, "n_groups": 4, "suffix_tokens": 128, "q_per_kv": 4,
               "num_kv_heads": 8, "head_dim": 128, "kv_dtype": "bf16", "page_size": 16, "root_tokens": root}
        typed = msgspec.convert(cfg, AttentionConfigDoc)
        assert is_tree(typed) and typed.root_tokens == root
        pred = predict_tree_row(probe, "triton", typed, H200)
        for kernel, key in (("decode_shared", "per_sequence"), ("decode_dup", "per_sequence_dup"),
                            ("cascade_total", "cascade")):
            planted.append({"backend": "triton", "kernel": kernel, "config": cfg, "median_s": 1.25 * pred[key]})
    doc["measurements"] = doc["measurements"] + planted
    path = tmp_path / "h200-probe-trees.json"
    path.write_text(json.dumps(doc))
    with_trees = load_probe(path)
    res = validate_trees(with_trees, H200)
    assert set(res["summary"]) == {"triton/bf16"} and len(res["points"]) == 6
    for s in res["summary"]["triton/bf16"].values():
        assert s["n"] == 2 and s["median_signed"] == pytest.approx(1 / 1.25 - 1, rel=1e-9)
    # never fitted, never interpolated, not in the measured grid
    assert all(not is_tree(r.config) for r in with_trees.select("triton", "decode_shared", None, "bf16"))
    assert measured_grid(with_trees, "bf16") == measured_grid(probe, "bf16")


def test_the_shipped_tree_rows_are_scored(probe):
    """FlashInfer's tree rows on the H200 (all 33 configurations: 22 timed by the trees run of 2026-12-03, the rest by
    the probe 1.4 run of 2026-12-04; 30 bf16, 3 fp8): every planner kernel of both FlashInfer backends has a figure,
    and the planner's per-sequence decode of a tree, priced from two-level fits alone, lands within 9.1% (2.5%
    median in bf16)."""
    from cascade_plan.calibration.tree_validation import validate_trees

    res = validate_trees(probe, H200)
    assert set(res["summary"]) == {"flashinfer/bf16", "flashinfer-fa2/bf16", "flashinfer/fp8", "flashinfer-fa2/fp8"}
    for key, per in res["summary"].items():
        assert set(per) == {"per_sequence", "per_sequence_dup", "cascade"}
        assert per["cascade"]["n"] == (30 if key.endswith("bf16") else 3)
        assert per["per_sequence"]["max_ape"] < 0.095 and per["per_sequence_dup"]["max_ape"] < 0.04
