"""Pictures of an estimate and a sweep: speedup heatmap with the breakeven contour, step time over a
run, bytes per step, and one workload across several GPUs. PNG and SVG, written atomically.

matplotlib is imported inside the functions (the estimate path must not pay for it) and drawn on a
bare `Figure` with the Agg backend, so nothing here needs a display or touches pyplot's figure list.
Functions return the paths they wrote and never print.
"""

# The plots live in three modules (style, heatmap, run and GPU plots); this one names the public API.
from cascade_plan.render.heatmap_plot import plot_speedup_heatmap
from cascade_plan.render.plot_style import (
    C_CASCADE,
    C_MERGE,
    C_PER_SEQ,
    C_PREFIX,
    C_SUFFIX,
    C_WEIGHTS,
    DPI,
    FORMATS,
    RC,
    fmt_tokens,
    mpl_modules,
    new_figure,
    save_figure,
)
from cascade_plan.render.run_plots import plot_bytes_per_step, plot_hardware_comparison, plot_step_times

__all__ = [
    "plot_speedup_heatmap", "plot_bytes_per_step", "plot_hardware_comparison", "plot_step_times", "RC", "C_CASCADE",
    "C_MERGE", "C_PER_SEQ", "C_PREFIX", "C_SUFFIX", "C_WEIGHTS", "DPI", "FORMATS", "mpl_modules", "new_figure",
    "save_figure", "fmt_tokens",
]
