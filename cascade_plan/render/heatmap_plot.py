"""The speedup heatmap over (shared prefix, sequences per group) with the breakeven contour, cells that do not
fit in memory hatched and the workload's own point marked."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.render.plot_style import (
    FORMATS,
    RC,
    finish_figure,
    fmt_tokens,
    log2_edges,
    log2_ticks,
    mpl_modules,
    new_figure,
    plain,
    save_figure,
    set_title,
    speedup_cmap,
    speedup_norm,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from cascade_plan.cost.breakeven import Sweep
    from cascade_plan.cost.cost_params import CostParams


_GAIN_LEVELS = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
_LOSS_LEVELS = (0.5, 0.25)
_CBAR_TICKS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


def _hatch_no_fit(ax: Axes, fits: np.ndarray, x_edges: np.ndarray, y_edges: np.ndarray) -> bool:
    """Hatch every cell whose point does not fit in GPU memory; True when any does not."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    cells = [Rectangle((x_edges[j], y_edges[i]), x_edges[j + 1] - x_edges[j], y_edges[i + 1] - y_edges[i])
             for i, j in zip(*np.nonzero(~fits))]
    if cells:
        ax.add_collection(PatchCollection(cells, facecolor=(1, 1, 1, 0.35), edgecolor="#555555", hatch="////",
                                          linewidth=0.0, zorder=2))
    return bool(cells)


def _mark_point(ax: Axes, point: tuple[float, float, str], x_range: tuple[float, float],
                y_range: tuple[float, float]) -> bool:
    """A star at (group, prefix) with its label; False when the point lies outside the grid."""
    group, prefix, label = point
    if group <= 0 or prefix <= 0:
        return False
    x, y = math.log2(group), math.log2(prefix)
    if not (x_range[0] <= x <= x_range[1] and y_range[0] <= y <= y_range[1]):
        return False
    ax.plot([x], [y], marker="*", markersize=17, color="white", markeredgecolor="black", markeredgewidth=1.4,
            zorder=5, linestyle="none")
    right = x < (x_range[0] + x_range[1]) / 2
    ax.annotate(plain(label), (x, y), xytext=(12 if right else -12, 10), textcoords="offset points", fontsize=9.5,
                ha="left" if right else "right", va="bottom", zorder=6,
                bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "#333333", "alpha": 0.9})
    return True


def plot_speedup_heatmap(sweep: "Sweep", title: str, out_stem: Path, suffix_index: int = 0,
                         params: CostParams | None = None,
                         point: tuple[float, float, str] | None = None,
                         formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Speedup over shared prefix length (y) x group size (x) at one suffix length, with the breakeven
    (speedup = 1) contour drawn thick and a few speedup contours labelled. Cells that do not fit in
    GPU memory are hatched; `point` = (group size, prefix tokens, label) marks the workload's own point;
    `params` (CostParams) names the cost-model source in the footer."""
    mpl_modules()
    from matplotlib import rc_context
    from matplotlib.ticker import FixedLocator, FuncFormatter

    prefix = np.asarray(sweep.prefix_tokens, float)
    group = np.asarray(sweep.group_size, float)
    suffix = float(np.asarray(sweep.suffix_tokens, float)[suffix_index])
    sp = np.asarray(sweep.speedup, float)[:, :, suffix_index]          # (P, N)
    fits = (np.ones(sp.shape, bool) if sweep.fits is None
            else np.asarray(sweep.fits, bool)[:, :, suffix_index])
    keep_p, keep_n = prefix > 0, group > 0                               # log axes: drop 0-length rows
    prefix, group = prefix[keep_p], group[keep_n]
    sp, fits = sp[np.ix_(keep_p, keep_n)], fits[np.ix_(keep_p, keep_n)]
    if prefix.size == 0 or group.size == 0:
        raise ValueError("the sweep has no positive prefix lengths or group sizes to plot")
    op, og = np.argsort(prefix), np.argsort(group)
    prefix, group = prefix[op], group[og]
    sp, fits = sp[np.ix_(op, og)], fits[np.ix_(op, og)]
    finite = np.isfinite(sp) & (sp > 0)
    sp = np.where(finite, sp, np.nan)
    if not finite.any():
        raise ValueError("the sweep holds no finite speedups")

    data_min, data_max = float(np.nanmin(sp)), float(np.nanmax(sp))
    # Each side of 1.0 spans at least 2x, so a 0.95x corner is light red, not the darkest red.
    vmin, vmax = min(data_min, 0.5), max(data_max, 2.0)
    x, y = np.log2(group), np.log2(prefix)
    wins = int(np.nansum(sp > 1.0))
    total = int(finite.sum())

    with rc_context(RC):
        fig = new_figure((8.0, 6.2))
        ax = fig.add_subplot()
        x_edges, y_edges = log2_edges(x), log2_edges(y)
        mesh = ax.pcolormesh(x_edges, y_edges, sp, cmap=speedup_cmap(),
                             norm=speedup_norm(vmin, vmax), shading="flat",
                             rasterized=sp.size > 4096)   # a small grid stays vector in the SVG
        ax.spines[["top", "right"]].set_visible(True)
        hatched = _hatch_no_fit(ax, fits, x_edges, y_edges)

        z = np.log(sp)
        if sp.shape[0] >= 2 and sp.shape[1] >= 2:
            zmin, zmax = float(np.nanmin(z)), float(np.nanmax(z))
            inside = lambda lv: zmin < math.log(lv) < zmax  # noqa: E731
            other = sorted(lv for lv in _LOSS_LEVELS + _GAIN_LEVELS if inside(lv))   # contour wants increasing levels
            if len(other) > 6:   # keep the picture readable: the breakeven side first
                other = sorted([lv for lv in other if lv < 1] + [lv for lv in other if lv > 1][:5])
            fmt = lambda v: "breakeven" if abs(v) < 1e-9 else f"{math.exp(v):g}x"  # noqa: E731
            if other:
                cs = ax.contour(x, y, z, levels=np.log(other), colors="#222222", linewidths=0.9,
                                linestyles="--")
                ax.clabel(cs, fmt=fmt, fontsize=9, inline=True, inline_spacing=4)
            if inside(1.0):
                cs1 = ax.contour(x, y, z, levels=[0.0], colors="black", linewidths=3.0)
                ax.clabel(cs1, fmt=fmt, fontsize=10, inline=True, inline_spacing=6)

        log2_ticks(ax, "x", group)
        log2_ticks(ax, "y", prefix)
        marked = point is not None and _mark_point(ax, point, (x_edges[0], x_edges[-1]), (y_edges[0], y_edges[-1]))
        if hatched or marked:
            from matplotlib.artist import Artist
            from matplotlib.lines import Line2D
            from matplotlib.patches import Patch

            handles: list[Artist] = ([Line2D([], [], marker="*", markersize=13, color="white", markeredgecolor="black",
                               linestyle="none", label="this workload")] if marked else [])
            if hatched:
                handles.append(Patch(facecolor="white", edgecolor="#555555", hatch="////",
                                     label="does not fit in GPU memory"))
            ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncols=len(handles),
                      frameon=False)
        ax.set_xlabel("sequences sharing one prefix (group size, log2 scale)")
        ax.set_ylabel("shared prefix length (tokens, log2 scale)")
        if wins == total:
            verdict = "cascade wins everywhere on this grid"
        elif wins == 0:
            verdict = "cascade never wins on this grid"
        else:
            verdict = f"cascade wins at {wins} of {total} grid points (right of / above the thick line)"
        groups = f"{sweep.n_groups} prompt{'s' if sweep.n_groups != 1 else ''} per batch"
        if point is not None and not marked:
            verdict += f"; this workload ({fmt_tokens(point[1])} tokens, group {fmt_tokens(point[0])}) is off the grid"
        set_title(ax, f"{title}\nsuffix {fmt_tokens(suffix)} tokens per sequence, {groups}\n{verdict}")

        cb = fig.colorbar(mesh, ax=ax, pad=0.02)
        cb.set_label("speedup (per-sequence step / cascade step)")
        ticks = [t for t in _CBAR_TICKS if vmin <= t <= vmax]
        cb.ax.yaxis.set_major_locator(FixedLocator(ticks))
        cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}x"))
        cb.ax.yaxis.set_minor_locator(FixedLocator([]))
        cb.ax.axhline(1.0, color="black", linewidth=2.5)
        finish_figure(fig, params)
        return save_figure(fig, out_stem, formats)
