"""The device run script runs every stage the decode-against-FlashInfer benchmark defines: a stage added to
benchmarks/decode_vs_flashinfer.py's STAGE_PLANS but not to benchmarks/h200_probe_run.sh's case would be silently
skipped by a device call that names it (the loop has no default branch)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmark_support import load_benchmark

ROOT = Path(__file__).resolve().parents[1]
# stages of the benchmark's first sessions, run by calling the script directly, never through the run script
RUN_DIRECTLY = {"sweep", "tiny"}


def _script_stages() -> set[str]:
    text = (ROOT / "benchmarks" / "h200_probe_run.sh").read_text()
    out: set[str] = set()
    for m in re.finditer(r"^ {4}([\w|-]+)\)", text, re.M):
        out |= set(m.group(1).split("|"))
    return out


def _benchmark():
    """benchmarks/decode_vs_flashinfer.py as a module (it puts the checkout on sys.path as it loads)."""
    return load_benchmark("decode_vs_flashinfer")


def test_every_benchmark_stage_is_a_case_of_the_run_script_and_documented():
    dvf = _benchmark()
    stages = set(dvf.STAGE_PLANS)
    assert "regimes-losers" in stages and "wide-head-waves" in stages
    assert stages - RUN_DIRECTLY <= _script_stages()
    header = (ROOT / "benchmarks" / "h200_probe_run.sh").read_text().split("set -o pipefail")[0]
    undocumented = {s for s in stages - RUN_DIRECTLY if not re.search(rf"^#\s+{re.escape(s)}\s", header, re.M)}
    assert not undocumented, undocumented


def test_the_stages_of_rules_the_default_took_on_still_time_them():
    """A stage whose variants are a rule the default since took on would time the default against itself: probe
    1.13.0 turned capped fp8 pairs and block fill on, so their stages keep probe 1.12.0's tune as their base (and
    1.14.0 the wide-dot targets: theirs keep 1.13.0's), and
    each variant still launches otherwise than the base on the shapes it was written for (fp8-capped: the 20 its
    docstring and the run script give; block-fill: at least one shape for every variant)."""
    dvf = _benchmark()

    def changed(stage: str, label: str) -> int:
        configs, variants, base = dvf.STAGE_PLANS[stage]
        tune = dict(variants(base))[label]
        keys = dvf.launch_keys.plan_keys
        return sum(keys(c, tune, 132, device="cpu") != keys(c, base, 132, device="cpu") for c in configs())

    assert changed("fp8-capped", "fp8 pairs <= 2.25/SM") == 20
    _, variants, base = dvf.STAGE_PLANS["block-fill"]
    for label, _ in variants(base)[1:]:
        assert changed("block-fill", label) > 0, label
    # probe 1.14.0 took on the keyed wide-dot targets with the tail cap: their stages keep probe 1.13.0's base
    assert changed("wide-dot-tails", "keyed, tails <= 512") >= 10
    assert changed("wide-dot-long", "wide dot 2/SM, 16+ splits") >= 6
    assert changed("regimes-next", "wide dot 2/SM, 16+ splits") == 1
    # probe 1.15.0 took on the wave rule and blocks of four: their stages keep probe 1.14.0's base
    assert changed("wide-head-rules", "waves of 2/SM") >= 30
    assert changed("wide-dot-four", "blocks of four, 1.8+/SM") >= 20
    assert changed("wide-head-fill", "fill down, blocks of 4+") >= 10     # its base: 1.15.0 without the rule
    # probe 1.16.0 took on the whole-wave split over shared pages: its stage keeps probe 1.15.0's base
    assert changed("wide-head-wave-shared", "waves over shared pages, no block") >= 24


def test_a_variants_summary_also_counts_only_the_rows_it_launches_otherwise(capsys):
    """Two rows: the variant launched one like the default (same_as, 1.000x) and one 1.25x faster. Over both the
    median is 1.125x; where it launches otherwise it is 1.25x, n=1."""
    dvf = _benchmark()
    same = {"default": {"median_s": 2e-5}, "v": {"median_s": 2e-5, "same_as": "default"}}
    faster = {"default": {"median_s": 5e-5}, "v": {"median_s": 4e-5}}
    rows = [{"flashinfer": {}, "triton": {"shared_table": t}} for t in (same, faster)]
    dvf.summarize(rows, ["default", "v"])
    out = capsys.readouterr().out
    assert "v over the default, shared_table: n=2 median 1.125x, min 1.000x, max 1.250x" in out
    assert ("v over the default where it launches otherwise, shared_table: n=1 median 1.250x, min 1.250x, "
            "max 1.250x") in out


def test_the_kernel_body_stages_run_another_kernel_on_every_shape_they_list():
    """l2-hints and wide-regs change the kernel, not (only) the launch: launch_key tells each variant from the default
    on every shape listed before the grids' (the rows they were written for), over both page layouts, so none of
    those rows is timed as the default's duplicate."""
    dvf = _benchmark()
    for stage, listed in (("l2-hints", 19), ("wide-regs", 12)):
        configs, variants, base = dvf.STAGE_PLANS[stage]
        cfgs = configs()[:listed]
        default = [dvf.launch_keys.plan_keys(c, base, 132, device="cpu") for c in cfgs]
        for label, tune in variants(base)[1:]:
            for c, keys in zip(cfgs, default):
                other = dvf.launch_keys.plan_keys(c, tune, 132, device="cpu")
                assert other[0] != keys[0] and other[1] != keys[1], (stage, label, c.label())


def test_every_stage_builds_its_shapes_and_variants_without_a_gpu():
    """The stages live in several modules beside the script (decode_split_stages, decode_wide_stages, ...): each
    stage's shape list and variants build on the CPU, so a device call never fails on a name one of them lost. Each
    lists a shape once and names each variant once."""
    from cascade_plan.own_kernel_tune import TuneParams

    dvf = _benchmark()
    for stage, (configs, variants_of, base) in dvf.STAGE_PLANS.items():
        cfgs, variants = configs(), variants_of(base)
        assert cfgs and len(cfgs) == len({json.dumps(c.as_dict(), sort_keys=True) for c in cfgs}), stage
        labels = [label for label, _ in variants]
        assert labels and len(labels) == len(set(labels)), stage
        assert all(isinstance(t, TuneParams) for _, t in variants), stage


def test_the_run_script_stops_with_one_line_where_no_wheels_travelled(tmp_path):
    """Every stage imports msgspec and pyyaml from the carried wheels, ours-alone ones (--no-flashinfer) too: a call
    without them stops before any stage, with exit 2 and the line that says how to carry them."""
    import os
    import subprocess

    env = {**os.environ, "OUT": str(tmp_path), "WHL": str(tmp_path / "none")}
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "h200_probe_run.sh"), "stagger", "10"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [f"no wheels in {tmp_path / 'none'}: run from the checkout with "
                                               "WHL=.whl and carry .whl (docs/probe.md)"]
    assert list(tmp_path.iterdir()) == []
