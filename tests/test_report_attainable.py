"""The report's 'attainable': the fastest per-sequence kernel measured against the fastest cascade kernel
measured, whichever backends they come from, both named in the row."""

import re

from typer.testing import CliRunner

from cascade_plan import ParamsChoice, estimate, load_scenario, select_params
from cascade_plan.calibration.calibration_file import load_probe
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.render.report import attainable

runner = CliRunner()


def test_attainable_pairs_the_best_kernel_of_each_mode(root):
    """rl-rollouts-64 on the H100: FlashInfer's per-sequence decode (22.3 ms final step) beats Triton's
    (25.8 ms), so attainable is FlashInfer decode against Triton's cascade, not Triton against Triton."""
    scn = load_scenario(root / "workloads/rl-rollouts-64.yaml")
    probe = load_probe(select_params(scn).source)
    ests = [estimate(scn, params_from_probe(probe, b, "bf16", scn.hardware, scn.model))
            for b in ("flashinfer", "flashinfer-fa2", "triton")]
    by = {e.params.backend: e for e in ests}
    ps, cas = attainable(ests + [estimate(scn, select_params(None, ParamsChoice(ideal=True)))])
    assert ps.run_per_sequence_s == min(e.run_per_sequence_s for e in ests)
    assert cas.run_cascade_s == min(e.run_cascade_s for e in ests)
    assert ps.params.backend == "flashinfer" and cas.params.backend == "triton"
    assert by["flashinfer"].final_step.per_sequence.step_s < by["triton"].final_step.per_sequence.step_s
    fair = ps.run_per_sequence_s / cas.run_cascade_s
    assert fair < by["triton"].run_speedup                 # the Triton-vs-Triton pairing inflated it


def test_report_row_names_both_kernels(root, tmp_path):
    from cascade_plan.cli.app import app

    res = runner.invoke(app, ["report", str(root / "workloads/rl-rollouts-64.yaml"), "--out", str(tmp_path),
                              "--no-plots", "--compare-hardware", ""])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "report.md").read_text()
    row = re.search(r"\| attainable: best per-sequence measured \(flashinfer decode\) vs best cascade measured "
                    r"\(triton cascade\) \| [\d.]+ ms \| [\d.]+ ms \| (\d\.\d\d)x \|", md)
    assert row and float(row.group(1)) < 2.17
    assert f"{row.group(1)}x is attainable: the fastest cascade measured (triton)" in md
