"""What `estimate` imports and computes at start-up (its wall time is measured by
benchmarks/estimate_startup.py, never asserted here)."""

import subprocess
import sys

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from cascade_plan.cost.ops.base import distinct, median0

# every calibration path of `estimate`: the probe file, an imported file, none, --uncalibrated; a GQA, an MLA
# (DeepSeek-V3) and a beam-search workload, whose verdicts read the other backends of the H200's file
PATHS = [["rl-rollouts-64", "--hardware", "h200"], ["rl-rollouts-64", "--hardware", "h100-sxm"],
         ["rl-rollouts-64", "--hardware", "mi300x"], ["rl-rollouts-64", "--hardware", "h100-sxm", "--uncalibrated"],
         ["deepseek-v3-grpo-tp8", "--hardware", "h200"], ["beam-search", "--hardware", "h200", "--kv-dtype", "fp8"]]
HEAVY = ("pandas", "matplotlib", "torch", "triton", "pyarrow", "pydantic", "aiconfigurator_core", "rich", "duckdb",
         "numpy.ma", "numpy.linalg.lapack_lite", "importlib.metadata")


def test_estimate_on_every_path_imports_nothing_heavy(root):
    """numpy.ma (np.unique and np.median import it on first call) and the other command modules stay out."""
    code = ("import io, sys, contextlib\nfrom cascade_plan.cli.entry import main\n"
            f"for args in {PATHS!r}:\n"
            "    sys.argv = ['cascade-plan', 'estimate', *args, '--json']\n"
            "    with contextlib.redirect_stdout(io.StringIO()):\n"
            "        try: main()\n"
            "        except SystemExit as e: assert not e.code, (args, e.code)\n"
            f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
            "print('CLI', sorted(m for m in sys.modules if m.startswith('cascade_plan.cli.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert "HEAVY []" in out.stdout, out.stdout[-800:] + out.stderr[-2000:]
    cli = out.stdout.split("CLI ")[1]
    for other in ("breakeven", "compare", "report", "calibrate", "logs_cli", "serving_cli", "aic"):
        assert f"cascade_plan.cli.{other}'" not in cli, cli


def test_importing_the_cli_registers_no_command(root):
    """`app` is built when first used: importing cli.app registers nothing; `app` then has every command."""
    code = ("import sys\nimport cascade_plan.cli.app as a\n"
            "print(sorted(m for m in sys.modules if m.startswith('cascade_plan.cli.')))\n"
            "from cascade_plan.cli.app import app, COMMANDS\n"
            "import typer.main\n"
            "print(sorted(typer.main.get_command(app).commands) == sorted(n for n, _ in COMMANDS))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    before, same = out.stdout.splitlines()[:2]
    assert "cascade_plan.cli.breakeven" not in before and same == "True", out.stdout + out.stderr[-2000:]


finite = arrays(np.float64, st.tuples(st.integers(0, 9), st.integers(1, 3)),
                elements=st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.0, 1.0, 2.5]))


@given(finite)
def test_distinct_is_np_unique(a):
    assert np.array_equal(distinct(a), np.unique(a))
    assert distinct(a).dtype == np.unique(a).dtype


@given(finite, st.booleans())
def test_median0_is_np_median(a, with_nan):
    if with_nan and a.size:
        a = a.copy()
        a[0, 0] = np.nan
    if a.shape[0] == 0:
        assert np.isnan(median0(a)).all() and median0(a).shape == a.shape[1:]
        return
    assert np.array_equal(median0(a), np.median(a, axis=0), equal_nan=True)
