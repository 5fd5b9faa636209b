"""Plot of routing: cascade speedup against replica count, one line per policy."""

from __future__ import annotations

from pathlib import Path

from cascade_plan.render.plot_style import RC, mpl_modules, new_figure, save_figure

COLOURS = {"random": "#c0392b", "round-robin": "#e69f00", "least-loaded": "#8e44ad", "prefix-aware": "#1f6fb4"}
MARKERS = {"random": "o", "round-robin": "s", "least-loaded": "^", "prefix-aware": "D"}


def plot_route_sweep(counts: list[int], sweep: dict[str, list[float]], title: str, out_stem: Path) -> list[Path]:
    mpl = mpl_modules()
    with mpl.rc_context(RC):
        fig = new_figure((7.5, 4.5))
        ax = fig.add_subplot(1, 1, 1)
        for policy, ys in sweep.items():
            ax.plot(counts, ys, marker=MARKERS[policy], color=COLOURS[policy], label=policy, lw=1.6,
                    alpha=0.9, ms=5 if policy != "prefix-aware" else 7, zorder=3 if policy == "prefix-aware" else 2)
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts)
        ax.set_xticklabels([str(c) for c in counts])
        ax.set_xlabel("replicas")
        ax.set_ylabel("cascade speedup over the run (x)")
        ax.set_ylim(bottom=0)
        ax.legend(frameon=False)
        ax.set_title(title, fontsize=9)
        fig.tight_layout()
        return save_figure(fig, out_stem)
