"""Merge whole MoE / MLA + MoE step rows (python -m kernels_probe.moe.moe_steps / h200_probe_run.sh moe-steps: a JSON
of kind "moe_step_rows") into a calibration file of the same GPU: its `steps` rows (with a `step_kind`) are
appended, each tagged with the run that measured it (`run`: created_utc), a re-measured step replacing the
older row; the run joins notes.runs and its skipped steps go to `step_skipped`. The no-attention rows
(`step_ops` of op moe_step_no_attention: the whole step with its attention kernels left out, M = 1-512) join
the file's `step_ops` as op "moe_layer_graph", each with the config.json of its model (from the same run's
step rows, or an earlier file's) and its weight dtype as `dtype`: `calibrate` fits the MoE layer term on
them (calibration/moe_layer_fit.py). The other diagnosis rows (moe_step_part) stay in the raw file. Steps
are never fitted, so `fitted` is kept as it is until `calibrate` runs.
Usage: python benchmarks/merge_moe_steps.py ROWS.json [ROWS.json ...] CALIBRATION.json"""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import merge_tagged_rows

KEY = ("step_kind", "workload", "position", "backend", "mode", "kv_dtype", "weight_dtype", "tp")
LAYER_OP = "moe_layer_graph"
LAYER_KEY = ("model", "tp", "m", "layers", "dtype", "glue")


def _layer_rows(rows_doc: dict, cal: dict, run: str) -> list[dict]:
    """The no-attention step rows as moe_layer_graph step-op rows."""
    configs = {r["model"]: r["model_config"] for r in cal.get("steps", []) + rows_doc.get("steps", [])
               if r.get("step_kind") and r.get("model_config")}
    out = []
    for r in rows_doc.get("step_ops", []):
        if r.get("op") != "moe_step_no_attention" or "median_s" not in r:
            continue
        c = r["config"]
        if c["model"] not in configs:
            raise SystemExit(f"no step row of {c['model']} carries its model_config: merge its steps first")
        out.append({"op": LAYER_OP,
                    "config": {"model": c["model"], "tp": c["tp"], "m": c["m"], "layers": c["layers"],
                               "dtype": c["weight_dtype"], "kv_dtype": c["kv_dtype"], "glue": c["glue"],
                               "skip": c["skip"]},
                    **{k: r[k] for k in ("median_s", "p10_s", "p90_s", "n_reps", "per_layer_s", "expert_block_config")
                       if k in r},
                    "model_config": configs[c["model"]], "run": run})
    return out


def _key(r: dict) -> tuple:
    return tuple(r.get(k) for k in KEY)


def merge(rows_doc: dict, cal: dict) -> dict:
    notes = cal.setdefault("notes", {})
    seen = next((x for x in notes.get("runs", []) if x.get("created_utc") == rows_doc.get("created_utc")), None)
    # a run merged again (for rows this script did not carry before) is not listed twice, nor its skipped steps
    run, new = merge_tagged_rows(rows_doc, cal, kind="moe_step_rows", what="MoE step", rows="steps", section="steps",
                                 skipped="step_skipped", ours=lambda r: r.get("step_kind"), key=_key,
                                 add_skipped=seen is None)
    layer = _layer_rows(rows_doc, cal, run)
    lkeys = {tuple(r["config"].get(k) for k in LAYER_KEY) for r in layer}
    cal["step_ops"] = [r for r in cal.get("step_ops", []) if not (
        r.get("op") == LAYER_OP and tuple(r["config"].get(k) for k in LAYER_KEY) in lkeys)] + layer
    if seen is not None:
        seen["grid"]["moe_layer_rows"] = len(layer)
        return cal
    notes.setdefault("runs", []).append({"created_utc": run, "probe_version": "moe_steps",
                                         "grid": {"mode": "moe_steps", "device": rows_doc["device"],
                                                  "elapsed_s": rows_doc.get("elapsed_s"),
                                                  "complete": rows_doc.get("complete"), "steps": len(new),
                                                  "moe_layer_rows": len(layer)}})
    return cal


if __name__ == "__main__":
    *rows_paths, cal_path = map(pathlib.Path, sys.argv[1:])
    cal = json.loads(cal_path.read_text())
    for p in rows_paths:
        cal = merge(json.loads(p.read_text()), cal)
    write_atomic(cal_path, cal)
    n = sum(1 for r in cal["steps"] if r.get("step_kind"))
    print(f"wrote {cal_path}: {n} MoE / MLA step rows, {len(cal['steps'])} step rows in all")
