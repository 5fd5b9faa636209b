"""The probe on a CUDA GPU (skipped without one): kernels against the float32 reference at real sizes,
and a tiny end-to-end run_probe that writes a valid calibration file."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():  # decided before triton is imported, so the interpreter tests can still run
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("Triton's interpreter is on in this process (run the GPU tests on their own)",
                allow_module_level=True)
pytest.importorskip("triton")

pytestmark = pytest.mark.gpu

from kernels_probe.attention.grid import AttentionConfig  # noqa: E402

CONFIGS = [AttentionConfig(prefix_tokens=1024, group_size=16, suffix_tokens=128),
           AttentionConfig(prefix_tokens=4096, group_size=64, suffix_tokens=0, q_per_kv=8, num_kv_heads=1),
           AttentionConfig(prefix_tokens=1024, group_size=8, n_groups=3, suffix_tokens=256, q_per_kv=1),
           AttentionConfig(prefix_tokens=2048, group_size=32, suffix_tokens=64, kv_dtype="fp8", page_size=32)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.label().replace(" ", "_"))
def test_triton_kernels_match_float32_reference(cfg):
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan

    sm = torch.cuda.get_device_properties(0).multi_processor_count
    d = build_data(cfg, "cuda", seed=7)
    ref = reference_output(d)
    T = cfg.prefix_tokens + cfg.suffix_tokens
    for table in (d.shared_table, d.dup_table):
        out = torch.full_like(d.q, float("nan"))
        DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, T, out, sm_count=sm)()
        torch.cuda.synchronize()
        assert max_rel_err(out, ref) < 1e-2
    out = torch.full_like(d.q, float("nan"))
    casc = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size, cfg.n_groups)],
                       d.suffix_table, d.suffix_lens, cfg.suffix_tokens, out, sm_count=sm)
    casc()
    torch.cuda.synchronize()
    assert max_rel_err(out, ref) < 1e-2
    # the same plan replayed from a CUDA graph (two streams inside) gives the same output
    from kernels_probe.timing import capture_graph

    g = capture_graph(casc)
    first = out.clone()
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, first)


def test_run_probe_writes_a_valid_calibration_file(tmp_path):
    from kernels_probe.calibration_file import load, validate_document
    from kernels_probe.runner import run_probe

    out = tmp_path / "cal.json"
    doc = run_probe(out, backends=["triton", "torch"], configs=CONFIGS[:2], skip_ceilings=True)
    assert validate_document(doc) == []
    assert load(out) == doc
    kinds = {(m["backend"], m["kernel"]) for m in doc["measurements"]}
    assert ("triton", "cascade_total") in kinds and ("torch", "decode_dup") in kinds
    assert all(m["median_s"] > 0 for m in doc["measurements"])


def test_step_gemm_and_glue_rows_are_sane():
    from kernels_probe.steps.step_probe import measure_gemms, measure_glue
    from kernels_probe.timing import L2Flusher

    fl = L2Flusher(torch.cuda.get_device_properties(0).L2_cache_size, "cuda")
    rows, skipped = measure_gemms(fl, "cuda", quick=True, budget_s=0.003)
    assert not [s for s in skipped if s["reason"].startswith("correctness")]
    bf16 = [r for r in rows if r["config"]["dtype"] == "bf16"]
    assert len(bf16) == 5 * 7 and all(r["max_rel_err"] is None or r["max_rel_err"] < 2e-2 for r in rows)
    for r in bf16:   # below the HBM copy bound and the dense rate (L2 flushed before every repetition)
        assert r["achieved_bytes_per_s"] < 6e12 and r["achieved_flop_per_s"] < 1.1e15
    glue, gskipped = measure_glue(fl, "cuda", ["torch"], quick=True, budget_s=0.003)
    assert not gskipped and {r["op"] for r in glue} == {"glue_layer", "glue_step"}
    by_m = sorted((r["config"]["m"], r["median_s"]) for r in glue if r["op"] == "glue_layer")
    assert by_m[-1][1] > by_m[0][1]          # more tokens, more glue


def test_tiny_model_step_modes_agree_and_replay_from_one_graph():
    from kernels_probe.steps.step_model import DecodeStep, StepKV, StepWeights
    from kernels_probe.steps.step_shapes import LayerShape, WorkloadStep
    from kernels_probe.steps.whole_steps import compare_modes, time_step
    from kernels_probe.timing import L2Flusher

    s = LayerShape("tiny", 1, 4, 1024, 8, 2, 128, 2048, 4096, False, 1e4)
    pt = WorkloadStep("w", "tiny", "first", 512, 8, 3, 0, 17, 64)
    w, kv = StepWeights(s, "cuda"), StepKV(s, pt, "cuda")
    sm = torch.cuda.get_device_properties(0).multi_processor_count
    steps = {("triton", m): DecodeStep(s, w, kv, "triton", m, glue="torch", sm_count=sm)
             for m in ("per_sequence", "cascade")}
    chk = compare_modes(kv, steps, pt)
    assert max(chk["ref_err"].values()) < 1e-2 and chk["mode_err"][("triton", "cascade")] < 1e-2
    fl = L2Flusher(torch.cuda.get_device_properties(0).L2_cache_size, "cuda")
    for st in steps.values():
        r = time_step(st, fl, budget_s=0.01)
        assert r["median_s"] > 0 and r["p10_s"] <= r["median_s"] <= r["p90_s"]
