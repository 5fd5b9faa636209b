"""Attention as an operation: measured per-layer times interpolated inside the probe's grid, the fitted
kernel model outside it.

A probe row times one attention layer (all KV heads of one layer on one GPU) at one configuration:
`n_groups` prompts of `prefix_tokens`, each shared by `group_size` sequences that read `suffix_tokens`
private tokens, at one attention shape (KV dtype, query heads per KV head, KV heads per GPU, head dim).
Inside the measured grid of a shape the time comes from the rows themselves, as AIConfigurator prices
its per-op tables: interpolated axis by axis (geometric over n_groups, group_size and prefix_tokens,
which the grid spans in powers; linear over suffix_tokens, which adds to the context linearly and is
measured from 0; for a kernel that reads whole tiles or pages, on a suffix axis counted in them:
`MeasuredAttention.tiled_query`). The grid is sparse, so a query counts as inside only where it is bracketed on every
axis by measured rows: along the first axis by the nearest measured values below and above it, each of
those slices bracketing it along the next axis, and so on. The result is then a convex combination of
measured times: exact at a measured point, between its neighbours in between, monotone where they are.
Everywhere else (another shape or dtype, a multi-level tree, a point no rows bracket) the answer is
NaN and the caller keeps the fitted model, saying why (`outside_reason`). Pure numpy."""

from __future__ import annotations

from functools import cached_property

import msgspec
import numpy as np

from cascade_plan.cost.ops.base import distinct, median0
from cascade_plan.cost.ops.tiles import tiled_suffix

AXES = ("n_groups", "group_size", "prefix_tokens", "suffix_tokens")
GEOMETRIC = (True, True, True, False)       # interpolate time geometrically (log axis) or linearly
REL_TOL = 1e-9                               # a query this close to a measured value is that value
DEDUPE_ABOVE = 4096                          # queries beyond which repeated ones are evaluated once

MEASURED = "measured (interpolated)"
MEASURED_AIC = "measured (AIConfigurator's rows, interpolated)"
FITTED = "fitted model"


class MeasuredTable(msgspec.Struct, frozen=True, eq=False):
    """Per-layer times of one kernel at one attention shape, over AXES (points: (N, 4)); fit_s: the fitted
    model's time at each row, where the table is to interpolate the rows' ratio to the fit (None: the
    times themselves)."""

    points: np.ndarray
    time_s: np.ndarray
    fit_s: np.ndarray | None = None

    def __call__(self, query: np.ndarray, fit_at_query: np.ndarray | None = None,
                 untiled: np.ndarray | None = None) -> np.ndarray:
        """Times at queries (Q, 4); NaN where the rows do not bracket a query. With the fit at the
        queries (and at the rows), the fit times the interpolated measured/fitted ratio, held within the
        bracketing rows' times: the fit supplies the shape between rows the grid spaces widely, the rows
        its level; at a row it is the row. `untiled`: the queries before MeasuredAttention.tiled_query, where the
        fit was evaluated: the rows' fitted times carry it to the tiled point (_tile_shift)."""
        q = np.atleast_2d(np.asarray(query, float))
        out = np.full(q.shape[0], np.nan)
        lo_box, hi_box = self.points.min(0), self.points.max(0)
        box = np.all((q >= lo_box * (1 - REL_TOL)) & (q <= hi_box * (1 + REL_TOL)), axis=1)   # cheap reject
        if not box.any():
            return out
        ratio = fit_at_query is not None and self.fit_s is not None
        cols = [self.time_s / self.fit_s, self.time_s, self.time_s] if ratio else [self.time_s]
        v = _interp(self.points, np.stack(cols, axis=1), q[box], 0)
        if ratio:
            fit = np.broadcast_to(np.asarray(fit_at_query, float), q.shape[:1])[box]
            if untiled is not None:
                fit = fit * self._tile_shift(np.atleast_2d(np.asarray(untiled, float))[box], q[box])
            out[box] = np.clip(fit * v[:, 0], v[:, 1], v[:, 2])
        else:
            out[box] = v[:, 0]
        return out

    def _tile_shift(self, untiled: np.ndarray, tiled: np.ndarray) -> np.ndarray:
        """Per query: the rows' fitted time at its tiled point over that at its own (1: unmoved or unbracketed)."""
        out = np.ones(tiled.shape[0])
        moved = np.any(untiled != tiled, axis=1)
        if self.fit_s is None or not moved.any():
            return out
        fit_rows = self.fit_s[:, None]
        at_own = _interp(self.points, fit_rows, untiled[moved], 0)[:, 0]
        at_tiles = _interp(self.points, fit_rows, tiled[moved], 0)[:, 0]
        ok = np.isfinite(at_own) & np.isfinite(at_tiles) & (at_own > 0)
        out[moved] = np.where(ok, at_tiles / np.where(ok, at_own, 1.0), 1.0)
        return out

    def axis_range(self, axis: int) -> tuple[float, float]:
        return float(self.points[:, axis].min()), float(self.points[:, axis].max())


def _interp(pts: np.ndarray, t: np.ndarray, q: np.ndarray, axis: int) -> np.ndarray:
    """Axis-by-axis interpolation of the columns of t (N, C) at queries q (Q, 4): column 0 interpolated,
    columns 1 and 2 (where present) the least and the greatest of the rows that bracket each query;
    (Q, C), NaN where the rows do not bracket a query."""
    ncol = t.shape[1]
    if axis == len(AXES):                   # every axis matched: one row (duplicates: their median)
        return np.broadcast_to(median0(t), (q.shape[0], ncol)).copy()
    if axis >= 2 and q.shape[0] > DEDUPE_ABOVE:   # a sweep grid repeats the last axes' values many times
        codes = [np.unique(q[:, k], return_inverse=True) for k in range(axis, len(AXES))]
        sizes = [c[0].size for c in codes]
        if np.prod(np.array(sizes, float)) < 0.5 * q.shape[0]:
            key = np.zeros(q.shape[0], np.int64)
            for (_, inv), n in zip(codes, sizes):
                key = key * n + inv.ravel()
            _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
            return _interp(pts, t, q[first], axis)[inverse.ravel()]
    out = np.full((q.shape[0], ncol), np.nan)
    values = distinct(pts[:, axis])
    x = q[:, axis]
    tol = REL_TOL * np.maximum(np.abs(values), 1.0)
    right = np.searchsorted(values, x, side="right")          # values[right - 1] <= x < values[right]
    below = np.clip(right - 1, 0, values.size - 1)
    above = np.clip(right, 0, values.size - 1)
    near_below = (right >= 1) & (np.abs(x - values[below]) <= tol[below])
    near_above = (right < values.size) & (np.abs(x - values[above]) <= tol[above])
    exact = near_below | near_above
    lo = np.where(near_above & ~near_below, above, below)
    hi = np.where(exact, lo, above)
    ok = exact | ((right >= 1) & (right < values.size))
    if not ok.any():
        return out
    if exact.all() and (lo == lo[0]).all():       # every query on one measured value (one group, say)
        rows = pts[:, axis] == values[lo[0]]
        return _interp(pts[rows], t[rows], q, axis + 1)
    present = np.zeros(values.size, bool)
    present[lo[ok]] = True
    present[hi[ok]] = True
    a = np.full((q.shape[0], ncol), np.nan)
    b = np.full((q.shape[0], ncol), np.nan)
    for i in np.flatnonzero(present):
        at_lo, at_hi = ok & (lo == i), ok & (hi == i)
        need = np.flatnonzero(at_lo | at_hi)
        rows = pts[:, axis] == values[i]
        r = _interp(pts[rows], t[rows], q[need], axis + 1)
        a[need[at_lo[need]]] = r[at_lo[need]]
        b[need[at_hi[need]]] = r[at_hi[need]]
    va, vb = values[lo], values[hi]
    if GEOMETRIC[axis]:
        span = (np.log(vb) - np.log(va) if va.min() > 0
                else np.log(np.maximum(vb, 1e-300)) - np.log(np.maximum(va, 1e-300)))
        w = np.where(span > 0, (np.log(np.maximum(x, 1e-300)) - np.log(np.maximum(va, 1e-300)))
                     / np.where(span > 0, span, 1), 0.0)
        val0 = np.exp((1 - w) * np.log(np.maximum(a[:, 0], 1e-300)) + w * np.log(np.maximum(b[:, 0], 1e-300)))
    else:
        span = vb - va
        w = np.where(span > 0, (x - va) / np.where(span > 0, span, 1), 0.0)
        val0 = (1 - w) * a[:, 0] + w * b[:, 0]
    val = np.empty_like(a)
    val[:, 0] = np.where(exact, a[:, 0], val0)
    if ncol > 1:
        val[:, 1] = np.minimum(a[:, 1], b[:, 1])
        val[:, 2] = np.maximum(a[:, 2], b[:, 2])
    good = ok & np.isfinite(a[:, 0]) & np.isfinite(b[:, 0])
    out[good] = val[good]
    return out


def overlapped_total(t_pre, t_suf, roof_pre, roof_suf, overlap: float) -> np.ndarray:
    """Prefix and suffix passes of one cascade. Run one after the other they add up; run concurrently
    (two streams) their fixed costs overlap but their bytes still share the bus: the larger of the two
    and of the two bandwidth parts together. `overlap` in [0, 1] mixes the two cases."""
    both = t_pre + t_suf
    concurrent = np.maximum(np.maximum(t_pre, t_suf), roof_pre + roof_suf)
    return (1.0 - overlap) * both + overlap * concurrent


def rest_ratio(total_s, total_fit_s, prefix_s, prefix_fit_s, suffix_tokens) -> np.ndarray:
    """Measured over fitted of a cascade less its prefix pass, elementwise over rows timed both ways at one point
    (NaN inputs where a point lacks the cascade row); NaN where either difference is not positive (a cascade with no
    suffix pass to speak of: its rest compares nothing), and at rows with no suffix: their rest is the merge alone,
    while a query with a suffix runs a suffix pass besides (Triton's fp8 rollout start at 512 tokens x 64 x 16 has a
    rest 0.3x its fit, which priced the first step, one private page each, at half its measured attention)."""
    d_meas = np.asarray(total_s, float) - np.asarray(prefix_s, float)
    d_fit = np.asarray(total_fit_s, float) - np.asarray(prefix_fit_s, float)
    ok = (d_meas > 0) & (d_fit > 0) & (np.asarray(suffix_tokens, float) > 0)
    return np.where(ok, d_meas / np.where(ok, d_fit, 1.0), np.nan)


# (q_per_kv, KV heads per GPU, head dim) -> the per-layer table of each planner kernel
ShapeKey = tuple[int, int, int]


class MeasuredAttention(msgspec.Struct, frozen=True, eq=False, dict=True):
    """One backend's measured attention rows at one KV dtype, built into tables lazily (a calibration
    holds many shapes; a workload asks for one). rows: kernel -> [(shape key, point (4,), time_s, fitted
    time_s or None[, trained])] for the planner's kernels "per_sequence" (decode over shared prefix pages),
    "per_sequence_dup" (private copies: no prefix caching) and "cascade" (the whole cascade: prefix,
    suffix and merge); `trained`: the fit was trained on the row (absent: it was)."""

    backend: str
    kv_dtype: str
    rows: dict[str, list[tuple]]
    # What outputs call an interpolated time from these rows (the probe's, or AIConfigurator's).
    label: str = MEASURED
    # Rows over private pages only, at points (sequences, 1, context tokens, 0) (AIConfigurator's
    # generation-attention rows: per-sequence decode, no shared prefix, no cascade): a step is queried by
    # its sequences and their common context (`private_level`), whatever its prefix tree.
    private: bool = False
    # "gqa", or "mla": the probe's MLA rows, keyed by (query heads per GPU, 1, latent width)
    kind: str = "gqa"
    # head dim -> KV tokens per tile of the backend's per-sequence decode where it walks whole tiles
    # (cost/ops/tiles.py): its rows and queries are interpolated along the suffix axis in whole tiles ...
    decode_tile_tokens: dict[int, int] = msgspec.field(default_factory=dict)
    # ... a partly filled last tile counting this share of its empty part, per planner kernel (absent: 1)
    decode_tile_share: dict[str, float] = msgspec.field(default_factory=dict)
    # KV tokens per page of the rows (0: not known): a cascade's suffix pass reads its private tokens in whole
    # pages, so one token is priced as the page holding it (at a rollout's first step, the rows' one-page suffix)
    page_tokens: int = 0

    @cached_property
    def _tables(self) -> dict[tuple[str, ShapeKey], MeasuredTable | None]:
        """The tables built so far (the rows are fixed, so a table once built holds)."""
        return {}

    def table(self, kernel: str, shape: ShapeKey) -> MeasuredTable | None:
        """A kernel's rows at one shape, their suffix axis in whole tiles where the kernel reads whole tiles
        (`tiled_query` gives a query's coordinates on the same axis)."""
        key = (kernel, shape)
        if key not in self._tables:
            sel = [r for r in self.rows.get(kernel, ()) if r[0] == shape]
            fit = [r[3] if len(r) > 3 else None for r in sel]
            self._tables[key] = (MeasuredTable(self.tiled_query(kernel, shape, np.array([r[1] for r in sel], float)),
                                               np.array([r[2] for r in sel], float),
                                               None if any(f is None for f in fit) else np.array(fit, float))
                                 if sel else None)
        return self._tables[key]

    def tile_tokens(self, kernel: str, shape: ShapeKey) -> int:
        """KV tokens per tile the kernel reads a context in at this shape (0: token by token)."""
        return self.decode_tile_tokens.get(shape[2], 0) if kernel in ("per_sequence", "per_sequence_dup") else 0

    def reaxed(self, kernel: str, shape: ShapeKey) -> bool:
        """Does `tiled_query` move this kernel's suffix axis at this shape?"""
        return bool(self.tile_tokens(kernel, shape) or (kernel == "cascade" and self.page_tokens))

    def tiled_query(self, kernel: str, shape: ShapeKey, points: np.ndarray) -> np.ndarray:
        """Points (N, 4) over AXES with the suffix a decode reads in whole tiles (tiles.tiled_suffix), or a cascade's
        suffix pass in whole pages."""
        if not self.reaxed(kernel, shape) or points.size == 0:
            return points
        out = np.array(points, float, copy=True)
        tile = self.tile_tokens(kernel, shape)
        out[:, 3] = (tiled_suffix(out[:, 2], out[:, 3], tile, self.decode_tile_share.get(kernel, 1.0)) if tile
                     else tiled_suffix(0.0, out[:, 3], self.page_tokens))      # reaxed: the cascade's pages
        return out

    def shapes(self, kernel: str) -> list[ShapeKey]:
        return sorted({r[0] for r in self.rows.get(kernel, ())})

    def anchor_rows(self, kernel: str, shape: ShapeKey) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                 np.ndarray | None] | None:
        """(points, measured/fitted ratios, trained) of a shape's rows for cost/ops/shape_anchor.py, and the
        largest point the fit trained on over every shape (None: none); None where some row lacks a fitted time
        or a training flag (imported and MLA rows: not anchored)."""
        key = ("anchor", kernel, shape)
        if key not in self._derived:
            self._derived[key] = self._anchor_rows(kernel, shape)
        return self._derived[key]

    @cached_property
    def _derived(self) -> dict:
        """What anchor_rows built so far (the rows are fixed; a step grid asks for the same shape many times)."""
        return {}

    def pass_anchor_rows(self, shape: ShapeKey) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(points, prefix-pass ratio, rest ratio, trained) of a shape's cascade prefix-pass rows ("cascade_prefix":
        the pass timed alone) for cost/ops/shape_anchor.py: measured/fitted of the pass, and of the whole cascade
        less the pass at the same point (NaN where no cascade row is there or either difference is not positive);
        None where the shape has no such rows or one lacks a fitted time or a training flag."""
        key = ("passes", shape)
        if key not in self._derived:
            self._derived[key] = self._pass_anchor_rows(shape)
        return self._derived[key]

    def _pass_anchor_rows(self, shape: ShapeKey):
        pre = [r for r in self.rows.get("cascade_prefix", ()) if r[0] == shape]
        if not pre or any(len(r) < 5 or r[3] is None or r[3] <= 0 for r in pre):
            return None
        total = {tuple(r[1]): (r[2], r[3]) for r in self.rows.get("cascade", ()) if r[0] == shape and len(r) >= 4
                 and r[3] is not None}
        at = np.array([total.get(tuple(r[1]), (np.nan, np.nan)) for r in pre], float).reshape(-1, 2)
        meas, fit = np.array([r[2] for r in pre], float), np.array([r[3] for r in pre], float)
        pts = np.array([r[1] for r in pre], float)
        return (pts, meas / fit, rest_ratio(at[:, 0], at[:, 1], meas, fit, pts[:, 3]),
                np.array([bool(r[4]) for r in pre]))

    def _anchor_rows(self, kernel: str, shape: ShapeKey):
        rows = self.rows.get(kernel, ())
        sel = [r for r in rows if r[0] == shape]
        if not sel or any(len(r) < 5 or r[3] is None or r[3] <= 0 for r in sel):
            return None
        trained_all = [r[1] for r in rows if len(r) < 5 or r[4]]
        reach = np.max(np.array(trained_all, float), axis=0) if trained_all else None
        return (np.array([r[1] for r in sel], float), np.array([r[2] / r[3] for r in sel], float),
                np.array([bool(r[4]) for r in sel]), reach)


class SingleLevel(msgspec.Struct, frozen=True):
    """A step's attention load in the probe's coordinates (arrays over the step grid), and where it is
    one shared level read by every sequence with one suffix length (the only cascades the probe times)."""

    coords: tuple[np.ndarray, ...]   # n_groups, group_size, prefix_tokens, suffix_tokens (broadcast views)
    valid: np.ndarray                # bool (...)

    def query(self, mask: np.ndarray) -> np.ndarray:
        """(M, 4) coordinates of the points where mask holds."""
        return np.stack([c[mask] for c in self.coords], axis=-1)


def single_level(load) -> SingleLevel:
    """The probe's coordinates of a StepLoad (cost_model.StepLoad), elementwise."""
    seqs = np.asarray(load.active_seqs, float)
    node_tok = np.asarray(load.node_tokens, float)
    inst_tok = np.asarray(load.node_instance_tokens, float)
    read = node_tok > 0
    one = read.sum(0) == 1                                        # exactly one shared node read
    tok = np.where(read, node_tok, 0).sum(0)
    prefix = np.where(read, inst_tok, 0).sum(0)
    groups = np.where(prefix > 0, tok / np.maximum(prefix, 1), 0)
    per_group = np.where(groups > 0, np.where(read, load.node_query_tokens, 0).sum(0) / np.maximum(tok, 1), 0)
    suffix = np.asarray(load.suffix_tokens, float) / np.maximum(seqs, 1)
    uniform = np.abs(suffix - np.asarray(load.longest_suffix, float)) <= 1e-6 * np.maximum(suffix, 1)
    everyone = np.abs(groups * per_group - seqs) <= 1e-6 * np.maximum(seqs, 1)
    all_read = np.abs(np.asarray(load.ps_prefix_tokens, float) - seqs * prefix) <= 1e-6 * np.maximum(seqs * prefix, 1)
    coords = tuple(np.broadcast_arrays(groups, per_group, prefix, suffix, one))[:4]
    valid = np.broadcast_to(one & uniform & everyone & all_read & (seqs > 0), coords[0].shape)
    return SingleLevel(coords, valid)


def private_level(load) -> SingleLevel:
    """The coordinates private-page rows are measured at (sequences, 1, context tokens, 0), elementwise:
    valid where every sequence decodes the same context (rows time equal contexts)."""
    seqs = np.asarray(load.active_seqs, float)
    ctx = (np.asarray(load.ps_prefix_tokens, float) + np.asarray(load.suffix_tokens, float)) / np.maximum(seqs, 1)
    equal = np.abs(np.asarray(load.longest_context, float) - ctx) <= 1e-6 * np.maximum(ctx, 1)
    coords = tuple(np.broadcast_arrays(seqs, np.ones_like(seqs), ctx, np.zeros_like(seqs), equal))[:4]
    valid = np.broadcast_to(equal & (seqs > 0) & (ctx > 0), coords[0].shape)
    return SingleLevel(coords, valid)


def measured_layer_s(measured: MeasuredAttention | None, kernel: str, shape: ShapeKey, sl: SingleLevel,
                     fitted_layer_s=None) -> np.ndarray:
    """Interpolated per-layer times at every valid point of the step grid (given the fitted model's
    per-layer time there, the rows' ratio to it is interpolated); NaN elsewhere."""
    out = np.full(sl.valid.shape, np.nan)
    tab = None if measured is None else measured.table(kernel, shape)
    if measured is None or tab is None or not sl.valid.any():
        return out
    take = sl.valid.copy()
    moves = measured.reaxed(kernel, shape)
    for a, c in enumerate(sl.coords):        # outside the rows' box: no need to look further (cheap, no copies)
        if a == 3 and moves:
            continue                         # a re-axed suffix only grows: the table checks it below
        lo, hi = tab.axis_range(a)
        take &= (c >= lo * (1 - REL_TOL)) & (c <= hi * (1 + REL_TOL))
    if not take.any():
        return out
    fit = None if fitted_layer_s is None else np.broadcast_to(np.asarray(fitted_layer_s, float), take.shape)[take]
    raw = sl.query(take)
    out[take] = tab(measured.tiled_query(kernel, shape, raw), fit, raw)
    return out


KERNEL_WORDS = {"per_sequence": "per-sequence decode over shared pages", "per_sequence_dup": "per-sequence decode",
                "cascade": "cascade"}
AXIS_WORDS = {"n_groups": "groups", "group_size": "sequences per group", "prefix_tokens": "prefix tokens",
              "suffix_tokens": "suffix tokens"}
PRIVATE_AXIS_WORDS = {**AXIS_WORDS, "n_groups": "sequences", "prefix_tokens": "context tokens"}


def _shape_words(shape: ShapeKey, kind: str = "gqa") -> str:
    if kind == "mla":
        from cascade_plan.cost.ops.mla_attention import shape_words

        return shape_words(shape)
    g, h, d = shape
    return (f"{g} query head{'s' if g != 1 else ''} per KV head, {h} KV head{'s' if h != 1 else ''} per GPU, "
            f"head dim {d}")


def _span(lo: float, hi: float) -> str:
    return f"{lo:,.0f}" if hi - lo < 0.5 else f"{lo:,.0f}-{hi:,.0f}"


def backend_words(measured: MeasuredAttention) -> str:
    return f"{measured.backend} {measured.kv_dtype}"


def outside_reason(measured: MeasuredAttention | None, kernel: str, shape: ShapeKey, sl: SingleLevel,
                   inside: np.ndarray, mla: bool = False) -> str | None:
    """Why some steps of a load fall back to the fitted model (None: every step measured)."""
    if inside.all():
        return None
    if measured is None:
        return "this calibration has no measured attention rows for its backend and KV dtype"
    what = KERNEL_WORDS[kernel]
    if mla and measured.kind != "mla":
        return f"the {measured.backend} {measured.kv_dtype} rows are GQA kernels; MLA has no rows of its own here"
    if measured.kind == "mla":
        what = "MLA " + what
    if measured.private and kernel == "cascade":
        return "AIConfigurator measures no cascade kernels; they are transferred from the H200 probe"
    if measured.private and kernel == "per_sequence" and not sl.valid.all():
        return ("AIConfigurator times decode over private pages only; over shared pages it is the fit with the L2 "
                "gain transferred from the H200 probe")
    if measured.private:
        kernel = "per_sequence_dup"
        what = KERNEL_WORDS[kernel]
    tab = measured.table(kernel, shape)
    if tab is None:
        if measured.kind == "mla":
            have = ", ".join(str(g) for g, _, _ in measured.shapes(kernel)) or "none"
            return (f"no {measured.kv_dtype} {what} rows of {measured.backend} at {_shape_words(shape, 'mla')} "
                    f"(measured query heads per GPU: {have})")
        have = ", ".join(f"{g}/{h}/{d}" for g, h, d in measured.shapes(kernel)) or "none"
        return (f"no {measured.kv_dtype} {what} rows of {measured.backend} at {_shape_words(shape)} (measured, "
                f"as query heads per KV head/KV heads/head dim: {have})")
    if not sl.valid.all():
        if measured.private:
            return "steps whose sequences decode different context lengths (AIConfigurator's rows time equal contexts)"
        return ("steps whose sequences do not share one prefix level with equal suffixes (the probe times one "
                "shared level)")
    miss = ~np.asarray(inside, bool)
    beyond = []
    words = PRIVATE_AXIS_WORDS if measured.private else AXIS_WORDS
    for a, name in enumerate(AXES):
        lo, hi = tab.axis_range(a)
        x = sl.coords[a][miss]
        out = (x < lo * (1 - REL_TOL)) | (x > hi * (1 + REL_TOL))
        if out.any():
            beyond.append(f"{words[name]} {_span(x[out].min(), x[out].max())} (rows span {_span(lo, hi)})")
    if beyond:      # every axis the workload leaves, not only the first
        return f"the {backend_words(measured)} {what} rows do not reach {', '.join(beyond)}"
    n, g, p, s = (c[miss][0] for c in sl.coords)
    if measured.private:
        return (f"no measured {backend_words(measured)} {what} rows bracket {n:,.0f} sequences of {p:,.0f} tokens "
                "(each axis must be bracketed by rows)")
    return (f"no measured {backend_words(measured)} {what} rows bracket {n:,.0f} x {g:,.0f} sequences, {p:,.0f} prefix "
            f"and {s:,.0f} suffix tokens (a sparse grid: each axis must be bracketed by rows)")


def source_label(measured_share: float, reason: str | None, steps: float = 0.0, measured: str = MEASURED) -> str:
    """The words `estimate`, `report` and the JSON show for one mode's attention over a run of `steps`
    decode steps (`measured`: what the rows are called, MEASURED or MEASURED_AIC)."""
    if measured_share >= 1.0 - 1e-12:
        return measured
    if measured_share <= 1e-12:
        return f"{FITTED} (outside the measured grid: {reason})"
    part = (f"on {max(1, round(measured_share * steps)):,} of {round(steps):,} decode steps" if steps
            else f"on {measured_share:.1%} of the decode steps")
    return f"{measured} {part}, {FITTED} on the rest (outside the measured grid: {reason})"
