"""The four ways AIConfigurator's tables were misread, each on fixture rows in its parquet format whose
expected numbers follow by hand from the collector's definition:

1. all-reduce `message_size` counts elements (collector/network/collect_all_reduce.py builds a bf16
   tensor of `size` elements and logs `"message_size": size`): a message is message_size x 2 bytes;
2. the all-reduce time is the measured curve, interpolated, not a line through it;
3. the K/V append is inside AIConfigurator's generation attention: counted once per step;
4. GEMMs are kept per (M, N, K) and interpolated in them.
"""

import msgspec
import numpy as np
import pytest

from cascade_plan.calibration.aic import fit as aic_fit
from cascade_plan.calibration.aic import tables as aic_tables
from cascade_plan.cost.step_parts import (
    GemmEfficiency,
    GlueParams,
    StepParts,
    gemm_time_s,
)

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _table(tmp_path, rows, name, columns):
    path = tmp_path / "h200_sxm" / "comm" / "vllm" / "0.24.0" / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    return aic_tables.read_table(tmp_path, path, columns).columns


# A step-shaped curve like the measured ones: flat at 5 us up to 32K elements, then a protocol switch to
# 12 us + 2 B x elements / 100 GB/s (latency in ms, as the collector logs it).
STEPPED = {2**p: (5e-6 if 2**p <= 2**15 else 12e-6 + 2 * 2**p / 100e9) for p in range(7, 25)}


def _allreduce(tmp_path):
    rows = [dict(num_gpus=8, message_size=e, latency=t * 1e3, kernel_source="vLLM_custom_graph",
                 allreduce_dtype="bfloat16") for e, t in STEPPED.items()]
    cols = _table(tmp_path, rows, "custom_allreduce_perf", ["num_gpus", "message_size", "latency", "kernel_source",
                                                            "allreduce_dtype"])
    return aic_fit.allreduce_fits(cols, np.ones(len(rows), bool), "fixture", "allreduce_dtype")[8]


def test_allreduce_message_size_is_elements_of_two_bytes(tmp_path):
    ar = _allreduce(tmp_path)
    # 128 tokens x hidden 8192 = 2^20 elements = 2 MiB: the row logged at message_size 2^20
    assert float(ar.time_s(128 * 8192 * 2)) == pytest.approx(12e-6 + 2 * 2**20 / 100e9, rel=1e-9)
    assert ar.table_bytes[0] == 2 * 128 and ar.table_bytes[-1] == 2 * 2**24
    # read as bytes (the old import), the same 2 MiB message was priced at the 2^21-element row: +64% here
    assert float(ar.time_s(2 * 2**20)) == pytest.approx(STEPPED[2**20]) and STEPPED[2**21] / STEPPED[2**20] > 1.6


def test_nccl_table_reads_elements_of_its_dtype(tmp_path):
    rows = [dict(op_name="all_reduce", nccl_dtype="half", num_gpus=4, message_size=e, latency=t * 1e3)
            for e, t in STEPPED.items()]
    cols = _table(tmp_path, rows, "nccl_perf", ["op_name", "nccl_dtype", "num_gpus", "message_size", "latency"])
    ar = aic_fit.allreduce_fits(cols, np.ones(len(rows), bool), "fixture", "nccl_dtype")[4]
    assert float(ar.time_s(2 * 2**18)) == pytest.approx(STEPPED[2**18], rel=1e-9)


def test_allreduce_is_the_measured_curve_interpolated_not_a_line(tmp_path):
    ar = _allreduce(tmp_path)
    # on the flat part every message costs 5 us; a line through the whole curve cannot be flat there
    assert float(ar.time_s(2 * 2**12)) == pytest.approx(5e-6, rel=1e-9)
    line = np.array([ar.latency_s + 2 * e / ar.bytes_per_s for e in STEPPED])
    assert np.max(np.abs(line / np.array(list(STEPPED.values())) - 1)) > 0.25      # the line misses the step
    assert np.allclose([float(ar.time_s(2 * e)) for e in STEPPED], list(STEPPED.values()), rtol=1e-9)
    # between two rows: log-log interpolation, by hand at the geometric mean of 2^16 and 2^17 elements
    b = 2 * 2**16.5
    want = float(np.exp((np.log(STEPPED[2**16]) + np.log(STEPPED[2**17])) / 2))
    assert float(ar.time_s(b)) == pytest.approx(want, rel=1e-9)
    # below the smallest row: its time; beyond the largest: the last segment's slope
    assert float(ar.time_s(10)) == pytest.approx(5e-6)
    slope = (STEPPED[2**24] - STEPPED[2**23]) / (2 * 2**24 - 2 * 2**23)
    assert float(ar.time_s(4 * 2**24)) == pytest.approx(STEPPED[2**24] + slope * 2 * 2**24, rel=1e-9)


def test_every_shipped_allreduce_is_a_curve_per_gpu_count():
    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.calibration.probe_params import params_from_probe
    from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.model_spec import load_preset

    hw = load_hardware("h200")
    probe = params_from_probe(find_committed(hw, source="probe"), None, "bf16", hw, load_preset("llama-3-8b")).step
    aic = params_from_probe(find_committed(load_hardware("h100-sxm")), None, "bf16", load_hardware("h100-sxm"),
                            load_preset("llama-3-8b")).step
    for parts in (probe, aic, DEFAULT_STEP_PARTS):
        assert {2, 4, 8} <= set(parts.allreduce)
        assert all(len(a.table_bytes) >= 10 for a in parts.allreduce.values()), parts.source
    # the probe's own 2-GPU NCCL rows: 2 MiB and 4 MiB took 28.6 and 34.7 us (the line said ~18.8 and ~27)
    ar2 = probe.allreduce_for(2)
    assert float(ar2.time_s(2**21)) == pytest.approx(28.55e-6, rel=0.01)
    assert float(ar2.time_s(2**22)) == pytest.approx(34.73e-6, rel=0.01)


# ---- the K/V append, counted once -----------------------------------------------------------------

def _costs(glue: GlueParams):
    from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
    from cascade_plan.cost.cost_params import DEFAULT
    from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.model_spec import load_preset

    model, hw = load_preset("llama-3-8b"), load_hardware("h200")
    step = StepParts(gemm=DEFAULT_STEP_PARTS.gemm, glue=glue, allreduce=DEFAULT_STEP_PARTS.allreduce)
    params = msgspec.structs.replace(DEFAULT, step=step)
    g = gpu_shape(model, hw, "bf16", "bf16", 1)
    return step_costs(single_level_load(4096, 64, 2, 512), g, model, "bf16", 1, params)


def test_kv_append_counted_once_with_an_attention_that_includes_it():
    from cascade_plan.calibration.aic.transfer import TransferRatios, transfer_glue

    probe_glue = GlueParams(per_layer_s=18e-6, per_token_layer_s=0.038e-6, per_step_s=41e-6, per_token_step_s=0.105e-6)
    own = _costs(probe_glue)                      # probe kernels: no append inside attention, glue has it
    imported = _costs(transfer_glue(probe_glue, TransferRatios(1.0, 1.0, 1.0, 1.0)))   # AIC: attention has it
    # by hand, Llama-3-8B at TP 1, 128 sequences: the append reads and writes K and V of 8 heads x 128:
    # 4 x 8 x 128 x 2 B = 8 KiB per token per layer of the glue's 180,224; plus one of five glue kernels
    per_token = 0.038e-6 * 8192 / 180_224
    append = 32 * (18e-6 / 5 + 128 * per_token)
    assert float(own.glue_s - imported.glue_s) == pytest.approx(append, rel=1e-9)
    # the per-sequence step takes it from the measured attention, so its glue no longer holds it ...
    assert float(own.ps_step_s - own.ps_attention_s - (imported.ps_step_s - imported.ps_attention_s)) == \
        pytest.approx(append, rel=1e-9)
    # ... and the cascade step, whose kernels come from the probe and do not write the cache, adds it once
    assert float(imported.cas_attention_s - own.cas_attention_s) == pytest.approx(append, rel=1e-9)
    assert float(imported.cas_step_s) == pytest.approx(float(own.cas_step_s), rel=1e-12)


def test_shipped_imports_leave_the_append_to_attention_and_the_probe_keeps_it():
    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.calibration.probe_params import step_parts_of
    from cascade_plan.inputs.hardware import load_hardware

    for gpu in ("h100-sxm", "a100-80gb", "b200"):
        assert step_parts_of(find_committed(load_hardware(gpu), source="aic")).glue.kv_append_in_attention
    assert not step_parts_of(find_committed(load_hardware("h200"), source="probe")).glue.kv_append_in_attention


# ---- GEMMs per shape --------------------------------------------------------------------------------

HBM, FLOP = 4.8e12, 989e12


def _gemm_rows(tmp_path):
    # two shapes of the same weight bytes, one 30% slower: a table over (M, weight bytes) blurs them
    rows = []
    for m in (1, 16, 256, 4096):
        for n, k, slow in ((4096, 14336, 1.3), (14336, 4096, 1.0), (4096, 4096, 1.0), (14336, 14336, 1.0)):
            roof = max((n * k * 2 + m * (n + k) * 2) / HBM, 2 * m * n * k / FLOP)
            rows.append(dict(gemm_dtype="bfloat16", m=m, n=n, k=k, latency=slow * 1.5 * roof * 1e3))
    cols = _table(tmp_path, rows, "gemm_perf", ["gemm_dtype", "m", "n", "k", "latency"])
    r = aic_fit.gemm_rows(cols, "bfloat16")
    eff = aic_fit.gemm_efficiency(r, "bf16", HBM, FLOP)
    return eff, aic_fit.gemm_shape_table(r, "bf16", HBM, FLOP, eff)


def _roof(m, n, k):
    return max((n * k * 2 + m * (n + k) * 2) / HBM, 2 * m * n * k / FLOP)


def test_gemms_are_read_per_shape(tmp_path):
    eff, shapes = _gemm_rows(tmp_path)
    for n, k, slow in ((4096, 14336, 1.3), (14336, 4096, 1.0)):
        want = slow * 1.5 * _roof(256, n, k)
        assert float(gemm_time_s(eff, 256, n, k, 2.0, HBM, FLOP, shapes)) == pytest.approx(want, rel=1e-3)
    # the ratio table alone gives both the same ratio, a blur of 1.5 and 1.95 (their cell's median, 1.725,
    # interpolated in log2 weight bytes towards the 1.5 of the next smaller cell)
    both = [float(gemm_time_s(eff, 256, n, k, 2.0, HBM, FLOP)) / _roof(256, n, k)
            for n, k in ((4096, 14336), (14336, 4096))]
    assert both[0] == pytest.approx(both[1]) and 1.6 < both[0] < 1.8


def test_gemm_between_shapes_interpolates_and_outside_falls_back(tmp_path):
    eff, shapes = _gemm_rows(tmp_path)
    # N halfway (in log2) between 4096 and 14336 at K = 14336: ratio halfway between 1.95 and 1.5
    n = float(np.sqrt(4096 * 14336))
    got = float(gemm_time_s(eff, 16, n, 14336, 2.0, HBM, FLOP, shapes)) / _roof(16, n, 14336)
    assert got == pytest.approx((1.95 + 1.5) / 2, rel=1e-3)
    # M between grid points: linear in log2 M between the neighbours' ratios (all 1.5 for this shape)
    assert float(gemm_time_s(eff, 100, 14336, 4096, 2.0, HBM, FLOP, shapes)) / _roof(100, 14336, 4096) == \
        pytest.approx(1.5, rel=1e-3)
    # a lm_head-like N beyond the widest measured: column blocks of the widest, its ratio (1.5 at K 4096)
    assert shapes.covers(128256, 4096)
    assert float(gemm_time_s(eff, 16, 128256, 4096, 2.0, HBM, FLOP, shapes)) / _roof(16, 128256, 4096) == \
        pytest.approx(1.5, rel=1e-3)
    # K beyond the measured shapes (or N below them): the (M, weight bytes) ratio table prices it
    assert not shapes.covers(4096, 65536) and not shapes.covers(128, 4096)
    assert float(gemm_time_s(eff, 16, 4096, 65536, 2.0, HBM, FLOP, shapes)) == \
        pytest.approx(float(gemm_time_s(eff, 16, 4096, 65536, 2.0, HBM, FLOP)))
    assert isinstance(eff, GemmEfficiency)


def test_aic_check_runs_aiconfigurators_own_estimate_beside_the_planner():
    pytest.importorskip("aiconfigurator_core")
    import json

    from typer.testing import CliRunner

    from cascade_plan.cli.app import app

    res = CliRunner().invoke(app, ["aic-check", "h100-sxm", "--quick", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert len(doc["rows"]) == 3 * 2                   # three model/TP pairs x batch 8, 128 at 4K
    s = doc["summary"]
    # the all-reduce per call is AIConfigurator's own table read at tokens x hidden elements
    assert s["allreduce_per_call_tp4_8_batch16_256"]["within_10pct"] == 1.0
    assert s["gemm"]["median_abs"] <= 0.03 and s["step"]["median_abs"] <= 0.10
    # inside its decode grid the planner interpolates its rows: 0.25% median here (the fit alone: 0.99%)
    assert s["attention"]["median_abs"] <= 0.005
    for r in doc["rows"]:
        assert r["aic_s"]["step"] == pytest.approx(sum(r["aic_s"][t]
                                                       for t in ("attention", "gemm", "glue", "allreduce")))
