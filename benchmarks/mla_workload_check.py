"""How well the planner predicted MLA rows before they were measured: the rows `probe --workload
deepseek-v3-grpo-tp8` measured (prefix 6,000 and 3,008 / 12,000 tokens: prefixes the grid never had) against
the interpolation of a calibration without them (as the planner applies it: the fit times the rows'
interpolated ratio) and against the fit alone. python benchmarks/mla_workload_check.py CAL_WITHOUT.json ROWS.json"""

import json
import sys

import numpy as np

from cascade_plan.calibration.mla_fit import mla_measured, predict_mla
from cascade_plan.cost.ops.mla_attention import MLA_BACKEND, mla_shape_key


def _load(path):
    with open(path) as fh:
        return json.load(fh)


cal, rows = (_load(p) for p in sys.argv[1:3])
l2 = 60 * 2**20
for kernel, name in (("per_sequence", "decode_shared"), ("cascade", "cascade_total")):
    sel = [r for r in rows["mla"] if r["kernel"] == name]
    errs_i, errs_f = [], []
    for r in sel:
        c = r["config"]
        fits = cal["fitted"]["kv_dtypes"][c["kv_dtype"]][MLA_BACKEND]
        m = mla_measured(cal, c["kv_dtype"], fits, l2)
        f = predict_mla(fits, name, [c], l2)
        q = np.array([[c["n_groups"], c["group_size"], c["prefix_tokens"], c["suffix_tokens"]]], float)
        t = m.table(kernel, mla_shape_key(c["num_heads"], c["kv_lora_rank"] + c["qk_rope_head_dim"]))(q, f)[0]
        ei, ef = t / r["median_s"] - 1, f[0] / r["median_s"] - 1
        if np.isfinite(t):          # outside the grid (prefix 3,008, 12,000) the planner uses the fit
            errs_i.append(abs(ei))
        errs_f.append(abs(ef))
        print(f"{name:14s} n={c['group_size']:3d} P={c['prefix_tokens']:6d} S={c['suffix_tokens']:5d} measured "
              f"{r['median_s'] * 1e6:7.1f} us  interpolated {t * 1e6:7.1f} ({ei:+.1%})  "
              f"fit {f[0] * 1e6:7.1f} ({ef:+.1%})")
    print(f"{name}: interpolated ({len(errs_i)} bracketed) median {np.median(errs_i):.1%} max {np.max(errs_i):.1%}; "
          f"fit median {np.median(errs_f):.1%} max {np.max(errs_f):.1%}")
