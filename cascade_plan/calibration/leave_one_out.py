"""Leave-one-out check of the measured-row interpolation, shared by the attention and MLA validations."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Protocol

import numpy as np


class _Row(Protocol):
    @property
    def config(self) -> Any: ...

    @property
    def timed_s(self) -> float: ...


def leave_one_out(rows: Sequence[_Row], shape: Callable[[Any], Hashable], axes: Sequence[str],
                  predict: Callable[[list[Any]], np.ndarray],
                  tiled: Callable[[Hashable, np.ndarray], np.ndarray] | None = None) -> tuple[list, list]:
    """Each row predicted from the other rows of its shape (`shape(config)`), as the planner interpolates: the fit
    (`predict(configs)`) times their interpolated ratio to it over `axes`, where they still bracket it; with
    `tiled` ((shape, points) -> the points with their suffix in whole tiles: MeasuredAttention.tiled_query), on the
    axes the planner interpolates a decode that reads whole tiles on. Returns
    (|interpolated / measured - 1|, |fit / measured - 1|) on the rows where the interpolation is finite."""
    from cascade_plan.cost.ops.attention import MeasuredTable

    by_shape: dict[Hashable, list[_Row]] = {}
    for r in rows:
        by_shape.setdefault(shape(r.config), []).append(r)
    interp: list[float] = []
    fit: list[float] = []
    for key, group in by_shape.items():
        pts = np.array([[getattr(r.config, a) for a in axes] for r in group], float)
        raw = pts
        pts = tiled(key, pts) if tiled is not None else pts
        t = np.array([r.timed_s for r in group], float)
        f = predict([r.config for r in group])
        for i in range(len(group)):
            others = np.arange(len(group)) != i
            same = np.all(pts[others] == pts[i], axis=1)      # a repeat of the same point is not held out
            keep = np.flatnonzero(others)[~same]
            if keep.size == 0:
                continue
            v = MeasuredTable(pts[keep], t[keep], f[keep])(pts[i:i + 1], f[i:i + 1], raw[i:i + 1])[0]
            if np.isfinite(v):
                interp.append(abs(v / t[i] - 1))
                fit.append(abs(f[i] / t[i] - 1))
    return interp, fit


def anchored_loo(rows: Sequence[_Row], shape: Callable[[Any], Hashable], axes: Sequence[str], kernel: str,
                 trained: Callable[[Any], bool], predict: Callable[[list[Any]], np.ndarray],
                 prefix: tuple[Sequence[_Row], Callable[[list[Any]], np.ndarray]] | None = None) -> dict[int, float]:
    """Each row the planner would anchor (cost/ops/shape_anchor.py: an untrained shape, or past the longest prefix or
    suffix the fit trained on) predicted from the other untrained rows of its shape, as the planner anchors: the fit
    times their ratio to it, regressed at the row. Returns {index in rows: |anchored / measured - 1|} where a row
    within reach anchors it. `kernel`: the planner kernel ("per_sequence", "per_sequence_dup", "cascade"); for the
    cascade, `prefix`: its prefix pass's rows and their fitted times' predictor, with which the planner anchors the
    cascade pass by pass (shape_anchor.passes_ratio), those at the held-out row's point left out too."""
    from cascade_plan.cost.ops.shape_anchor import anchored_ratio, passes_ratio, untrained_reach

    if not rows:
        return {}
    pts = np.array([[getattr(r.config, a) for a in axes] for r in rows], float)
    t = np.array([r.timed_s for r in rows], float)
    f = np.asarray(predict([r.config for r in rows]), float)
    tr = np.array([trained(r.config) for r in rows])
    reach = pts[tr].max(axis=0) if tr.any() else None
    keys = [shape(r.config) for r in rows]
    passes = _pass_rows(rows, pts, t, f, keys, shape, axes, trained, prefix) if prefix and kernel == "cascade" else None
    out: dict[int, float] = {}
    for i in np.flatnonzero(~tr):
        mine = np.array([k == keys[i] for k in keys]) & ~np.all(pts == pts[i], axis=1)
        if not mine.any():
            continue
        use, anchor = untrained_reach(pts[mine], tr[mine], reach, pts[i:i + 1])
        if not use[0] or not anchor.any():
            continue
        if passes is not None:
            ppts, pre_r, rest_r, ptr, pkeys, f_pre = passes
            pm = np.array([k == keys[i] for k in pkeys]) & ~np.all(ppts == pts[i], axis=1)
            _, pa = untrained_reach(ppts[pm], ptr[pm], reach, pts[i:i + 1])
            r = passes_ratio(pts[mine][anchor], (t / f)[mine][anchor], ppts[pm][pa], pre_r[pm][pa], rest_r[pm][pa],
                             pts[i:i + 1], f[i:i + 1], f_pre[i:i + 1])[0]
        else:
            r = anchored_ratio(pts[mine][anchor], (t / f)[mine][anchor], pts[i:i + 1], kernel)[0]
        if np.isfinite(r):
            out[int(i)] = abs(f[i] * r / t[i] - 1)
    return out


def _pass_rows(rows, pts, t, f, keys, shape, axes, trained, prefix):
    """The prefix-pass rows as shape_anchor.passes_ratio takes them: (points, measured/fitted of the pass, of the
    cascade less the pass at the same point (NaN where none), trained, shape keys, and the pass's fitted time at each
    cascade row)."""
    from cascade_plan.cost.ops.attention import rest_ratio

    prows, ppredict = prefix
    if not prows:
        return None
    ppts = np.array([[getattr(r.config, a) for a in axes] for r in prows], float)
    pt = np.array([r.timed_s for r in prows], float)
    pf = np.asarray(ppredict([r.config for r in prows]), float)
    pkeys = [shape(r.config) for r in prows]
    total = {(k, tuple(p)): (tm, fm) for k, p, tm, fm in zip(keys, pts, t, f)}
    at = np.array([total.get((k, tuple(p)), (np.nan, np.nan)) for k, p in zip(pkeys, ppts)], float).reshape(-1, 2)
    rest = rest_ratio(at[:, 0], at[:, 1], pt, pf, ppts[:, axes.index("suffix_tokens")])
    ptr = np.array([trained(r.config) for r in prows])
    f_pre = np.asarray(ppredict([r.config for r in rows]), float)
    return ppts, pt / pf, rest, ptr, pkeys, f_pre
