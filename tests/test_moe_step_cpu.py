"""The whole MoE / MLA step's plumbing on the CPU: shapes per GPU from config.json, the in-graph alignment
against the MoE probe's, and a tiny model step (GQA + MoE through the Triton interpreter; MLA + MoE with
the torch MLA stand-in) against a plain torch forward of the same weights (per-token experts, float32
attention over the whole context)."""

from __future__ import annotations

import pytest

from kernels_probe.moe.moe_step_shapes import MoeStepShape, moe_step_points, moe_step_shape


def test_shapes_per_gpu():
    s = moe_step_shape("deepseek-v3", 8, layers=32)
    assert (s.layers, s.dense_layers, s.moe_layers, s.q_heads, s.attention) == (32, 3, 29, 16, "mla")
    assert (s.experts, s.top_k, s.expert_width, s.shared_width, s.intermediate) == (256, 8, 256, 256, 2304)
    assert (s.kv_lora, s.rope_dim, s.nope_dim, s.v_dim, s.q_lora, s.vocab) == (512, 64, 128, 128, 1536, 16160)
    m = moe_step_shape("mixtral-8x7b", 1)
    assert (m.attention, m.q_heads, m.kv_heads, m.experts, m.top_k, m.expert_width, m.dense_layers) == (
        "gqa", 32, 8, 8, 2, 14336, 0)
    # bf16 Mixtral: 46.7 B parameters, 93 GB on one GPU
    assert 92e9 < m.weight_bytes(2) < 95e9
    q = moe_step_shape("qwen3-30b-a3b", 1)     # held out: calibrations/configs/
    assert (q.experts, q.top_k, q.expert_width, q.kv_heads, q.head_dim, q.shared_width) == (128, 8, 768, 4, 128, 0)
    # every point fits one H200 with room for its caches
    assert moe_step_shape("deepseek-v3", 8, layers=32).weight_bytes(1) < 50e9
    pts = moe_step_points()
    assert len(pts) == 24 and {p.step.position for p in pts} == {"first", "middle", "final"}


def test_deepseek_points_match_the_shipped_workload(root):
    import yaml

    d = yaml.safe_load((root / "workloads" / "deepseek-v3-grpo-tp8.yaml").read_text())
    t = d["tree"]
    pts = [p for p in moe_step_points() if p.step.workload == "deepseek-v3-grpo-tp8"]
    st = pts[0].step
    assert (st.model, st.prefix_tokens, st.group_size, st.n_groups, st.output_tokens, st.weight_dtype, pts[0].tp) == (
        d["model"], t["tokens"], t["samples"], t["copies"], t["output_tokens"], d["weight_dtype"], d["tp"])


torch = pytest.importorskip("torch")


def test_alignment_in_graph_matches_the_probe():
    from kernels_probe.interpret import enable_interpreter

    enable_interpreter()       # before triton's first import in this process (the step test needs it)
    from kernels_probe.moe.moe_probe import align
    from kernels_probe.moe.moe_step import align_in_graph

    g = torch.Generator().manual_seed(3)
    E, k, m, bm = 6, 2, 11, 4
    ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(m)])
    n = m * k
    cap = -(-n // bm) + min(E, n)
    slots, be = torch.empty(cap * bm, dtype=torch.int32), torch.empty(cap, dtype=torch.int32)
    align_in_graph(ids, E, bm, slots, be, torch.arange(cap) * bm, torch.ones(n, dtype=torch.int64), torch.arange(n))
    ref = align(ids, E, bm)
    nb = ref.n_blocks
    assert be[:nb].tolist() == ref.block_expert.tolist() and (be[nb:] == -1).all()
    assert slots[:nb * bm].tolist() == ref.sorted_slots.tolist() and (slots[nb * bm:] == n).all()


def _reference_forward(step):
    """The same step in plain torch: per-token experts, float32 attention (no alignment, no grouped GEMM)."""
    from kernels_probe.attention.reference import reference_paged
    from kernels_probe.moe.moe_step import reference_mla_layer

    s, w, kv, glue = step.s, step.w, step.kv, step.glue
    F = torch.nn.functional
    B = kv.pt.batch
    rows = list(range(B))
    residual = F.embedding(step.tokens, w.embed)
    x = glue.rmsnorm(residual, w.layers[0]["norm1"])
    for i, lw in enumerate(w.layers):
        if i > 0:
            glue.add_rmsnorm(x, residual, lw["norm1"])
        if s.attention == "mla":
            H = s.q_heads
            q = F.linear(glue.rmsnorm(F.linear(x, lw["q_a"]), lw["q_a_norm"]), lw["q_b"]).view(B, H, -1)
            kva = F.linear(x, lw["kv_a"])
            ckv, kpe = glue.rmsnorm(kva[:, :s.kv_lora], lw["kv_a_norm"]), kva[:, s.kv_lora:].clone()
            qpe = q[..., s.nope_dim:].clone()
            glue.rope(qpe.view(B, -1), kpe, kv.append.positions, s.rope_dim)
            kv.write(i, ckv, kpe)
            qn = torch.einsum("bhn,hnl->bhl", q[..., :s.nope_dim].float(), lw["w_uk"].float()).to(torch.bfloat16)
            a = reference_mla_layer(kv, i, qn, qpe, rows).to(torch.bfloat16)
            o = torch.einsum("bhl,hlv->bhv", a.float(), lw["w_uv"].float()).to(torch.bfloat16).reshape(B, -1)
            x = F.linear(o, lw["o"])
        else:
            hq, hkv, d = s.q_heads, s.kv_heads, s.head_dim
            qkv = F.linear(x, lw["qkv"], lw["qkv_bias"])
            q, k, v = qkv[:, :hq * d], qkv[:, hq * d:(hq + hkv) * d], qkv[:, (hq + hkv) * d:]
            glue.rope(q, k, kv.append.positions, d)
            glue.append(k.reshape(B, hkv, d), v.reshape(B, hkv, d), kv.k[i], kv.v[i], kv.append)
            a = reference_paged(q.reshape(B, hq, d), kv.k[i], kv.v[i], kv.shared_table, kv.seq_lens)
            x = F.linear(a.to(torch.bfloat16).reshape(B, -1), lw["o"])
        glue.add_rmsnorm(x, residual, lw["norm2"])
        if i < s.dense_layers:
            x = F.linear(glue.silu_mul(F.linear(x, lw["gate_up"])), lw["down"])
            continue
        tw, ids = torch.topk(torch.softmax(F.linear(x, lw["router"]).float(), -1), s.top_k, dim=-1)
        tw = tw / tw.sum(-1, keepdim=True)
        y = torch.zeros((B, s.hidden))
        for t in range(B):
            for j in range(s.top_k):
                e = int(ids[t, j])
                h1 = x[t].float() @ lw["w13"][e].float().T
                act = F.silu(h1[:s.expert_width]) * h1[s.expert_width:]
                y[t] += tw[t, j] * (act @ lw["w2"][e].float().T)
        if s.shared_width:
            y += F.linear(glue.silu_mul(F.linear(x, lw["shared_gate_up"])), lw["shared_down"]).float()
        x = y.to(torch.bfloat16)
    glue.add_rmsnorm(x, residual, w.final_norm)
    return x


def _rel(a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


@pytest.mark.parametrize("attention", ["gqa", "mla"])
def test_tiny_moe_step_matches_a_plain_torch_forward(attention):
    from kernels_probe.interpret import enable_interpreter

    if not enable_interpreter():
        pytest.skip("triton was imported without the interpreter in this process")
    from kernels_probe.moe.moe_step import MoeDecodeStep, MoeStepWeights, make_kv
    from kernels_probe.steps.step_shapes import WorkloadStep
    from kernels_probe.steps.whole_steps import compare_modes

    if attention == "gqa":   # 2 MoE layers, 8 experts top 2, GQA groups of 2
        s = MoeStepShape("tiny", 1, 2, 0, 64, 4, "gqa", 2, 32, 0, 8, 2, 48, 0, 100, 1e4)
        backends, modes = "triton", ("per_sequence", "cascade")
    else:                    # 1 dense + 2 MoE layers, shared expert, MLA latent 64 + rope 16
        s = MoeStepShape("tiny-mla", 1, 3, 1, 64, 4, "mla", 1, 0, 96, 8, 2, 32, 32, 100, 1e4, q_lora=48,
                         kv_lora=64, rope_dim=16, nope_dim=16, v_dim=16)
        backends, modes = "torch", ("per_sequence",)
    pt = WorkloadStep("w", "tiny", "first", 32, 3, 2, 0, 5, 16)
    w, kv = MoeStepWeights(s, "cpu"), make_kv(s, pt, "cpu")
    steps = {(backends, m): MoeDecodeStep(s, w, kv, backends, m, glue="torch") for m in modes}
    if attention == "gqa":
        chk = compare_modes(kv, steps, pt)
        assert all(e < 1e-2 for e in chk["ref_err"].values()) and chk["mode_err"][("triton", "cascade")] < 1e-2
    for st in steps.values():
        st()
        ref = _reference_forward(st)
        assert _rel(st.hidden_out, ref) < 3e-2
        # every MoE layer routed to experts, and the routing used by the grouped GEMMs is the reference's
        assert st.experts.topk_ids.shape == (pt.batch, s.top_k)


def test_shipped_moe_steps_validate_apart_from_the_dense_ones(root):
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.calibration.moe_step_validation import moe_step_points
    from cascade_plan.calibration.step_validation import step_points
    from cascade_plan.inputs.hardware import load_hardware

    probe = load_probe(root / "calibrations" / "h200-probe-2026-12-01.json")
    hw = load_hardware("h200")
    moe_rows = [r for r in probe.doc["steps"] if r.get("step_kind")]
    assert moe_rows, "the shipped H200 file carries the MoE / MLA steps"
    dense = step_points(probe, hw)
    assert {p.workload for p in dense}.isdisjoint({r["workload"] for r in moe_rows})
    pts = moe_step_points(probe, hw)
    kinds = {k for k, _ in pts}
    assert kinds == {"moe", "mla_moe"}
    ds = [p for k, p in pts if k == "mla_moe"]
    # DeepSeek-V3's TP-8 shard on one GPU: predicted without its all-reduce, at the measured 32 layers
    assert ds and all(p.tp == 8 and p.predicted_parts["comm_s"] == 0.0 for p in ds)
    # Qwen3-30B-A3B's experts were never GEMM-probed: held out; Mixtral's were
    held = {p.model: p.held_out_shape for _, p in pts}
    assert held["qwen3-30b-a3b"] and not held["mixtral-8x7b"]
    # every comparison pairs a cascade with its own per-sequence twin
    assert len(pts) == sum(1 for r in moe_rows if r["mode"] == "cascade")


def test_mla_rows_are_timed_kernels():
    from types import SimpleNamespace

    from kernels_probe.attention.mla import mla_kernels
    from kernels_probe.attention.timed import TimedKernel

    def prefix():
        return "prefix"

    cas = SimpleNamespace(mode="cascade", prefix=prefix, __call__=None)
    ks = mla_kernels(cas, "cascade_total")
    assert all(isinstance(k, TimedKernel) for k in ks)
    assert [(k.backend, k.kernel, k.variant) for k in ks] == [("flashinfer", "cascade_total", "mla"),
                                                             ("flashinfer", "cascade_prefix", "mla")]
    assert ks[1].timed_callable()() == "prefix" and ks[0].check is cas and ks[1].check is None
    assert [k.kernel for k in mla_kernels(SimpleNamespace(mode="per_sequence"), "decode_shared")] == ["decode_shared"]
