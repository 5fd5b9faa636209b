"""Cross-check where both exist: AIConfigurator's tables against our probe on the same GPU (the H200).

Two halves. At import time (`pairs_at_import`, tables at hand): AIConfigurator's measured decode time at
every shape our probe timed that its grid covers (log-log interpolation between its four neighbouring
grid points), and its GEMM at the probe's matmul shape; stored in the imported file's `crosscheck`.
At validate time (`crosscheck`, no tables needed): kernel by kernel (decode attention per probe backend,
GEMM rate, streaming rate, all-reduce) and the per-step and run speedup of every shipped workload
through the planner with each calibration.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import numpy as np

from cascade_plan.calibration.calibration_file import ProbeData
from cascade_plan.calibration.holdout import config_key
from cascade_plan.calibration.probe_params import step_parts_of
from cascade_plan.calibration_schema.attention import AttentionConfigDoc
from cascade_plan.calibration_schema.imported import Crosscheck

PROBE_DECODE = {"flashinfer": ("flashinfer", "tensor_cores"), "triton": ("triton", None), "torch": ("torch", None)}
PROBE_MATMUL = 8192          # the probe's bf16 matmul ceiling is timed at 8192^3


def _aic_decode_grid(cols: dict, kernel: str) -> dict[tuple, dict[tuple, float]]:
    """(q heads, kv heads) -> {(log2 batch, log2 context): seconds} of the bf16 head-dim-128 rows."""
    sel = ((cols["head_dim"] == 128) & (cols["window_size"] == 0) & (cols["kv_cache_dtype"] == "bfloat16")
           & (cols["kernel_source"] == kernel) & (cols["latency"] > 0))
    grid: dict[tuple, dict[tuple, float]] = {}
    for i in np.flatnonzero(sel):
        key = (int(cols["num_heads"][i]), int(cols["num_key_value_heads"][i]))
        pt = (float(np.log2(cols["batch_size"][i])), float(np.log2(cols["isl"][i] + cols["step"][i])))
        grid.setdefault(key, {})[pt] = float(cols["latency"][i]) * 1e-3
    return grid


def _interp(points: dict[tuple, float], lb: float, lc: float) -> float | None:
    """Bilinear in (log2 batch, log2 context) of log time; None outside the measured grid."""
    bs = sorted({p[0] for p in points})
    cs = sorted({p[1] for p in points})
    if not (bs[0] <= lb <= bs[-1] and cs[0] <= lc <= cs[-1]):
        return None
    b0 = max(b for b in bs if b <= lb)
    b1 = min(b for b in bs if b >= lb)
    c0 = max(c for c in cs if c <= lc)
    c1 = min(c for c in cs if c >= lc)
    corners = [(b0, c0), (b1, c0), (b0, c1), (b1, c1)]
    if any(c not in points for c in corners):
        return None
    tb = 0.0 if b1 == b0 else (lb - b0) / (b1 - b0)
    tc = 0.0 if c1 == c0 else (lc - c0) / (c1 - c0)
    v = np.log([points[c] for c in corners])
    return float(np.exp((1 - tb) * (1 - tc) * v[0] + tb * (1 - tc) * v[1] + (1 - tb) * tc * v[2] + tb * tc * v[3]))


def pairs_at_import(attn_cols: dict, kernel: str, gemm_rows: dict, probe: ProbeData) -> dict:
    """The `crosscheck` section of an imported file for a GPU our probe measured."""
    grid = _aic_decode_grid(attn_cols, kernel)
    by_cfg: dict[str, tuple[AttentionConfigDoc, dict[str, float]]] = {}
    for backend, (b, v) in PROBE_DECODE.items():
        for r in probe.select(b, "decode_dup", v, "bf16"):
            _, probe_s = by_cfg.setdefault(config_key(r.config), (r.config, {}))
            probe_s[backend] = r.timed_s
    decode = []
    for c, probe_s in by_cfg.values():
        seqs = c.group_size * c.n_groups
        pts = grid.get((c.q_per_kv * c.num_kv_heads, c.num_kv_heads))
        t = _interp(pts, np.log2(seqs), np.log2(c.prefix_tokens + c.suffix_tokens)) if pts else None
        if t is not None:
            decode.append({"sequences": seqs, "context": c.prefix_tokens + c.suffix_tokens,
                           "q_per_kv": c.q_per_kv, "kv_heads": c.num_kv_heads, "aic_s": t,
                           "probe_s": probe_s})
    m = gemm_rows["bf16"]
    at = (m["m"] == PROBE_MATMUL) & (m["n"] == PROBE_MATMUL) & (m["k"] == PROBE_MATMUL)
    return {"probe_file": Path(probe.path).name, "aic_kernel": kernel, "decode": decode,
            "gemm_8192_s": float(m["t"][at][0]) if at.any() else None}


def _stats(ratio: np.ndarray) -> dict:
    if ratio.size == 0:
        return {"n": 0}
    err = ratio - 1.0
    return {"n": int(ratio.size), "median_ratio": float(np.median(ratio)), "median_ape": float(np.median(np.abs(err))),
            "p90_ape": float(np.percentile(np.abs(err), 90)), "within_10pct": float(np.mean(np.abs(err) <= 0.10))}


def decode_comparison(cross: Crosscheck | None) -> dict:
    """Per probe backend: AIConfigurator's time / the probe's on the shapes both measured, overall and split
    at 50 us (launch-dominated vs bandwidth-dominated)."""
    out = {}
    for backend in PROBE_DECODE:
        rows = [(d.aic_s, d.probe_s[backend]) for d in (cross.decode if cross else []) if backend in d.probe_s]
        if not rows:
            continue
        aic, pr = np.array(rows).T
        big = pr >= 50e-6
        out[backend] = {"all": _stats(aic / pr), "probe >= 50 us": _stats(aic[big] / pr[big]),
                        "probe < 50 us": _stats(aic[~big] / pr[~big])}
    return out


def kernel_table(aic: ProbeData, probe: ProbeData) -> list[dict]:
    """GEMM rate, streaming rate and all-reduce: the figures both files hold, side by side."""
    cross = aic.crosscheck
    pc, ac = probe.ceilings, aic.ceilings
    rows: list[dict] = []
    if cross is not None and cross.gemm_8192_s:
        rows.append({"what": "bf16 GEMM 8192^3 (FLOP/s)", "aic": 2 * PROBE_MATMUL**3 / cross.gemm_8192_s,
                     "probe": pc.bf16_matmul_flop_per_s})
    rows.append({"what": "bf16 GEMM rate, AIC: median of M,N,K >= 4096 (FLOP/s)", "aic": ac.bf16_matmul_flop_per_s,
                 "probe": pc.bf16_matmul_flop_per_s})
    rows.append({"what": "streaming read (B/s): AIC small-M GEMM vs probe read kernel",
                 "aic": ac.hbm_read_bytes_per_s,
                 "probe": pc.hbm_read_bytes_per_s})
    rows += gemm_rows(aic, probe)
    from cascade_plan.calibration.aic.moe_crosscheck import moe_rows

    rows += moe_rows(step_parts_of(aic).moe, step_parts_of(probe).moe)
    ar = aic.step_parts_doc.allreduce.get("2") if aic.step_parts_doc else None
    par = probe.step_parts_doc.allreduce.get("2") if probe.step_parts_doc else None
    if ar:
        for key, what in (("latency_s", "all-reduce, 2 GPUs: latency (s)"),
                          ("bytes_per_s", "all-reduce, 2 GPUs: rate (B/s)")):
            rows.append({"what": what, "aic": getattr(ar, key), "probe": getattr(par, key) if par else None})
        from cascade_plan.calibration.allreduce_source import with_measured_curves

        a_fit = step_parts_of(aic).allreduce_for(2)      # each priced from its measured curve
        p_fit = with_measured_curves(step_parts_of(probe), probe.step_ops).allreduce_for(2) if par else None
        for size in (64 * 1024, 2 * 2**20, 4 * 2**20, 16 * 2**20):     # a few decode steps' worth of hidden states
            rows.append({"what": f"all-reduce, 2 GPUs, {size // 1024:,} KiB message (s)",
                         "aic": float(a_fit.time_s(size)),
                         "probe": float(p_fit.time_s(size)) if p_fit else None})
    for r in rows:
        r["ratio"] = r["aic"] / r["probe"] if r["probe"] else None
    return rows


# Llama-3-8B's GEMMs at TP 1 (N, K): qkv, o, gate_up, down, lm_head; tokens per step M.
GEMM_SHAPES = ((6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096))
GEMM_M = (1, 16, 64, 256, 1024, 4096)


def gemm_rows(aic: ProbeData, probe: ProbeData) -> list[dict]:
    """Where the probe file has its own GEMM ratio table: Llama-3-8B's GEMMs priced with each table
    (same roofline, datasheet peaks), AIC time / probe time, median and range per M band."""
    if not (aic.step_parts_doc and probe.step_parts_doc):
        return []
    a, p = step_parts_of(aic), step_parts_of(probe)
    if "bf16" not in a.gemm or "bf16" not in p.gemm:
        return []
    from cascade_plan.cost.step_parts import gemm_time_s
    from cascade_plan.inputs.hardware import load_hardware

    hw = load_hardware(probe.require_hardware_id())
    out = []
    for lo, hi, name in ((1, 64, "M <= 64 (memory-bound)"), (256, 4096, "M >= 256")):
        ms = [m for m in GEMM_M if lo <= m <= hi]
        r = np.array([gemm_time_s(a.gemm["bf16"], m, n, k, 2.0, hw.hbm_bytes_per_s, hw.dense_bf16_flop_per_s)
                      / gemm_time_s(p.gemm["bf16"], m, n, k, 2.0, hw.hbm_bytes_per_s, hw.dense_bf16_flop_per_s)
                      for m in ms for n, k in GEMM_SHAPES], float)
        out.append({"what": f"Llama-3-8B bf16 GEMMs, {name}: AIC time / probe time (median; range "
                            f"{r.min():.2f}-{r.max():.2f})", "aic": float(np.median(r)), "probe": 1.0})
    return out


def workload_table(aic: ProbeData, probe: ProbeData, backend: str = "flashinfer") -> list[dict]:
    """Every shipped workload on this GPU through the planner with each calibration (same backend)."""
    from cascade_plan.calibration.probe_params import params_from_probe
    from cascade_plan.cost.estimate import estimate
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.workload import load_scenario
    from cascade_plan.resources import data_dir

    hw = load_hardware(probe.require_hardware_id())
    rows = []
    for path in sorted(data_dir("workloads").glob("*.yaml")):
        scn = msgspec.structs.replace(load_scenario(path), hardware=hw)
        ep, ea = (estimate(scn, params_from_probe(f, backend, scn.kv_dtype, hw, scn.model)) for f in (probe, aic))
        rows.append({"workload": path.stem,
                     "first_step_speedup": {"probe": float(ep.steps[0].speedup), "aic": float(ea.steps[0].speedup)},
                     "final_step_speedup": {"probe": float(ep.final_step.speedup), "aic": float(ea.final_step.speedup)},
                     "final_per_sequence_step_s": {"probe": ep.final_step.per_sequence.step_s,
                                                   "aic": ea.final_step.per_sequence.step_s},
                     "final_cascade_step_s": {"probe": ep.final_step.cascade.step_s,
                                              "aic": ea.final_step.cascade.step_s},
                     "run_speedup": {"probe": ep.run_speedup, "aic": ea.run_speedup}})
    return rows


def crosscheck(aic: ProbeData, probe: ProbeData) -> dict:
    cross = aic.crosscheck
    return {"gpu": probe.hardware_id, "probe_file": Path(probe.path).name, "aic_file": Path(aic.path).name,
            "aic_kernel": cross.aic_kernel if cross else None, "decode": decode_comparison(cross),
            "kernels": kernel_table(aic, probe), "workloads": workload_table(aic, probe)}
