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

from kernels_probe.grid import ProbeConfig  # noqa: E402

CONFIGS = [ProbeConfig(prefix_tokens=1024, group_size=16, suffix_tokens=128),
           ProbeConfig(prefix_tokens=4096, group_size=64, suffix_tokens=0, q_per_kv=8, num_kv_heads=1),
           ProbeConfig(prefix_tokens=1024, group_size=8, n_groups=3, suffix_tokens=256, q_per_kv=1),
           ProbeConfig(prefix_tokens=2048, group_size=32, suffix_tokens=64, kv_dtype="fp8", page_size=32)]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.label().replace(" ", "_"))
def test_triton_kernels_match_float32_reference(cfg):
    from kernels_probe.data import build_data, reference_output
    from kernels_probe.reference import max_rel_err
    from kernels_probe.triton_kernels import CascadePlan, DecodePlan

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
