"""Measured rows used as measured: inside the probe's grid the planner's attention is interpolated from
the rows (exact at them, between them in between), outside it the fitted model prices it and the output
says so; fp8 KV is never priced from bf16 rows or fits."""

import json
import math

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_calibration import one_layer_model
from typer.testing import CliRunner

from cascade_plan import Scenario, load_hardware, select_params, simple_tree
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.cli.app import app
from cascade_plan.cost.cost_model import gpu_shape, single_level_load, step_costs
from cascade_plan.cost.ops.attention import FITTED, MEASURED, MeasuredAttention, MeasuredTable
from cascade_plan.cost.ops.shape_anchor import ANCHORED

runner = CliRunner()
H200 = load_hardware("h200")

# Rows of the shipped H200 file (calibrations/h200-probe-2026-12-01.json: the bf16 rows measured on 2026-11-30,
# the fp8 ones on 2026-12-01), one attention layer, 8 KV heads, 4 query heads per KV head, head dim 128, one
# group: (group_size, prefix, suffix) -> median_s
FI_DECODE_SHARED = {(64, 4096, 128): 0.00013593600690364838, (64, 4096, 1024): 0.00018636800348758697,
                    (256, 4096, 128): 0.000498528003692627, (256, 4096, 1024): 0.0006755200028419494}
# its sustained time (FA3 cascade rows carry sustained_s, which the planner takes), not its burst 148.83 us
FI_CASCADE_TOTAL_64_4096_128 = 0.00014895999431610108
# the shipped rows at (64, 4096, 128), the probe 1.3 kernels (re-measured 2026-12-03)
TRITON_DECODE_SHARED = {"bf16": 0.00018395199626684188, "fp8": 0.0002576000094413757}
TRITON_CASCADE_TOTAL = {"bf16": 4.45920005440712e-05, "fp8": 4.899200052022934e-05}


@pytest.fixture(scope="module")
def probe():
    p = find_committed(H200)
    assert p is not None and p.hardware_id == "h200"
    return p


def one_layer(params, prefix, group, groups, suffix, kv="bf16", model=None):
    model = model or one_layer_model()
    sh = gpu_shape(model, H200, kv, "bf16", 1)
    return step_costs(single_level_load(prefix, group, groups, suffix), sh, model, "bf16", 1, params)


def test_measured_points_are_reproduced_exactly(probe):
    params = params_from_probe(probe, "flashinfer", "bf16", H200)
    for (g, p, s), t in FI_DECODE_SHARED.items():
        c = one_layer(params, p, g, 1, s)
        assert float(c.ps_attention_s) == t and float(c.ps_measured) == 1.0
    c = one_layer(params, 4096, 64, 1, 128)
    assert float(c.cas_attention_s) == FI_CASCADE_TOTAL_64_4096_128 and float(c.cas_measured) == 1.0
    # the passes still add up to the measured whole
    assert float(c.cas_prefix_s + c.cas_suffix_s + c.cas_merge_s) == pytest.approx(FI_CASCADE_TOTAL_64_4096_128,
                                                                                     rel=1e-12)


def test_between_rows_geometric_over_batch_and_linear_over_suffix(probe):
    """128 sequences (halfway between 64 and 256 in log), 640 suffix tokens (4/7 of the way from 128 to 1,024; the
    context ends on one of the 128-token tiles FlashInfer's decode reads, so the suffix axis takes it as it is:
    tests/test_kv_tiles.py prices a partly filled tile). The table alone interpolates the times; the planner
    interpolates the rows' ratio to the fitted model the same way and multiplies the fit at the query by it, within
    the bracketing rows' times."""
    params = params_from_probe(probe, "flashinfer", "bf16", H200)
    q = np.array([[1, 128, 4096, 640]], float)
    assert (params.measured.tiled_query("per_sequence", (4, 8, 128), q) == q).all()
    w = (640 - 128) / (1024 - 128)
    at64 = (1 - w) * FI_DECODE_SHARED[(64, 4096, 128)] + w * FI_DECODE_SHARED[(64, 4096, 1024)]
    at256 = (1 - w) * FI_DECODE_SHARED[(256, 4096, 128)] + w * FI_DECODE_SHARED[(256, 4096, 1024)]
    assert params.measured.table("per_sequence", (4, 8, 128))(q)[0] == pytest.approx(math.sqrt(at64 * at256), rel=1e-12)

    fitted_only = msgspec.structs.replace(params, measured=None)
    ratio = {k: t / float(one_layer(fitted_only, k[1], k[0], 1, k[2]).ps_attention_s)
             for k, t in FI_DECODE_SHARED.items()}
    r64 = (1 - w) * ratio[(64, 4096, 128)] + w * ratio[(64, 4096, 1024)]
    r256 = (1 - w) * ratio[(256, 4096, 128)] + w * ratio[(256, 4096, 1024)]
    fit_q = float(one_layer(fitted_only, 4096, 128, 1, 640).ps_attention_s)
    want = min(max(fit_q * math.sqrt(r64 * r256), min(FI_DECODE_SHARED.values())), max(FI_DECODE_SHARED.values()))
    c = one_layer(params, 4096, 128, 1, 640)
    assert float(c.ps_attention_s) == pytest.approx(want, rel=1e-12) and float(c.ps_measured) == 1.0
    assert min(FI_DECODE_SHARED.values()) < float(c.ps_attention_s) < max(FI_DECODE_SHARED.values())


def test_ratio_interpolation_stays_within_the_bracketing_rows():
    pts = np.array([[1, 1, 1024, 0], [1, 1, 4096, 0]], float)
    tab = MeasuredTable(pts, np.array([1.0, 2.0]), fit_s=np.array([1.0, 1.0]))
    assert tab(np.array([[1, 1, 2048, 0]]), np.array([10.0]))[0] == 2.0      # a wild fit is held within the rows
    assert tab(np.array([[1, 1, 2048, 0]]), np.array([1.2]))[0] == pytest.approx(1.2 * math.sqrt(2.0))
    assert tab(pts, np.array([5.0, 5.0])).tolist() == [1.0, 2.0]              # at a row: the row


def test_outside_the_grid_is_the_fitted_model_and_says_why(probe):
    params = params_from_probe(probe, "flashinfer", "bf16", H200)
    fitted_only = msgspec.structs.replace(params, measured=None)
    # below the rows, inside what the fit trained on: the fit
    c, f = one_layer(params, 128, 64, 1, 128), one_layer(fitted_only, 128, 64, 1, 128)
    assert float(c.ps_measured) == 0.0 and float(c.ps_attention_s) == float(f.ps_attention_s)
    assert float(c.cas_attention_s) == float(f.cas_attention_s)
    assert c.ps_outside and "rows span" in c.ps_outside[0] and ANCHORED not in c.ps_outside[0]
    # past the longest suffix (4K) and prefix (64K) the fit trained on: the fit scaled to the untrained rows there
    # (the regimes grid's 8K suffixes and 128K-256K prefixes; tests/test_shape_anchor.py)
    for args in ((4096, 64, 1, 9000), (524288, 64, 1, 128)):
        c, f = one_layer(params, *args), one_layer(fitted_only, *args)
        assert float(c.ps_measured) == 0.0 and float(c.ps_attention_s) != float(f.ps_attention_s)
        assert c.ps_outside and ("rows span" in c.ps_outside[0] or "bracket" in c.ps_outside[0])
        assert ANCHORED in c.ps_outside[0]
    # every axis the step leaves is named
    c = one_layer(params, 524288, 2048, 1, 9000)
    why = c.ps_outside[0]
    assert "sequences per group 2,048 (rows span 1-1,024)" in why and "prefix tokens 524,288" in why and "suffix" in why
    # a shape the probe never measured (32 query heads per KV head): no rows, the fit
    c = one_layer(params, 4096, 64, 1, 128, model=one_layer_model(8, 32))
    assert float(c.ps_measured) == 0.0 and "32 query heads per KV head" in c.ps_outside[0]


def test_a_cell_counts_as_inside_only_when_bracketed():
    """A sparse grid: the corner (group 4, prefix 4096) is missing, so (group 2, prefix 2048) is outside
    although every axis value lies within the measured ranges."""
    pts = np.array([[1, 1, 1024, 0], [1, 1, 4096, 0], [1, 4, 1024, 0]], float)
    tab = MeasuredTable(pts, np.array([1.0, 2.0, 3.0]))
    assert np.isnan(tab(np.array([[1, 2, 2048, 0]]))[0])
    assert tab(np.array([[1, 1, 2048, 0]]))[0] == pytest.approx(math.sqrt(2.0))
    assert tab(np.array([[1, 4, 1024, 0]]))[0] == 3.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-6, 1e-2), min_size=16, max_size=16), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1),
       st.floats(0, 1))
def test_interpolation_is_bounded_by_its_rows_and_exact_at_them(times, a, b, c, d):
    axes = ([1, 4], [4, 64], [1024, 16384], [0, 1024])
    pts = np.array([[n, g, p, s] for n in axes[0] for g in axes[1] for p in axes[2] for s in axes[3]], float)
    t = np.array(times)
    tab = MeasuredTable(pts, t)
    assert np.array_equal(tab(pts), t)
    q = np.array([[ax[0] * (ax[1] / ax[0]) ** u if i < 3 else ax[0] + u * (ax[1] - ax[0])
                   for i, (ax, u) in enumerate(zip(axes, (a, b, c, d)))]])
    v = tab(q)[0]
    assert t.min() * (1 - 1e-12) <= v <= t.max() * (1 + 1e-12)


def test_interpolation_is_monotone_where_the_rows_are():
    pts = np.array([[1, g, 4096, s] for g in (4, 64, 256) for s in (128, 1024, 4096)], float)
    t = np.array([1e-5 * g * (1 + s / 4096) for g in (4, 64, 256) for s in (128, 1024, 4096)])
    tab = MeasuredTable(pts, t)
    gs = np.geomspace(4, 256, 40)
    for s in (128, 700, 4096):
        v = tab(np.array([[1, g, 4096, s] for g in gs]))
        assert np.all(np.diff(v) > 0)
    v = tab(np.array([[1, 100, 4096, s] for s in np.linspace(128, 4096, 40)]))
    assert np.all(np.diff(v) > 0)


def test_fp8_is_priced_from_fp8_rows_never_from_bf16(probe):
    """Triton has fp8 rows: at a measured fp8 configuration the planner returns the fp8 row (slower than
    bf16 on the H200, as docs/probe-notes.md says), and its fit is the fp8 fit, not bf16's."""
    fp8 = params_from_probe(probe, "triton", "fp8", H200)
    bf16 = params_from_probe(probe, "triton", "bf16", H200)
    assert fp8.measured.kv_dtype == "fp8"
    assert (4, 8, 128) in fp8.measured.shapes("per_sequence")
    c8, c16 = one_layer(fp8, 4096, 64, 1, 128, "fp8"), one_layer(bf16, 4096, 64, 1, 128, "bf16")
    assert float(c8.ps_attention_s) == TRITON_DECODE_SHARED["fp8"]
    assert float(c16.ps_attention_s) == TRITON_DECODE_SHARED["bf16"]
    assert float(c8.cas_attention_s) == TRITON_CASCADE_TOTAL["fp8"]
    assert fp8.decode.bw_eff != bf16.decode.bw_eff
    # outside the fp8 rows: the fp8 fit prices it (fp8 decode is not bf16 decode at half the bytes)
    out8 = one_layer(fp8, 4096, 64, 1, 2048, "fp8")
    assert float(out8.ps_measured) == 0.0
    assert float(out8.ps_attention_s) > float(one_layer(bf16, 4096, 64, 1, 2048, "fp8").ps_attention_s)


def test_a_backend_without_fp8_rows_is_not_calibrated_for_fp8(probe):
    """torch has no fp8 rows in the shipped file (its flash attention takes no e4m3 KV): nothing of bf16 is
    interpolated for it, and its verdict is a range with the reason, never a bf16 number passed off as fp8."""
    p = params_from_probe(probe, "torch", "fp8", H200)
    assert p.measured is None
    assert any("not calibrated for fp8" in n for n in p.notes)
    res = runner.invoke(app, ["estimate", "rl-rollouts-64", "--hardware", "h200", "--kv-dtype", "fp8",
                              "--backend", "torch", "--json"])
    doc = json.loads(res.stdout)
    assert doc["go_no_go"]["speedup_range"] is not None
    assert "not calibrated for fp8" in doc["go_no_go"]["text"]


def test_rl_rollouts_fp8_on_the_h200_gets_a_measured_verdict():
    res = runner.invoke(app, ["estimate", "rl-rollouts-64", "--hardware", "h200", "--kv-dtype", "fp8", "--json"])
    doc = json.loads(res.stdout)
    assert doc["calibration"]["numbers"] == "probe/flashinfer"  # the default backend, measured with fp8 KV
    assert doc["go_no_go"]["level"] in ("go", "marginal", "no-go") and doc["go_no_go"]["speedup_range"] is None
    assert "not calibrated" not in doc["calibration"]["label"]


def test_source_label_in_estimate_json_table_and_report(tmp_path):
    args = ["estimate", "--model", "llama-3-8b", "--hardware", "h200", "--prefix", "4096", "--samples", "64",
            "--output-tokens", "64", "--private-tokens", "128"]
    res = runner.invoke(app, args + ["--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    src = doc["attention_source"]
    assert set(src) == {"per_sequence", "cascade"}
    for mode in ("per_sequence", "cascade"):
        assert src[mode]["source"].startswith((MEASURED, FITTED))
        assert doc["first_step"][mode]["attention_source"] in (MEASURED, FITTED)
    # 64 sequences, a 4,096-token prefix, suffixes 129-192 tokens: bracketed by the 128- and 1,024-token rows
    assert src["per_sequence"]["source"] == MEASURED and src["per_sequence"]["measured_share"] == 1.0
    table = " ".join(runner.invoke(app, args).stdout.split())
    assert "Attention" in table and MEASURED in table
    res = runner.invoke(app, ["report", "rl-rollouts-64", "--hardware", "h200", "--out", str(tmp_path / "r"),
                              "--no-plots"])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "r" / "report.md").read_text()
    assert "*Attention" in md and FITTED in md


def test_beyond_the_grid_names_the_probe_command():
    scn = Scenario(name="t", model=one_layer_model(), hardware=H200, kv_dtype="bf16", weight_dtype="bf16", tp=1,
                   prefix_caching=True, block_size=16, tree=simple_tree(400000, 1, 64, 16))
    from cascade_plan.cost.estimate import estimate

    est = estimate(scn, select_params(scn))
    assert est.coverage and "cascade-plan probe --workload FILE" in est.coverage[-1]


def test_measured_attention_builds_only_the_tables_asked_for():
    m = MeasuredAttention("x", "bf16", {"per_sequence": [((4, 8, 128), (1, 1, 1024, 0), 1e-5)]})
    assert m.table("per_sequence", (4, 8, 128)) is not None and m.table("cascade", (4, 8, 128)) is None
    assert list(m._tables) == [("per_sequence", (4, 8, 128)), ("cascade", (4, 8, 128))]


@pytest.mark.xdist_group("validate")        # conftest.py: one `validate --json --plots` for the tests that read it
def test_validate_reports_the_interpolation_error_apart_from_the_fit(h200_validation):
    res = h200_validation
    for name in ("flashinfer", "triton", "triton/fp8"):
        interp = res["backends"][name]["interpolation"]
        assert set(interp) >= {"per_sequence", "cascade"}
        for s in interp.values():
            assert s["interpolation"]["n"] <= s["rows"] and s["interpolation"]["n"] == s["fit_same_rows"]["n"]
    # the interpolation as the planner applies it, held out row by row: within 2% median on FlashInfer decode
    assert res["backends"]["flashinfer"]["interpolation"]["per_sequence"]["interpolation"]["median_ape"] < 0.02


def test_fp8_coverage_notes_come_from_the_fp8_rows(probe):
    """With fp8 rows of 4 query heads per KV head only (the 2026-11-30 file's case, rebuilt from the shipped
    rows), Llama-3-70B's 8 is measured in bf16 but not in fp8, so its fp8 verdict carries the note (a range),
    its bf16 one does not."""
    from cascade_plan.calibration.calibration_file import ProbeData
    from cascade_plan.inputs.model_spec import load_model

    doc = json.loads(json.dumps(probe.doc))
    doc["measurements"] = [r for r in doc["measurements"]
                           if r["config"]["kv_dtype"] != "fp8" or r["config"]["q_per_kv"] == 4]
    narrow = ProbeData(probe.path, doc)
    m = load_model("llama-3-70b")
    assert not params_from_probe(narrow, "triton", "bf16", H200, m).notes
    assert any("8 query heads per KV head is beyond the measured 4 (fp8 KV rows)" in n
               for n in params_from_probe(narrow, "triton", "fp8", H200, m).notes)


@pytest.fixture(scope="module")
def synthetic(probe, tmp_path_factory):
    """The shipped file with FlashInfer's fp8 rows replaced by synthetic ones, and rows of a shape it lacks,
    as a new probe run would add them: FlashInfer with fp8 KV (every FlashInfer bf16 row again, 1.25x slower:
    fp8 decode is slower on the H200), and 32 query heads per KV head (the 8-per-KV rows again, 1.2x); then
    calibrated as `calibrate` does."""
    from cascade_plan.calibration.calibration_file import ProbeData
    from cascade_plan.calibration.probe_fit import calibrate

    doc = json.loads(json.dumps(probe.doc))
    doc["measurements"] = [m for m in doc["measurements"]
                           if not (m["backend"].startswith("flashinfer") and m["config"]["kv_dtype"] == "fp8")]
    extra = []

    def scaled(m, f):     # every time the row holds (FA3 cascade rows: their sustained time too), times f
        return {k: v * f if k in ("median_s", "sustained_s") and v else v for k, v in m.items()}

    for m in doc["measurements"]:
        c = m["config"]
        if m["backend"].startswith("flashinfer") and c["kv_dtype"] == "bf16":
            extra.append({**scaled(m, 1.25), "config": {**c, "kv_dtype": "fp8"}})
        if m["backend"] == "flashinfer" and c["kv_dtype"] == "bf16" and c["q_per_kv"] == 8 and c["num_kv_heads"] == 8:
            extra.append({**scaled(m, 1.2), "config": {**c, "q_per_kv": 32}})
    doc["measurements"] += extra
    path = tmp_path_factory.mktemp("cal") / "h200-synthetic.json"
    with np.errstate(all="ignore"):
        doc["fitted"] = calibrate(ProbeData(str(path), doc))
    path.write_text(json.dumps(doc))
    return ProbeData(str(path), doc)


def test_new_rows_are_fitted_and_interpolated_generically(synthetic):
    assert "flashinfer" in synthetic.fitted["kv_dtypes"]["fp8"]
    p = params_from_probe(synthetic, None, "fp8", H200)
    assert p.backend == "flashinfer" and p.measured.kv_dtype == "fp8" and not p.info
    c = one_layer(p, 4096, 64, 1, 128, "fp8")
    assert float(c.ps_attention_s) == pytest.approx(FI_DECODE_SHARED[(64, 4096, 128)] * 1.25, rel=1e-12)
    assert float(c.cas_attention_s) == pytest.approx(FI_CASCADE_TOTAL_64_4096_128 * 1.25, rel=1e-12)
    # 32 query heads per KV head: its own rows, no extrapolation note
    m16 = one_layer_model(8, 32)
    p16 = params_from_probe(synthetic, "flashinfer", "bf16", H200, m16)
    assert not p16.notes and (32, 8, 128) in p16.measured.shapes("per_sequence")
    c16 = one_layer(p16, 4096, 64, 1, 128, model=m16)
    c8 = one_layer(p16, 4096, 64, 1, 128, model=one_layer_model(8, 8))
    assert float(c16.ps_measured) == 1.0 and float(c16.ps_attention_s) == pytest.approx(1.2 * float(c8.ps_attention_s))


def test_estimate_with_measured_rows_imports_no_heavy_modules(root):
    """The H200's probe file is interpolated on every estimate there: still no torch, pandas or matplotlib
    (start-up itself is measured by benchmarks/estimate_startup.py, not asserted here)."""
    import subprocess
    import sys

    code = ("import sys; from cascade_plan.cli.app import main; sys.argv=['cascade-plan','estimate','rl-rollouts-64',"
            "'--hardware','h200','--kv-dtype','fp8']\ntry: main()\nexcept SystemExit: pass\n"
            "print('HEAVY', sorted(m for m in ('pandas','matplotlib','torch','triton','pyarrow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
    assert "HEAVY []" in out.stdout and "Attention" in out.stdout, out.stdout[-500:] + out.stderr
