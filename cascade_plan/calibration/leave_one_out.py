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
                  predict: Callable[[list[Any]], np.ndarray]) -> tuple[list, list]:
    """Each row predicted from the other rows of its shape (`shape(config)`), as the planner interpolates: the fit
    (`predict(configs)`) times their interpolated ratio to it over `axes`, where they still bracket it. Returns
    (|interpolated / measured - 1|, |fit / measured - 1|) on the rows where the interpolation is finite."""
    from cascade_plan.cost.ops.attention import MeasuredTable

    by_shape: dict[Hashable, list[_Row]] = {}
    for r in rows:
        by_shape.setdefault(shape(r.config), []).append(r)
    interp: list[float] = []
    fit: list[float] = []
    for group in by_shape.values():
        pts = np.array([[getattr(r.config, a) for a in axes] for r in group], float)
        t = np.array([r.timed_s for r in group], float)
        f = predict([r.config for r in group])
        for i in range(len(group)):
            others = np.arange(len(group)) != i
            same = np.all(pts[others] == pts[i], axis=1)      # a repeat of the same point is not held out
            keep = np.flatnonzero(others)[~same]
            if keep.size == 0:
                continue
            v = MeasuredTable(pts[keep], t[keep], f[keep])(pts[i:i + 1], f[i:i + 1])[0]
            if np.isfinite(v):
                interp.append(abs(v / t[i] - 1))
                fit.append(abs(f[i] / t[i] - 1))
    return interp, fit
