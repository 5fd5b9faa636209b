"""Build the H200 candidate calibration of probe 1.4 from the runs of 2026-12-04 (benchmarks/raw/h200-2026-12-04/):
every attention row of `all-probe-1.4.json` (the `all` grid, Triton's rows all probe 1.4) with Triton's whole steps
re-timed on the probe 1.4 kernels (`triton-steps.json`, benchmarks/triton_steps_run.py: one GPU, 70 rows laid over
the file's by identity). Triton's step rows of probe 1.3 that the re-time did not repeat (TP 2, rl-rollouts-64 with
fp8 KV: 12 rows) are dropped: they time a kernel the probe no longer runs. The base keeps its ceilings and every
other row. Then `cascade-plan calibrate OUT.json` fits it and `cascade-plan validate OUT.json` scores it.

Usage: python benchmarks/merge_h200_2026_12_04.py OUT.json"""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import merge_sections, step_key

RAW = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "raw" / "h200-2026-12-04"


def main(argv: list[str]) -> None:
    base = json.loads((RAW / "all-probe-1.4.json").read_text())
    steps = json.loads((RAW / "triton-steps.json").read_text())
    doc = merge_sections(steps, base, ("steps", "step_skipped"))
    retimed = {step_key(r) for r in steps["steps"]}
    stale = [r for r in doc["steps"]
             if r["backend"] == "triton" and not r.get("step_kind") and step_key(r) not in retimed]
    doc["steps"] = [r for r in doc["steps"] if r not in stale]
    doc.setdefault("notes", {})["stale_dropped"] = (
        f"{len(stale)} Triton whole-step rows of probe 1.3's kernel that the 2026-12-04 re-time (one GPU) did not "
        "repeat (TP 2, rl-rollouts-64 with fp8 KV) were dropped: they time a kernel the probe no longer runs")
    write_atomic(argv[0], doc)
    print(f"wrote {argv[0]}: {len(doc['measurements'])} attention rows, {len(doc['steps'])} steps "
          f"({len(steps['steps'])} Triton steps re-timed, {len(stale)} stale dropped)")


if __name__ == "__main__":
    main(sys.argv[1:])
