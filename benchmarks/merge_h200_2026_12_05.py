"""Add FlashInfer's rows of the probe 1.4 run (benchmarks/raw/h200-2026-12-04/all-probe-1.4.json) at the configurations
the H200 calibration lacks: the grid's new 1,024-sequence points where a rollout starts (64 x 16 at 512 tokens, 32 x
16 at 2K, one group of 1,024; no suffix or a 16-token one) on every regime shape, and the three-level tree rows the
earlier trees run left out. FlashInfer's kernels are the same in both runs; its rows the calibration already holds
stay as they are. Triton's rows and whole steps stay probe 1.3's: the probe 1.4 Triton rows time page-aware blocks
the fitted model does not price (docs/probe-notes.md), so the planner keeps pricing the kernel its rows measured.

Usage: python benchmarks/merge_h200_2026_12_05.py CALIBRATION.json [OUT.json], then `cascade-plan calibrate OUT.json`.
The rollout starts among the added rows are held out of the fits (calibration/holdout.py: rollout_start)."""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import measurement_key

RUN = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "raw" / "h200-2026-12-04" / "all-probe-1.4.json"
BACKENDS = ("flashinfer", "flashinfer-fa2")


def main(argv: list[str]) -> None:
    src = pathlib.Path(argv[0])
    out = pathlib.Path(argv[1]) if len(argv) > 1 else src
    base = json.loads(src.read_text())
    run = json.loads(RUN.read_text())
    have = {measurement_key(m) for m in base["measurements"]}
    new = [m for m in run["measurements"] if m["backend"] in BACKENDS and measurement_key(m) not in have]
    doc = {**base, "measurements": base["measurements"] + new}
    configs = {json.dumps(m["config"], sort_keys=True) for m in doc["measurements"]}
    doc["grid"] = {**base["grid"], "n_configs": len(configs)}
    doc.setdefault("notes", {})["flashinfer_rows_2026_12_04"] = (
        f"{len(new)} FlashInfer rows of the probe 1.4 run of 2026-12-04 at configurations this file lacked "
        "(1,024-sequence rollout starts, three-level trees); Triton's rows stay probe 1.3's")
    write_atomic(out, doc)
    print(f"wrote {out}: {len(new)} FlashInfer rows added, {len(doc['measurements'])} measurements")


if __name__ == "__main__":
    main(sys.argv[1:])
