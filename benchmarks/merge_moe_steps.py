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

KEY = ("step_kind", "workload", "position", "backend", "mode", "kv_dtype", "weight_dtype", "tp")


def _key(r: dict) -> tuple:
    return tuple(r.get(k) for k in KEY)


def merge(rows_doc: dict, cal: dict) -> dict:
    if rows_doc.get("kind") != "moe_step_rows":
        raise SystemExit("not a MoE step rows file (kind moe_step_rows)")
    gpu, cal_gpu = rows_doc["device"]["name"], (cal.get("device") or {}).get("name")
    if gpu != cal_gpu:
        raise SystemExit(f"rows measured on {gpu!r}, calibration on {cal_gpu!r}: not merged")
    run = rows_doc["created_utc"]
    new = [{**r, "run": run} for r in rows_doc.get("steps", []) if r.get("step_kind")]
    keys = {_key(r) for r in new}
    cal["steps"] = [r for r in cal.get("steps", []) if not (r.get("step_kind") and _key(r) in keys)] + new
    cal["step_skipped"] = (list(cal.get("step_skipped") or [])
                           + [{**s, "run": run} for s in rows_doc.get("step_skipped", [])])
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
