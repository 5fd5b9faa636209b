"""The capacity search's Pareto frontier: tokens/s per GPU against mean decode step (TPOT), cascade on and off."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from cascade_plan.render.plot_style import (
    C_CASCADE,
    C_PER_SEQ,
    FORMATS,
    log_if_wide,
    new_figure,
    plain,
    save_figure,
    set_title,
)
from cascade_plan.serving.capacity_search import Candidate, SearchResult


def pareto(cands: list[Candidate]) -> list[Candidate]:
    """The candidates no other beats on both TPOT (lower) and tokens/s per GPU (higher), by TPOT."""
    out: list[Candidate] = []
    best = -np.inf
    for c in sorted(cands, key=lambda c: (c.tpot_s, -c.tokens_per_s_per_gpu)):
        if c.tokens_per_s_per_gpu > best:
            out.append(c)
            best = c.tokens_per_s_per_gpu
    return out


def _label(c: Candidate) -> str:
    return f"{c.gpus}x {c.hardware} TP{c.tp}, {c.backend}, {c.kv_dtype} KV, {c.sequences:,} seqs"


def plot_capacity(result: SearchResult, out_stem: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    fig = new_figure((9.0, 5.6))
    ax = fig.add_subplot(1, 1, 1)
    fitting = [c for c in result.candidates if c.fits]
    for cascade, colour, name in ((False, C_PER_SEQ, "cascade off"), (True, C_CASCADE, "cascade on")):
        mine = [c for c in fitting if c.cascade == cascade]
        if not mine:
            continue
        for meets, face, size in ((False, "none", 14), (True, colour, 18)):
            pts = [c for c in mine if c.meets == meets]
            if pts:
                ax.scatter([c.tpot_s * 1e3 for c in pts], [c.tokens_per_s_per_gpu for c in pts], s=size,
                           facecolors=face, edgecolors=colour, linewidths=0.7, alpha=0.45,
                           label=f"{name}, {'meets' if meets else 'misses'} the targets")
        front = pareto(mine)
        ax.step([c.tpot_s * 1e3 for c in front], [c.tokens_per_s_per_gpu for c in front], where="post",
                color=colour, linewidth=1.6, label=f"{name}: Pareto frontier")
    best = result.best
    if best is not None:
        ax.scatter([best.tpot_s * 1e3], [best.tokens_per_s_per_gpu], marker="*", s=220, color="#222222", zorder=5,
                   label="best: " + _label(best))
    tpot = result.targets.tpot_s
    if tpot is not None:
        ax.axvline(tpot * 1e3, color="#555555", linestyle="--", linewidth=1.0, label=f"TPOT target {tpot * 1e3:g} ms")
    if fitting:
        xs = [c.tpot_s * 1e3 for c in fitting]
        log_if_wide(ax, "x", min(xs), max(xs))
    ax.set_xlabel("mean decode step, TPOT (ms)")
    ax.set_ylabel("output tokens/s per GPU (whole rollout, waves included)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7.5, loc="best", framealpha=0.85)
    uncal = sum(c.source == "uncalibrated" for c in fitting)
    sub = f"{len(fitting):,} configurations that fit" + (f" ({uncal:,} from uncalibrated defaults)" if uncal else "")
    set_title(ax, f"{result.workload} ({result.model}): capacity, cascade on vs off\n{sub}")
    lines = textwrap.wrap("Cost model: each GPU's own numbers, " + sources_words(result.candidates), 125)
    h = fig.get_size_inches()[1]
    fig.tight_layout(pad=0.6, rect=(0, (0.1 + 0.17 * len(lines)) / h, 1, 1))
    fig.text(0.01, 0.04 / h, plain("\n".join(lines)), fontsize=9, color="#444444", ha="left", va="bottom")
    return save_figure(fig, out_stem, formats)


SOURCE_WORDS = {"calibrated": "our probe on that GPU", "imported": "AIConfigurator's tables, cascade kernels "
                "transferred from the H200 probe", "uncalibrated": "the default efficiencies (uncalibrated)"}


def sources_words(cands: list[Candidate]) -> str:
    """Which GPUs' candidates rest on which source, in words."""
    by: dict[str, list[str]] = {}
    for c in cands:
        gpus = by.setdefault(c.source, [])
        if c.hardware not in gpus:
            gpus.append(c.hardware)
    return "; ".join(f"{SOURCE_WORDS[s]}: {', '.join(g)}" for s, g in by.items())
