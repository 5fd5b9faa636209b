"""The look every plot shares: colours, matplotlib settings, formatters, titles, footers and the atomic
PNG/SVG save. matplotlib is imported inside the functions (the estimate path must not pay for it) and drawn
on a bare `Figure` with the Agg backend: nothing here needs a display or touches pyplot's figure list."""

from __future__ import annotations

import io
import math
import re
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from cascade_plan.atomic import write_bytes_atomic

if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType, SimpleNamespace

    from matplotlib.axes import Axes
    from matplotlib.colors import FuncNorm, ListedColormap
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

    from cascade_plan.cost.cost_params import CostParams
    from cascade_plan.cost.estimate import Estimate
    from cascade_plan.inputs.hardware import HardwareProfile


DPI = 150

# One colour per mode and per byte kind, used in every plot.
C_PER_SEQ = "#c0392b"      # red: per-sequence attention
C_CASCADE = "#1f6fb4"      # blue: cascade attention
C_WEIGHTS = "#8c8c8c"
C_PREFIX = "#e69f00"
C_SUFFIX = "#56b4e9"
C_MERGE = "#8e44ad"
# The one word every output uses for default-efficiency numbers (compare, report, every plot).
UNCALIBRATED = "uncalibrated"

RC: dict[RcKeyType, Any] = {
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


def mpl_modules() -> ModuleType:
    """Import matplotlib lazily, headless. A caller that already drives pyplot keeps its backend:
    everything here draws on a bare Figure, which renders through Agg whatever the backend is."""
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")
    return matplotlib


def new_figure(figsize: tuple[float, float]) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=DPI)
    FigureCanvasAgg(fig)   # one Agg renderer for layout and the PNG, so text is measured once
    return fig


FORMATS = ("png", "svg")


def save_figure(fig: Figure, out_stem: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Write <stem>.png and (when asked) <stem>.svg next to each other, each atomically."""
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


def fmt_ms(s: float) -> str:
    ms = s * 1e3
    if ms >= 100:
        return f"{ms:,.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.2f} ms"


def fmt_seconds_short(s: float) -> str:
    if s >= 100:
        return f"{s:,.0f} s"
    if s >= 1:
        return f"{s:.3g} s"
    return f"{s * 1e3:.3g} ms"


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:.1f}x"


def plain(text: str) -> str:
    """Text drawn as written: a `$` in a name (a workload, a GPU, a file) would start matplotlib's math mode
    and fail the whole plot on an unbalanced one. Escapes each unescaped `$` (idempotent)."""
    return re.sub(r"(?<!\\)\$", r"\\$", text)


def gpu_name(hw: HardwareProfile) -> str:
    return plain(hw.name or hw.id)


def scenario_line(est: "Estimate") -> str:
    scn = est.scenario
    parts = [f"{scn.model.id} on {gpu_name(scn.hardware)}"]
    if scn.tp > 1:
        parts.append(f"TP{scn.tp}")
    parts.append(f"{scn.kv_dtype} KV, {scn.weight_dtype} weights")
    return ", ".join(parts)


def batch_line(est: "Estimate") -> str:
    flat = est.flat
    return (f"{flat.total_seqs:,} sequences, {fmt_tokens(flat.unique_prefix_tokens)} unique shared prefix tokens, "
            f"{est.decode_steps:,} decode steps")


def fit_note(est: "Estimate") -> str:
    """A title line for a configuration that cannot run (its times are what it would take if it could)."""
    if est.memory is None or est.memory.fits:
        return ""
    return "\ndoes not fit in GPU memory: hypothetical times, no verdict"


def finish_figure(fig: Figure, est_params: CostParams | SimpleNamespace | None = None,
            coverage: tuple[str, ...] = ()) -> None:
    """tight_layout, keeping a strip at the bottom for the cost-parameter sentence (ideal / default /
    calibrated) and, where the workload leaves the calibration's measured grid, why its numbers are
    extrapolated; 9 pt, so nothing needs bbox_inches="tight" (an extra draw per file)."""
    if est_params is None:
        fig.tight_layout(pad=0.6)
        return
    width_in = fig.get_size_inches()[0]
    lines = textwrap.wrap(f"Cost model: {est_params.label}", int(width_in * 14))
    if coverage:
        lines += textwrap.wrap("Beyond the measured grid: " + "; ".join(coverage), int(width_in * 14))
    tagged = getattr(est_params, "mode", None) == "default"   # the same mark on every plot drawn from the defaults
    strip_in = 0.08 + 0.17 * len(lines) + (0.3 if tagged else 0.0)
    h = fig.get_size_inches()[1]
    fig.tight_layout(pad=0.6, rect=(0, strip_in / h, 1, 1))
    fig.text(0.01, 0.04 / h, plain("\n".join(lines)), fontsize=9, color="#444444", ha="left", va="bottom")
    if tagged:
        fig.text(0.01, (0.1 + 0.17 * len(lines)) / h, f"{UNCALIBRATED.upper()}: default efficiencies, not measured "
                 "kernels", fontsize=9.5, color="#333333",
                 ha="left", va="bottom", fontweight="bold",
                 bbox={"boxstyle": "round,pad=0.25", "facecolor": "#e6e6e6", "edgecolor": "#999999"})


def set_title(ax: Axes, text: str, **kw: Any) -> None:
    """Axes title whose lines are wrapped to the figure's width (11 pt DejaVu Sans: ~10 characters
    an inch), so a long workload or GPU name never runs off the canvas."""
    # every axes here is drawn on a Figure, none on a SubFigure (Axes.get_figure(root=True) needs matplotlib 3.10)
    width_chars = int(ax.figure.get_size_inches()[0] * 11)  # type: ignore[union-attr]
    lines = [w for line in text.split("\n") for w in (textwrap.wrap(line, width_chars) or [""])]
    ax.set_title(plain("\n".join(lines)), fontsize=11, **kw)


def log_if_wide(ax: Axes, axis: str, lo: float, hi: float, decade: float = 10.0) -> bool:
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


def log2_edges(centres: np.ndarray) -> np.ndarray:
    """Cell edges for pcolormesh on a log2 axis: midpoints, half a step beyond the ends."""
    c = np.asarray(centres, float)
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[1:] + c[:-1]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])


def log2_ticks(ax: Axes, axis: str, values: np.ndarray, max_ticks: int = 11) -> None:
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


def speedup_cmap() -> ListedColormap:
    """Diverging with a visible step at 1.0: reds below (cascade loses), greens to blues above."""
    from matplotlib import colormaps
    from matplotlib.colors import ListedColormap

    lose = colormaps["Reds"](np.linspace(0.85, 0.30, 128))   # strongest loss darkest
    win = colormaps["GnBu"](np.linspace(0.30, 0.95, 128))    # light green just past breakeven -> dark blue
    return ListedColormap(np.vstack([lose, win]), name="cascade_speedup")


def speedup_norm(vmin: float, vmax: float) -> FuncNorm:
    """Log on each side of 1.0, each side scaled to its own extent, 1.0 in the middle of the map."""
    from matplotlib.colors import FuncNorm

    lo, hi = math.log(vmin), math.log(vmax)   # lo < 0 < hi

    def forward(v: np.ndarray) -> np.ndarray:
        z = np.log(np.clip(np.asarray(v, float), 1e-300, None))
        return np.where(z < 0, z / -lo, z / hi)

    def inverse(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, float)
        return np.exp(np.where(t < 0, t * -lo, t * hi))

    return FuncNorm((forward, inverse), vmin=vmin, vmax=vmax)
