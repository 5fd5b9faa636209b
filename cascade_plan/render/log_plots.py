"""Plots of a log analysis: distributions of the sharing per step and of the per-step speedup."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.logs.analysis import METRICS, Analysis
from cascade_plan.render.plot_style import C_CASCADE, C_PER_SEQ, RC, mpl_modules, new_figure, save_figure

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

SHORT = {"batch": "batch size", "siblings": "siblings per group", "prefix_tokens": "shared prefix per sequence",
         "private_tokens": "private context per sequence", "groups": "sibling groups",
         "common_prefix_tokens": "prefix shared by every sequence"}


def _hist(ax: Axes, x: np.ndarray, label: str, color: str = C_CASCADE) -> None:
    x = x[np.isfinite(x)]
    if x.size == 0:
        ax.text(0.5, 0.5, "no steps", ha="center", transform=ax.transAxes)
        return
    lo, hi = float(x.min()), float(x.max())
    whole = bool(np.all(x == np.round(x)))
    if lo > 0 and hi / lo > 1e4:
        bins = np.geomspace(lo, hi * 1.0001, 40)
        ax.set_xscale("log")
    elif whole and hi - lo < 40:
        bins = np.arange(lo - 0.5, hi + 1.5)         # one bar per whole value
        from matplotlib.ticker import MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    else:
        pad = max(hi - lo, abs(hi), 1.0) * 0.02
        bins = np.linspace(lo - pad, hi + pad, 41)
    counts = np.asarray(ax.hist(x, bins=bins.tolist(), color=color, alpha=0.85)[0])
    nonzero = counts[counts > 0]
    if nonzero.size > 1 and nonzero.max() / nonzero.min() > 50:
        ax.set_yscale("log")          # a few odd steps stay visible beside the bulk
    ax.set_xlabel(label)
    ax.set_ylabel("steps")


def plot_log_distributions(a: Analysis, title: str, out_stem: Path) -> list[Path]:
    """Histograms of batch size, sibling count, shared-prefix and private tokens per step, and of the
    modelled per-step speedup of cascade (left of 1x: cascade loses)."""
    mpl = mpl_modules()
    with mpl.rc_context(RC):
        fig = new_figure((15, 6.5))
        axes = fig.subplots(2, 4)
        keys = ("batch", "groups", "siblings", "prefix_tokens", "common_prefix_tokens", "private_tokens")
        for ax, key in zip(axes.flat, keys):
            unit, _ = METRICS[key]
            _hist(ax, a.metrics[key], f"{SHORT[key]} ({unit})")
        box = axes.flat[7]
        box.set_axis_off()
        v, e = a.verdict, a.engine.to_json(a.times.pays)
        box.text(0.0, 0.95, "\n".join([
            f"{v.steps:,} steps on {len(a.replica_names)} replica(s)",
            f"cascade pays in {v.share_steps_paying:.1%} of steps,",
            f"  {v.share_time_paying:.1%} of decode time",
            f"decode: {v.per_sequence_s:,.3g} s per-sequence,",
            f"  {v.best_s:,.3g} s with cascade where it pays",
            f"  (saves {v.saving_fraction:.1%})",
            "vLLM (opted in) would cascade",
            f"  {e['share_of_steps_vllm_would_cascade']:.1%} of steps"]), va="top", ha="left", fontsize=10,
            transform=box.transAxes, family="DejaVu Sans")
        ax = axes.flat[6]
        with np.errstate(divide="ignore", invalid="ignore"):
            sp = a.times.per_sequence_s / a.times.cascade_s
        _hist(ax, sp, "per-step speedup of cascade (x)", C_PER_SEQ)
        ax.axvline(1.0, color="k", lw=1, ls="--")
        fig.suptitle(title, fontsize=11)
        fig.tight_layout()
        return save_figure(fig, out_stem)
