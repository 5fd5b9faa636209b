"""The probe's regimes (CPU): the attention grid where small models, long contexts and long suffixes run, the step
set of small models and held-out regime steps, and --only-missing, which times only what a file lacks."""

from __future__ import annotations

import pytest

from kernels_probe.__main__ import main
from kernels_probe.attention.grid import (
    REGIME_LONG_PREFIXES,
    AttentionConfig,
    named_grid,
    owed_configs,
    regimes_grid,
)
from kernels_probe.steps.step_shapes import (
    REGIME_FIT_MODELS,
    REGIME_HELD_OUT_WORKLOADS,
    layer_shape,
    regime_held_out_points,
)


def test_regimes_grid_spans_the_regimes():
    cfgs = regimes_grid()
    assert len(set(cfgs)) == len(cfgs)
    assert {c.head_dim for c in cfgs} == {64, 128, 256}
    assert {6, 12} <= {c.q_per_kv for c in cfgs}
    assert max(c.prefix_tokens for c in cfgs) == REGIME_LONG_PREFIXES[-1] == 262144
    assert max(c.suffix_tokens for c in cfgs) == 8192
    assert {c.batch for c in cfgs if c.head_dim != 128} >= {8, 128, 1024}
    # every configuration's duplicated pages fit beside the shared ones on a 141 GB part
    assert max(c.batch * (c.prefix_tokens + c.suffix_tokens) * c.num_kv_heads * c.head_dim * 2 * c.kv_elem_bytes
               for c in cfgs) <= 40 << 30


def test_named_grids():
    full, _ = named_grid("full")
    cov, _ = named_grid("coverage")
    both, _ = named_grid("full+coverage")
    reg, desc = named_grid("regimes")
    trees, _ = named_grid("trees")
    every, desc_all = named_grid("all")
    assert set(both) == set(full) | set(cov) and every[:len(both)] == both
    assert set(every) == set(both) | set(reg) | set(trees)
    assert desc["mode"] == "regimes" and desc["axes"]["head_dim"] == [64, 128, 256]
    assert desc_all["n_configs"] == len(every)


def test_owed_configs_per_backend():
    a, b = AttentionConfig(prefix_tokens=1024, group_size=4), AttentionConfig(prefix_tokens=4096, group_size=4)
    rows = [{"backend": "triton", "config": a.as_dict()}, {"backend": "flashinfer", "config": b.as_dict()}]
    assert owed_configs([a, b], ["triton", "flashinfer"], rows) == {"triton": [b], "flashinfer": [a]}
    assert owed_configs([a, b], ["torch"], rows) == {"torch": [a, b]}


def test_only_missing_needs_a_file(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--out", "x.json", "--only-missing"])
    assert e.value.code == 2 and "--only-missing needs --merge-into" in capsys.readouterr().err


def test_regime_step_set_models():
    hidden = sorted(layer_shape(m, tp).hidden for m, tp in REGIME_FIT_MODELS)
    assert hidden == [1024, 2048, 3072]
    pts = regime_held_out_points()
    assert len(pts) == 2 * len(REGIME_HELD_OUT_WORKLOADS)
    assert max(p.batch for p in pts) == 1024 and max(p.prefix_tokens for p in pts) == 131072
    assert {layer_shape(p.model).head_dim for p in pts} == {64, 128, 256}
    assert {p.kv_dtype for p in pts} == {"bf16", "fp8"} and max(p.suffix_tokens for p in pts) >= 4096
    fit = {m for m, _ in REGIME_FIT_MODELS}
    assert not fit & {p.model for p in pts}          # held out: no step model is a fit model


def test_step_set_shapes():
    from kernels_probe.steps.step_probe import step_set_shapes

    assert step_set_shapes("default") == ({}, {})
    gemm, glue = step_set_shapes("regimes")
    assert [s.model for s in gemm["shapes"]] == [m for m, _ in REGIME_FIT_MODELS] == [s.model for s in glue["shapes"]]
    assert max(gemm["m_grid"]) == max(glue["m_grid"]) == 1024
    with pytest.raises(ValueError, match="step set"):
        step_set_shapes("tiny")


def test_every_regimes_row_is_held_out_and_no_earlier_grid_row_changes_side():
    import msgspec

    from cascade_plan.calibration.holdout import held_out_regime, rollout_start
    from cascade_plan.calibration_schema.attention import AttentionConfigDoc

    def doc(c):
        return msgspec.convert(c.as_dict(), AttentionConfigDoc)

    reg = regimes_grid()
    assert all(held_out_regime(doc(c)) for c in reg)
    earlier, _ = named_grid("full+coverage")
    # of the core grids, only the rollout starts (1,024 sequences, at most one page of private tokens) are held out
    moved = [c for c in earlier if c not in reg and held_out_regime(doc(c))]
    assert all(rollout_start(doc(c)) for c in moved)
    assert moved and {(c.prefix_tokens, c.group_size, c.n_groups) for c in moved} <= {(512, 16, 64), (2048, 16, 32),
                                                                                     (4096, 1024, 1)}
