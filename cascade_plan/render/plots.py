"""Pictures of an estimate and a sweep: speedup heatmap with the breakeven contour, step time over a
run, bytes per step, and one workload across several GPUs. PNG and SVG, written atomically.

matplotlib is imported inside the functions (the estimate path must not pay for it) and drawn on a
bare `Figure` with the Agg backend, so nothing here needs a display or touches pyplot's figure list.
Functions return the paths they wrote and never print.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.units import GiB

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.cost.breakeven import Sweep
    from cascade_plan.cost.estimate import Estimate

DPI = 150

# One colour per mode and per byte kind, used in every plot.
C_PER_SEQ = "#c0392b"      # red: per-sequence attention
C_CASCADE = "#1f6fb4"      # blue: cascade attention
C_WEIGHTS = "#8c8c8c"
C_PREFIX = "#e69f00"
C_SUFFIX = "#56b4e9"
C_MERGE = "#8e44ad"

_RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.hashsalt": "cascade-plan",   # stable SVG ids between runs
    # SVG text as <text> (selectable, searchable, a quarter of the size, twice as fast to write);
    # viewers without DejaVu Sans fall back to a narrower sans-serif, so labels only gain room.
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",     # matplotlib ships it, so PNGs look the same everywhere
}


# ----------------------------------------------------------------------------------------------
# helpers


def _mpl():
    """Import matplotlib lazily, headless. A caller that already drives pyplot keeps its backend:
    everything here draws on a bare Figure, which renders through Agg whatever the backend is."""
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return matplotlib


def _new_figure(figsize):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=DPI)
    FigureCanvasAgg(fig)   # one Agg renderer for layout and the PNG, so text is measured once
    return fig


FORMATS = ("png", "svg")


def _save(fig, out_stem: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write <stem>.png and (when asked) <stem>.svg next to each other, each atomically."""
    import io

    from cascade_plan.atomic import write_bytes_atomic

    out_stem = Path(out_stem)
    written = []
    try:
        for ext in formats:
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, dpi=DPI, metadata={"Software": None} if ext == "png" else {"Date": None})
            written.append(write_bytes_atomic(out_stem.with_suffix(f".{ext}"), buf.getvalue()))
    finally:
        fig.clear()
    return written

def fmt_tokens(n: float) -> str:
    """Human token / count labels: 256, 1K, 4K, 32K, 1M (binary K/M for whole multiples of 1024, as
    token counts are usually powers of two), else the plain number with thousands separators."""
    n = float(n)
    if n >= 1024**2 and n % 1024**2 == 0:
        return f"{int(n // 1024**2)}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{int(n // 1024)}K"
    if n == int(n):
        return f"{int(n):,}"
    return f"{n:.3g}"


def _fmt_ms(s: float) -> str:
    ms = s * 1e3
    if ms >= 100:
        return f"{ms:,.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.2f} ms"


def _fmt_s(s: float) -> str:
    if s >= 100:
        return f"{s:,.0f} s"
    if s >= 1:
        return f"{s:.3g} s"
    return f"{s * 1e3:.3g} ms"


def _fmt_x(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


def _gpu_name(hw) -> str:
    return hw.name or hw.id


def _scenario_line(est: "Estimate") -> str:
    scn = est.scenario
    parts = [f"{scn.model.id} on {_gpu_name(scn.hardware)}"]
    if scn.tp > 1:
        parts.append(f"TP{scn.tp}")
    parts.append(f"{scn.kv_dtype} KV, {scn.weight_dtype} weights")
    return ", ".join(parts)


def _batch_line(est: "Estimate") -> str:
    flat = est.flat
    return (f"{flat.total_seqs:,} sequences, {fmt_tokens(flat.unique_prefix_tokens)} unique shared prefix tokens, "
            f"{est.decode_steps:,} decode steps")


def _fit_note(est: "Estimate") -> str:
    """A title line for a configuration that cannot run (its times are what it would take if it could)."""
    if est.memory is None or est.memory.fits:
        return ""
    return "\ndoes not fit in GPU memory: hypothetical times, no verdict"


def _finish(fig, est_params=None) -> None:
    """tight_layout, keeping a strip at the bottom for the cost-parameter sentence (ideal / default /
    calibrated), 9 pt, so nothing needs bbox_inches="tight" (an extra draw per file)."""
    if est_params is None:
        fig.tight_layout(pad=0.6)
        return
    width_in = fig.get_size_inches()[0]
    lines = textwrap.wrap(f"Cost model: {est_params.label}", int(width_in * 15))
    strip_in = 0.08 + 0.17 * len(lines)
    h = fig.get_size_inches()[1]
    fig.tight_layout(pad=0.6, rect=(0, strip_in / h, 1, 1))
    fig.text(0.01, 0.04 / h, "\n".join(lines), fontsize=9, color="#444444", ha="left", va="bottom")


def _title(ax, text: str, **kw) -> None:
    """Axes title whose lines are wrapped to the figure's width (11 pt DejaVu Sans: ~10 characters
    an inch), so a long workload or GPU name never runs off the canvas."""
    width_chars = int(ax.figure.get_size_inches()[0] * 11)
    lines = [w for line in text.split("\n") for w in (textwrap.wrap(line, width_chars) or [""])]
    ax.set_title("\n".join(lines), fontsize=11, **kw)


def _log_if_wide(ax, axis: str, lo: float, hi: float, decade: float = 10.0) -> bool:
    """Switch `axis` to log when the positive data spans at least `decade`x."""
    if lo > 0 and hi / lo >= decade:
        from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

        getattr(ax, f"set_{axis}scale")("log")
        ax_ = getattr(ax, f"{axis}axis")
        ax_.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax_.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,.4g}"))
        ax_.set_minor_formatter(NullFormatter())
        return True
    return False


# ----------------------------------------------------------------------------------------------
# speedup heatmap


def _log2_edges(centres: np.ndarray) -> np.ndarray:
    """Cell edges for pcolormesh on a log2 axis: midpoints, half a step beyond the ends."""
    c = np.asarray(centres, float)
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[1:] + c[:-1]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])


def _log2_ticks(ax, axis: str, values: np.ndarray, max_ticks: int = 11) -> None:
    """Ticks on a log2 axis labelled 256 / 1K / 4K: every (or every other) power of two when the grid
    is powers of two, else the grid's own values, so each row / column is named by what was swept."""
    lv = np.log2(values)
    if np.allclose(lv, np.round(lv)):
        pows = np.arange(round(lv.min()), round(lv.max()) + 1)
        step = max(1, math.ceil(pows.size / max_ticks))
        pos = pows[::step]
        labels = [fmt_tokens(2.0**p) for p in pos]
    else:
        idx = np.unique(np.linspace(0, values.size - 1, min(values.size, max_ticks)).round().astype(int))
        pos = lv[idx]
        labels = [fmt_tokens(values[i]) for i in idx]
    getattr(ax, f"set_{axis}ticks")(pos, labels)


def _speedup_cmap():
    """Diverging with a visible step at 1.0: reds below (cascade loses), greens to blues above."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    lose = colormaps["Reds"](np.linspace(0.85, 0.30, 128))   # strongest loss darkest
    win = colormaps["GnBu"](np.linspace(0.30, 0.95, 128))    # light green just past breakeven -> dark blue
    return ListedColormap(np.vstack([lose, win]), name="cascade_speedup")


def _speedup_norm(vmin: float, vmax: float):
    """Log on each side of 1.0, each side scaled to its own extent, 1.0 in the middle of the map."""
    from matplotlib.colors import FuncNorm

    lo, hi = math.log(vmin), math.log(vmax)   # lo < 0 < hi

    def forward(v):
        z = np.log(np.clip(np.asarray(v, float), 1e-300, None))
        return np.where(z < 0, z / -lo, z / hi)

    def inverse(t):
        t = np.asarray(t, float)
        return np.exp(np.where(t < 0, t * -lo, t * hi))

    return FuncNorm((forward, inverse), vmin=vmin, vmax=vmax)


_GAIN_LEVELS = (1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0)
_LOSS_LEVELS = (0.5, 0.25)
_CBAR_TICKS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0)


def _hatch_no_fit(ax, fits: np.ndarray, x_edges: np.ndarray, y_edges: np.ndarray) -> bool:
    """Hatch every cell whose point does not fit in GPU memory; True when any does not."""
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    cells = [Rectangle((x_edges[j], y_edges[i]), x_edges[j + 1] - x_edges[j], y_edges[i + 1] - y_edges[i])
             for i, j in zip(*np.nonzero(~fits))]
    if cells:
        ax.add_collection(PatchCollection(cells, facecolor=(1, 1, 1, 0.35), edgecolor="#555555", hatch="////",
                                          linewidth=0.0, zorder=2))
    return bool(cells)


def _mark_point(ax, point: tuple[float, float, str], x_range, y_range) -> bool:
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
    ax.annotate(label, (x, y), xytext=(12 if right else -12, 10), textcoords="offset points", fontsize=9.5,
                ha="left" if right else "right", va="bottom", zorder=6,
                bbox={"boxstyle": "round,pad=0.25", "facecolor": "white", "edgecolor": "#333333", "alpha": 0.9})
    return True


def plot_speedup_heatmap(sweep: "Sweep", title: str, out_stem: Path, suffix_index: int = 0, params=None,
                         point: tuple[float, float, str] | None = None,
                         formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Speedup over shared prefix length (y) x group size (x) at one suffix length, with the breakeven
    (speedup = 1) contour drawn thick and a few speedup contours labelled. Cells that do not fit in
    GPU memory are hatched; `point` = (group size, prefix tokens, label) marks the workload's own point;
    `params` (CostParams) names the cost-model source in the footer."""
    _mpl()
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

    with rc_context(_RC):
        fig = _new_figure((8.0, 6.2))
        ax = fig.add_subplot()
        x_edges, y_edges = _log2_edges(x), _log2_edges(y)
        mesh = ax.pcolormesh(x_edges, y_edges, sp, cmap=_speedup_cmap(),
                             norm=_speedup_norm(vmin, vmax), shading="flat",
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

        _log2_ticks(ax, "x", group)
        _log2_ticks(ax, "y", prefix)
        marked = point is not None and _mark_point(ax, point, (x_edges[0], x_edges[-1]), (y_edges[0], y_edges[-1]))
        if hatched or marked:
            from matplotlib.lines import Line2D
            from matplotlib.patches import Patch

            handles = ([Line2D([], [], marker="*", markersize=13, color="white", markeredgecolor="black",
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
        _title(ax, f"{title}\nsuffix {fmt_tokens(suffix)} tokens per sequence, {groups}\n{verdict}")

        cb = fig.colorbar(mesh, ax=ax, pad=0.02)
        cb.set_label("speedup (per-sequence step / cascade step)")
        ticks = [t for t in _CBAR_TICKS if vmin <= t <= vmax]
        cb.ax.yaxis.set_major_locator(FixedLocator(ticks))
        cb.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}x"))
        cb.ax.yaxis.set_minor_locator(FixedLocator([]))
        cb.ax.axhline(1.0, color="black", linewidth=2.5)
        _finish(fig, params)
        return _save(fig, out_stem, formats)


# ----------------------------------------------------------------------------------------------
# step time over a run


def _thin(n: int, max_points: int = 600) -> np.ndarray:
    """Indices of at most ~max_points evenly spread steps, first and last included (the curves are
    smooth between steps; 8,192 points only bloat the SVG and slow the drawing)."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(int))


def _right_labels(ax, items) -> None:
    """Labels just right of the axes at data heights, nudged apart when they would overlap."""
    from matplotlib.transforms import blended_transform_factory, offset_copy

    tr = blended_transform_factory(ax.transAxes, ax.transData)
    fig = ax.figure
    min_gap_px = 11 / 72 * fig.dpi * 1.05
    ys = [ax.transData.transform((0, y))[1] for y, _t, _c in items]
    order = np.argsort(ys)
    placed = {}
    last = -np.inf
    for i in order:
        y = max(ys[i], last + min_gap_px)
        placed[i] = y - ys[i]
        last = y
    for i, (y, text, colour) in enumerate(items):
        t = offset_copy(tr, fig=fig, x=4, y=placed[i], units="dots")
        ax.text(1.0, y, text, transform=t, ha="left", va="center", fontsize=9, color=colour, clip_on=False)


def plot_step_times(est: "Estimate", out_stem: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Step time (ms) per decode step for both modes over the stacked parts that attention does not
    touch (GEMMs, engine glue, all-reduce: the floor both modes share), and the per-step speedup below
    it: early steps gain most, the gain fades as the private suffixes grow."""
    _mpl()
    from matplotlib import rc_context

    c = est.costs
    idx = _thin(np.asarray(c.steps).size)
    k = np.asarray(c.steps, float)[idx]
    ps_ms, cas_ms, w_ms = c.ps_step_s[idx] * 1e3, c.cas_step_s[idx] * 1e3, c.weight_s[idx] * 1e3
    speed = np.asarray(c.speedup, float)[idx]
    run = est.run_speedup
    marker = "o" if k.size <= 20 else None

    with rc_context(_RC):
        fig = _new_figure((8.5, 6.8))
        ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})

        if (ps_ms > cas_ms).any():
            ax.fill_between(k, cas_ms, ps_ms, where=ps_ms >= cas_ms, color=C_CASCADE, alpha=0.10, linewidth=0,
                            interpolate=True, label="time cascade saves")
        if (cas_ms > ps_ms).any():
            ax.fill_between(k, ps_ms, cas_ms, where=cas_ms >= ps_ms, color=C_PER_SEQ, alpha=0.15, linewidth=0,
                            interpolate=True, label="time cascade loses")
        parts = [(w_ms, "GEMMs (weights)", C_WEIGHTS)]
        for arr, name, colour in ((c.glue_s, "engine glue", "#b8860b"), (c.comm_s, "all-reduce (TP)", "#6a3d9a")):
            if arr is not None and np.any(np.asarray(arr) > 0):
                parts.append((np.asarray(arr)[idx] * 1e3, name, colour))
        if len(parts) > 1:   # the step's non-attention parts, stacked: the floor both modes share
            ax.stackplot(k, *[p[0] for p in parts], labels=[p[1] for p in parts], colors=[p[2] for p in parts],
                         alpha=0.28, linewidth=0)
        else:
            ax.plot(k, w_ms, color=C_WEIGHTS, linewidth=1.6, linestyle="--", label="weights only (floor)")
        ax.plot(k, ps_ms, color=C_PER_SEQ, linewidth=2.0, marker=marker, label="step, per-sequence attention")
        ax.plot(k, cas_ms, color=C_CASCADE, linewidth=2.0, marker=marker, label="step, cascade attention")
        lo = float(min(w_ms.min(), cas_ms.min(), ps_ms.min()))
        hi = float(max(ps_ms.max(), cas_ms.max()))
        if _log_if_wide(ax, "y", lo, hi):
            ax.set_ylim(lo / 1.3, hi * 1.6)
            ax.set_ylabel("time per decode step (ms, log scale)")
        else:
            ax.set_ylim(0, hi * 1.12)
            ax.set_ylabel("time per decode step (ms)")
        ax.legend(loc="best", frameon=True, framealpha=0.9, edgecolor="none")
        ax.grid(True, axis="y", alpha=0.3)
        _title(ax, f"{est.scenario.name}: step time over the run ({est.params.mode} mode)\n"
                   f"{_scenario_line(est)}\n{_batch_line(est)}{_fit_note(est)}")

        ax2.axhline(1.0, color="black", linewidth=1.0)
        ax2.fill_between(k, 1.0, speed, where=speed >= 1.0, color=C_CASCADE, alpha=0.15, linewidth=0,
                         interpolate=True)
        ax2.fill_between(k, 1.0, speed, where=speed <= 1.0, color=C_PER_SEQ, alpha=0.2, linewidth=0,
                         interpolate=True)
        ax2.plot(k, speed, color="#1a1a1a", linewidth=2.0, marker=marker)
        ax2.axhline(run, color=C_CASCADE if run >= 1 else C_PER_SEQ, linestyle=":", linewidth=1.8)
        ax2.set_ylabel("speedup per step\n(per-seq. / cascade)")
        ax2.set_xlabel("decode step (tokens generated per sequence)")
        s_lo, s_hi = float(min(speed.min(), 1.0, run)), float(max(speed.max(), 1.0, run))
        pad = (s_hi - s_lo) * 0.22 or 0.1
        ax2.set_ylim(max(0.0, s_lo - pad), s_hi + pad)
        ax2.yaxis.set_major_formatter(lambda v, _p: f"{v:g}x")
        ax2.grid(True, axis="y", alpha=0.3)
        # End-point values: above the curve when it lies above the run line there, else below.
        for j, ha, dx in ((0, "left", 6), (-1, "right", -6)):
            if j == -1 and k.size == 1:
                break
            above = speed[j] >= run
            ax2.annotate(f"step {int(k[j]):,}: {_fmt_x(speed[j])}", (k[j], speed[j]), xytext=(dx, 6 if above else -6),
                         textcoords="offset points", fontsize=9, ha=ha, va="bottom" if above else "top")
        _right_labels(ax2, [(1.0, "breakeven", "black"),
                            (run, f"whole run\n{_fmt_x(run)}", C_CASCADE if run >= 1 else C_PER_SEQ)])
        ax2.set_xlim(k[0] - 0.5 if k.size == 1 else k[0], k[-1] + 0.5 if k.size == 1 else k[-1])
        _finish(fig, est.params)
        return _save(fig, out_stem, formats)


# ----------------------------------------------------------------------------------------------
# bytes per step


def plot_bytes_per_step(est: "Estimate", out_stem: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Stacked HBM bytes per step (weights, shared prefix, private suffix, merge) for both modes at the
    first, middle and final decode step, each bar annotated with its step time."""
    _mpl()
    from matplotlib import rc_context
    from matplotlib.transforms import blended_transform_factory

    merge_gib = max(s.cascade.merge_bytes for s in est.steps) / GiB
    kinds = [("weights", C_WEIGHTS), ("shared prefix KV", C_PREFIX), ("private suffix KV", C_SUFFIX),
             (f"cascade merge (outputs + LSE, {merge_gib:.2g} GiB)", C_MERGE)]
    bars = []   # (x, mode label, [weights, prefix, suffix, merge] GiB, step_s)
    centres, group_labels = [], []
    width, gap = 0.36, 0.04
    for i, s in enumerate(est.steps):
        ps, cas = s.per_sequence, s.cascade
        l2_saved = max(ps.attention_bytes - ps.hbm_bytes, 0.0)   # prefix re-reads served from L2
        ps_parts = [s.weight_bytes, max(ps.prefix_bytes - l2_saved, 0.0), ps.suffix_bytes, ps.merge_bytes]
        cas_parts = [s.weight_bytes, cas.prefix_bytes, cas.suffix_bytes, cas.merge_bytes]
        x0 = float(i)
        bars.append((x0 - width / 2 - gap / 2, "per-seq.", np.array(ps_parts) / GiB, ps.step_s))
        bars.append((x0 + width / 2 + gap / 2, "cascade", np.array(cas_parts) / GiB, cas.step_s))
        centres.append(x0)
        group_labels.append(f"{s.label} step (k={s.step:,})\ncascade {_fmt_x(s.speedup)} faster"
                            if s.speedup >= 1 else f"{s.label} step (k={s.step:,})\ncascade {_fmt_x(s.speedup)}")

    top = max(float(b[2].sum()) for b in bars)
    with rc_context(_RC):
        fig = _new_figure((8.5, 6.0))
        ax = fig.add_subplot()
        for x, _mode, parts, step_s in bars:
            bottom = 0.0
            for (name, colour), v in zip(kinds, parts):
                ax.bar(x, v, width, bottom=bottom, color=colour, edgecolor="white", linewidth=0.6)
                bottom += v
            ax.annotate(f"{_fmt_ms(step_s)}\n{bottom:,.3g} GiB", (x, bottom), xytext=(0, 3),
                        textcoords="offset points", ha="center", va="bottom", fontsize=9)
        ax.set_xticks([b[0] for b in bars], [b[1] for b in bars])
        tr = blended_transform_factory(ax.transData, ax.transAxes)
        for x, label in zip(centres, group_labels):
            ax.text(x, -0.075, label, transform=tr, ha="center", va="top", fontsize=9.5)
        ax.tick_params(axis="x", length=0)
        ax.set_ylim(0, top * 1.22)
        ax.set_ylabel("HBM bytes read per decode step (GiB)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        # Legend: only the kinds present; merge only appears for cascade.
        from matplotlib.patches import Patch

        present = [i for i in range(len(kinds)) if any(b[2][i] > 0 for b in bars)]
        handles = [Patch(color=kinds[i][1], label=kinds[i][0]) for i in present]
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=len(handles),
                  frameon=False)
        _title(ax, f"{est.scenario.name}: HBM bytes per decode step ({est.params.mode} mode)\n"
                   f"{_scenario_line(est)}\n{_batch_line(est)}\nabove each bar: step time and total bytes read"
                   f"{_fit_note(est)}")
        _finish(fig, est.params)
        return _save(fig, out_stem, formats)


# ----------------------------------------------------------------------------------------------
# one workload, several GPUs


def plot_hardware_comparison(estimates: list["Estimate"], out_stem: Path,
                             formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Whole-run decode time per GPU for both modes, with the run speedup over each pair."""
    if not estimates:
        raise ValueError("plot_hardware_comparison needs at least one estimate")
    _mpl()
    from matplotlib import rc_context
    from matplotlib.transforms import blended_transform_factory

    ps = np.array([e.run_per_sequence_s for e in estimates], float)
    cas = np.array([e.run_cascade_s for e in estimates], float)
    names = ["\n".join(textwrap.wrap(_gpu_name(e.scenario.hardware).replace("NVIDIA ", ""), 16))
             for e in estimates]
    x = np.arange(len(estimates), dtype=float)
    width = 0.38
    first = estimates[0]
    models = sorted({e.scenario.model.id for e in estimates})
    sources = list(dict.fromkeys(e.params.numbers for e in estimates))
    if len(sources) > 1:   # say under each GPU which numbers it has (measured, imported or default)
        names = [f"{n}\n({e.params.numbers})" for n, e in zip(names, estimates)]
    workloads = sorted({e.scenario.name for e in estimates})

    with rc_context(_RC):
        fig = _new_figure((max(6.5, 1.6 * len(estimates) + 2.5), 5.8))
        ax = fig.add_subplot()
        ax.bar(x - width / 2, ps, width, color=C_PER_SEQ, label="per-sequence attention")
        ax.bar(x + width / 2, cas, width, color=C_CASCADE, label="cascade attention")
        lo, hi = float(min(ps.min(), cas.min())), float(max(ps.max(), cas.max()))
        log = _log_if_wide(ax, "y", lo, hi)
        for xi, a, b in zip(x, ps, cas):
            for xx, v in ((xi - width / 2, a), (xi + width / 2, b)):
                ax.annotate(_fmt_s(v), (xx, v), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=9)
        # The speedup of each GPU in a row above the bars.
        tr = blended_transform_factory(ax.transData, ax.transAxes)
        for xi, e in zip(x, estimates):
            sp = e.run_speedup
            if e.memory is not None and not e.memory.fits:   # its times are hypothetical: no speedup
                ax.text(xi, 1.01, "does not fit", transform=tr, ha="center", va="bottom", fontsize=10.5,
                        color="#555555")
                ax.bar([xi - width / 2, xi + width / 2], [ps[int(xi)], cas[int(xi)]], width, fill=False,
                       hatch="///", edgecolor="white", linewidth=0)
                continue
            rng = e.verdict.speedup_range
            if rng:   # measured numbers extrapolated to this shape: the range over the sources, not one figure
                ax.text(xi, 1.01, f"{_fmt_x(rng[0])} to {_fmt_x(rng[1])}?", transform=tr, ha="center", va="bottom",
                        fontsize=10.5, color="#555555")
                continue
            ax.text(xi, 1.01, f"{_fmt_x(sp)}", transform=tr, ha="center", va="bottom", fontsize=11.5,
                    color=C_CASCADE if sp >= 1 else C_PER_SEQ)
        if log:
            ax.set_ylim(lo / 1.5, hi * 2.2)
        else:
            ax.set_ylim(0, hi * 1.12)
        ax.set_xticks(x, names)
        ax.set_xlim(-0.6, len(estimates) - 0.4)
        ax.set_ylabel("whole-run decode time (s" + (", log scale)" if log else ")"))
        ax.grid(True, axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=2, frameon=False)
        head = (f"{workloads[0]}: {models[0]}" if len(workloads) == 1 and len(models) == 1
                else f"{', '.join(workloads)}: {', '.join(models)}")
        ranged = any(e.verdict.speedup_range for e in estimates)
        _title(ax, f"{head} across GPUs (numbers: {', '.join(sources)})\n{_batch_line(first)}\n"
                   "above each GPU: whole-run speedup of cascade (per-sequence time / cascade time)"
                   + ("\n'a to b?': measurements extrapolated to this shape, range over every source" if ranged else ""),
               pad=22)
        if len(sources) > 1:
            from types import SimpleNamespace

            from cascade_plan.calibration.params_select import sources_note

            _finish(fig, SimpleNamespace(label="mixed sources, as labelled under each GPU: " + sources_note(
                [(e.scenario.hardware.id, e.params) for e in estimates])))
        else:
            _finish(fig, first.params)
        return _save(fig, out_stem, formats)
