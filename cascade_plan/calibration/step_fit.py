"""Fit StepParts (GEMM ratio tables, glue, all-reduce) from the probe's op-level rows (``step_ops``).
Whole-step rows (``steps``) are never used here: they only validate (calibration/step_validation.py).

GEMM: per weight dtype, measured time / roofline over (M, weight bytes), the roofline taken with the
hardware profile's datasheet peaks (what the cost model multiplies). Every row was timed alone in its
own CUDA graph, so it holds the latency of a kernel that must wait for the one before it (~4 us on the
H200). The fit keeps it, as the attention fits keep it in their per-launch overhead: inside a step's
graph each GEMM waits for the kernel before it to drain the GPU, which costs about that, not the
0.9 us an empty kernel adds back to back. (Removing it, v1 of this fit, predicted whole steps 2-5% short
on every backend: docs/probe-notes.md.) ``LAUNCH_CORRECTION`` keeps that variant available.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from cascade_plan.calibration.step_parts_doc import step_parts_json
from cascade_plan.calibration_schema.device import Ceilings
from cascade_plan.calibration_schema.steps import StepOpRow
from cascade_plan.cost.step_parts import (
    AllReduceFit,
    Composition,
    GemmEfficiency,
    GlueParams,
    StepParts,
    carried_curve,
)
from cascade_plan.gpus import GPUS

if TYPE_CHECKING:
    from cascade_plan.calibration.calibration_file import ProbeData
    from cascade_plan.inputs.hardware import HardwareProfile

LAUNCH_CORRECTION = False   # subtract (graph_single_kernel_s - graph_kernel_launch_s) from each op row

# GPU id -> (NVLink bandwidth per GPU per direction, bytes/s; source), from cascade_plan/gpus.py
NVLINK_BASIS = {g.id: g.nvlink for g in GPUS if g.nvlink is not None}


def _launch_correction(ceilings: Ceilings | None) -> tuple[float, float]:
    """(seconds removed from each op row, per-GEMM overhead kept apart from the ratio); no ceilings: none."""
    single = float(ceilings.graph_single_kernel_s or 0.0) if ceilings is not None else 0.0
    launch = float(ceilings.graph_kernel_launch_s or 0.0) if ceilings is not None else 0.0
    return (max(single - launch, 0.0) if LAUNCH_CORRECTION else 0.0), launch


def gemm_roofline_s(m, n, k, element_bytes, hbm_bytes_per_s, flop_per_s):
    m = np.asarray(m, float)
    return np.maximum((n * k * element_bytes + m * (n + k) * 2.0) / hbm_bytes_per_s, 2.0 * m * n * k / flop_per_s)


def _at(r: StepOpRow, *fields: str) -> tuple:
    """A row's config fields that its op must carry (the step-op config's fields are optional: other ops have
    other ones), and its median."""
    got = tuple(getattr(r.config, f) for f in fields)
    if any(v is None for v in got) or r.median_s is None:
        missing = [f for f, v in zip(fields, got) if v is None] or ["median_s"]
        raise ValueError(f"a {r.op} row has no {missing[0]}")
    return got


def _median(r: StepOpRow) -> float:
    if r.median_s is None:
        raise ValueError(f"a {r.op} row has no median_s")
    return r.median_s


def fit_gemm(rows: Sequence[StepOpRow], dtype: str, hw: HardwareProfile,
             ceilings: Ceilings | None) -> GemmEfficiency | None:
    sel = [r for r in rows if r.op == "gemm" and r.config.dtype == dtype]
    if len(sel) < 4:
        return None
    corr, launch = _launch_correction(ceilings)
    eb = 1.0 if dtype == "fp8" else 2.0
    flop = hw.flop_per_s("fp8" if dtype == "fp8" else "bf16")
    mnk = [_at(r, "m", "n", "k") for r in sel]
    ms = sorted({m for m, _, _ in mnk})
    wbs = sorted({n * k * eb for _, n, k in mnk})
    logs: dict[tuple[int, float], list[float]] = {}
    for r, (m, n, k) in zip(sel, mnk):
        roof = float(gemm_roofline_s(m, n, k, eb, hw.hbm_bytes_per_s, flop))
        t = max(_median(r) - corr - launch, 0.05 * _median(r))
        logs.setdefault((m, n * k * eb), []).append(math.log(t / roof))
    ratio = np.full((len(ms), len(wbs)), np.nan)
    for (m, w), v in logs.items():
        ratio[ms.index(m), wbs.index(w)] = math.exp(sum(v) / len(v))   # geometric mean of equal-size shapes
    for j in range(len(wbs)):   # a missing point (a skipped shape): interpolate along M
        col = ratio[:, j]
        ok = np.isfinite(col)
        if not ok.any():
            col[:] = 1.0
        elif not ok.all():
            col[~ok] = np.interp(np.flatnonzero(~ok), np.flatnonzero(ok), col[ok])
    return GemmEfficiency(dtype=dtype, log2_m=tuple(math.log2(m) for m in ms),
                          log2_weight_bytes=tuple(math.log2(w) for w in wbs),
                          ratio=tuple(tuple(float(x) for x in row) for row in ratio), overhead_s=launch)


def _linear_fit(x, t) -> tuple[float, float]:
    """t ~ a + b x, least squares in relative error (every point counts alike), a, b >= 0."""
    x, t = np.asarray(x, float), np.asarray(t, float)
    A = np.stack([1.0 / t, x / t], axis=1)
    (a, b), *_ = np.linalg.lstsq(A, np.ones_like(t), rcond=None)
    if b < 0:
        a, b = float(np.median(t)), 0.0
    if a < 0:
        a, b = 0.0, float(np.median(t / np.maximum(x, 1e-30)))
    return float(a), float(b)


def fit_glue(rows: Sequence[StepOpRow], variant: str, ceilings: Ceilings | None, model: str = "llama-3-8b",
             tp: int = 1) -> GlueParams | None:
    corr, _ = _launch_correction(ceilings)

    def pick(op: str) -> list[StepOpRow]:
        return [r for r in rows if r.op == op and r.config.variant == variant
                and r.config.model == model and r.config.tp == tp]

    lay, stp = pick("glue_layer"), pick("glue_step")
    if len(lay) < 2 or len(stp) < 2:
        return None
    a, b = _linear_fit([_at(r, "m")[0] for r in lay], [_median(r) - corr for r in lay])
    c, d = _linear_fit([_at(r, "m")[0] for r in stp], [_median(r) - corr for r in stp])
    from cascade_plan.cost.glue_widths import (
        layer_bytes_per_token,
        step_bytes_per_token,
    )
    from cascade_plan.inputs.model_spec import load_preset

    spec = load_preset(model)       # the basis other shapes' per-token costs scale from
    return GlueParams(variant=variant, per_layer_s=a, per_token_layer_s=b, per_step_s=c, per_token_step_s=d,
                      layer_bytes_per_token=layer_bytes_per_token(spec, tp),
                      step_bytes_per_token=step_bytes_per_token(spec, tp), basis=f"{model} TP{tp}")


def allreduce_curve(rows: Sequence[StepOpRow], gpus: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The probe's measured all-reduce curve for one GPU count: (message bytes ascending, median seconds);
    the rows' `bytes` are bytes (the probe builds bf16 tensors of bytes / 2 elements)."""
    by: dict[float, list[float]] = {}
    for r in rows:
        if r.op == "allreduce" and r.correct and _at(r, "gpus")[0] == gpus:
            by.setdefault(float(_at(r, "bytes")[0]), []).append(float(_median(r)))
    sizes = sorted(by)
    return tuple(sizes), tuple(float(np.median(by[b])) for b in sizes)


def fit_allreduce(rows: Sequence[StepOpRow], hardware_id: str | None) -> dict[int, AllReduceFit]:
    """Per measured GPU count the measured curve (a table; NCCL switches protocols with message size, so a
    line misses it: 2-4 MB took 34-40 us on two H200s where the line gave 19), plus latency + bytes / rate
    as a one-line summary; 4 and 8 GPUs, where not measured, the measured curve carried over (a model)."""
    out: dict[int, AllReduceFit] = {}
    by_n: dict[int, list[StepOpRow]] = {}
    for r in rows:
        if r.op == "allreduce" and r.correct:
            by_n.setdefault(_at(r, "gpus")[0], []).append(r)
    for n, rs in by_n.items():
        if len(rs) < 3:
            continue
        sizes = [_at(r, "bytes")[0] for r in rs]
        lat, inv_bw = _linear_fit(sizes, [_median(r) for r in rs])
        tb, ts = allreduce_curve(rs, n)
        out[n] = AllReduceFit(gpus=n, latency_s=lat, bytes_per_s=1.0 / max(inv_bw, 1e-15), origin="measured",
                              algorithm="NCCL",
                              basis=f"NCCL all-reduce of bf16, {len(rs)} message sizes "
                                    f"{min(sizes)}-{max(sizes)} B, "
                                    "marginal cost inside a CUDA graph; the measured curve, interpolated",
                              table_bytes=tb, table_s=ts)
    if out:
        base_n = max(out)
        base = out[base_n]
        busbw = base.bytes_per_s * 2 * (base_n - 1) / base_n      # what each GPU's links carried
        link, source = NVLINK_BASIS.get(hardware_id or "", (None, "no NVLink figure on file for this GPU"))
        for n in (4, 8):
            if n in out:
                continue
            tb, ts = carried_curve(base, n)
            out[n] = AllReduceFit(
                gpus=n, latency_s=base.latency_s * math.log2(n) / math.log2(base_n),
                bytes_per_s=busbw / (2 * (n - 1) / n), origin="extrapolated", algorithm="NCCL (modelled)",
                basis=(f"from the measured {base_n}-GPU curve: bus bandwidth per GPU kept ({busbw / 1e9:.0f} GB/s; "
                       f"NVSwitch gives every GPU its full links at any count; {source}"
                       + (f", {link / 1e9:.0f} GB/s per direction" if link else "")
                       + f"), ring traffic 2(n-1)/n; latency x log2(n)/log2({base_n}) (NCCL's tree for small "
                         "messages)"), table_bytes=tb, table_s=ts)
    return out


# The composition correction is fitted wherever layer_graph rows exist and stored in the step parts. On the
# H200 (2026-12-01) a layer back to back ran 4-9% faster than its isolated ops summed (factor 0.91-0.96 for
# M <= 512), yet applying it made the whole steps worse (median |error| 2.1 -> 3.8%, worst 10.3 -> 12.6% on
# Triton): the isolated rows' dependent-kernel latency stands in for what attention and the layer boundary
# cost in a real step. So it ships measured but not applied (docs/probe-notes.md); COMPOSE_APPLY turns it on.
COMPOSE_APPLY = False


def fit_composition(rows: Sequence[StepOpRow], gemm: dict, glue: GlueParams,
                    hw: HardwareProfile, model: str = "llama-3-8b") -> Composition | None:
    """factor(M) = one layer's GEMMs + glue timed back to back in one graph (``layer_graph`` rows, per layer)
    over the same layer priced from the isolated-op fits (GEMM tables + fused glue per layer), per weight dtype.
    The layer's shapes come from the GEMM rows of the same model and TP (qkv, o, gate_up, down). Fitted on the
    glue fit's basis model only: the factor follows the layer's size (fp8's quantise kernels are a fixed cost per
    GEMM: 7-11% of a Llama-3-8B layer at M <= 128, 15-20% of a Qwen3-0.6B one), so a median over models of several
    sizes would describe none of them; the small models' layer graphs are measured beside it."""
    from cascade_plan.cost.step_parts import gemm_time_s

    sel = [r for r in rows if r.op == "layer_graph" and r.config.model == model]
    shapes: dict[tuple, dict[str, tuple[int, int]]] = {}
    for r in rows:
        if r.op == "gemm":
            model, tp, gemm_name, n, k = _at(r, "model", "tp", "gemm", "n", "k")
            shapes.setdefault((model, tp), {})[gemm_name] = (n, k)
    by: dict[str, dict[int, list[float]]] = {}
    basis = set()
    for r in sel:
        model, tp, dtype, m_rows, layers, glue_variant = _at(r, "model", "tp", "dtype", "m", "layers", "glue")
        sh = shapes.get((model, tp), {})
        if dtype not in gemm or not all(g in sh for g in ("qkv", "o", "gate_up", "down")):
            continue
        if r.per_layer_s is None:
            raise ValueError("a layer_graph row has no per_layer_s")
        eb = 1.0 if dtype == "fp8" else 2.0
        flop = hw.flop_per_s("fp8" if dtype == "fp8" else "bf16")
        m = float(m_rows)
        pred = sum(float(gemm_time_s(gemm[dtype], m, n, k, eb, hw.hbm_bytes_per_s, flop))
                   for n, k in (sh[g] for g in ("qkv", "o", "gate_up", "down")))
        pred += glue.per_layer_s + m * glue.per_token_layer_s
        by.setdefault(dtype, {}).setdefault(int(m), []).append(r.per_layer_s / pred)
        basis.add(f"{model} TP{tp} ({layers} layers in one graph, {glue_variant} glue)")
    if "bf16" not in by:
        return None
    ms = sorted(by["bf16"])
    factor = {}
    for dt, d in by.items():
        if sorted(d) != ms:
            continue
        factor[dt] = tuple(float(np.median(d[m])) for m in ms)
    log2_m = tuple(math.log2(m) for m in ms)
    over = {}
    for dt, d in by.items():
        if dt == "bf16":
            continue
        own = sorted(m for m in d if ms[0] <= m <= ms[-1])   # where the bf16 curve is measured too
        if own:
            base = np.interp(np.log2(own), log2_m, factor["bf16"])
            over[dt] = (tuple(math.log2(m) for m in own),
                        tuple(float(np.median(d[m]) / b) for m, b in zip(own, base)))
    return Composition(log2_m=log2_m, factor=factor, applied=COMPOSE_APPLY,
                       basis="layer_graph rows of " + ", ".join(sorted(basis)), over_bf16=over)


def fit_step_parts(probe: ProbeData, hw: HardwareProfile, source: str) -> StepParts | None:
    """StepParts from a probe calibration's step_ops (None when it has none)."""
    rows = probe.step_ops
    if not rows:
        return None
    ceil = probe.ceilings
    gemm = {d: e for d in ("bf16", "fp8") if (e := fit_gemm(rows, d, hw, ceil)) is not None}
    if "bf16" not in gemm:
        return None
    variant = probe.step_glue
    glue = fit_glue(rows, variant, ceil) or fit_glue(rows, "torch", ceil) or GlueParams()
    fit_models = sorted({_at(r, "model", "tp") for r in rows if r.op == "gemm"})
    models = ", ".join(f"{m} TP{t}" for m, t in fit_models)
    notes: tuple[str, ...] = (
             f"GEMMs fitted on {models} shapes only; other models are predicted from the (M, weight bytes) table",
             f"glue: {glue.variant} ({'FlashInfer kernels' if glue.variant == 'fused' else 'plain torch'}), fitted "
             f"on the {glue.basis} layer; other shapes' per-token glue scaled by their glue bytes per token per GPU "
             "(cost/glue_widths.py)")
    comp = fit_composition(rows, gemm, glue, hw)
    if comp is not None:
        notes = notes + (f"composition: a layer's GEMMs + glue back to back in one graph / the same ops priced alone "
                         f"= {', '.join(f'{x:.2f}' for x in comp.factor['bf16'])} (bf16) at M = "
                         f"{', '.join(str(round(2 ** v)) for v in comp.log2_m)}; {comp.basis}; "
                         + ("applied" if comp.applied else "measured, not applied (it worsens whole steps)"),)
        for dt, (lm, f) in comp.over_bf16.items():
            notes = notes + (f"{dt} weights: a dense layer back to back over a bf16 layer = "
                             f"{', '.join(f'{x:.2f}' for x in f)} at M = {', '.join(str(round(2 ** v)) for v in lm)} "
                             "(each GEMM's activation quantised in the step, not in the isolated rows); applied",)
    parts = StepParts(gemm=gemm, glue=glue, allreduce=fit_allreduce(rows, probe.hardware_id),
                      source=f"probe:{source}", notes=notes, composition=comp)
    from cascade_plan.calibration.moe_layer_fit import fit_moe_layer
    from cascade_plan.calibration.moe_rows import with_moe_tables

    moe_layer = fit_moe_layer(rows, with_moe_tables(parts, rows, path=probe.path), hw)
    # not in `notes`: every estimate on this GPU lists those; the fit says what it is in its own fields
    return parts if moe_layer is None else msgspec.structs.replace(parts, moe_layer=moe_layer)


def fitted_step_parts_json(probe: ProbeData, hw: HardwareProfile, source: str) -> dict | None:
    p = fit_step_parts(probe, hw, source)
    return step_parts_json(p) if p is not None else None
