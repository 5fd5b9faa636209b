"""Workloads beyond the calibration's measured grid: context length, batch and one
layer's shared prefix are checked against what the probe (or an AIConfigurator import) measured, and a
workload beyond them gets a range or no verdict instead of a confident one."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.measured_grid import grid_of_configs, measured_grid
from cascade_plan.cli.app import app

runner = CliRunner()
MiB = 2**20


def _estimate(hardware: str, prefix: int, groups: int, samples: int, output: int) -> dict:
    r = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--hardware", hardware, "--prefix", str(prefix),
                            "--groups", str(groups), "--samples", str(samples), "--output-tokens", str(output),
                            "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_the_probes_grid_by_hand():
    g = measured_grid(find_committed(load_hardware("h200"), "probe"))
    # the regimes grid's 262,144-token prefix + 128 suffix tokens; 1 x 1,024 (or 16 x 64) sequences; that prefix
    # of the Llama-3-8B layer (8 KV heads: 262,144 x 2 x 8 x 128 x 2 B = 1 GiB per layer)
    assert g["decode"]["context_tokens"] == g["cascade"]["context_tokens"] == 262_144 + 128
    assert g["decode"]["sequences"] == g["cascade"]["sequences"] == 1_024
    assert g["cascade"]["layer_prefix_bytes"] == 262_144 * 2 * 8 * 128 * 2 == 1024 * MiB
    one = {"prefix_tokens": 100, "suffix_tokens": 7, "group_size": 3, "n_groups": 2, "num_kv_heads": 8,
           "head_dim": 128, "kv_dtype": "fp8"}
    assert grid_of_configs([one]) == {"context_tokens": 107, "sequences": 6,
                                      "layer_prefix_bytes": 2 * 100 * 2 * 8 * 128}


def test_an_imported_file_carries_its_own_decode_grid_and_the_probes_cascade_grid():
    # the imports were written beside the 2026-12-01 probe and carry its cascade grid (65,536 + 1,024 tokens,
    # 320 MiB of shared prefix per layer) until they are imported again
    for gpu in ("h200", "h100-sxm", "a100-80gb"):
        g = measured_grid(find_committed(load_hardware(gpu), "aic"))
        assert g["decode"]["context_tokens"] == 131_072 and g["decode"]["sequences"] == 2048
        assert g["cascade"]["context_tokens"] == 66_560
        assert g["cascade"]["layer_prefix_bytes"] == pytest.approx(320 * MiB, rel=1e-5)


def test_inside_the_grid_no_notes_and_the_verdict_stands():
    d = _estimate("h200", 4096, 2, 64, 1024)                 # rl-rollouts-64
    assert d["coverage"] == [] and d["go_no_go"]["level"] in ("go", "marginal", "no-go")
    # exactly the longest measured context (4,096 + 28,800 = 32,896 tokens) is still inside
    assert _estimate("h200", 4096, 1, 8, 28_800)["coverage"] == []


def test_long_context_declines_to_judge_on_probe_and_imported_numbers():
    d = _estimate("h200", 4096, 1, 2, 300_000)               # 304,096 tokens per sequence (10% past the grid)
    assert len(d["coverage"]) == 1 and d["coverage"][0].startswith("contexts up to 304,096 tokens")
    v = d["go_no_go"]
    assert v["level"] == "undecided" and v["speedup_range"][0] < 1 <= v["speedup_range"][1]
    assert "262,272 tokens per sequence" in v["text"]
    assert _estimate("h200", 4096, 1, 4, 250_000)["coverage"] == []   # 254,096 tokens: inside the 256K-prefix rows
    h100 = _estimate("h100-sxm", 4096, 1, 4, 100_000)       # AIConfigurator decode reaches 131,072: only cascade
    (note,) = h100["coverage"]
    assert "cascade kernels were measured up to 66,560" in note and "per-sequence decode kernels" not in note
    assert h100["go_no_go"]["speedup_range"] is not None


def test_ten_million_output_tokens_are_flagged_even_where_nothing_fits():
    d = _estimate("h200", 4096, 2, 64, 10_000_000)          # the 0.23x once reported here
    assert d["go_no_go"]["level"] == "does-not-fit"
    assert "contexts up to 10,004,096 tokens" in d["coverage"][0] and "GiB of KV per layer" in d["coverage"][0]
    text = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--hardware", "h200", "--prefix", "4096",
                               "--groups", "2", "--samples", "64", "--output-tokens", "10000000"]).output
    assert "beyond the measurements: contexts up to 10,004,096 tokens" in " ".join(text.split())


def test_batch_beyond_the_grid():
    d = _estimate("h200", 256, 4, 512, 64)                  # 2,048 sequences
    (note,) = d["coverage"]
    assert note.startswith("a batch of 2,048 sequences") and "measured up to 1,024 sequences" in note
    assert d["go_no_go"]["speedup_range"] is not None
    assert _estimate("h200", 256, 2, 512, 64)["coverage"] == []      # 1,024 sequences: measured now


def test_per_layer_prefix_beyond_the_grid():
    d = _estimate("h200", 20_000, 16, 8, 16)                # 16 x 20,000 tokens x 4 KiB = 1,250 MiB per layer
    notes = [n for n in d["coverage"] if n.startswith("one layer's shared prefix")]
    assert notes and "(1.2 GiB: 320,000 tokens" in notes[0] and "1.0 GiB per layer measured" in notes[0]
    assert d["go_no_go"]["speedup_range"] is not None


def test_uncalibrated_and_ideal_numbers_carry_no_grid_notes():
    for flag in ("--uncalibrated", "--ideal"):
        r = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--hardware", "h200", "--prefix", "4096",
                                "--groups", "1", "--samples", "4", "--output-tokens", "60000", flag, "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["coverage"] == []


def test_the_step_plot_footer_says_when_a_workload_is_beyond_the_grid(tmp_path, root):
    # beam search over 64 prompts of CodeLlama-13B: 64 x 1,024 tokens x 20 KiB = 1.25 GiB of shared prefix per
    # layer, beyond the 1 GiB measured
    wide = tmp_path / "beam-search-wide.yaml"
    wide.write_text((root / "workloads/beam-search.yaml").read_text().replace("copies: 24", "copies: 64")
                    .replace("output_tokens: 256", "output_tokens: 16")
                    .replace("name: beam-search", "name: beam-search-wide"))
    for name, beyond in ((str(wide), True), ("rl-rollouts-64", False)):
        out = tmp_path / Path(name).stem
        r = runner.invoke(app, ["plot", name, "--hardware", "h200", "--kind", "steps", "--svg", "--out", str(out)])
        assert r.exit_code == 0, r.output
        svg = next(out.rglob("*.svg")).read_text()
        assert ("Beyond the measured grid" in svg) is beyond, name
