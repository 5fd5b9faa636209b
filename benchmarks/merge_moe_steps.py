"""Merge whole MoE / MLA + MoE step rows (python -m kernels_probe.moe_steps / h200_probe_run.sh moe-steps: a JSON
of kind "moe_step_rows") into a calibration file of the same GPU: its `steps` rows (with a `step_kind`) are
appended, each tagged with the run that measured it (`run`: created_utc), a re-measured step replacing the
older row; the run joins notes.runs and its skipped steps go to `step_skipped`. The diagnosis rows
(`step_ops` of op moe_step_part / moe_step_no_attention) stay in the raw file: nothing fits them. Steps are
never fitted, so `fitted` is kept as it is (`validate` reads them as measured).
Usage: python benchmarks/merge_moe_steps.py ROWS.json [ROWS.json ...] CALIBRATION.json"""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import merge_tagged_rows

KEY = ("step_kind", "workload", "position", "backend", "mode", "kv_dtype", "weight_dtype", "tp")


def _key(r: dict) -> tuple:
    return tuple(r.get(k) for k in KEY)


def merge(rows_doc: dict, cal: dict) -> dict:
    run, new = merge_tagged_rows(rows_doc, cal, kind="moe_step_rows", what="MoE step", rows="steps", section="steps",
                                 skipped="step_skipped", ours=lambda r: r.get("step_kind"), key=_key)
    notes = cal.setdefault("notes", {})
    notes.setdefault("runs", []).append({"created_utc": run, "probe_version": "moe_steps",
                                         "grid": {"mode": "moe_steps", "device": rows_doc["device"],
                                                  "elapsed_s": rows_doc.get("elapsed_s"),
                                                  "complete": rows_doc.get("complete"), "steps": len(new)}})
    return cal


if __name__ == "__main__":
    *rows_paths, cal_path = map(pathlib.Path, sys.argv[1:])
    cal = json.loads(cal_path.read_text())
    for p in rows_paths:
        cal = merge(json.loads(p.read_text()), cal)
    write_atomic(cal_path, cal)
    n = sum(1 for r in cal["steps"] if r.get("step_kind"))
    print(f"wrote {cal_path}: {n} MoE / MLA step rows, {len(cal['steps'])} step rows in all")
