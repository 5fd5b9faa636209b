"""Merge the MoE probe's rows (python -m kernels_probe.moe.moe_run / benchmarks/moe_probe_run.sh: a JSON of
kind "moe_probe_rows") into a calibration file of the same GPU: its `step_ops` rows of op
"moe_grouped_gemm" are appended, each tagged with the run that measured it (`run`: created_utc), a
re-measured point replacing the older row; the run joins notes.runs and its skipped rows go to
`step_skipped`. Nothing is refitted: the planner reads these rows as measured at load time
(calibration/moe_rows.py), so `fitted` is kept as it is.
Usage: python benchmarks/merge_moe_rows.py ROWS.json CALIBRATION.json"""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import merge_tagged_rows

OP = "moe_grouped_gemm"


def _key(r: dict) -> str:
    return json.dumps(r["config"], sort_keys=True)


def merge(rows_doc: dict, cal: dict) -> dict:
    run, _ = merge_tagged_rows(rows_doc, cal, kind="moe_probe_rows", what="MoE probe", rows="step_ops",
                               section="step_ops", skipped="skipped", ours=lambda r: r.get("op") == OP, key=_key)
    notes = cal.setdefault("notes", {})
    notes.setdefault("runs", []).append({"created_utc": run, "probe_version": "moe_probe",
                                         "grid": {"mode": "moe", "shapes": rows_doc.get("shapes"),
                                                  "device": rows_doc["device"],
                                                  "elapsed_s": rows_doc.get("elapsed_s"),
                                                  "complete": rows_doc.get("complete")}})
    return cal


if __name__ == "__main__":
    rows_path, cal_path = map(pathlib.Path, sys.argv[1:3])
    cal = merge(json.loads(rows_path.read_text()), json.loads(cal_path.read_text()))
    write_atomic(cal_path, cal)
    n = sum(1 for r in cal["step_ops"] if r.get("op") == OP)
    print(f"wrote {cal_path}: {n} {OP} rows, {len(cal['step_ops'])} op rows in all")
