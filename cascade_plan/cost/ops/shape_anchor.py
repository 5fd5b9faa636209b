"""A shape the fit never saw takes its level from its own rows.

The fitted kernel models are trained on the probe's core shapes (head dim 128; query groups other than 6 and 12;
see calibration/holdout.py). A shape outside them (head dim 64 or 256, groups of 6 or 12, one KV head per GPU) is
priced by a fit that never saw it, and its measured rows show by how much that fit is off: FlashInfer's cascade at
head dim 64 ran 33-40% over the fit, its decode over shared pages at groups of 12 25% under it. Inside those rows'
grid the planner interpolates them (cost/ops/attention.py); outside it, the fitted time is scaled by the rows'
measured/fitted ratio, regressed at the query with Gaussian weights over how far each row's work lies from it: the
nearest rows decide, and far from all of them the nearest one does (the shape's level, not the core shapes'). Pure
numpy.

Distance is measured in a kernel's work, not in the grid's raw axes: a factor of two in sequences, sequences per
group or context tokens counts one unit, and so does a quarter of the tokens read moving between the shared
prefix and the private suffixes (a first decode step, with no suffix yet, lies next to a row with a 16-token
suffix, not next to a row of another batch at the same suffix).

A cascade is anchored pass by pass where the shape's rows time its prefix pass on its own: the fitted prefix pass
scaled by the prefix rows' ratio (at a distance in the prefix pass's own work: sequences, sequences per group,
prefix tokens), the rest of the cascade (suffix pass, merge, what the passes' overlap leaves) by the rest's ratio
(total minus prefix, measured over fitted). A first step, all prefix, then takes the prefix pass's level, not the
level of rows whose time is mostly suffix: Triton's head-dim-256 prefix pass ran 17-20% over the fit where its
suffix pass ran 4-6% over it. At a row, within the spread of the prefix ratios of the rows that share its prefix
pass's work (passes_ratio)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from cascade_plan.cost.ops.attention import MeasuredAttention, ShapeKey, SingleLevel

# One unit of distance per factor of two along the batch and context axes; the Gaussian's width in those units.
BANDWIDTH = 1.0
# Units of distance across the whole range of the suffix's share of the tokens read (0 to 1).
SUFFIX_SHARE_UNITS = 4.0
# A query farther than this from every anchoring row keeps the fitted time (a factor of eight in batch or context,
# or three quarters of the suffix share): Triton's one fp8 row of a small-model shape, at a first step with no
# suffix, priced that shape's final step (two thirds of the tokens private) 36% slow when nothing bounded the reach.
MAX_DISTANCE = 3.0
# Where the ratio comes from, in the words the planner's outputs use: after the reason a step lies outside the rows'
# grid, and as a step's attention source.
ANCHORED = ("the fitted model scaled to this shape's own measured rows (the fit never trained on the shape, or not "
            "this far)")
ANCHORED_SOURCE = "fitted model scaled to this shape's measured rows"


def anchor_coords(points: np.ndarray, kernel: str) -> np.ndarray:
    """(N, 4) probe points (n_groups, group_size, prefix_tokens, suffix_tokens) as (N, 4) coordinates of work:
    log2 sequences, log2 sequences per group, log2 context tokens, and the suffix's share of the tokens the kernel
    reads (a cascade reads each prefix once per group, a per-sequence decode once per sequence). The cascade's
    prefix pass ("cascade_prefix") reads no suffix: its context is the prefix, its suffix share 0."""
    p = np.asarray(points, float)
    ng, gs, pre, suf = (np.maximum(p[:, k], 0.0) for k in range(4))
    seqs = ng * gs
    if kernel == "cascade_prefix":
        share, suf = np.zeros_like(pre), np.zeros_like(suf)
    elif kernel == "cascade":
        share = seqs * suf / np.maximum(ng * pre + seqs * suf, 1.0)
    else:
        share = suf / np.maximum(pre + suf, 1.0)
    return np.stack([np.log2(np.maximum(seqs, 1.0)), np.log2(np.maximum(gs, 1.0)),
                     np.log2(np.maximum(pre + suf, 1.0)), SUFFIX_SHARE_UNITS * share], axis=1)


def anchored_ratio(points: np.ndarray, ratio: np.ndarray, query: np.ndarray, kernel: str) -> np.ndarray:
    """The rows' measured/fitted `ratio` (N,) regressed at each query (Q, 4): the geometric mean of the rows'
    ratios under Gaussian weights of their distance (anchor_coords) over its square, exact at a row. The weights are
    taken relative to the nearest row's, so a query far from every row gets the nearest rows' ratio rather than none;
    NaN past MAX_DISTANCE from every row."""
    x = anchor_coords(points, kernel)
    q = np.atleast_2d(np.asarray(query, float))
    if q.shape[0] == 0:
        return np.ones(0)
    uq, inverse = np.unique(q, axis=0, return_inverse=True)      # a step grid repeats its points
    d2 = ((anchor_coords(uq, kernel)[:, None, :] - x[None, :, :]) ** 2).sum(-1) / (2.0 * BANDWIDTH**2)
    near = d2.min(axis=1, keepdims=True)
    # Gaussian weights relative to the nearest row's, over the squared distance: exact at a row (a step on a measured
    # point gets that row's ratio, so the anchored times meet the measured ones there without a step)
    w = np.exp(-(d2 - near)) / np.maximum(d2, 1e-12)
    log_r = np.log(np.maximum(np.asarray(ratio, float), 1e-300))
    out = np.exp((w @ log_r) / w.sum(axis=1))
    out[near[:, 0] > MAX_DISTANCE**2 / (2.0 * BANDWIDTH**2)] = np.nan
    return out[np.asarray(inverse).ravel()]


def untrained_reach(points: np.ndarray, trained: np.ndarray, reach: np.ndarray | None,
                    query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which queries (Q, 4) lie where the fit never trained, and which of a shape's rows (N,) anchor them: every
    query and every row of a shape with no training row; else the queries past the longest prefix or suffix the fit
    trained on (`reach`, over every shape), anchored by the shape's untrained rows past it (the probe's 128K-256K
    prefixes and 8K suffixes on a core shape). (Q,), (N,)."""
    pts, q = np.asarray(points, float), np.atleast_2d(np.asarray(query, float))
    trained = np.asarray(trained, bool)
    if not trained.any():
        return np.ones(q.shape[0], bool), np.ones(pts.shape[0], bool)
    if reach is None:
        return np.zeros(q.shape[0], bool), np.zeros(pts.shape[0], bool)
    r = np.asarray(reach, float) * (1 + 1e-9)
    beyond_rows = ~trained & ((pts[:, 2] > r[2]) | (pts[:, 3] > r[3]))
    if not beyond_rows.any():
        return np.zeros(q.shape[0], bool), beyond_rows
    return (q[:, 2] > r[2]) | (q[:, 3] > r[3]), beyond_rows


def passes_ratio(total_points: np.ndarray, total_ratio: np.ndarray, prefix_points: np.ndarray,
                 prefix_ratio: np.ndarray, rest_ratio: np.ndarray, query: np.ndarray, fit_total: np.ndarray,
                 fit_prefix: np.ndarray) -> np.ndarray:
    """The cascade's measured/fitted ratio at each query (Q, 4), pass by pass: (fitted prefix x the prefix rows'
    ratio + fitted rest x the rest's ratio) / fitted total, where `prefix_points` (M, 4) hold the shape's prefix-pass
    rows with their `prefix_ratio` and, at the same points, the `rest_ratio` of the cascade less its prefix pass (NaN
    where a row has no rest to compare); the whole cascade's ratio (`total_points`, `total_ratio`) where the prefix
    rows do not reach a query. At a row: its own rest ratio, and the prefix ratio of the rows whose prefix pass does
    its work (the same whatever their suffixes), so the row's time within their spread."""
    q = np.atleast_2d(np.asarray(query, float))
    whole = anchored_ratio(total_points, total_ratio, q, "cascade")
    rest_ok = np.isfinite(rest_ratio)
    if q.shape[0] == 0 or not rest_ok.any():       # no prefix-pass row (with a rest beside it) anchors the query
        return whole
    r_pre = anchored_ratio(prefix_points, prefix_ratio, q, "cascade_prefix")
    r_rest = anchored_ratio(prefix_points[rest_ok], rest_ratio[rest_ok], q, "cascade")
    ft, fp = np.asarray(fit_total, float), np.minimum(np.asarray(fit_prefix, float), np.asarray(fit_total, float))
    by_pass = (fp * r_pre + (ft - fp) * r_rest) / np.maximum(ft, 1e-300)
    return np.where(np.isfinite(by_pass), by_pass, whole)


def anchored_layer_s(measured: MeasuredAttention | None, kernel: str, shape: ShapeKey, sl: SingleLevel,
                     fitted_layer_s, interpolated: np.ndarray, fitted_prefix_layer_s=None) -> np.ndarray:
    """Per-layer times where the rows do not bracket a valid point that lies where the fit never trained (a
    shape it never saw; a prefix or suffix past its training rows): the fitted time scaled by the untrained rows'
    measured/fitted ratio there (anchored_ratio; for the cascade given its fitted prefix pass, pass by pass where
    the shape's rows time that pass: passes_ratio); NaN elsewhere."""
    out = np.full(sl.valid.shape, np.nan)
    rows = None if measured is None or fitted_layer_s is None else measured.anchor_rows(kernel, shape)
    if rows is None:
        return out
    take = sl.valid & ~np.isfinite(interpolated)
    if not take.any():
        return out
    q = sl.query(take)
    use, anchor = untrained_reach(rows[0], rows[2], rows[3], q)
    if not use.any():
        return out
    fit = np.broadcast_to(np.asarray(fitted_layer_s, float), take.shape)[take]
    vals = np.full(q.shape[0], np.nan)
    passes = (measured.pass_anchor_rows(shape)
              if measured is not None and kernel == "cascade" and fitted_prefix_layer_s is not None else None)
    if passes is not None:
        pts, pre_r, rest_r, trained = passes
        _, pass_anchor = untrained_reach(pts, trained, rows[3], q[use])
        fit_pre = np.broadcast_to(np.asarray(fitted_prefix_layer_s, float), take.shape)[take]
        ratio = passes_ratio(rows[0][anchor], rows[1][anchor], pts[pass_anchor], pre_r[pass_anchor],
                             rest_r[pass_anchor], q[use], fit[use], fit_pre[use])
    else:
        ratio = anchored_ratio(rows[0][anchor], rows[1][anchor], q[use], kernel)
    vals[use] = fit[use] * ratio
    out[take] = vals
    return out
