"""What `estimate` imports and computes at start-up (its wall time is measured by
benchmarks/estimate_startup.py, never asserted here)."""

import subprocess
import sys

import msgspec
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


def test_a_one_shot_command_leaves_its_objects_out_of_the_exit_collections(root):
    """`estimate` runs without the automatic collector and freezes what it built once it has answered, so that the
    interpreter's exit does not collect it (~40-70 ms); a command that may hold files or connections keeps both."""
    code = ("import gc, io, sys, contextlib\nfrom cascade_plan.cli.entry import main\n"
            "sys.argv = ['cascade-plan', *sys.argv[1:]]\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: main()\n"
            "    except SystemExit as e: assert not e.code, e.code\n"
            "print('GC', gc.get_freeze_count() > 0, gc.isenabled())\n")
    for args, want in ((["estimate", "rl-rollouts-64", "--hardware", "mi300x"], "GC True False"),
                       (["models"], "GC False True")):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=root)
        assert out.stdout.strip().endswith(want), (args, out.stdout[-300:], out.stderr[-2000:])


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


def _fresh_caches():
    from cascade_plan.calibration import calibration_file
    from cascade_plan.planning import speedup_margin

    calibration_file._DECODED.clear()
    for f in (speedup_margin._stored, speedup_margin._errors, speedup_margin._probed_models):
        f.cache_clear()


def _reads(monkeypatch):
    """Counts of Path.read_bytes per file name from here on."""
    from collections import Counter
    from pathlib import Path

    reads: Counter = Counter()
    real = Path.read_bytes

    def counted(self):
        reads[self.name] += 1
        return real(self)
    monkeypatch.setattr(Path, "read_bytes", counted)
    return reads


def _scenario(workload, hardware):
    import cascade_plan as cp

    scn = cp.load_scenario(workload)
    return msgspec.structs.replace(scn, hardware=cp.load_hardware(hardware))


def _assess(workload, hardware, **choice):
    import cascade_plan as cp

    scn = _scenario(workload, hardware)
    return cp.assess(scn, cp.select_params(scn, cp.ParamsChoice(**choice)))


def test_each_calibration_file_is_parsed_once_per_estimate(monkeypatch):
    """The defaults' evidence reads the H200 probe file (3.9 MB) for the H200's numbers, and the margin takes
    its stored errors from that same read; on the H200 its own numbers and the margin share one read too, and
    on an imported GPU its file is read once for its numbers and the margin's pointer to the probe file."""
    from cascade_plan.planning.speedup_margin import shipped_probe

    probe = shipped_probe().name
    for hardware, choice in (("mi300x", {}), ("h100-sxm", {"uncalibrated": True}), ("h200", {}), ("h100-sxm", {})):
        _fresh_caches()
        reads = _reads(monkeypatch)
        est = _assess("rl-rollouts-64", hardware, **choice)
        assert est.verdict.margin_error is not None and reads[probe] == 1, (hardware, dict(reads))
        assert all(n == 1 for n in reads.values()), (hardware, dict(reads))    # the imported files too
        if est.params.mode == "default":
            assert "Evidence: " in est.verdict.evidence and "h200" in est.verdict.evidence


def test_a_calibrated_estimate_estimates_no_other_gpu(monkeypatch):
    """On a GPU with its own measured numbers and a workload inside them, the verdict needs no other GPU:
    one estimate, one calibration chosen."""
    from cascade_plan.planning import params_select, verdict_evidence

    calls = {"estimate": 0, "select": []}
    real_estimate, real_select = verdict_evidence.estimate, params_select.select_params

    def estimate(*a, **k):
        calls["estimate"] += 1
        return real_estimate(*a, **k)

    def select(scn=None, *a, **k):
        calls["select"].append(scn.hardware.id if scn is not None else None)
        return real_select(scn, *a, **k)
    scn = _scenario("rl-rollouts-64", "h200")
    params = real_select(scn)
    monkeypatch.setattr(verdict_evidence, "estimate", estimate)
    monkeypatch.setattr(params_select, "select_params", select)
    est = verdict_evidence.assess(scn, params)
    assert est.params.mode == "calibrated" and not est.params.notes and not est.coverage
    assert calls["estimate"] == 1 and calls["select"] == [], calls
