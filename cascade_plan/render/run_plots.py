"""Plots of one run and of one workload across GPUs: step time over the run (with the parts attention does not
touch stacked beneath), bytes per step, and whole-run time per GPU."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING

import numpy as np

from cascade_plan.cost.verdict import range_tag
from cascade_plan.planning.params_select import sources_note
from cascade_plan.render.plot_style import (
    C_CASCADE,
    C_MERGE,
    C_PER_SEQ,
    C_PREFIX,
    C_SUFFIX,
    C_WEIGHTS,
    FORMATS,
    RC,
    UNCALIBRATED,
    batch_line,
    finish_figure,
    fit_note,
    fmt_ms,
    fmt_ratio,
    fmt_seconds_short,
    gpu_name,
    log_if_wide,
    mpl_modules,
    new_figure,
    save_figure,
    scenario_line,
    set_title,
)
from cascade_plan.render.step_table import glue_label
from cascade_plan.units import GiB

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

    from cascade_plan.cost.estimate import Estimate


# ----------------------------------------------------------------------------------------------
# step time over a run


def _thin(n: int, max_points: int = 600) -> np.ndarray:
    """Indices of at most ~max_points evenly spread steps, first and last included (the curves are
    smooth between steps; 8,192 points only bloat the SVG and slow the drawing)."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(int))


def _right_labels(ax: Axes, items: list[tuple[float, str, str]]) -> None:
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
        t = offset_copy(tr, fig=fig, x=4, y=placed[i], units="dots")  # type: ignore[arg-type]  # no SubFigures
        ax.text(1.0, y, text, transform=t, ha="left", va="center", fontsize=9, color=colour, clip_on=False)


def plot_step_times(est: "Estimate", out_stem: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Step time (ms) per decode step for both modes over the stacked parts that attention does not
    touch (GEMMs, engine glue, all-reduce: the floor both modes share), and the per-step speedup below
    it: early steps gain most, the gain fades as the private suffixes grow."""
    mpl_modules()
    from matplotlib import rc_context

    c = est.costs
    idx = _thin(np.asarray(c.steps).size)
    k = np.asarray(c.steps, float)[idx]
    ps_ms, cas_ms, w_ms = c.ps_step_s[idx] * 1e3, c.cas_step_s[idx] * 1e3, c.weight_s[idx] * 1e3
    speed = np.asarray(c.speedup, float)[idx]
    run = est.run_speedup
    marker = "o" if k.size <= 20 else None

    with rc_context(RC):
        fig = new_figure((8.5, 6.8))
        ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})

        if (ps_ms > cas_ms).any():
            ax.fill_between(k, cas_ms, ps_ms, where=ps_ms >= cas_ms, color=C_CASCADE, alpha=0.10, linewidth=0,
                            interpolate=True, label="time cascade saves")
        if (cas_ms > ps_ms).any():
            ax.fill_between(k, ps_ms, cas_ms, where=cas_ms >= ps_ms, color=C_PER_SEQ, alpha=0.15, linewidth=0,
                            interpolate=True, label="time cascade loses")
        parts = [(w_ms, "GEMMs (weights)", C_WEIGHTS)]
        for arr, name, colour in ((c.glue_s, glue_label(est), "#b8860b"), (c.comm_s, "all-reduce (TP)", "#6a3d9a")):
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
        if log_if_wide(ax, "y", lo, hi):
            ax.set_ylim(lo / 1.3, hi * 1.6)
            ax.set_ylabel("time per decode step (ms, log scale)")
        else:
            ax.set_ylim(0, hi * 1.12)
            ax.set_ylabel("time per decode step (ms)")
        ax.legend(loc="best", frameon=True, framealpha=0.9, edgecolor="none")
        ax.grid(True, axis="y", alpha=0.3)
        set_title(ax, f"{est.scenario.name}: step time over the run ({est.params.mode} mode)\n"
                   f"{scenario_line(est)}\n{batch_line(est)}{fit_note(est)}")

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
            ax2.annotate(f"step {int(k[j]):,}: {fmt_ratio(speed[j])}", (k[j], speed[j]),
                         xytext=(dx, 6 if above else -6), textcoords="offset points", fontsize=9, ha=ha,
                         va="bottom" if above else "top")
        rng = est.verdict.speedup_range
        run_text = (f"whole run\n{fmt_ratio(rng[0])} to\n{fmt_ratio(rng[1])}?\n{range_tag(est.verdict)}" if rng
                    else f"whole run\n{fmt_ratio(run)}")
        _right_labels(ax2, [(1.0, "breakeven", "black"),
                            (run, run_text, "#555555" if rng else C_CASCADE if run >= 1 else C_PER_SEQ)])
        ax2.set_xlim(k[0] - 0.5 if k.size == 1 else k[0], k[-1] + 0.5 if k.size == 1 else k[-1])
        finish_figure(fig, est.params, est.coverage)
        return save_figure(fig, out_stem, formats)


# ----------------------------------------------------------------------------------------------
# bytes per step


def plot_bytes_per_step(est: "Estimate", out_stem: Path, formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Stacked HBM bytes per step (weights, shared prefix, private suffix, merge) for both modes at the
    first, middle and final decode step, each bar annotated with its step time."""
    mpl_modules()
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
        group_labels.append(f"{s.label} step (k={s.step:,})\ncascade {fmt_ratio(s.speedup)} faster"
                            if s.speedup >= 1 else f"{s.label} step (k={s.step:,})\ncascade {fmt_ratio(s.speedup)}")

    top = max(float(b[2].sum()) for b in bars)
    with rc_context(RC):
        fig = new_figure((8.5, 6.0))
        ax = fig.add_subplot()
        for x, _mode, parts, step_s in bars:
            bottom = 0.0
            for (name, colour), v in zip(kinds, parts):
                ax.bar(x, v, width, bottom=bottom, color=colour, edgecolor="white", linewidth=0.6)
                bottom += v
            ax.annotate(f"{fmt_ms(step_s)}\n{bottom:,.3g} GiB", (x, bottom), xytext=(0, 3),
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
        set_title(ax, f"{est.scenario.name}: HBM bytes per decode step ({est.params.mode} mode)\n"
                   f"{scenario_line(est)}\n{batch_line(est)}\nabove each bar: step time and total bytes read"
                   f"{fit_note(est)}")
        finish_figure(fig, est.params, est.coverage)
        return save_figure(fig, out_stem, formats)


# ----------------------------------------------------------------------------------------------
# one workload, several GPUs


def plot_hardware_comparison(estimates: list["Estimate"], out_stem: Path,
                             formats: tuple[str, ...] = FORMATS) -> list[Path]:
    """Whole-run decode time per GPU for both modes, with the run speedup over each pair."""
    if not estimates:
        raise ValueError("plot_hardware_comparison needs at least one estimate")
    mpl_modules()
    from matplotlib import rc_context
    from matplotlib.transforms import blended_transform_factory

    ps = np.array([e.run_per_sequence_s for e in estimates], float)
    cas = np.array([e.run_cascade_s for e in estimates], float)
    names = ["\n".join(textwrap.wrap(gpu_name(e.scenario.hardware).replace("NVIDIA ", ""), 16))
             for e in estimates]
    x = np.arange(len(estimates), dtype=float)
    width = 0.38
    first = estimates[0]
    models = sorted({e.scenario.model.id for e in estimates})
    sources = list(dict.fromkeys(e.params.numbers for e in estimates))
    unc = np.array([e.params.mode == "default" for e in estimates], bool)
    if len(sources) > 1:   # say under each GPU which numbers it has (measured, imported or default)
        names = [f"{n}\n({UNCALIBRATED if e.params.mode == 'default' else e.params.numbers})"
                 for n, e in zip(names, estimates)]
    workloads = sorted({e.scenario.name for e in estimates})

    with rc_context(RC):
        fig = new_figure((max(6.5, 1.6 * len(estimates) + 2.5), 5.8))
        ax = fig.add_subplot()
        ax.bar(x[~unc] - width / 2, ps[~unc], width, color=C_PER_SEQ, label="per-sequence attention")
        ax.bar(x[~unc] + width / 2, cas[~unc], width, color=C_CASCADE, label="cascade attention")
        if unc.any():   # default efficiencies: pale, hatched, never as crisp as measured bars
            for xs, ys, c in ((x[unc] - width / 2, ps[unc], C_PER_SEQ), (x[unc] + width / 2, cas[unc], C_CASCADE)):
                ax.bar(xs, ys, width, color=c, alpha=0.3, hatch="//", edgecolor=c, linewidth=0.8)
            ax.bar([np.nan], [np.nan], width, color="#bbbbbb", alpha=0.5, hatch="//", edgecolor="#777777",
                   label=f"{UNCALIBRATED} (default efficiencies)")
        tops = [ps[i] / e.verdict.speedup_range[0] for i, e in enumerate(estimates) if e.verdict.speedup_range]
        lo, hi = float(min(ps.min(), cas.min())), float(max(ps.max(), cas.max(), *tops))
        log = log_if_wide(ax, "y", lo, hi)
        for xi, a, b in zip(x, ps, cas):
            for xx, v in ((xi - width / 2, a), (xi + width / 2, b)):
                ax.annotate(fmt_seconds_short(v), (xx, v), xytext=(0, 2), textcoords="offset points", ha="center",
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
            if rng:   # extrapolated or uncalibrated: the range, as a bar on the cascade time, not one figure
                i = int(xi)
                lo_s, hi_s = ps[i] / rng[1], ps[i] / rng[0]
                ax.errorbar([xi + width / 2], [cas[i]], yerr=[[max(cas[i] - lo_s, 0)], [max(hi_s - cas[i], 0)]],
                            fmt="none", ecolor="#444444", elinewidth=1.4, capsize=5)
                ax.text(xi, 1.01, f"{fmt_ratio(rng[0])} to {fmt_ratio(rng[1])}?\n{range_tag(e.verdict)}", transform=tr,
                        ha="center", va="bottom", fontsize=10, color="#555555")
                continue
            ax.text(xi, 1.01, f"{fmt_ratio(sp)}", transform=tr, ha="center", va="bottom", fontsize=11.5,
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
        tick_lines = max(n.count("\n") + 1 for n in names)     # the legend goes below the longest GPU name
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.04 - 0.05 * tick_lines), ncols=3 if unc.any() else 2,
                  frameon=False)
        head = (f"{workloads[0]}: {models[0]}" if len(workloads) == 1 and len(models) == 1
                else f"{', '.join(workloads)}: {', '.join(models)}")
        tags = sorted({range_tag(e.verdict) for e in estimates if e.verdict.speedup_range})
        ranged = "\n'a to b?' and the bar on the cascade time: " + "; ".join(
            {"extrapolated": "extrapolated, the range over every source of numbers",
             "uncalibrated": "uncalibrated, the range the defaults' measured error allows"}[t] for t in tags)
        set_title(ax, f"{head} across GPUs (numbers: {', '.join(sources)})\n{batch_line(first)}\n"
                   "above each GPU: whole-run speedup of cascade (per-sequence time / cascade time)"
                   + (ranged if tags else ""), pad=30 if tags else 22)
        if len(sources) > 1:
            note = sources_note([(e.scenario.hardware.id, e.params) for e in estimates])
            assert note is not None                          # the GPUs' `numbers` differ: sources has two
            finish_figure(fig, SimpleNamespace(label="mixed sources, as labelled under each GPU: " + note))
        else:
            finish_figure(fig, first.params)
        return save_figure(fig, out_stem, formats)
