"""The safety review's reproducers, first half (defects 1-5), one test (or one parametrised test) per defect:
nothing of the user's lost, every calibration fit typed, every input read bounded and refused in one
line when bad, names that cannot escape. Defects 6-9: tests/test_robustness_safety_io.py."""

import json
import os
import time
from pathlib import Path

import pytest

from cli_support import AIC_H100, ENV, GOOD, PROBE_H200, ROOT, TINY, refused, run, runner, tree_files  # noqa: F401

# ---- 1: data loss -------------------------------------------------------------------------------

def test_report_never_deletes_a_folder_of_the_users_notes(tmp_path):
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "README.md").write_text("mine\n")
    (notes / "sub" / "ideas.md").write_text("x\n")
    before = tree_files(notes)
    refused(run("report", "rl-rollouts-64", "--out", notes, "--no-plots"), "not a cascade-plan report", "README.md")
    assert tree_files(notes) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes"]        # no temporary, no lock left


def test_report_out_dot_is_refused_from_inside_any_folder(tmp_path, monkeypatch):
    (tmp_path / "README.md").write_text("mine\n")
    monkeypatch.chdir(tmp_path)
    refused(run("report", "rl-rollouts-64", "--out", ".", "--no-plots"), "current folder")
    assert (tmp_path / "README.md").read_text() == "mine\n"


def test_report_replaces_its_own_folder_but_not_a_file_added_to_it(tmp_path):
    out = tmp_path / "rep"
    assert run("report", "rl-rollouts-64", "--out", out, "--no-plots").exit_code == 0
    marker = json.loads((out / ".cascade-plan-report").read_text())
    assert marker["kind"] == "cascade-plan-report" and marker["format"] == 1 and list(marker["files"]) == ["report.md"]
    assert run("report", "beam-search", "--out", out, "--no-plots").exit_code == 0      # ours: replaced
    assert "beam-search" in (out / "report.md").read_text()
    (out / "my-notes.md").write_text("mine\n")
    refused(run("report", "rl-rollouts-64", "--out", out, "--no-plots"), "my-notes.md")
    assert (out / "my-notes.md").read_text() == "mine\n" and "beam-search" in (out / "report.md").read_text()
    (out / "my-notes.md").unlink()
    with open(out / "report.md", "a") as fh:             # the user annotated the report itself
        fh.write("my annotation\n")
    refused(run("report", "rl-rollouts-64", "--out", out, "--no-plots"), "report.md, changed since")
    assert (out / "report.md").read_text().endswith("my annotation\n")


def test_a_forged_or_foreign_marker_does_not_make_a_folder_replaceable(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    (out / ".cascade-plan-report").write_text('{"kind": "something-else"}')
    (out / "a.md").write_text("mine")
    refused(run("report", "rl-rollouts-64", "--out", out, "--no-plots"), "a.md")
    assert (out / "a.md").read_text() == "mine"


def test_an_earlier_versions_report_is_replaced_but_not_notes_added_to_it(tmp_path):
    out = tmp_path / "rep"
    (out / "rl-rollouts-64").mkdir(parents=True)
    (out / ".cascade-plan-report").write_text("written by cascade-plan report; the folder is replaced whole\n")
    (out / "report.md").write_text("old")
    (out / "rl-rollouts-64" / "steps.png").write_bytes(b"png")
    (out / "notes.md").write_text("mine")
    refused(run("report", "rl-rollouts-64", "--out", out, "--no-plots"), "notes.md")
    (out / "notes.md").unlink()
    assert run("report", "rl-rollouts-64", "--out", out, "--no-plots").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == [".cascade-plan-report", "report.md"]


def test_a_fifo_inside_a_report_folder_is_not_opened(tmp_path):
    out = tmp_path / "rep"
    assert run("report", "rl-rollouts-64", "--out", out, "--no-plots").exit_code == 0
    (out / "report.md").unlink()
    os.mkfifo(out / "report.md")
    refused(run("report", "rl-rollouts-64", "--out", out, "--no-plots"), "not a regular file")


def test_an_empty_folder_is_used(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert run("report", "rl-rollouts-64", "--out", out, "--no-plots").exit_code == 0
    assert (out / "report.md").is_file()


# ---- 2: calibration: one typed schema, every fit ---------------------------------------------------

def _edited(tmp_path, edit, source=AIC_H100):
    doc = json.loads(source.read_text())
    edit(doc)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(doc))
    return path


def _mla(doc):
    return doc["fitted"]["kv_dtypes"]["bf16"]["flashinfer"]["decode_mla"]


@pytest.mark.parametrize("edit, fragments", [
    (lambda d: _mla(d).__setitem__("overhead_s", -1e-3), ("decode_mla.overhead_s", ">= 0")),
    (lambda d: _mla(d).__setitem__("bw_bytes_per_s", -1e12), ("decode_mla.bw_bytes_per_s",)),
    (lambda d: _mla(d).__setitem__("extra", 1), ("decode_mla", "unknown field extra")),
    (lambda d: d["fitted"]["kv_dtypes"]["bf16"]["flashinfer"]["prefix"].__setitem__("extra", 1), ("prefix", "extra")),
    (lambda d: d["fitted"]["step_parts"]["glue"].__setitem__("per_layer_s", -1.0), ("step_parts.glue.per_layer_s",)),
    (lambda d: d["fitted"]["step_parts"]["gemm"]["bf16"]["ratio"][0].__setitem__(0, "zz"), ("gemm.bf16.ratio[0][0]",)),
    (lambda d: d["fitted"]["step_parts"]["gemm"]["bf16"]["ratio"].pop(), ("gemm.bf16.ratio", "axes")),
    (lambda d: d["fitted"]["step_parts"]["allreduce"]["8"].__setitem__("bytes_per_s", 0), ("allreduce.8.bytes_per_s",)),
    (lambda d: d["fitted"]["step_parts"].__setitem__("surprise", {}), ("step_parts", "surprise")),
])
def test_every_fit_of_a_calibration_is_checked(tmp_path, edit, fragments):
    cal = _edited(tmp_path, edit)
    refused(run("estimate", "deepseek-v3-grpo-tp8", "--hardware", "h100-sxm", "--calibration", cal, "--json"),
            *fragments)


def test_a_string_in_a_surface_is_one_line(tmp_path):
    def edit(doc):
        for fit in doc["fitted"]["kv_dtypes"]["bf16"]["flashinfer"].values():
            if isinstance(fit, dict) and fit.get("surface"):
                fit["surface"]["values"][0][0] = "a"
                return
        raise AssertionError("no surface in the shipped file")
    refused(run("estimate", "deepseek-v3-grpo-tp8", "--hardware", "h100-sxm", "--calibration", _edited(tmp_path, edit),
                "--json"), "surface.values[0][0]")


def test_every_shipped_calibration_passes_the_schema():
    from cascade_plan.calibration.calibration_file import load_probe

    for path in sorted((ROOT / "calibrations").glob("*.json")):
        load_probe(path)
    assert MAX_CAL_MULTIPLE() >= 4


def MAX_CAL_MULTIPLE():
    from cascade_plan.inputs.limits import MAX_CALIBRATION_BYTES

    return MAX_CALIBRATION_BYTES / max(p.stat().st_size for p in (ROOT / "calibrations").glob("*.json"))


@pytest.mark.parametrize("edit, fragments", [
    (lambda d: [r.__setitem__("median_s", -1e-3) for r in d["step_ops"][:3]], ("step_ops[0].median_s",)),
    (lambda d: d["step_ops"][3].__setitem__("median_s", "fast"), ("step_ops[3].median_s",)),
    (lambda d: d["step_ops"][3]["config"].__setitem__("m", -4), ("step_ops[3].config.m",)),
    (lambda d: d["fitted"]["step_parts"]["glue"].__setitem__("per_step_s", -5), ("step_parts.glue.per_step_s",)),
])
def test_calibrate_refuses_garbage_or_negative_step_parts(tmp_path, edit, fragments):
    cal = _edited(tmp_path, edit, PROBE_H200)
    refused(run("calibrate", cal, "--out", tmp_path / "out.json"), *fragments)
    assert not (tmp_path / "out.json").exists()


# ---- 3: inputs read whole before any check ---------------------------------------------------------

def _fifo(tmp_path, name):
    path = tmp_path / name
    os.mkfifo(path)
    return path


SPECIAL = {"dev-zero": lambda tmp: Path("/dev/zero"), "fifo": lambda tmp: _fifo(tmp, "f.json"),
           "folder": lambda tmp: tmp}


@pytest.mark.parametrize("kind", sorted(SPECIAL))
@pytest.mark.parametrize("role", ["workload", "config", "hardware", "calibration"])
def test_special_files_are_refused_before_they_are_opened(tmp_path, kind, role):
    path = SPECIAL[kind](tmp_path)
    args = {"workload": ["estimate", path],
            "config": ["estimate", "--model", path, "--hardware", "h100", "--prefix", "100", "--samples", "2",
                       "--output-tokens", "8"],
            "hardware": ["estimate", "rl-rollouts-64", "--hardware", path],
            "calibration": ["estimate", "rl-rollouts-64", "--calibration", path]}[role]
    if role == "hardware" and kind == "folder":
        args[-1] = f"{path}/"
    t0 = time.perf_counter()
    line = refused(run(*args))
    assert time.perf_counter() - t0 < 10
    assert any(w in line for w in ("FIFO", "device", "directory", "not a regular file", "not found", "unknown")), line


def test_a_huge_config_json_is_refused_by_its_size_without_reading_it(tmp_path):
    big = tmp_path / "config.json"
    with open(big, "wb") as fh:
        fh.truncate(300 * 2**20)                  # sparse: 300 MB on paper, nothing on disk
    line = refused(run("estimate", "--model", big, "--hardware", "h100", "--prefix", "100", "--samples", "2",
                       "--output-tokens", "8"), "1,048,576 bytes")
    assert "314,572,800 bytes" in line


@pytest.mark.parametrize("role, limit", [("hardware", 64 << 10), ("calibration", 32 << 20), ("workload", 1 << 20)])
def test_size_caps(tmp_path, role, limit):
    from cascade_plan.inputs.yaml_source import read_bytes_bounded

    path = tmp_path / "f"
    path.write_bytes(b"#" * limit)
    assert len(read_bytes_bounded(path, role, limit)) == limit
    path.write_bytes(b"#" * (limit + 1))
    with pytest.raises(Exception, match=f"{limit:,} bytes"):
        read_bytes_bounded(path, role, limit)


def test_hardware_profile_cap_is_64_kib(tmp_path):
    hw = tmp_path / "gpu.yaml"
    hw.write_text((ROOT / "hardware_profiles" / "h200.yaml").read_text() + "#" * (64 << 10))
    refused(run("estimate", "rl-rollouts-64", "--hardware", hw), "65,536 bytes")


# ---- 5: names that escape -----------------------------------------------------------------------

@pytest.mark.parametrize("name", ["..", ".", "report.md", ".cascade-plan-report", "a" * 300, "../../etc", "x/../y",
                                  "$(x) CON: step $y^"])
def test_workload_names_never_escape_or_break_the_report(tmp_path, name):
    wl = tmp_path / "w.yaml"
    wl.write_text(GOOD.read_text().replace("schema_version: 1", f"schema_version: 1\nname: {json.dumps(name)}", 1))
    out = tmp_path / "out" / "rep"
    res = run("plot", wl, "--out", out, "--kind", "steps", "--compare-hardware", "")
    assert res.exit_code == 0, res.output
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert written and all(out in p.parents for p in written), written
    assert all(len(part.encode()) <= 64 for p in written for part in p.relative_to(out).parts)
    rep = tmp_path / "rep"
    assert run("report", wl, "--out", rep, "--no-plots", "--compare-hardware", "").exit_code == 0
    assert sorted(p.name for p in rep.iterdir()) == [".cascade-plan-report", "report.md"]


def test_slug_rules():
    from cascade_plan.inputs.ids import slug

    assert slug("rl-rollouts-64") == "rl-rollouts-64" and slug("Llama 3.1 8B") == "llama-3.1-8b"
    for bad in ("..", ".", "", "...", "/"):
        assert slug(bad) == "workload"
    assert slug("report.md") == "report-md" and slug(".cascade-plan-report") == "cascade-plan-report"
    assert slug("a" * 300) != slug("a" * 301) and len(slug("a" * 300)) == 64


def test_an_out_path_component_over_255_bytes_is_one_line_before_any_work(tmp_path):
    refused(run("report", "rl-rollouts-64", "--out", tmp_path / ("r" * 256), "--no-plots"), "255 bytes")
    refused(run("simulate-log", "rl-rollouts-64", "--out", tmp_path / ("s" * 300 + ".jsonl")), "255 bytes")


def test_an_output_name_near_255_bytes_still_gets_a_temporary(tmp_path):
    from cascade_plan.atomic import write_text_atomic

    path = tmp_path / ("n" * 250 + ".json")
    write_text_atomic(path, "{}")
    assert path.read_text() == "{}" and [p.name for p in tmp_path.iterdir()] == [path.name]
