"""The step probe's plumbing on the CPU: the stepped workloads match the shipped YAML files, preset
shapes per GPU, the torch glue by hand, and a whole (tiny) model step through the Triton interpreter
with per-sequence and cascade attention giving the same output."""

from __future__ import annotations

import math

import pytest

from kernels_probe.steps.step_shapes import STEPPED_WORKLOADS, layer_shape, step_points


def test_stepped_workloads_match_the_shipped_files(root):
    import yaml

    for name, model, p, n, ng, priv, out in STEPPED_WORKLOADS:
        f = root / "workloads" / f"{name}.yaml"
        if not f.exists():
            continue
        d = yaml.safe_load(f.read_text())
        t = d["tree"]
        assert (d["model"], t["tokens"], t["samples"], t["copies"], t["output_tokens"]) == (model, p, n, ng, out)
    pts = step_points()
    assert len(pts) == 9 and {p.position for p in pts} == {"first", "middle", "final"}
    assert pts[0].suffix_tokens == 1 and pts[2].suffix_tokens == 1024


def test_layer_shapes_per_gpu():
    s = layer_shape("qwen2.5-7b", 1)
    assert (s.q_heads, s.kv_heads, s.qkv_bias, s.gemms()["qkv"]) == (28, 4, True, ((28 + 8) * 128, 3584))
    with pytest.raises(ValueError):
        layer_shape("deepseek-v3", 1)


torch = pytest.importorskip("torch")


def test_torch_glue_by_hand():
    from kernels_probe.steps.glue import AppendTarget, TorchGlue, rope_cache

    g = TorchGlue(rope_cache(8, 4, 10000.0, "cpu"))
    x = torch.tensor([[3.0, 4.0]])
    r = torch.zeros(1, 2)
    g.add_rmsnorm(x, r, torch.ones(2))
    assert torch.allclose(r, torch.tensor([[3.0, 4.0]]))
    assert torch.allclose(x, torch.tensor([[3.0, 4.0]]) / math.sqrt(12.5), atol=1e-4)
    q = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    k = q.clone()
    g.rope(q, k, torch.tensor([1]), 4)   # NeoX: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), theta_0 = 1 rad
    assert torch.allclose(q, torch.tensor([[math.cos(1.0), 0.0, math.sin(1.0), 0.0]]), atol=1e-6)
    t = AppendTarget(torch.tensor([[5, 2], [7, 1]], dtype=torch.int32), torch.tensor([17, 3], dtype=torch.int32), 16)
    # position 16 -> page 2 slot 0; position 2 -> page 7 slot 2
    assert t.slots.tolist() == [2 * 16 + 0, 7 * 16 + 2]
    assert t.kv_indices.tolist() == [5, 2, 7] and t.kv_last_page_len.tolist() == [1, 3]


def test_tiny_model_step_per_sequence_and_cascade_agree():
    from kernels_probe.interpret import enable_interpreter

    if not enable_interpreter():
        pytest.skip("triton was imported without the interpreter in this process")
    from kernels_probe.steps.step_model import DecodeStep, StepKV, StepWeights
    from kernels_probe.steps.step_shapes import LayerShape, WorkloadStep
    from kernels_probe.steps.whole_steps import compare_modes

    s = LayerShape("tiny", 1, 2, 64, 4, 2, 32, 96, 100, True, 1e4)
    pt = WorkloadStep("w", "tiny", "first", 64, 2, 2, 0, 19, 32)
    w, kv = StepWeights(s, "cpu"), StepKV(s, pt, "cpu")
    steps = {("triton", m): DecodeStep(s, w, kv, "triton", m, glue="torch", sm_count=8)
             for m in ("per_sequence", "cascade")}
    chk = compare_modes(kv, steps, pt)
    assert all(e < 1e-2 for e in chk["ref_err"].values())
    assert chk["mode_err"][("triton", "cascade")] < 1e-2
    out = {m: (st(), st.hidden_out.clone()) for (_, m), st in steps.items()}
    a, b = out["per_sequence"], out["cascade"]
    assert torch.equal(a[0], b[0])
    assert float((a[1].float() - b[1].float()).norm() / a[1].float().norm()) < 2e-2
    # the new token's K landed in the last slot of each sequence's own suffix pages
    assert kv.append.positions.tolist() == [64 + 19 - 1] * 4


def test_only_steps_that_pass_their_checks_are_timed_and_the_others_say_why():
    from kernels_probe.steps.whole_steps import STEP_TOLERANCE, passing_steps

    steps = {("triton", "per_sequence"): "ps", ("triton", "cascade"): "c", ("flashinfer", "cascade"): "fc"}
    errs = {"ref_err": {("triton", "per_sequence"): 1e-3, ("triton", "cascade"): 10 * STEP_TOLERANCE,
                        ("flashinfer", "cascade"): 1e-4}, "mode_err": {("flashinfer", "cascade"): 1e-3}}
    skipped: list = []
    order = []
    for key, st, e_ref, e_mode in passing_steps(lambda kv, s, pt: errs, None, steps, None, {"w": 1}, skipped):
        order.append((key, st, e_ref, e_mode, len(skipped)))
    # the failing cascade is skipped as it is reached: after the first step was handed out, before the third
    assert order == [(("triton", "per_sequence"), "ps", 1e-3, None, 0),
                     (("flashinfer", "cascade"), "fc", 1e-4, 1e-3, 1)]
    assert skipped == [{"w": 1, "backend": "triton", "mode": "cascade",
                        "reason": f"correctness: ref err {10 * STEP_TOLERANCE}, vs per-sequence None"}]

    def broken(kv, s, pt):
        raise RuntimeError("no reference")

    skipped = []
    assert list(passing_steps(broken, None, steps, None, {}, skipped)) == []
    assert [(s["backend"], s["mode"]) for s in skipped] == list(steps)
    assert all(s["reason"] == "check failed: RuntimeError: no reference" for s in skipped)
