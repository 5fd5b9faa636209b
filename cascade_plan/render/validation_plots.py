"""validate's pictures: predicted vs measured, and error by region of the grid."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.render.plot_style import mpl_modules, save_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure as FigureType

MARKERS = {"decode_shared": "o", "decode_dup": "s", "prefix": "^", "suffix": "v", "cascade_total": "D"}


def _footer(fig: FigureType, res: dict) -> None:
    """Name the cost-model source, as every plot does: the fitted calibration, scored on held-out points."""
    src = res.get("source")
    where = f" ({Path(src).name})" if src else ""
    text = (f"Cost model: calibrated{where}, fitted on the training part of the probe grid; the points shown are "
            "held out")
    fig.supxlabel("\n".join(textwrap.wrap(text, int(fig.get_size_inches()[0] * 14))), fontsize=8, color="#444444",
                  x=0.01, ha="left")


def plot_scatter(res: dict, out_stem: Path) -> list[Path]:
    mpl_modules()
    from matplotlib.figure import Figure

    backends = list(res["backends"])
    fig = Figure(figsize=(4.2 * len(backends), 4.4), layout="constrained")
    axes = fig.subplots(1, len(backends), squeeze=False)[0]
    for ax, backend in zip(axes, backends):
        name, _, kv = backend.partition("/")
        pts = [p for p in res["points"] if p["backend"] == name and p["kv_dtype"] == (kv or "bf16")]
        lo = min(min(p["measured_s"], p["predicted_s"]) for p in pts) * 1e6 * 0.8
        hi = max(max(p["measured_s"], p["predicted_s"]) for p in pts) * 1e6 * 1.25
        ax.fill_between([lo, hi], [lo / 1.12, hi / 1.12], [lo * 1.12, hi * 1.12], color="#dddddd", label="±12%")
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8)
        for kind, marker in MARKERS.items():
            sel = [p for p in pts if p["kernel"] == kind]
            if sel:
                ax.scatter([p["measured_s"] * 1e6 for p in sel], [p["predicted_s"] * 1e6 for p in sel], s=16,
                           marker=marker, label=kind, alpha=0.8)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured time per layer (µs)",
               ylabel="predicted (µs)", title=backend)
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle("Held-out kernels: predicted vs measured (one attention layer)")
    _footer(fig, res)
    return save_figure(fig, out_stem)


def plot_error_heatmap(res: dict, out_stem: Path) -> list[Path]:
    """Median absolute error of held-out kernel times per (prefix, group) cell, all backends."""
    mpl_modules()
    from matplotlib.figure import Figure

    pts = [p for p in res["points"] if p["kernel"] in ("cascade_total", "decode_shared", "decode_dup", "prefix")]
    prefixes = sorted({p["config"]["prefix_tokens"] for p in pts})
    groups = sorted({p["config"]["group_size"] for p in pts})
    grid = np.full((len(prefixes), len(groups)), np.nan)
    count = np.zeros_like(grid)
    for i, pf in enumerate(prefixes):
        for j, g in enumerate(groups):
            errs = [abs(p["predicted_s"] / p["measured_s"] - 1) for p in pts
                    if p["config"]["prefix_tokens"] == pf and p["config"]["group_size"] == g]
            if errs:
                grid[i, j], count[i, j] = np.median(errs) * 100, len(errs)
    fig = Figure(figsize=(6.4, 4.6), layout="constrained")
    ax = fig.subplots()
    im = ax.imshow(grid, origin="lower", cmap="magma_r", vmin=0, vmax=max(15, np.nanmax(grid)), aspect="auto")
    for i in range(len(prefixes)):
        for j in range(len(groups)):
            if count[i, j]:
                ax.text(j, i, f"{grid[i, j]:.0f}%\nn={int(count[i, j])}", ha="center", va="center", fontsize=7,
                        color="white" if grid[i, j] > 10 else "black")
    ax.set_xticks(range(len(groups)), [str(g) for g in groups])
    ax.set_yticks(range(len(prefixes)), [f"{p:,}" for p in prefixes])
    ax.set(xlabel="sequences sharing the prefix (group size)", ylabel="shared prefix (tokens)",
           title="Median |error| of held-out kernel times by region (all backends)")
    fig.colorbar(im, ax=ax, label="median absolute error (%)")
    _footer(fig, res)
    return save_figure(fig, out_stem)
