"""The measured error against float32 of the kernels behind a verdict (planning/kernel_numerics.py): the figures
equal the shipped probe file's own rows, read here with plain `json`, for the backend and KV dtype select_params
chose; an imported GPU carries its transferred probe's cascade rows and says so; the defaults and the ideal bound
carry none; `estimate` prints the line and emits it as `numerics`."""

import json
from functools import cache

import msgspec
import pytest

from cascade_plan import DEFAULT, IDEAL, ParamsChoice, load_hardware, load_scenario, select_params
from cascade_plan.planning.kernel_numerics import KernelNumerics, kernel_numerics

from cli_support import PROBE_H200, ROOT, estimate_json_and_text, run

PER_SEQUENCE = ("decode_shared", "decode_dup")


@cache
def _probe() -> dict:
    return json.loads(PROBE_H200.read_text())


def _largest(section: str, backend: str, kernels: tuple[str, ...], variant: str | None, kv: str) -> tuple[float, int]:
    """(largest max_rel_err, rows carrying one) of the shipped probe's rows, straight from its JSON."""
    errs = [m["max_rel_err"] for m in _probe()[section]
            if m["backend"] == backend and m["kernel"] in kernels and (variant is None or m.get("variant") == variant)
            and m["config"].get("kv_dtype", "bf16") == kv and m.get("max_rel_err") is not None]
    return max(errs), len(errs)


def _scenario(workload: str, hw: str, kv: str = "bf16"):
    scn = load_scenario(ROOT / "workloads" / f"{workload}.yaml")
    return msgspec.structs.replace(scn, hardware=load_hardware(hw), kv_dtype=kv)


def _numerics(workload: str, hw: str, kv: str = "bf16", **choice) -> KernelNumerics | None:
    return kernel_numerics(select_params(_scenario(workload, hw, kv), ParamsChoice(**choice)), kv)


# (backend asked, KV dtype, probe backend and variant of its cascade_total rows, of its decode rows,
#  the figures as read once by hand from the file: largest cascade error, its rows, largest decode error)
GQA = [("triton", "bf16", ("triton", None), ("triton", None), 3.659e-3, 211, 3.471e-3),
       ("triton", "fp8", ("triton", None), ("triton", None), 2.368e-3, 38, 2.361e-3),
       (None, "bf16", ("flashinfer", "auto"), ("flashinfer", "tensor_cores"), 4.732e-3, 225, 4.047e-3),
       ("flashinfer-fa2", "bf16", ("flashinfer-fa2", "fa2"), ("flashinfer", "tensor_cores"), 5.511e-3, 225, 4.047e-3),
       ("torch", "bf16", ("torch", None), ("torch", None), 4.059e-3, 132, 3.211e-3)]


@pytest.mark.parametrize("backend, kv, total, decode, cascade_err, rows, decode_err", GQA)
def test_a_probe_gpu_states_its_backends_cascade_and_decode_error(backend, kv, total, decode, cascade_err, rows,
                                                                 decode_err):
    n = _numerics("rl-rollouts-64", "h200", kv, backend=backend)
    assert n is not None
    want_cascade, want_rows = _largest("measurements", total[0], ("cascade_total",), total[1], kv)
    want_decode, _ = _largest("measurements", decode[0], PER_SEQUENCE, decode[1], kv)
    assert (n.backend, n.kv_dtype) == (backend or "flashinfer", kv)
    assert n.cascade_max_rel_err == want_cascade and n.rows == want_rows
    assert n.per_sequence_max_rel_err == want_decode
    assert (n.cascade_max_rel_err, n.rows, n.per_sequence_max_rel_err) == (pytest.approx(cascade_err, abs=5e-7), rows,
                                                                            pytest.approx(decode_err, abs=5e-7))
    assert n.source == "H200 probe, h200-probe-2026-12-01.json"


def test_the_line_states_the_figures_in_words():
    n = _numerics("rl-rollouts-64", "h200", backend="triton")
    assert n is not None and n.text == ("measured error vs float32: cascade (triton, bf16 KV) max 3.7e-3 relative over "
                                        "211 probed shapes, per-sequence decode 3.5e-3 (H200 probe, "
                                        "h200-probe-2026-12-01.json)")
    assert n.to_json() == {"backend": "triton", "kv_dtype": "bf16", "cascade_max_rel_err": n.cascade_max_rel_err,
                           "per_sequence_max_rel_err": n.per_sequence_max_rel_err, "rows": 211,
                           "source": n.source, "text": n.text}


def test_a_backend_without_rows_of_that_kv_dtype_says_nothing_was_measured():
    """torch's flash attention takes no fp8 KV: the probe skipped it, and its bf16 numbers stand in (one end of a
    range). No error is claimed for kernels that never ran with fp8 KV."""
    n = _numerics("rl-rollouts-64", "h200", "fp8", backend="torch")
    assert n is not None
    assert (n.cascade_max_rel_err, n.per_sequence_max_rel_err, n.rows) == (None, None, 0)
    assert n.text.startswith("measured error vs float32: none for torch with fp8 KV (no such rows")


@pytest.mark.parametrize("kv, rows", [("bf16", 243), ("fp8", 103)])
def test_an_mla_model_states_the_error_of_the_mla_kernels(kv, rows):
    n = _numerics("deepseek-v3-grpo-tp8", "h200", kv)
    assert n is not None
    want, want_rows = _largest("mla", "flashinfer", ("cascade_total",), None, kv)
    decode, _ = _largest("mla", "flashinfer", PER_SEQUENCE, None, kv)
    assert (n.cascade_max_rel_err, n.rows, n.per_sequence_max_rel_err) == (want, want_rows, decode)
    assert want_rows == rows and "MLA kernels" in n.source
    # the MLA rows, not the GQA ones of the same backend
    assert want != _largest("measurements", "flashinfer", ("cascade_total",), "auto", kv)[0]


def test_an_imported_gpu_gets_the_transferred_probes_cascade_rows_and_says_so():
    """h100-sxm's numbers are AIConfigurator's with the cascade kernels transferred from the H200 probe: the cascade
    error is that probe's; its per-sequence decode is AIConfigurator's kernel, never checked against float32."""
    n = _numerics("rl-rollouts-64", "h100-sxm")
    assert n is not None
    want, rows = _largest("measurements", "flashinfer", ("cascade_total",), "auto", "bf16")
    assert (n.backend, n.cascade_max_rel_err, n.rows, n.per_sequence_max_rel_err) == ("flashinfer", want, rows, None)
    assert "h200-probe-2026-12-01.json" in n.source and "transferred into h100-sxm-aic-vllm.json" in n.source
    assert "per-sequence decode not checked" in n.text


def test_an_imported_gpu_without_fa3_states_the_fa2_cascade_it_runs():
    """FlashInfer's cascade on an A100 is its FA2 prefill: the probe's flashinfer-fa2 rows
    (CostParams.margin_backend)."""
    n = _numerics("rl-rollouts-64", "a100-80gb")
    assert n is not None
    want, rows = _largest("measurements", "flashinfer-fa2", ("cascade_total",), "fa2", "bf16")
    assert (n.backend, n.cascade_max_rel_err, n.rows) == ("flashinfer-fa2", want, rows)


def test_the_defaults_and_the_ideal_bound_have_no_kernel_behind_them():
    assert kernel_numerics(DEFAULT, "bf16") is None and kernel_numerics(IDEAL, "bf16") is None
    assert _numerics("rl-rollouts-64", "h100-sxm", uncalibrated=True) is None
    assert _numerics("rl-rollouts-64", "h200", ideal=True) is None
    assert _numerics("rl-rollouts-64", "mi300x") is None        # no calibration shipped for it


def test_a_users_copy_of_the_probe_file_gives_the_same_figures(tmp_path):
    """A file given with --calibration (not in this process's decoded cache) is read for its errors alone."""
    own = tmp_path / "my-probe.json"
    own.write_bytes(PROBE_H200.read_bytes())
    scn = _scenario("rl-rollouts-64", "h200")
    n = kernel_numerics(select_params(scn, ParamsChoice(calibration=own, backend="triton")), "bf16")
    shipped = _numerics("rl-rollouts-64", "h200", backend="triton")
    assert n is not None and shipped is not None
    assert (n.cascade_max_rel_err, n.rows, n.per_sequence_max_rel_err) == (
        shipped.cascade_max_rel_err, shipped.rows, shipped.per_sequence_max_rel_err)
    assert n.source == "H200 probe, my-probe.json"


def test_estimate_emits_numerics_after_the_verdict_and_prints_the_line():
    doc, text = estimate_json_and_text("rl-rollouts-64", "--hardware", "h200", "--backend", "triton")
    keys = list(doc)
    assert keys[keys.index("go_no_go") + 1] == "numerics"
    want = _numerics("rl-rollouts-64", "h200", backend="triton")
    assert want is not None and doc["numerics"] == want.to_json()
    assert doc["numerics"]["cascade_max_rel_err"] == _largest("measurements", "triton", ("cascade_total",), None,
                                                              "bf16")[0]
    assert want.text in text
    # right after the verdict's panel, before any warning or note
    assert text.index(want.text) > text.index("Verdict")


def test_estimate_on_an_imported_gpu_and_uncalibrated():
    doc, text = estimate_json_and_text("rl-rollouts-64", "--hardware", "h100-sxm")
    assert doc["numerics"]["per_sequence_max_rel_err"] is None and "transferred" in doc["numerics"]["source"]
    assert doc["numerics"]["text"] in text
    res = run("estimate", "rl-rollouts-64", "--uncalibrated", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["numerics"] is None
    plain = run("estimate", "rl-rollouts-64", "--uncalibrated")
    assert plain.exit_code == 0 and "measured error vs float32" not in plain.stdout
