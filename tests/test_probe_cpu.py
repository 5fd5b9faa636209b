"""CPU-side logic of the GPU probe: grid, bytes/FLOP counting, the calibration file (format, atomic
write), the target figures, the environment check, and the torch backend's layout and merge."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from cascade_plan.calibration_schema.probe_rows import ProbeDevice
from kernels_probe import calibration_file
from kernels_probe.attention import accounting
from kernels_probe.attention.grid import BACKENDS, KERNELS, AttentionConfig, build_grid

ROOT = pathlib.Path(__file__).resolve().parent.parent
COMMITTED = sorted((ROOT / "calibrations").glob("h200-probe-*.json"))


# ------------------------------------------------------------------------------------------------ grid


def test_quick_and_full_grids_span_the_axes():
    quick, qd = build_grid(quick=True)
    full, fd = build_grid()
    assert qd["mode"] == "quick" and fd["mode"] == "full"
    assert 5 <= len(quick) <= 16 and 60 <= len(full) <= 120
    assert len(set(full)) == len(full)
    ax = lambda cfgs, k: {getattr(c, k) for c in cfgs}  # noqa: E731
    assert {256, 32768} <= ax(full, "prefix_tokens")
    assert {1, 256} <= ax(full, "group_size")
    assert {0, 4096} <= ax(full, "suffix_tokens")
    assert {1, 4, 8} <= ax(full, "q_per_kv")
    assert {1, 8} <= ax(full, "num_kv_heads")
    assert {"bf16", "fp8"} <= ax(full, "kv_dtype")
    assert ax(full, "n_groups") - {1}
    assert sum(c.n_groups == 1 for c in full) > 0.9 * len(full)
    # Llama-3-8B layer shape crossed over prefix x group size
    core = {(c.prefix_tokens, c.group_size) for c in full
            if (c.q_per_kv, c.num_kv_heads, c.suffix_tokens, c.kv_dtype) == (4, 8, 128, "bf16")}
    assert {(p, n) for p in (256, 1024, 4096, 16384, 32768) for n in (1, 4, 16, 64, 256)} <= core


def test_grid_page_size_and_config_validation():
    cfgs, desc = build_grid(quick=True, page_size=32)
    assert desc["page_size"] == 32 and all(c.page_size == 32 for c in cfgs)
    with pytest.raises(ValueError):
        AttentionConfig(prefix_tokens=100, group_size=1, page_size=16)
    with pytest.raises(ValueError):
        AttentionConfig(prefix_tokens=256, group_size=1, kv_dtype="int4")
    c = AttentionConfig(prefix_tokens=4096, group_size=64, n_groups=2)
    assert c.batch == 128 and c.num_q_heads == 32 and c.as_dict()["n_groups"] == 2


# ---------------------------------------------------------------------------------------- accounting


def test_kv_bytes_per_token_matches_the_seed():
    # Llama-3-8B: 32 layers x 2 x 8 heads x 128 x 2 B = 128 KiB per token; one layer is 4 KiB.
    c = AttentionConfig(prefix_tokens=4096, group_size=64)
    assert accounting.kv_bytes_per_token(c) * 32 == 131072
    assert accounting.kv_bytes_per_token(AttentionConfig(prefix_tokens=4096, group_size=1, kv_dtype="fp8")) == 2048


def test_kernel_costs_by_hand():
    c = AttentionConfig(prefix_tokens=4096, group_size=64, suffix_tokens=128)
    kvt, q = 4096, 64 * 32 * 128 * 2
    state = 64 * 32 * 129 * 4
    dup = accounting.kernel_cost(c, "decode_dup")
    assert dup["bytes"] == 64 * 4224 * kvt + 2 * q == dup["unique_bytes"]
    assert dup["flops"] == 4 * 64 * 32 * 128 * 4224
    sh = accounting.kernel_cost(c, "decode_shared")
    assert sh["bytes"] == dup["bytes"] and sh["unique_bytes"] == (4096 + 64 * 128) * kvt + 2 * q
    assert accounting.kernel_cost(c, "cascade_prefix")["bytes"] == 4096 * kvt + q + state
    assert accounting.kernel_cost(c, "cascade_suffix")["bytes"] == 64 * 128 * kvt + q + state
    assert accounting.kernel_cost(c, "cascade_merge")["bytes"] == 2 * state + q
    tot = accounting.kernel_cost(c, "cascade_total")
    assert tot["bytes"] == (4096 + 64 * 128) * kvt + 2 * q
    assert tot["flops"] == dup["flops"]
    with pytest.raises(ValueError):
        accounting.kernel_cost(c, "nope")


def test_cascade_never_moves_more_than_per_sequence():
    for c in build_grid()[0]:
        assert accounting.kernel_cost(c, "cascade_total")["bytes"] <= accounting.kernel_cost(c, "decode_dup")["bytes"]


# ---------------------------------------------------------------------------------- calibration file


def _doc(**over):
    cfg = AttentionConfig(prefix_tokens=256, group_size=4).as_dict()
    m = {"backend": "triton", "kernel": "cascade_total", "variant": None, "config": cfg, "bytes": 10, "flops": 20,
         "median_s": 2e-6, "p10_s": 1e-6, "p90_s": 3e-6, "n_reps": 10, "max_rel_err": 1e-3}
    doc = calibration_file.new_document(
        device={k: None for k in ProbeDevice.__struct_fields__} | {"name": "NVIDIA H200"},
        ceilings={"hbm_read_bytes_per_s": 4.5e12, "hbm_copy_bytes_per_s": 3.6e12, "bf16_matmul_flop_per_s": 7.9e14,
                  "graph_kernel_launch_s": 9e-7},
        grid={"mode": "quick"}, measurements=[m],
        skipped=[{"config": cfg, "backend": "torch", "kernel": "decode_shared", "reason": "no block table"}])
    doc.update(over)
    return doc


def test_new_document_is_valid_and_versioned():
    d = _doc()
    assert calibration_file.validate_document(d) == []
    assert d["schema_version"] == 1 and d["kind"] == "cascade-plan-calibration"
    assert d["hardware_id"] == "h200" and d["fitted"] == {}
    assert d["created_utc"].endswith("Z")


def test_validation_names_the_problem():
    d = _doc()
    d["measurements"][0]["backend"] = "cuda"
    d["measurements"][0]["median_s"] = 5e-6  # above p90
    del d["ceilings"]["graph_kernel_launch_s"]
    errs = calibration_file.validate_document(d)
    assert any("backend" in e for e in errs)
    assert any("p10_s <= median_s <= p90_s" in e for e in errs)
    assert any("graph_kernel_launch_s" in e for e in errs)
    assert calibration_file.validate_document(_doc(schema_version=2))


def test_the_probe_checks_its_file_with_the_shared_format():
    from cascade_plan.calibration_schema import document

    assert calibration_file.SCHEMA_VERSION is document.SCHEMA_VERSION
    d = _doc()
    d["measurements"][0]["n_reps"] = 0                    # a range the shared struct annotates (n_reps >= 1)
    assert calibration_file.validate_document(d) == ["Expected `int` >= 1 - at `$.measurements[0].n_reps`"]
    d = _doc()
    del d["skipped"][0]["reason"]
    assert calibration_file.validate_document(d) == ["Object missing required field `reason` - at `$.skipped[0]`"]


@pytest.mark.parametrize("name,hid", [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100-sxm"),
                                      ("NVIDIA H100 PCIe", "h100-pcie"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
                                      ("NVIDIA RTX 6000 Ada Generation", None), (None, None)])
def test_hardware_id(name, hid):
    assert calibration_file.hardware_id_for(name) == hid


def test_write_atomic_roundtrip(tmp_path):
    p = tmp_path / "sub" / "cal.json"
    calibration_file.write_atomic(p, _doc())
    assert calibration_file.load(p) == json.loads(p.read_text())
    assert [x.name for x in p.parent.iterdir()] == ["cal.json"]


def test_write_atomic_leaves_old_file_and_no_temp_on_interrupt(tmp_path, monkeypatch):
    p = tmp_path / "cal.json"
    p.write_text('{"old": true}\n')

    def boom(src, dst):
        raise KeyboardInterrupt

    import cascade_plan.outputs

    monkeypatch.setattr(cascade_plan.outputs.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        calibration_file.write_atomic(p, _doc())
    assert json.loads(p.read_text()) == {"old": True}
    assert [x.name for x in tmp_path.iterdir()] == ["cal.json"]


def test_write_atomic_refuses_nan(tmp_path):
    d = _doc()
    d["ceilings"]["hbm_read_bytes_per_s"] = float("nan")
    with pytest.raises(ValueError):
        calibration_file.write_atomic(tmp_path / "x.json", d)
    assert not list(tmp_path.iterdir())


@pytest.mark.skipif(not COMMITTED, reason="no committed H200 calibration file")
def test_committed_h200_calibration_is_valid_and_complete():
    doc = calibration_file.load(COMMITTED[-1])
    assert calibration_file.validate_document(doc) == []
    assert doc["hardware_id"] == "h200" and doc["grid"]["mode"].startswith("full+coverage")
    assert {m["config"]["kv_dtype"] for m in doc["measurements"] if m["backend"] == "flashinfer"} == {"bf16", "fp8"}
    assert all("run" in m for m in doc["measurements"]) and len(doc["notes"]["runs"]) >= 3
    assert "H200" in doc["device"]["name"]
    have = {(m["backend"], m["kernel"]) for m in doc["measurements"]}
    for k in KERNELS:
        assert ("triton", k) in have
    assert {m["backend"] for m in doc["measurements"]} <= set(BACKENDS)
    errs = [m["max_rel_err"] for m in doc["measurements"] if m["max_rel_err"] is not None]
    assert errs and max(errs) < 1e-2
    assert not [s for s in doc["skipped"] if s["reason"].startswith("correctness")]


@pytest.mark.skipif(not COMMITTED, reason="no committed H200 calibration file")
def test_target_figures_and_summary_from_committed_file():
    from kernels_probe.report import floor_s, summary_table, target_figures

    doc = calibration_file.load(COMMITTED[-1])
    f = target_figures(doc)
    assert f["decode_dup_largest"]["triton"]["pct_of_read_bw"] > 90
    assert f["cascade_total"]["triton"]["median_ratio_to_floor"] >= 1.0
    m = next(m for m in doc["measurements"] if m["kernel"] == "cascade_total")
    assert floor_s(m, doc["ceilings"], 3) > floor_s(m, doc["ceilings"], 0) > 0
    assert summary_table(doc).row_count > 5


# ------------------------------------------------------------------------------------------ environment


def test_package_import_is_light():
    code = "import sys, kernels_probe, kernels_probe.environment, kernels_probe.attention.grid, " \
           "kernels_probe.calibration_file; " \
           "print(sorted(m for m in ('torch', 'triton', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_requirements_says_what_and_how(monkeypatch):
    import importlib.util

    from kernels_probe import environment

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n in ("torch", "triton") else real(n, *a))
    msgs = environment.missing_requirements()
    assert any("torch is not installed" in m and "cascade-plan[probe]" in m for m in msgs)
    assert any("triton is not installed" in m for m in msgs)


def test_missing_requirements_reports_no_gpu():
    pytest.importorskip("torch")
    import torch

    from kernels_probe import environment

    msgs = environment.missing_requirements()
    if torch.cuda.is_available():
        assert not any("CUDA" in m for m in msgs)
    else:
        assert any("no CUDA GPU is visible to torch" in m for m in msgs)


def test_module_main_exits_2_without_gpu(tmp_path):
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out = subprocess.run([sys.executable, "-m", "kernels_probe", "--out", str(tmp_path / "c.json"), "--quick"],
                         cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2 and "error:" in out.stderr
    assert not (tmp_path / "c.json").exists()


# --------------------------------------------------------------------------------- torch backend (CPU)


def test_torch_backend_layout_and_merge_with_a_stand_in_kernel(monkeypatch):
    """torch's flash kernel needs CUDA; a float32 stand-in with the same (out, lse) contract checks our
    GQA packing, the group permutation of the prefix pass and the LSE merge."""
    torch = pytest.importorskip("torch")
    from kernels_probe.attention import torch_backend as tb
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.reference import max_rel_err

    def stand_in(q4, k4, v4, scale):
        s = torch.einsum("bhld,bhtd->bhlt", q4.float(), k4.float()) * scale
        o = torch.einsum("bhlt,bhtd->bhld", torch.softmax(s, -1), v4.float()).to(q4.dtype)
        return o, torch.logsumexp(s, -1)

    monkeypatch.setattr(tb, "flash", stand_in)
    for cfg in (AttentionConfig(prefix_tokens=32, group_size=3, n_groups=2, suffix_tokens=16, q_per_kv=4,
                                num_kv_heads=2, head_dim=16, page_size=16),
                AttentionConfig(prefix_tokens=32, group_size=3, suffix_tokens=0, q_per_kv=2, num_kv_heads=2,
                                head_dim=16, page_size=16)):
        d = build_data(cfg, "cpu")
        ref = reference_output(d)
        tc = tb.TorchCascade(d, torch.full_like(d.q, float("nan")))
        assert max_rel_err(tc.total(), ref) < 1e-2
        assert max_rel_err(tc.merge(*tc.merge_inputs()), ref) < 1e-2
        assert max_rel_err(tb.TorchDecode(d, shared=False)().reshape(ref.shape), ref) < 1e-2
        if cfg.suffix_tokens == 0 and cfg.n_groups == 1:
            assert max_rel_err(tb.TorchDecode(d, shared=True)().reshape(ref.shape), ref) < 1e-2
        else:
            with pytest.raises(NotImplementedError):
                tb.TorchDecode(d, shared=True)


def test_probe_data_layout_shares_and_duplicates_pages():
    torch = pytest.importorskip("torch")
    from kernels_probe.attention.data import build_data, cache_bytes

    cfg = AttentionConfig(prefix_tokens=32, group_size=2, n_groups=2, suffix_tokens=16, q_per_kv=2, num_kv_heads=1,
                      head_dim=8, page_size=8)
    d = build_data(cfg, "cpu")
    pp = 4
    assert d.has_dup and d.k_cache.shape[0] == 2 * pp + 4 * (pp + 2)
    assert torch.equal(d.shared_table[2, :pp], d.prefix_table[1])  # sequence 2 is in group 1
    assert not set(d.dup_table[:, :pp].flatten().tolist()) & set(d.prefix_table.flatten().tolist())
    assert torch.equal(d.k_cache[d.dup_table[3, :pp].long()], d.k_cache[d.prefix_table[1].long()])  # same bytes
    assert torch.equal(d.shared_table[:, pp:], d.suffix_table)
    small = build_data(cfg, "cpu", dup_cap_bytes=cache_bytes(cfg, True) - 1)
    assert not small.has_dup and small.dup_table is None


def test_the_step_sections_and_the_device_are_checked_by_their_structs():
    """step_ops and steps rows (as the shipped H200 file holds them) and the device read through the shared format's
    writer-side structs: an unknown op, a whole step without its glue or with a mode the planner has no name for,
    a device without a field, and p90 below the median are each named."""
    import copy

    shipped = json.loads((ROOT / "calibrations" / "h200-probe-2026-12-01.json").read_text())
    base = _doc()
    base["step_ops"] = [shipped["step_ops"][0]]
    base["steps"] = [shipped["steps"][0]]
    assert calibration_file.validate_document(base) == []

    def broken(change):
        d = copy.deepcopy(base)
        change(d)
        return " | ".join(calibration_file.validate_document(d))

    assert "$.step_ops[0].op" in broken(lambda d: d["step_ops"][0].update(op="softmax"))
    assert "`glue`" in broken(lambda d: d["steps"][0].pop("glue"))
    assert "$.steps[0].mode" in broken(lambda d: d["steps"][0].update(mode="both"))
    assert "`triton`" in broken(lambda d: d["device"].pop("triton"))
    assert "steps[0]: p10_s <= median_s <= p90_s" in broken(lambda d: d["steps"][0].update(p90_s=0.0))
