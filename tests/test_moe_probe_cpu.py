"""The MoE probe on the CPU: routing and block alignment arithmetic, the Triton grouped GEMM under
Triton's interpreter, torch._grouped_mm and the per-expert loop against a float32 reference, and one
pass of the measuring loop with a stand-in timer."""

from __future__ import annotations

import json

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernels_probe.moe import moe_probe as mp  # noqa: E402
from kernels_probe.moe.moe_shapes import (  # noqa: E402
    MOE_PROBE_MODELS,
    MoeShape,
    align_counts,
    expected_touched,
    moe_bytes_flops,
    moe_shape,
)

TINY = MoeShape("tiny", 1, hidden=64, intermediate=48, experts=6, top_k=2)
MINI = MoeShape("mini", 1, hidden=32, intermediate=16, experts=4, top_k=2)   # the measuring loop: fast
CPU = torch.device("cpu")


def test_align_counts_by_hand() -> None:
    # 3 rows of expert 0, none of expert 1, 17 of expert 2, blocks of 16: 16 + 0 + 32 rows, experts 0, 2, 2
    assert align_counts([3, 0, 17], 16) == ([16, 0, 32], [0, 2, 2])


def test_expected_touched_ends() -> None:
    assert expected_touched(256, 8, 1) == pytest.approx(8.0)
    assert expected_touched(8, 2, 1) == pytest.approx(2.0)
    assert expected_touched(256, 8, 1024) == pytest.approx(256.0, rel=1e-6)
    # two tokens on Mixtral: 8 (1 - (3/4)^2) = 3.5
    assert expected_touched(8, 2, 2) == pytest.approx(3.5)


def test_shapes_of_the_presets() -> None:
    shapes = {(m, tp): moe_shape(m, tp) for m, tp in MOE_PROBE_MODELS}
    ds = shapes[("deepseek-v3", 8)]
    assert (ds.hidden, ds.intermediate, ds.experts, ds.top_k) == (7168, 256, 256, 8)
    assert ds.gemms() == {"gate_up": (512, 7168), "down": (7168, 256)}
    mx = shapes[("mixtral-8x7b", 2)]
    assert (mx.hidden, mx.intermediate, mx.experts, mx.top_k) == (4096, 7168, 8, 2)
    with pytest.raises(ValueError, match="no routed experts"):
        moe_shape("llama-3-8b", 1)


def test_bytes_and_flops_by_hand() -> None:
    # Mixtral TP 1, M = 4, 3 experts touched, bf16: gate_up weights 3 x 28672 x 4096 x 2 B; activations
    # in 4 x 4096 x 2 B, out 8 slots x 28672 x 2 B; FLOPs 2 x 8 x 28672 x 4096
    s = moe_shape("mixtral-8x7b", 1)
    bf = moe_bytes_flops(s, "gate_up", 4, 3, 2)
    assert bf["weight_bytes"] == 3 * 28672 * 4096 * 2
    assert bf["bytes"] == 3 * 28672 * 4096 * 2 + 4 * 4096 * 2 + 8 * 28672 * 2
    assert bf["flops"] == 2 * 8 * 28672 * 4096
    dn = moe_bytes_flops(s, "down", 4, 3, 1)   # fp8 weights; down reads one row per routed slot
    assert dn["bytes"] == 3 * 4096 * 14336 + 8 * 14336 * 2 + 8 * 4096 * 2


@pytest.mark.parametrize("routing", ["balanced", "skewed"])
def test_align_layout(routing: str) -> None:
    gen = torch.Generator().manual_seed(3)
    ids, w = mp.route(37, TINY, routing, gen, CPU)
    assert ids.shape == (37, 2) and torch.allclose(w.sum(-1), torch.ones(37))
    assert all(len(set(r)) == 2 for r in ids.tolist())       # top-k picks distinct experts
    al = mp.align(ids, TINY.experts, 16)
    flat = ids.reshape(-1)
    slots = al.sorted_slots.tolist()
    valid = [s for s in slots if s < al.n_slots]
    assert sorted(valid) == list(range(74))                  # every (token, slot) pair exactly once
    for b, e in enumerate(al.block_expert.tolist()):          # each block holds one expert's slots
        assert all(flat[s].item() == e for s in slots[b * 16:(b + 1) * 16] if s < al.n_slots)
    assert al.offsets.tolist()[-1] == len(slots) == 16 * al.n_blocks
    assert al.touched == len(set(flat.tolist()))


def test_skewed_routing_concentrates() -> None:
    s = MoeShape("wide", 1, hidden=16, intermediate=16, experts=64, top_k=4)
    gen = torch.Generator().manual_seed(0)
    bal = torch.bincount(mp.route(512, s, "balanced", gen, CPU)[0].reshape(-1), minlength=64)
    skw = torch.bincount(mp.route(512, s, "skewed", gen, CPU)[0].reshape(-1), minlength=64)
    assert skw.max() > 2 * bal.max()
    assert skw[:4].sum() > bal[:4].sum()


@pytest.mark.parametrize("proj", ["gate_up", "down"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
@pytest.mark.parametrize("m", [1, 5, 40])
def test_backends_match_reference(proj: str, dtype: str, m: int) -> None:
    w = mp.expert_weights(TINY, proj, dtype, 0, CPU)
    gen = torch.Generator().manual_seed(m)
    ids, _ = mp.route(m, TINY, "skewed" if m == 40 else "balanced", gen, CPU)
    p = mp.make_problem(TINY, proj, m, ids, w, gen, CPU)
    ref = mp.reference(p.a, w, ids, p.a_div)
    assert ref.shape == (m * 2, TINY.gemms()[proj][0])
    backends = ["triton"] + (["grouped_mm", "loop"] if dtype == "bf16" else [])
    for be in backends:
        cfg = mp.BlockConfig(16, 32, 32) if be == "triton" else None
        _, _, err = mp.check(be, p, cfg, ref)
        assert err < 1e-2, (be, err)


def test_triton_odd_k_and_wide_block() -> None:
    s = MoeShape("odd", 1, hidden=40, intermediate=24, experts=3, top_k=1)   # K = 40: masked K tail
    w = mp.expert_weights(s, "gate_up", "bf16", 1, CPU)
    gen = torch.Generator().manual_seed(1)
    ids, _ = mp.route(20, s, "balanced", gen, CPU)
    p = mp.make_problem(s, "gate_up", 20, ids, w, gen, CPU)
    _, _, err = mp.check("triton", p, mp.BlockConfig(16, 32, 32), mp.reference(p.a, w, ids, 1))
    assert err < 1e-2


def test_a_wrong_kernel_is_caught() -> None:
    """The check compares with the reference: scrambled expert ids give a large error."""
    w = mp.expert_weights(TINY, "down", "bf16", 0, CPU)
    gen = torch.Generator().manual_seed(2)
    ids, _ = mp.route(8, TINY, "balanced", gen, CPU)
    p = mp.make_problem(TINY, "down", 8, ids, w, gen, CPU)
    ref = mp.reference(p.a, w, (ids + 1) % TINY.experts, 1)
    _, _, err = mp.check("triton", p, mp.BlockConfig(16, 32, 32), ref)
    assert err > 0.5


def test_measuring_loop_rows(monkeypatch) -> None:
    monkeypatch.setattr(mp, "candidate_configs", lambda rows, fp8: [mp.BlockConfig(16, 32, 32),
                                                                      mp.BlockConfig(16, 64, 32)])
    calls = []

    def fake_time(fn, flusher, budget_s):
        calls.append(fn)
        return {"median_s": 1e-5 * len(calls), "p10_s": 1e-5, "p90_s": 1e-5, "n_reps": 10}

    rows, skipped = mp.measure_moe(None, CPU, [MINI], m_grid=(1, 9), budget_s=0.01, log=lambda s: None,
                                   time_fn=fake_time)
    # per projection: bf16 x 2 routings x 2 M x (triton, grouped_mm) + loop (balanced) x 2 M, fp8 x 2 x 2 triton
    assert len(rows) == 2 * (2 * 2 * 2 + 2 + 2 * 2) and skipped == []
    r = next(r for r in rows if r["config"]["backend"] == "triton")
    assert r["op"] == "moe_grouped_gemm" and r["block_config"]["block_n"] == 32   # the faster candidate
    assert len(r["candidates_s"]) == 2 and r["max_rel_err"] < 1e-2
    c = r["config"]
    assert (c["n"], c["k"], c["experts"], c["top_k"]) == (32, 32, 4, 2)
    assert r["touched_experts"] <= min(4, c["m"] * 2)
    past = mp.measure_moe(None, CPU, [MINI], m_grid=(1,), dtypes=("bf16",), backends=("triton",),
                          deadline_s=0.0, log=lambda s: None, time_fn=fake_time)
    assert past[0] == [] and {s["reason"] for s in past[1]} == {"time budget"} and len(past[1]) == 2


def test_run_writes_the_file_and_table(tmp_path, capsys) -> None:
    import json
    import time

    from kernels_probe.moe.moe_run import run

    out = tmp_path / "moe" / "rows.json"
    fake = (lambda fn, flusher, budget_s: {"median_s": 2e-5, "p10_s": 2e-5, "p90_s": 2e-5, "n_reps": 10})
    doc = run(out, [MINI], CPU, None, m_grid=(1, 16), dtypes=["bf16"], backends=["triton", "loop"],
              deadline_s=None, t_start=time.perf_counter(), time_fn=fake)
    on_disk = json.loads(out.read_text())
    assert on_disk["complete"] and on_disk["step_ops"] == doc["step_ops"] and len(doc["step_ops"]) == 2 * 6
    text = capsys.readouterr().out
    assert "mini tp1" in text and "40.0" in text     # gate_up + down = 2 x 20 us at M=1 and 16


def test_probe_workload_plan_of_a_moe_model() -> None:
    from cascade_plan.cli.app import probe_plan_from_options
    from kernels_probe.steps.workload_probe import plan_from_json

    plan = probe_plan_from_options(None, model="mixtral-8x7b", prefix=2048, groups=2, samples=16, output_tokens=256,
                                   private_tokens=0, kv_dtype=None, weight_dtype=None, tp=2)
    assert plan.moe == MoeShape("mixtral-8x7b", 2, hidden=4096, intermediate=7168, experts=8, top_k=2)
    # its whole first / middle / final steps through the MoE step model: all 32 layers of a TP-2 shard fit
    assert [(p.position, p.suffix_tokens, p.batch) for p in plan.steps] == [
        ("first", 1, 32), ("middle", 128, 32), ("final", 256, 32)]
    assert plan.moe_step_layers == 32 and any("whole steps" in n and "all 32 layers" in n for n in plan.notes)
    assert 32 in plan.gemm_m and plan.attention                      # attention and dense GEMMs as before
    assert plan_from_json(plan.describe()) == plan
    dense = probe_plan_from_options(None, model="llama-3-8b", prefix=1000, groups=1, samples=8, output_tokens=100,
                                    private_tokens=0, kv_dtype=None, weight_dtype=None, tp=1)
    assert dense.moe is None and "moe" not in dense.describe()      # a dense plan's JSON is unchanged


def test_workload_step_ops_measure_the_experts(monkeypatch) -> None:
    import kernels_probe.moe.moe_probe as moe
    import kernels_probe.steps.step_probe as sp
    from cascade_plan.cli.app import probe_plan_from_options

    plan = probe_plan_from_options(None, model="mixtral-8x7b", prefix=1024, groups=1, samples=8, output_tokens=64,
                                   private_tokens=0, kv_dtype=None, weight_dtype=None, tp=1)
    seen = {}

    def fake_moe(flusher, device, shapes, **kw):
        seen.update(shapes=shapes, **kw)
        return [{"op": "moe_grouped_gemm"}], []

    monkeypatch.setattr(moe, "measure_moe", fake_moe)
    monkeypatch.setattr(sp, "measure_gemms", lambda *a, **k: ([], []))
    monkeypatch.setattr(sp, "measure_glue", lambda *a, **k: ([], []))
    out = sp.run_step_ops(None, CPU, quick=False, plan=plan)
    assert seen["shapes"] == [plan.moe] and seen["m_grid"] == plan.gemm_m and seen["dtypes"] == ["bf16"]
    assert out["step_ops"] == [{"op": "moe_grouped_gemm"}] and "moe_s" in out["timings_s"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the commands' refusal without a GPU")
@pytest.mark.parametrize("module, prog", [("moe_run", "moe_probe"), ("moe_steps", "moe_steps")])
def test_the_moe_commands_parse_then_refuse_without_a_gpu_writing_nothing(module, prog, tmp_path, capsys) -> None:
    import importlib

    main = importlib.import_module(f"kernels_probe.moe.{module}").main
    out = tmp_path / "rows.json"
    assert main(["--out", str(out), "--quick", "--budget-s", "5"]) == 2
    assert capsys.readouterr().out.strip() == f"{prog}: no CUDA GPU" and not out.exists()
    with pytest.raises(SystemExit):          # --out is required: argparse refuses before looking for a GPU
        main(["--quick"])
    assert "--out" in capsys.readouterr().err


def test_probe_workload_moe_steps_need_a_config_the_step_model_finds(tmp_path) -> None:
    """A MoE model the step model has no config for (a user's config.json outside calibrations/configs/) is
    probed for its attention and experts only, and the plan's notes say why no whole steps."""
    from cascade_plan.cli.app import probe_plan_from_options
    from kernels_probe.steps.step_shapes import config_dir

    cfg = json.loads((config_dir() / "qwen3-30b-a3b.json").read_text())
    path = tmp_path / "my-moe.json"
    path.write_text(json.dumps(cfg))
    plan = probe_plan_from_options(None, model=str(path), prefix=1024, groups=4, samples=8, output_tokens=64,
                                   private_tokens=0, kv_dtype=None, weight_dtype=None, tp=1)
    assert plan.moe is not None and plan.attention and plan.steps == () and plan.moe_step_layers == 0
    assert any(n.startswith("no whole steps: ") and "my-moe" in n for n in plan.notes)


def test_a_moe_workload_plans_steps_are_timed_by_the_moe_step_model(monkeypatch) -> None:
    """probe --workload on a GQA MoE model: its steps go to the MoE step model (never the dense one), with the
    plan's layer count and the backends the run has."""
    import kernels_probe.moe.moe_steps as ms
    import kernels_probe.steps.layer_graph as lg
    import kernels_probe.steps.step_probe as sp
    from cascade_plan.cli.app import probe_plan_from_options

    plan = probe_plan_from_options(None, model="mixtral-8x7b", prefix=1024, groups=1, samples=8, output_tokens=64,
                                   private_tokens=0, kv_dtype=None, weight_dtype=None, tp=1)
    seen: dict = {}

    def dense(*a, points, **k):
        seen["dense"] = list(points)
        return [], []

    def moe_steps(flusher, device, sm_count, points, **kw):
        seen.update(points=points, **kw)
        return [{"step_kind": "moe"}], []

    monkeypatch.setattr(sp, "measure_steps", dense)
    monkeypatch.setattr(lg, "measure_layer_graphs", lambda *a, **k: ([], []))
    monkeypatch.setattr(ms, "measure_moe_steps", moe_steps)
    monkeypatch.setattr(sp.torch.cuda, "device_count", lambda: 1)
    out = sp.run_step_probe(None, "cpu", 132, quick=True, fi_ok=False, out={"step_ops": [], "steps": [], "skipped": [],
                                                                             "timings_s": {}}, plan=plan)
    assert seen["dense"] == [] and out["steps"] == [{"step_kind": "moe"}]
    assert [(p.step.position, p.layers, p.tp) for p in seen["points"]] == [("first", 32, 1), ("middle", 32, 1),
                                                                         ("final", 32, 1)]
    assert seen["modes"] == (("triton", "per_sequence"), ("triton", "cascade"))     # no FlashInfer in this run
