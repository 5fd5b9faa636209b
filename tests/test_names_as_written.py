"""Names and references the user wrote come back as written or as one clear refusal: a 300-byte name is a bad
reference (not an OSError traceback), rich never reads a workload's, GPU's or log's names as markup or emoji codes,
and a failed check prints the digits that decide it."""

import re

import pytest

from cli_support import GOOD, ROOT, refused, run

LONG = "a" * 300


@pytest.mark.parametrize("args,what", [
    (("estimate", "--model", LONG, "--prefix", "1", "--samples", "1", "--output-tokens", "1"), "model"),
    (("estimate", LONG), "workload"),
    (("capacity", LONG), "workload"),
    (("check", LONG), "workload"),
    (("estimate", "rl-rollouts-64", "--hardware", LONG), "hardware"),
    (("compare", "rl-rollouts-64", "--hardware", f"h200,{LONG}"), "hardware"),
])
def test_a_name_longer_than_a_file_name_is_one_line(args, what):
    refused(run(*args), f"{what} 'aaaa", "one of its names is 300 bytes, longer than a file name can be (255)")


def _lab_gpu(tmp_path):
    text = (ROOT / "hardware_profiles" / "h100-sxm.yaml").read_text()
    swap = {"name:": 'name: "Lab GPU [red] :rocket:"', "id:": "id: labgpu", "notes:": 'notes: "see [bold]x[/bold]"'}
    lines, in_notes = [], False
    for ln in text.splitlines():
        if in_notes and ln.startswith("  "):         # the folded notes' own lines: replaced with one
            continue
        in_notes = ln.startswith("notes:")
        lines.append(next((v for k, v in swap.items() if ln.startswith(k)), ln))
    hw = tmp_path / "lab.yaml"
    hw.write_text("\n".join(lines) + "\n")
    return hw


def test_compare_and_hardware_print_names_as_written(tmp_path):
    wl = tmp_path / "w.yaml"
    wl.write_text(GOOD.read_text().replace("schema_version: 1", 'schema_version: 1\nname: "run [red] :rocket:"'))
    res = run("compare", wl, "--hardware", "h200,h100-sxm")
    assert res.exit_code == 0, res.output
    assert "run [red] :rocket:: side by side" in res.stdout
    hw = _lab_gpu(tmp_path)
    res = run("hardware", hw)
    assert res.exit_code == 0, res.output
    assert "Lab GPU [red] :rocket:" in res.stdout and "see [bold]x[/bold]" in res.stdout


def test_a_failed_check_shows_the_digits_that_decide_it():
    # rl-rollouts-64 on the H100 runs at 1.0098x with FlashInfer's kernels: "1.01x < 1.01x" said nothing
    res = run("check", "rl-rollouts-64", "--min-run-speedup", "1.01")
    assert res.exit_code == 1
    line = next(ln for ln in res.stdout.splitlines() if "min_run_speedup" in ln)
    measured, bound = re.search(r"min_run_speedup: ([\d.]+)x < ([\d.]+)x", line).groups()
    assert measured != bound and float(measured) < float(bound) == 1.01
    ok = run("check", "rl-rollouts-64", "--min-run-speedup", "5")
    assert "min_run_speedup: 1.01x < 5.00x (required: >= 5.00x)" in ok.stdout      # two digits where they decide
