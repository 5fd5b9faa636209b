"""Render the plots of one or more workloads, in parallel processes when there are several.

matplotlib draws on one core, and drawing and encoding the figures is nearly all of `report`'s time, so
each (workload, plot) is a task for a process pool. Where the platform can fork, workers inherit the
already-imported matplotlib instead of importing it again."""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Callable, Collection

from cascade_plan.cost.verdict import range_tag

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.serving.workload_analysis import WorkloadReport

KINDS = ("heatmap", "steps", "bytes", "hardware", "capacity")
CAPTIONS = {"heatmap": "Speedup over shared-prefix length x group size, breakeven contour",
            "steps": "Step time over the run", "bytes": "Bytes per decode step",
            "hardware": "The same workload across GPUs",
            "capacity": "Capacity: tokens/s per GPU against TPOT, cascade on and off (Pareto frontier)"}
STEMS = {"heatmap": "speedup-heatmap", "steps": "step-times", "bytes": "bytes-per-step", "hardware": "hardware",
         "capacity": "capacity"}


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:          # macOS, Windows
        return max(1, os.cpu_count() or 1)


def render_one(r: WorkloadReport, kind: str, folder: Path, formats: tuple[str, ...]) -> Path:
    """One plot of one analysed workload; returns the first file written (the PNG)."""
    # imported here: estimate's start-up imports this module (for KINDS), never the drawing or the breakeven search
    from cascade_plan.render import plots

    est, stem = r.est, Path(folder) / STEMS[kind]
    if kind == "heatmap":
        from cascade_plan.cost.breakeven import workload_point

        name = f"{est.scenario.model.id} on {est.scenario.hardware.id}"
        group, prefix = workload_point(est.scenario)
        rng = est.verdict.speedup_range
        run = (f"run {rng[0]:.2f}x to {rng[1]:.2f}x\n({range_tag(est.verdict)})" if rng
               else f"run {est.run_speedup:.2f}x")
        return plots.plot_speedup_heatmap(r.breakeven.sweep, f"Cascade speedup: {name}", stem,
                                          params=r.breakeven.params,
                                          point=(group, prefix, f"{est.scenario.name}\n{run}"),
                                          formats=formats)[0]
    if kind == "steps":
        return plots.plot_step_times(est, stem, formats=formats)[0]
    if kind == "bytes":
        return plots.plot_bytes_per_step(est, stem, formats=formats)[0]
    if kind == "capacity":
        from cascade_plan.render.capacity_plot import plot_capacity

        assert r.capacity is not None                    # plot_tasks draws it only where there is one
        return plot_capacity(r.capacity, stem, formats)[0]
    return plots.plot_hardware_comparison(r.hardware_estimates, stem, formats=formats)[0]


def plot_tasks(jobs: list[tuple[WorkloadReport, Path]], kinds: Collection[str]) -> list[tuple[int, str]]:
    """(job index, kind) of every plot to draw; the across-GPU plot only where GPUs are compared."""
    return [(i, k) for i, (r, _) in enumerate(jobs) for k in KINDS
            if k in kinds and (k != "hardware" or r.hardware_estimates) and (k != "capacity" or r.capacity)]


def render_plots(jobs: list[tuple[WorkloadReport, Path]], kinds: Collection[str], formats: tuple[str, ...],
                 workers: int, on_done: Callable[[], None] | None = None) -> list[dict[str, Path]]:
    """For each (analysed workload, folder): {caption: first file} in KINDS order. `workers` > 1 renders in
    that many processes; on_done is called once per plot finished."""
    tasks = plot_tasks(jobs, kinds)
    done: dict[tuple[int, str], Path] = {}
    if workers <= 1 or len(tasks) <= 1:
        for i, k in tasks:
            done[(i, k)] = render_one(jobs[i][0], k, jobs[i][1], formats)
            if on_done:
                on_done()
    else:
        _parallel(jobs, tasks, formats, workers, done, on_done)
    return [{CAPTIONS[k]: done[(i, k)] for k in KINDS if (i, k) in done} for i in range(len(jobs))]


def _parallel(jobs: list[tuple[WorkloadReport, Path]], tasks: list[tuple[int, str]], formats: tuple[str, ...],
              workers: int, done: dict[tuple[int, str], Path], on_done: Callable[[], None] | None) -> None:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from cascade_plan.render import plots

    _warm(plots)                     # forked workers inherit matplotlib imported, fonts loaded
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else None)
    pool = ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=context, initializer=_ignore_sigint)
    try:
        futures = {pool.submit(render_one, jobs[i][0], k, jobs[i][1], formats): (i, k) for i, k in tasks}
        for fut in as_completed(futures):
            done[futures[fut]] = fut.result()
            if on_done:
                on_done()
    except BaseException:
        # Ctrl-C (or a failed plot): stop the workers now rather than wait for their plots; the caller
        # removes the folder they were drawing into.
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _ignore_sigint() -> None:
    """In a plot worker: Ctrl-C is the parent's to handle (one line, exit 130); a worker that took it too
    would print its own traceback. And a worker ends with its parent: a report killed with SIGKILL would
    otherwise leave its workers waiting on the task queue forever (Linux: PR_SET_PDEATHSIG)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM), 0, 0, 0)          # PR_SET_PDEATHSIG
    except (OSError, AttributeError):                           # not Linux: the parent stops them on Ctrl-C
        pass
    if os.getppid() == 1:                                       # the parent died before the call above
        os._exit(1)


def _warm(plots: ModuleType) -> None:
    """Import what drawing needs and draw one tiny figure (fonts, text layout), once, in the parent."""
    import matplotlib.colors  # noqa: F401  (imported by the plot functions; here so that workers inherit it)
    import matplotlib.patches  # noqa: F401
    import matplotlib.ticker  # noqa: F401
    import matplotlib.transforms  # noqa: F401

    plots.mpl_modules()
    fig = plots.new_figure((1, 1))
    ax = fig.add_subplot()
    ax.plot([1, 2], [1, 2])
    ax.set_title("warm-up 1K")
    fig.savefig(io.BytesIO(), format="png")

