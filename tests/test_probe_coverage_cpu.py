"""Probe 1.2 on the CPU: the coverage grid spans fp8 KV, query groups 1-16, batch 1-1024 and prefixes to 64K,
held-out models come from config.json files, fp8 KV steps run through the Triton interpreter, the layer graph
computes what the step computes, and merging runs keeps every row exactly once."""

from __future__ import annotations

import pytest

from kernels_probe.attention.grid import COVERAGE_LONG_PREFIX, build_grid, coverage_grid
from kernels_probe.merge import merge_documents
from kernels_probe.steps.step_shapes import HELD_OUT_WORKLOADS, held_out_points, layer_shape


def test_coverage_grid_spans_the_issue():
    cov = coverage_grid()
    backends_fp8 = {c for c in cov if c.kv_dtype == "fp8"}
    assert len(backends_fp8) >= 20
    assert {c.q_per_kv for c in cov} >= {1, 4, 5, 7, 8, 16}
    assert min(c.batch for c in cov) == 1 and max(c.batch for c in cov) == 1024
    assert max(c.prefix_tokens for c in cov) == COVERAGE_LONG_PREFIX == 65536
    assert any(c.q_per_kv == 1 and c.num_kv_heads == 40 for c in cov)       # MHA at CodeLlama-13B's width
    assert len(set(cov)) == len(cov)
    full, _ = build_grid()
    both, desc = build_grid(coverage=True)
    assert both[:len(full)] == full and set(both) == set(full) | set(cov)
    assert desc["mode"] == "full+coverage" and 65536 in desc["axes"]["prefix_tokens"]


def test_held_out_models_from_config_files():
    s = layer_shape("codellama-13b")
    assert (s.q_heads, s.kv_heads, s.layers) == (40, 40, 40)               # MHA
    q = layer_shape("qwen2.5-14b")
    assert q.q_heads // q.kv_heads == 5 and q.qkv_bias
    n = layer_shape("mistral-nemo-12b")
    assert n.gemms()["o"] == (5120, 4096)                                  # head_dim from the file, not hidden/heads
    pts = held_out_points()
    assert {p.batch for p in pts} >= {8, 512}
    assert {p.kv_dtype for p in pts} == {"bf16", "fp8"} and {p.weight_dtype for p in pts} == {"bf16", "fp8"}
    assert max(p.prefix_tokens for p in pts) == 32768
    assert len(pts) == 3 * len(HELD_OUT_WORKLOADS)
    with pytest.raises(ValueError, match="neither a model preset"):
        layer_shape("no-such-model")


def test_fp8_kv_step_through_the_interpreter():
    torch = pytest.importorskip("torch")
    from kernels_probe.interpret import enable_interpreter

    if not enable_interpreter():
        pytest.skip("triton was imported without the interpreter in this process")
    from kernels_probe.steps.step_model import DecodeStep, StepKV, StepWeights
    from kernels_probe.steps.step_shapes import LayerShape, WorkloadStep
    from kernels_probe.steps.whole_steps import compare_modes

    s = LayerShape("tiny", 1, 2, 64, 4, 2, 32, 96, 100, False, 1e4)
    pt = WorkloadStep("w", "tiny", "first", 32, 2, 2, 0, 5, 16, kv_dtype="fp8")
    w, kv = StepWeights(s, "cpu"), StepKV(s, pt, "cpu")
    assert kv.k.dtype == torch.float8_e4m3fn and kv.bytes() == 2 * kv.k.numel()
    steps = {("triton", m): DecodeStep(s, w, kv, "triton", m, glue="torch", sm_count=8)
             for m in ("per_sequence", "cascade")}
    chk = compare_modes(kv, steps, pt)
    assert all(e < 1e-2 for e in chk["ref_err"].values())
    assert chk["mode_err"][("triton", "cascade")] < 1e-2


def test_layer_graph_runs_the_steps_layer():
    torch = pytest.importorskip("torch")
    from kernels_probe.steps.layer_graph import LayerGraph
    from kernels_probe.steps.step_shapes import LayerShape

    s = LayerShape("tiny", 1, 2, 64, 4, 2, 32, 96, 100, False, 1e4)
    lg = LayerGraph(s, 8, "bf16", "torch", "cpu", layers=2)
    res0, x0, attn = lg.res.clone(), lg.x.clone(), lg.attn
    y = lg()
    assert y.shape == (8, 64) and torch.isfinite(y.float()).all()
    # by hand: the second layer's output from the first layer's, with the same glue
    g, F = lg.glue, torch.nn.functional
    res = res0.clone()
    x = x0.clone()
    for lw in lg.w:
        g.add_rmsnorm(x, res, lg.norm)
        o = F.linear(attn, lw["o"])
        g.add_rmsnorm(o, res, lg.norm)
        x = F.linear(g.silu_mul(F.linear(o, lw["gate_up"])), lw["down"])
    assert torch.allclose(x.float(), y.float(), rtol=2e-2, atol=2e-2)
    # the new tokens' K/V were written into the cache
    assert lg.kc.abs().sum() > 0


def _doc(created, rows, ops=(), steps=()):
    return {"schema_version": 1, "kind": "cascade-plan-calibration", "hardware_id": "h200", "created_utc": created,
            "device": {"name": "NVIDIA H200"}, "probe_version": "x", "grid": {}, "measurements": list(rows),
            "skipped": [], "step_ops": list(ops), "steps": list(steps), "step_skipped": [], "fitted": {"a": 1},
            "notes": {}}


def test_merge_replaces_remeasured_rows_and_keeps_the_rest():
    cfg = {"prefix_tokens": 1024, "kv_dtype": "bf16"}
    old = _doc("2026-11-30T00:00:00Z",
               [{"backend": "triton", "kernel": "decode_dup", "variant": None, "config": cfg, "median_s": 1.0},
                {"backend": "triton", "kernel": "decode_shared", "variant": None, "config": cfg, "median_s": 2.0}],
               ops=[{"op": "allreduce", "config": {"gpus": 2, "bytes": 8192}, "median_s": 1e-5}],
               steps=[{"workload": "w", "model": "m", "tp": 2, "position": "first", "backend": "triton",
                       "mode": "cascade", "glue": "fused", "config": {}, "median_s": 0.01}])
    new = _doc("2026-12-01T00:00:00Z",
               [{"backend": "triton", "kernel": "decode_dup", "variant": None, "config": cfg, "median_s": 1.5}])
    m = merge_documents(new, old)
    dup = [r for r in m["measurements"] if r["kernel"] == "decode_dup"]
    assert len(dup) == 1 and dup[0]["median_s"] == 1.5 and dup[0]["run"] == "2026-12-01T00:00:00Z"
    shared = [r for r in m["measurements"] if r["kernel"] == "decode_shared"]
    assert shared[0]["run"] == "2026-11-30T00:00:00Z"
    assert len(m["step_ops"]) == 1 and len(m["steps"]) == 1          # only the old run had 2 GPUs
    assert m["fitted"] == {} and len(m["notes"]["runs"]) == 2
    assert old["measurements"][0].get("run") is None                 # inputs untouched
    with pytest.raises(ValueError, match="different GPUs"):
        merge_documents({**new, "hardware_id": "h100-sxm", "device": {"name": "NVIDIA H100"}}, old)


def test_a_run_that_completes_a_file_keeps_its_header_and_both_grids():
    cfg, cfg2 = {"prefix_tokens": 1024, "kv_dtype": "bf16"}, {"prefix_tokens": 512, "kv_dtype": "fp8"}
    old = {**_doc("2026-11-30T00:00:00Z", [{"backend": "triton", "kernel": "decode_dup", "variant": None,
                                             "config": cfg, "median_s": 1.0}]),
           "probe_version": "1.3.0", "ceilings": {"hbm_read_bytes_per_s": 4.5e12},
           "grid": {"mode": "full+regimes (merged runs)", "axes": {"prefix_tokens": [1024, 4096], "kv_dtype": ["bf16"]},
                    "backends": ["torch", "triton"]},
           "notes": {"tune": "old kernels",
                     "runs": [{"created_utc": "2026-11-30T00:00:00Z", "probe_version": "1.3.0"}]}}
    new = {**_doc("2026-12-06T00:00:00Z", [{"backend": "flashinfer", "kernel": "decode_dup", "variant": "tc",
                                             "config": cfg2, "median_s": 2.0}]),
           "probe_version": "1.5.5", "ceilings": {"hbm_read_bytes_per_s": 4.4e12},
           "grid": {"mode": "regimes", "axes": {"prefix_tokens": [512, 1024], "kv_dtype": ["bf16", "fp8"]},
                    "backends": ["flashinfer"]},
           "notes": {"tune": "new kernels"}}
    for keep in (True, False):
        m = merge_documents(new, old, keep_base_header=keep)
        # both runs' axes and backends, whichever header wins: the file holds both runs' rows
        assert m["grid"]["axes"] == {"prefix_tokens": [512, 1024, 4096], "kv_dtype": ["bf16", "fp8"]}
        assert m["grid"]["backends"] == ["flashinfer", "torch", "triton"] and m["grid"]["n_configs"] == 2
        assert m["grid"]["mode"] == "full+regimes (merged runs)"
        assert [r["probe_version"] for r in m["notes"]["runs"]] == ["1.3.0", "1.5.5"]
        want = old if keep else new
        assert (m["probe_version"], m["ceilings"], m["notes"]["tune"]) == (want["probe_version"], want["ceilings"],
                                                                           want["notes"]["tune"])
        assert {r["run"] for r in m["measurements"]} == {"2026-11-30T00:00:00Z", "2026-12-06T00:00:00Z"}


def test_mla_reference_equals_a_two_pass_cascade_by_hand():
    torch = pytest.importorskip("torch")
    from kernels_probe.attention.mla import MlaData, MlaShape, mla_cost, mla_grid, reference_mla

    c = MlaShape(prefix_tokens=32, group_size=3, n_groups=2, suffix_tokens=16, num_heads=4, kv_lora_rank=16,
                  qk_rope_head_dim=8)
    d = MlaData(c, "cpu")
    ref = reference_mla(d, list(range(c.batch)))

    def part(b, table, length):                 # (out, lse) of one pass, natural log
        pg = table[:-(-length // c.page_size)].long()
        ckv = d.ckv[pg].reshape(-1, c.kv_lora_rank)[:length].float()
        kpe = d.kpe[pg].reshape(-1, c.qk_rope_head_dim)[:length].float()
        s = (d.q_nope[b].float() @ ckv.T + d.q_pe[b].float() @ kpe.T) * d.sm_scale
        return torch.softmax(s, -1) @ ckv, torch.logsumexp(s, -1)

    for b in range(c.batch):
        o0, l0 = part(b, d.prefix_table[b // c.group_size], c.prefix_tokens)
        o1, l1 = part(b, d.suffix_table[b], c.suffix_tokens)
        m = torch.maximum(l0, l1)
        w0, w1 = torch.exp(l0 - m)[:, None], torch.exp(l1 - m)[:, None]
        assert torch.allclose((o0 * w0 + o1 * w1) / (w0 + w1), ref[b], atol=1e-5)
    # bytes: the cascade reads each group's prefix once; per-sequence reads it once per sequence
    tb = 24 * 2
    assert mla_cost(c, "decode_shared")["bytes"] - mla_cost(c, "cascade_total")["bytes"] == (c.batch - 2) * 32 * tb
    g = mla_grid()
    assert {x.num_heads for x in g} == {128} and {x.kv_lora_rank + x.qk_rope_head_dim for x in g} == {576}


def test_multi_gpu_plan_covers_every_gpu_count_with_70b_steps():
    from kernels_probe.steps.step_shapes import ALLREDUCE_BYTES_DENSE, multi_gpu_plan

    assert multi_gpu_plan(1) == []
    assert [p["world"] for p in multi_gpu_plan(2)] == [2]
    assert [p["world"] for p in multi_gpu_plan(4)] == [2, 4]
    plans = multi_gpu_plan(8)
    assert [p["world"] for p in plans] == [2, 4, 8]
    for p in plans:
        seventy = [pt for pt in p["points"] if pt.model == "llama-3-70b"]
        assert [pt.position for pt in seventy] == ["first", "middle", "final"]
        s = layer_shape("llama-3-70b", p["world"])                  # the shard each rank builds
        assert s.q_heads * p["world"] == 64 and s.kv_heads == 8 // p["world"]
        assert p["allreduce_bytes"] == ALLREDUCE_BYTES_DENSE
    assert {pt.model for pt in plans[0]["points"]} == {"llama-3-8b", "llama-3-70b"}   # 8B TP-2 steps kept
    # 64 KiB .. 64 MiB at least every 1.5-2x (protocol switches), plus the small sizes
    big = [b for b in ALLREDUCE_BYTES_DENSE if b >= 64 << 10]
    assert big[0] == 64 << 10 and big[-1] == 64 << 20
    assert all(1.3 < b / a <= 2.0 for a, b in zip(big, big[1:]))
    assert len(big) >= 20


def test_run_step_probe_launches_every_gpu_count(monkeypatch):
    pytest.importorskip("torch")
    import kernels_probe.multi_gpu.collectives as mg
    import kernels_probe.steps.step_probe as sp

    calls = []
    monkeypatch.setattr(mg, "run_multi_gpu", lambda n, **kw: calls.append((n, kw["tp_steps"])) or {"step_ops": []})
    monkeypatch.setattr(sp, "measure_steps", lambda *a, **k: ([], []))
    monkeypatch.setattr(sp, "measure_layer_graphs", lambda *a, **k: ([], []), raising=False)
    import kernels_probe.steps.layer_graph as lg

    monkeypatch.setattr(lg, "measure_layer_graphs", lambda *a, **k: ([], []))
    monkeypatch.setattr(sp, "has_fp8", lambda d: False)
    monkeypatch.setattr(sp.torch.cuda, "device_count", lambda: 8)
    out = sp.run_step_probe(None, "cpu", 8, quick=True, fi_ok=False,
                            out={"step_ops": [], "steps": [], "skipped": [], "timings_s": {}})
    assert calls == [(2, True), (4, True), (8, True)] and out["gpus_visible"] == 8


def _probe(*args):
    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    return CliRunner().invoke(app, ["probe", *map(str, args)])


@pytest.mark.parametrize("args,message", [
    (["--workload", "no-such-workload"], "no-such-workload"),
    (["--samples", "64"], "--samples describes a workload to probe: give --workload FILE or --model ID"),
    (["--workload", "rl-rollouts-64", "--model", "llama-3-8b"], "not both"),
    (["--grid", "nope"], "--grid: unknown grid"),
    (["--merge-into", "missing.json"], "--merge-into: no such file"),
])
def test_probe_workload_arguments_fail_before_any_gpu_work(tmp_path, args, message):
    res = _probe("--out", tmp_path / "cal.json", *args)
    assert res.exit_code == 2, res.output
    assert message in res.stderr and "Traceback" not in res.output
    assert not (tmp_path / "cal.json").exists()


def test_probe_workload_plan_from_the_shipped_file():
    from pathlib import Path

    from cascade_plan.cli.app import probe_plan_from_options
    from cascade_plan.cli.common import KvDtypeOpt
    from kernels_probe.steps.workload_probe import plan_from_json

    plan = probe_plan_from_options(Path("rl-rollouts-64"), model=None, prefix=None, groups=1, samples=None,
                                   output_tokens=None, private_tokens=0, kv_dtype=KvDtypeOpt("fp8"), weight_dtype=None,
                                   tp=None)
    # 2 prompts of 4,096 shared by 64 samples each; suffix 1 / 512 / 1,024 tokens rounded to pages of 16
    first, mid, final = plan.attention[:3]
    assert (first.prefix_tokens, first.group_size, first.n_groups, first.kv_dtype) == (4096, 64, 2, "fp8")
    assert [c.suffix_tokens for c in (first, mid, final)] == [16, 512, 1024]
    assert (first.q_per_kv, first.num_kv_heads, first.head_dim) == (4, 8, 128)
    assert {(c.group_size, c.prefix_tokens) for c in plan.attention[3:]} == {(32, 4096), (128, 4096), (64, 2048),
                                                                            (64, 8192)}
    assert plan.gemm_m[0] == 1 and 128 in plan.gemm_m and min(plan.gemm_m[1:]) >= 32 and max(plan.gemm_m) <= 512
    assert [p.generated for p in plan.steps] == [1, 512, 1024] and plan.steps[0].batch == 128
    assert plan_from_json(plan.describe()) == plan
    # at TP 2 the shard halves the heads and says its all-reduces are not in a one-GPU step
    tp2 = probe_plan_from_options(None, model="llama-3-70b", prefix=1000, groups=1, samples=8, output_tokens=100,
                                  private_tokens=0, kv_dtype=None, weight_dtype=None, tp=2)
    assert tp2.shape.kv_heads == 4 and tp2.attention[0].prefix_tokens == 1008
    assert any("TP 2" in n for n in tp2.notes) and any("rounded up to 1008" in n for n in tp2.notes)
