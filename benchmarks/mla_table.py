"""Print the MLA rows of a probe output as a short table (per-sequence vs cascade per configuration):
python benchmarks/mla_table.py OUT.json [more.json ...]. No planner imports (runs on the device image)."""

from __future__ import annotations

import json
import sys


def table(doc: dict) -> list[str]:
    by: dict = {}
    for r in doc.get("mla") or []:
        c = r["config"]
        key = (c["kv_dtype"], c["num_heads"], c["n_groups"], c["group_size"], c["prefix_tokens"], c["suffix_tokens"])
        by.setdefault(key, {})[r["kernel"]] = r
    lines = [(f"{'kv':>4} {'H':>4} {'grp':>4} {'n':>5} {'P':>6} {'S':>5} {'per-seq us':>11} {'cascade us':>11} "
              f"{'prefix us':>10} {'speedup':>8} {'err':>8} kernel")]
    for key in sorted(by):
        k = by[key]
        ps, ca, pr = (k.get(n, {}).get("median_s") for n in ("decode_shared", "cascade_total", "cascade_prefix"))
        f = lambda x: f"{x * 1e6:11.1f}" if x else f"{'-':>11}"
        err = max((x.get("max_rel_err") or 0) for x in k.values())
        sp = f"{ps / ca:7.2f}x" if ps and ca else f"{'-':>8}"
        fk = next((x.get("fi_kernel") for x in k.values() if x.get("fi_kernel")), "")
        lines.append(f"{key[0]:>4} {key[1]:>4} {key[2]:>4} {key[3]:>5} {key[4]:>6} {key[5]:>5} {f(ps)} {f(ca)} "
                     f"{f(pr)[1:]} {sp} {err:8.1e} {fk}")
    skipped = doc.get("mla_skipped") or []
    reasons: dict = {}
    for s in skipped:
        reasons[s["reason"][:120]] = reasons.get(s["reason"][:120], 0) + 1
    lines.append(f"{len(doc.get('mla') or [])} MLA rows, {len(skipped)} skipped" +
                 "".join(f"\n  {n} x {r}" for r, n in reasons.items()))
    return lines


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path) as fh:
            print("\n".join(table(json.load(fh))))
