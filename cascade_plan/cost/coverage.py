"""Does a workload stay inside what its calibration measured?

A calibrated kernel is a physical roofline times a correction surface fitted over the measured
(bytes per layer, rows per layer) of that kernel; beyond the measured range the surface is held at its
edge (bytes) or fades out (rows), so the prediction there is an extrapolation, not a measurement. Two
descriptions of what was measured, for a probe file and an AIConfigurator import alike:

* the measured grid in workload terms (CostParams.measured_grid, calibration/measured_grid.py): the
  longest context per sequence, the largest batch and the largest shared prefix per layer, for the
  per-sequence decode kernel and for the cascade kernels (an import's are the probe's, transferred);
* the correction surfaces' own ranges: rows per layer (sequences x KV heads per GPU: a model with more KV
  heads reaches more rows at the same batch) and the per-sequence kernel's KV read per layer.

Three checks follow, one note each: context, batch, and one layer's shared prefix (the prefix pass's
input and the L2 re-read term's working set). The notes join CostParams.notes in the verdict
(planning/verdict_evidence.py): a range over every source we have, and no verdict where that range
straddles 1x. Pure numpy."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.cost_model import StepCosts
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.ops.attention import FITTED, MEASURED, source_label
from cascade_plan.cost.surface import Surface

TOLERANCE = 1.1     # beyond the measured edge by more than 10%: a clamped surface is no longer the data


def _edge(s: Surface | None, axis: str) -> float | None:
    return None if s is None else float(10 ** getattr(s, axis)[-1])


def _size(b: float | None) -> str:
    assert b is not None   # only called on an edge that _beyond found
    return f"{b / 2**30:,.1f} GiB" if b >= 2**30 else f"{b / 2**20:,.0f} MiB"


def _beyond(value: float, edge) -> bool:
    return edge is not None and value > TOLERANCE * edge


def grid_notes(c: StepCosts, params: CostParams, layers: int, kv_heads: int, kv_bytes_per_token: float,
               longest_context: int, prefix_caching: bool = True) -> tuple[str, ...]:
    """Notes for every way the workload's steps leave the calibration's measured grid; () inside it or
    when the numbers are not measured (ideal, defaults)."""
    if params.mode != "calibrated":
        return ()
    grid = params.measured_grid or {}
    dec_grid, cas_grid = grid.get("decode") or {}, grid.get("cascade") or {}
    dec = params.decode if prefix_caching or params.decode_dup is None else params.decode_dup
    notes = []

    why = [f"the {what} kernels were measured up to {g['context_tokens']:,} tokens per sequence"
           for what, g in (("per-sequence decode", dec_grid), ("cascade", cas_grid))
           if _beyond(longest_context, g.get("context_tokens"))]
    ps_layer = float(np.max(c.ps_attention_bytes)) / layers
    edge = _edge(dec.surface, "log_bytes")
    if _beyond(ps_layer, edge):
        why.append(f"the per-sequence decode reads up to {_size(ps_layer)} of KV per layer, measured up to "
                   f"{_size(edge)}")
    if why:
        notes.append(f"contexts up to {longest_context:,} tokens are beyond the measured grid ({'; '.join(why)})")

    seqs = float(np.max(c.active_seqs))
    why = [f"the {what} kernels were measured up to {g['sequences']:,} sequences"
           for what, g in (("per-sequence decode", dec_grid), ("cascade", cas_grid))
           if _beyond(seqs, g.get("sequences"))]
    edge = _edge(dec.surface, "log_rows")
    if _beyond(seqs * kv_heads, edge):
        why.append(f"{seqs * kv_heads:,.0f} rows of one KV head per layer ({kv_heads} KV heads per GPU), measured up "
                   f"to {edge:,.0f}")
    if why:
        notes.append(f"a batch of {seqs:,.0f} sequences is beyond the measured grid ({'; '.join(why)})")

    prefix_layer = float(np.max(c.cas_prefix_bytes)) / layers if c.cas_prefix_bytes.size else 0.0
    edge = cas_grid.get("layer_prefix_bytes") or _edge(params.prefix.surface, "log_bytes")
    if _beyond(prefix_layer, edge):
        notes.append(f"one layer's shared prefix ({_size(prefix_layer)}: "
                     f"{prefix_layer * layers / kv_bytes_per_token:,.0f} tokens over all shared nodes) is beyond the "
                     f"{_size(edge)} per layer measured, so the prefix pass and the L2 re-read term extrapolate")
    if notes:   # the way back inside: measure this workload's own shapes on the GPU
        notes[-1] += f" (measure it: `{PROBE_COMMAND}`)"
    return tuple(notes)


PROBE_COMMAND = "cascade-plan probe --workload FILE"
NOT_MEASURED = {"ideal": "ideal (bytes at peak bandwidth; nothing measured)",
                "default": "default efficiencies (uncalibrated; nothing measured)"}


def attention_sources(c: StepCosts, weights: np.ndarray, params: CostParams) -> dict:
    """Per mode, where the run's attention times come from: the measured rows (interpolated inside their
    grid) or the fitted model (outside it, and why), with the share of decode steps each priced."""
    if params.mode in NOT_MEASURED:
        return {mode: {"source": NOT_MEASURED[params.mode], "measured_share": 0.0, "outside": None}
                for mode in ("per_sequence", "cascade")}
    out = {}
    w = np.asarray(weights, float)
    for mode, mask, why in (("per_sequence", c.ps_measured, c.ps_outside), ("cascade", c.cas_measured, c.cas_outside)):
        if mask is None:
            out[mode] = {"source": f"{FITTED} (this calibration carries no measured rows of {params.backend} at "
                                   "this KV dtype to interpolate)", "measured_share": 0.0, "outside": None}
            continue
        share = float((np.asarray(mask, float) * w).sum() / max(w.sum(), 1e-300))
        reason = why[0] if why else None
        out[mode] = {"source": source_label(share, reason, float(w.sum()), params.measured.label if params.measured
                                            else MEASURED), "measured_share": share, "outside": reason}
    return out


def sources_line(sources: dict) -> str:
    """One line for tables and the report: per-sequence and cascade attention sources."""
    ps, cas = sources["per_sequence"]["source"], sources["cascade"]["source"]
    if ps == cas:
        return f"Attention (both modes): {ps}"
    return f"Attention: per-sequence {ps}; cascade {cas}"
