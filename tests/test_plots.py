"""Plots: every shipped workload yields non-empty PNG + SVG from every plot function, written
atomically (no temp files left), and the heatmap survives sweeps where cascade never / always wins."""

import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

from cascade_plan import DEFAULT, IDEAL, estimate, load_hardware, load_scenario
from cascade_plan.cost.breakeven import Sweep, sweep
from cascade_plan.render import plots

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = sorted((ROOT / "workloads").glob("*.yaml"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def assert_plot_files(paths, stem: Path):
    assert [p.suffix for p in paths] == [".png", ".svg"]
    png, svg = paths
    assert png == stem.with_suffix(".png") and svg == stem.with_suffix(".svg")
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE)
    assert len(data) > 10_000
    text = svg.read_text(encoding="utf-8")
    assert "<svg" in text
    assert len(text) > 2_000


def no_temp_files(folder: Path):
    return sorted(p.name for p in folder.rglob("*") if p.is_file() and p.suffix not in (".png", ".svg"))


def small_sweep(scn, params):
    return sweep(scn, params, prefix_tokens=2 ** np.arange(6, 17), group_size=2 ** np.arange(0, 10),
                 suffix_tokens=[512, 4096], n_groups=2)


def _render_workload(path: Path, out: Path) -> dict[str, list[Path]]:
    """Every plot function on one shipped workload."""
    scn = load_scenario(path)
    est = estimate(scn, DEFAULT)
    out_dir = out / "nested" / "dir"        # parent directories are created
    title = f"{scn.model.id} on {scn.hardware.name} ({DEFAULT.mode} mode)"
    ests = [estimate(msgspec.structs.replace(scn, hardware=load_hardware(h)), DEFAULT) for h in ("a100-80gb", "b200")]
    return {
        "heatmap": plots.plot_speedup_heatmap(small_sweep(scn, DEFAULT), title, out_dir / "heatmap"),
        "steps": plots.plot_step_times(est, out_dir / "steps"),
        "bytes": plots.plot_bytes_per_step(est, out_dir / "bytes"),
        "gpus": plots.plot_hardware_comparison(ests, out_dir / "gpus"),
    }


# Each test draws its own workload's plots: a module fixture drawing all of them was drawn again on each xdist
# worker that ran one of these tests (about 20 s of drawing per worker).
@pytest.mark.slow       # 4 plots x 8 workloads, about 20 s together
@pytest.mark.parametrize("path", WORKLOADS, ids=lambda p: p.stem)
def test_every_plot_for_every_shipped_workload(tmp_path, path):
    results = _render_workload(path, tmp_path)
    out_dir = tmp_path / "nested" / "dir"
    assert set(results) == {"heatmap", "steps", "bytes", "gpus"}
    for stem, paths in results.items():
        assert_plot_files(paths, out_dir / stem)
    assert len(list(out_dir.iterdir())) == 8
    assert no_temp_files(tmp_path) == []


def test_heatmap_where_cascade_never_wins_always_wins_or_breaks_exactly_even(tmp_path, recwarn):
    scn = load_scenario(ROOT / "workloads/rl-rollouts-64.yaml")
    # Groups of one or two, long suffixes: cascade only adds launches, it never wins.
    never = sweep(scn, DEFAULT, prefix_tokens=[64, 128, 256], group_size=[1, 2], suffix_tokens=[4096])
    assert (never.speedup < 1).all()
    # Ideal mode (no fixed costs), groups > 1, on a grid that is not in powers of two, second suffix.
    always = sweep(scn, IDEAL, prefix_tokens=[100, 300, 3000, 30000], group_size=[3, 5, 12, 40],
                   suffix_tokens=[16, 2000])
    assert (always.speedup[:, :, 1] > 1).all()
    # Every point exactly at the breakeven: no contour level lies strictly inside the data.
    even = Sweep(prefix_tokens=np.array([256, 512]), group_size=np.array([1, 2]), suffix_tokens=np.array([256]),
                 n_groups=1, per_sequence_step_s=np.full((2, 2, 1), 0.01), cascade_step_s=np.full((2, 2, 1), 0.01))
    for name, sw, idx in (("never", never, 0), ("always", always, 1), ("even", even, 0)):
        assert_plot_files(plots.plot_speedup_heatmap(sw, name, tmp_path / name, suffix_index=idx), tmp_path / name)
    assert no_temp_files(tmp_path) == []
    assert not [w for w in recwarn if "contour" in str(w.message).lower()]


def test_overwrites_in_place_and_leaves_no_temp_files(tmp_path):
    est = estimate(load_scenario(ROOT / "workloads/parallel-sampling-n8.yaml"), IDEAL)
    first = plots.plot_hardware_comparison([est], tmp_path / "b")
    again = plots.plot_hardware_comparison([est], tmp_path / "b")
    assert first == again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.png", "b.svg"]


def test_failed_save_leaves_no_temp_file(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    def boom(self, *a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", boom)
    est = estimate(load_scenario(ROOT / "workloads/beam-search.yaml"), DEFAULT)
    with pytest.raises(RuntimeError, match="disk full"):
        plots.plot_step_times(est, tmp_path / "s")
    assert list(tmp_path.iterdir()) == []


def test_hardware_comparison_needs_an_estimate(tmp_path):
    with pytest.raises(ValueError):
        plots.plot_hardware_comparison([], tmp_path / "x")


@pytest.mark.parametrize("n, text", [(64, "64"), (256, "256"), (1024, "1K"), (4096, "4K"), (32768, "32K"),
                                     (1 << 20, "1M"), (6000, "6,000"), (1, "1")])
def test_token_labels(n, text):
    assert plots.fmt_tokens(n) == text


def test_module_imports_no_matplotlib():
    import subprocess

    code = "import sys, cascade_plan.render.plots; print('matplotlib' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert res.stdout.strip() == "False"


def test_step_times_legend_step_table_and_report_name_the_glue_alike(tmp_path, monkeypatch):
    """An MoE model's glue time holds its router, alignment and combine where the calibration prices them: the
    plot's legend, the step table and the report's words say the same."""
    from cascade_plan import select_params
    from cascade_plan.render import run_plots
    from cascade_plan.render.report import _rest_of_step
    from cascade_plan.render.step_table import glue_label, step_rows

    scn = load_scenario(ROOT / "workloads/deepseek-v3-grpo-tp8.yaml")
    est = estimate(scn, select_params(scn))
    label = glue_label(est)
    assert label == "engine glue + MoE routing, alignment, combine"
    assert label in [r[0] for r in step_rows(est)]
    assert f", {label} " in _rest_of_step(est)[0]
    figs = []
    monkeypatch.setattr(run_plots, "save_figure", lambda fig, stem, formats=(): figs.append(fig) or [])
    run_plots.plot_step_times(est, tmp_path / "s")
    assert label in [t.get_text() for t in figs[0].axes[0].get_legend().get_texts()]
    dense = estimate(load_scenario(ROOT / "workloads/rl-rollouts-64.yaml"), DEFAULT)
    assert glue_label(dense) == "engine glue"
