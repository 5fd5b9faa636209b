"""How well the planner answered a `probe --workload` run before it was measured, and after.

    python benchmarks/workload_rows_check.py CAL.json WORKLOAD_ROWS.json

CAL.json: a calibration without the workload's rows (the shipped H200 file). WORKLOAD_ROWS.json: what
`cascade-plan probe --workload` wrote (its attention rows and its whole steps). Prints:

1. every attention row of the workload beside CAL's answer for it: the measured rows interpolated where CAL's
   grid brackets the point, else the fit (what the planner uses), and the fit alone;
2. the workload's whole steps predicted from CAL (its shapes never measured), then from CAL with the workload's
   attention rows merged in and refitted (`--merge-into` and `calibrate`, the way a user runs it): the error
   that `validate` shows once the workload is inside the measured grid. Only attention rows are merged, so the
   change is the attention's alone.

Example (H200, Qwen3-30B-A3B, 32 prompts x 16 samples, 2,048-token prefix, 512 output tokens, bf16):
    python benchmarks/workload_rows_check.py calibrations/h200-probe-2026-12-01.json \\
        benchmarks/raw/h200-2026-12-01b/qwen3-bf16.json
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from cascade_plan.calibration.backends import BACKENDS
from cascade_plan.calibration.calibration_file import ProbeData
from cascade_plan.calibration.fitting import predict_kind
from cascade_plan.calibration.measured_grid import measured_rows
from cascade_plan.calibration.moe_step_validation import moe_step_points
from cascade_plan.calibration.probe_fit import calibrate
from cascade_plan.inputs.hardware import load_hardware

KINDS = (("per_sequence", "decode_shared", "decode_shared"), ("per_sequence_dup", "decode_dup", "decode_dup"),
         ("cascade", "cascade_total", "cascade_total"))


def _stats(errs: list[float]) -> str:
    a = np.abs(np.array(errs))
    return f"median |error| {np.median(a):.1%}, max {a.max():.1%} ({a.size} rows)" if a.size else "no rows"


def attention(cal: ProbeData, rows: list[dict]) -> None:
    for backend, src in BACKENDS.items():
        db, dv = src["decode"]
        tb, tv = src.get("total", src["prefix"])
        for kv in sorted({r["config"]["kv_dtype"] for r in rows}):
            fits = (cal.fits.kv_dtypes.get(kv) or {}).get(backend) if cal.fits else None
            if fits is None:
                continue
            table = measured_rows(cal, backend, kv, fits)
            for kernel, name, kind in KINDS:
                b, v = (db, dv) if kernel.startswith("per_sequence") else (tb, tv)
                sel = [r for r in rows if r["backend"] == b and r["kernel"] == name and r["variant"] == v
                       and r["config"]["kv_dtype"] == kv]
                if not sel:
                    continue
                fit = predict_kind(fits, kind, [r["config"] for r in sel], cal.l2_bytes)
                e_fit, e_used = [], []
                for r, f in zip(sel, fit):
                    c = r["config"]
                    shape = (c["q_per_kv"], c["num_kv_heads"], c["head_dim"])
                    t = table.table(kernel, shape) if table is not None else None
                    q = np.array([[c["n_groups"], c["group_size"], c["prefix_tokens"], c["suffix_tokens"]]], float)
                    interp = t(q, np.array([f]))[0] if t is not None else np.nan
                    used = interp if np.isfinite(interp) else f
                    e_fit.append(f / r["median_s"] - 1)
                    e_used.append(used / r["median_s"] - 1)
                print(f"{kv} {backend:15s} {kernel:17s} planner {_stats(e_used)}; fit alone {_stats(e_fit)}")


def steps(cal_doc: dict, wl_doc: dict, hw, label: str) -> None:
    doc = {**cal_doc, "steps": wl_doc.get("steps") or []}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cal.json"
        path.write_text(json.dumps(doc))
        pts = moe_step_points(ProbeData(str(path), doc), hw)
    if not pts:
        print(f"{label}: no whole MoE steps in the workload file")
        return
    print(f"\nwhole steps, {label}: step error (per-sequence, cascade) and speedup error")
    errs: dict[str, list[float]] = {}
    for _, p in pts:
        print(f"  {p.backend:15s} {p.kv_dtype} {p.position:7s} per-seq {p.measured_ps_s * 1e3:7.2f} ms {p.ps_err:+6.1%}"
              f"  cascade {p.measured_cas_s * 1e3:7.2f} ms {p.cas_err:+6.1%}  speedup {p.speedup_measured:.2f}x "
              f"{p.speedup_err:+6.1%}")
        errs.setdefault(p.backend, []).extend([p.ps_err, p.cas_err])
        errs.setdefault(p.backend + " speedup", []).append(p.speedup_err)
    for k, v in errs.items():
        print(f"  {k:24s} {_stats(v)}")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    cal_doc, wl_doc = (json.loads(Path(p).read_text()) for p in argv)
    cal = ProbeData(argv[0], cal_doc)
    hw = load_hardware(cal.hardware_id)
    rows = wl_doc["measurements"]
    print(f"{len(rows)} attention rows of {Path(argv[1]).name} against {Path(argv[0]).name}")
    attention(cal, rows)
    steps(cal_doc, wl_doc, hw, "shapes never measured (the shipped calibration)")
    merged = {**cal_doc, "measurements": cal_doc["measurements"] + rows}
    with np.errstate(all="ignore"):
        merged["fitted"] = calibrate(ProbeData(argv[0], merged))
    steps(merged, wl_doc, hw, "after probe --workload (its attention rows merged, refitted)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
