"""Figures from a MoE probe rows file (benchmarks/moe_probe_run.sh): per shape and weight dtype, one MoE
layer's gate_up + down at a few M for each backend and routing, skewed over balanced, and the measured
(triton, balanced) time over what the planner's model (uniform routing, dense GEMM table of the H200
calibration) predicted before the rows. Usage: python benchmarks/moe_rows_summary.py ROWS.json"""

import json
import sys

import numpy as np

from cascade_plan.calibration.calibration_file import ProbeData, find_committed
from cascade_plan.calibration.moe_rows import moe_tables
from cascade_plan.calibration.probe_params import params_from_probe
from cascade_plan.cost.ops.moe import _modelled_layer_s
from cascade_plan.inputs.dtypes import ELEMENT_BYTES
from cascade_plan.inputs.hardware import load_hardware
from cascade_plan.inputs.model_spec import load_preset

SHOW = (1, 8, 64, 256, 1024)


def main(path: str) -> None:
    doc = json.loads(open(path).read())
    rows = doc["step_ops"]
    print(f"{len(rows)} rows, {len(doc.get('skipped', []))} skipped, {doc.get('elapsed_s', 0):.0f} s, "
          f"{doc['device']}")
    by: dict = {}
    for r in rows:
        c = r["config"]
        by.setdefault((c["model"], c["tp"], c["dtype"]), {}).setdefault((c["backend"], c["routing"]), {}) \
            .setdefault(c["m"], {})[c["proj"]] = r["median_s"]
    hw = load_hardware("h200")
    params = params_from_probe(find_committed(hw), None, "bf16", hw)
    for (model, tp, dtype), per in sorted(by.items()):
        print(f"\n{model} TP {tp}, {dtype} weights: gate_up + down per layer, us")
        print(f"  {'backend/routing':<22}" + "".join(f"{'M=' + str(m):>10}" for m in SHOW))
        for (be, rt), d in sorted(per.items()):
            cells = [f"{(d[m]['gate_up'] + d[m]['down']) * 1e6:10.1f}" if len(d.get(m, {})) == 2 else f"{'-':>10}"
                     for m in SHOW]
            print(f"  {be + '/' + rt:<22}" + "".join(cells))
        bal, skw = per.get(("triton", "balanced"), {}), per.get(("triton", "skewed"), {})
        ms = [m for m in SHOW if len(bal.get(m, {})) == 2 and len(skw.get(m, {})) == 2]
        if ms:
            print("  skewed / balanced (triton): " + ", ".join(
                f"M={m} {sum(skw[m].values()) / sum(bal[m].values()):.2f}" for m in ms))
        spec = load_preset(model)
        layer_s = _modelled_layer_s(spec, tp, dtype, params.step, ELEMENT_BYTES[dtype], hw.hbm_bytes_per_s,
                                    hw.dense_bf16_flop_per_s)
        t = next((t for t in moe_tables(ProbeData(path, doc).step_ops, path) if t.matches(spec, tp, dtype)), None)
        if t is not None:
            ms = [m for m in t.m if m in SHOW]
            ratio = np.asarray(t.seconds) / layer_s(np.asarray(t.m))
            print(f"  measured ({t.backend}, balanced) / planner's model before the rows: " + ", ".join(
                f"M={int(m)} {r:.2f}" for m, r in zip(t.m, ratio) if m in ms)
                  + f"; median over M {np.median(ratio):.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
