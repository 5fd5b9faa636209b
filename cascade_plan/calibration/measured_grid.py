"""The grid a calibration measured, in the workload's terms: the longest context per sequence, the
largest batch, and the largest shared prefix per layer (all groups' prefixes of one layer, the L2
working set), separately for the per-sequence decode kernel and for the cascade kernels, which may
come from different sources (an AIConfigurator import measures decode and transfers the cascade
kernels from the probe). cost/coverage.py checks workloads against it. Also the rows themselves, as the
planner interpolates them (per backend and KV dtype: cost/ops/attention.py), and the attention shapes
they cover."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from cascade_plan.calibration.fitting import KV_ELEMENT_BYTES, Configs, config_column
from cascade_plan.calibration.holdout import fit_trained_on, is_tree
from cascade_plan.calibration_schema.kernel_fit import BackendFit
from cascade_plan.cost.ops.attention import MeasuredAttention

if TYPE_CHECKING:
    from cascade_plan.calibration.calibration_file import ProbeData

KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def grid_of_configs(cfgs: Configs) -> dict | None:
    """{context_tokens, sequences, layer_prefix_bytes} over probe-style configurations (None: none)."""
    if not cfgs:
        return None
    P, S, G, N, H, D, KV = (config_column(cfgs, k) for k in ("prefix_tokens", "suffix_tokens", "group_size",
                                                             "n_groups", "num_kv_heads", "head_dim", "kv_dtype"))
    # K and V of one token, one layer, this GPU's KV heads
    kvb = [2 * h * d * KV_BYTES.get(kv, 2.0) for h, d, kv in zip(H, D, KV)]
    return {"context_tokens": int(max(p + s for p, s in zip(P, S))),
            "sequences": int(max(g * n for g, n in zip(G, N))),
            "layer_prefix_bytes": float(max(n * p * b for n, p, b in zip(N, P, kvb)))}


def measured_grid(probe: ProbeData, kv_dtype: str | None = None) -> dict | None:
    """{"decode": grid, "cascade": grid} of a calibration: written by the importer (grid.measured), else
    computed from the probe's measurement rows (of `kv_dtype` only, where given: a grid measured in bf16
    says nothing about fp8); None when neither exists. Once per document and dtype: the result is shared."""
    return probe.derived(f"measured_grid:{kv_dtype}", lambda p: _measured_grid(p, kv_dtype))


def _measured_grid(probe: ProbeData, kv_dtype: str | None) -> dict | None:
    stored = msgspec.to_builtins(probe.grid.measured) if probe.grid.measured is not None else None
    if stored:
        return stored
    rows = [r for r in probe.measurements if (kv_dtype is None or r.config.kv_dtype == kv_dtype)
            and not is_tree(r.config)]
    if not rows:
        return None
    out = {"decode": grid_of_configs([r.config for r in rows if r.kernel.startswith("decode")]),
           "cascade": grid_of_configs([r.config for r in rows if r.kernel.startswith("cascade")])}
    return {k: v for k, v in out.items() if v} or None


def coverage_notes(probe: ProbeData, model, has_mla_fit: bool | str = False, kv_dtype: str | None = None,
                   backend: str | None = None) -> list[str]:
    """Where a model's attention shape lies outside what the probe measured: query heads per KV head and
    head dim of the rows of this KV dtype and backend where given (fp8 may cover fewer shapes than bf16),
    else the grid's axes."""
    from cascade_plan.calibration.backends import BACKENDS

    def shapes(p: ProbeData) -> tuple[list[int], list[int], bool]:
        grid = p.grid
        kernels_of = {b for b, _ in BACKENDS.get(backend, {}).values()} if backend is not None else None
        rows = ([m.config for m in p.measurements
                 if m.config.kv_dtype == kv_dtype and (kernels_of is None or m.backend in kernels_of)
                 and not is_tree(m.config)]
                if kv_dtype else [])
        if rows:
            return sorted({c.q_per_kv for c in rows}), sorted({c.head_dim for c in rows}), True
        return sorted(set(grid.axes.q_per_kv or [])), [grid.head_dim] if grid.head_dim else [], False

    q_per_kv, head_dims, by_rows = probe.derived(f"measured_shapes:{kv_dtype}:{backend}", shapes)
    what = f" ({kv_dtype} KV rows)" if by_rows and kv_dtype != "bf16" else ""
    notes = []
    if model.attention == "mla" and has_mla_fit == "probe":
        pass     # the probe's own MLA rows and fits: heads and grid are checked where they are interpolated
    elif model.attention == "mla" and has_mla_fit:
        notes.append("MLA decode measured (AIConfigurator's MLA module); its cascade passes are GQA kernels, "
                     "transferred")
    elif model.attention == "mla":
        notes.append("the probe measured GQA kernels; MLA's absorbed decode (one 576-wide latent for all query "
                     "heads) is outside them, so these numbers extrapolate")
    else:
        g = model.num_q_heads // max(model.num_kv_heads, 1)
        if q_per_kv and g > max(q_per_kv):
            notes.append(f"{g} query heads per KV head is beyond the measured {max(q_per_kv)}{what}")
        elif q_per_kv and g < min(q_per_kv):
            notes.append(f"{g} query head{'s' if g > 1 else ''} per KV head is below the measured "
                         f"{min(q_per_kv)}{what}")
        if head_dims and model.head_dim not in head_dims:
            notes.append(f"head dim {model.head_dim} differs from the measured {', '.join(map(str, head_dims))}{what}")
    return notes


def measured_rows(probe: ProbeData, backend: str, kv_dtype: str,
                  fits: BackendFit | None = None) -> MeasuredAttention | None:
    """The rows the planner interpolates for one backend and KV dtype (rows of that dtype only), per
    planner kernel: decode over shared pages, decode over private copies, the whole cascade (and its prefix pass
    timed alone, with which a shape the fit never saw anchors that pass on its own); each with
    the backend's fitted time at its configuration (the planner interpolates the rows' ratio to the fit), and
    whether the fit was trained on it."""
    from cascade_plan.calibration.backends import BACKENDS
    from cascade_plan.calibration.fitting import predict_kind

    src = BACKENDS[backend]
    db, dv = src["decode"]
    tb, tv = src.get("total", src["prefix"])
    pb, pv = src["prefix"]
    out: dict[str, list] = {}
    pages: set[int] = set()
    for kernel, (b, name, v, kind) in {"per_sequence": (db, "decode_shared", dv, "decode_shared"),
                                       "per_sequence_dup": (db, "decode_dup", dv, "decode_dup"),
                                       "cascade": (tb, "cascade_total", tv, "cascade_total"),
                                       "cascade_prefix": (pb, "cascade_prefix", pv, "prefix")}.items():
        sel = probe.select(b, name, v, kv_dtype)
        cfgs = [r.config for r in sel]
        pages.update(c.page_size for c in cfgs)
        fit = (predict_kind(fits, kind, cfgs, probe.l2_bytes).tolist() if fits and cfgs else [None] * len(sel))
        # whether the fit was trained on the row: a shape with no such row takes its level from its own rows
        # outside their grid (cost/ops/shape_anchor.py)
        out[kernel] = [((c.q_per_kv, c.num_kv_heads, c.head_dim),
                        (c.n_groups, c.group_size, c.prefix_tokens, c.suffix_tokens), r.timed_s, f,
                        fit_trained_on(fits, c))
                       for r, c, f in zip(sel, cfgs, fit)]
    if not any(out.values()):
        return None
    dims = {r[0][2] for k in ("per_sequence", "per_sequence_dup") for r in out.get(k, ())}
    tiles = decode_tiles(probe, backend, kv_dtype, dims)
    return MeasuredAttention(backend, kv_dtype, out, decode_tile_tokens=tiles,
                             decode_tile_share=decode_tile_shares(out, tiles),
                             page_tokens=pages.pop() if len(pages) == 1 else 0)


def decode_tile_shares(rows: dict[str, list], tiles: dict[int, int]) -> dict[str, float]:
    """Per decode kernel with rows that show it (tiles.partial_tile_shares, every shape pooled): the median share of
    a partly filled tile's empty part its time carries, held within [0, 1]; a kernel none of whose shapes holds such
    rows is absent (the kernel's own rule then: the whole tile)."""
    from cascade_plan.cost.ops.base import median0
    from cascade_plan.cost.ops.tiles import partial_tile_shares

    out = {}
    for kernel in ("per_sequence", "per_sequence_dup"):
        by_shape: dict[tuple, list] = {}
        for r in rows.get(kernel, ()):
            by_shape.setdefault(r[0], []).append(r)
        shares = [x for shape, sel in by_shape.items() if tiles.get(shape[2])
                  for x in partial_tile_shares(np.array([r[1] for r in sel], float), np.array([r[2] for r in sel]),
                                               tiles[shape[2]])]
        if shares:
            out[kernel] = min(max(float(median0(np.array(shares))), 0.0), 1.0)
    return out


def decode_tiles(probe: ProbeData, backend: str, kv_dtype: str, head_dims) -> dict[int, int]:
    """Head dim -> KV tokens per tile of the backend's per-sequence decode at each of `head_dims`, where it walks
    whole tiles on the probe's GPU (cost/ops/tiles.py; empty elsewhere)."""
    from cascade_plan.calibration.backends import WHOLE_TILE_DECODE
    from cascade_plan.cost.ops.tiles import fa2_decode_tile_tokens

    cc = probe.device.compute_capability
    if backend not in WHOLE_TILE_DECODE or cc is None:
        return {}
    tiles = {d: fa2_decode_tile_tokens(d, KV_ELEMENT_BYTES[kv_dtype], cc) for d in head_dims}
    return {d: t for d, t in tiles.items() if t}
