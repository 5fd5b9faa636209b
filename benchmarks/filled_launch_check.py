"""Check the planner's batch-filled launch (cost/roofline.py filled_gain) against the GPU rows of
`benchmarks/decode_vs_flashinfer.py filled` (probe 1.3's Triton decode, the kernel the shipped calibration prices, in
its "default" column). Needs no GPU.

Per shape, our decode over shared and over duplicated pages: measured, the shipped fit, their ratio; then, within
each set of shapes that differ only in their private tokens, the time over the shortest context's, measured and as
two rules price it: whole 128-token tiles in the launch (the planner) and time in proportion to the tokens. The
planner's rule is falsified where the measured ratios follow the tokens instead (528 tokens at 1.03x 512's rather
than 1.25x).

Usage: python benchmarks/filled_launch_check.py ROWS.json [CALIBRATION.json]"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict

KERNELS = {"shared_table": "decode_shared", "dup_table": "decode_dup"}


def compare(rows: list[dict], fits_by_kv: dict, l2_bytes: float) -> list[dict]:
    """One record per (shape, table) timed in the "default" column: the measured time, the fit's, and the fit's
    gain there (1: outside the launch)."""
    import numpy as np

    from cascade_plan.calibration.fitting import features, predict_kind
    from cascade_plan.cost.roofline import filled_gain, filled_on

    out = []
    for row in rows:
        c = row["config"]
        fits = fits_by_kv.get(c["kv_dtype"])
        for table, kind in KERNELS.items():
            t = ((row.get("triton") or {}).get(table) or {}).get("default")
            if fits is None or t is None:
                continue
            pred = float(predict_kind(fits, kind, [c], l2_bytes)[0])
            f = features(kind, [c], decode_rows=fits.decode_rows)
            k = getattr(fits, kind)
            # a kind without the launch rule returns the scalar 1.0; a rule without a gain, its whole tiles alone
            gain = float(np.atleast_1d(filled_gain(k, f.rows, f.longest_tokens))[0])
            on = bool(k.filled_rows) and bool(np.atleast_1d(filled_on(k, f.rows, f.longest_tokens))[0])
            out.append({"config": c, "kind": kind, "measured_s": t["median_s"], "fit_s": pred, "gain": gain,
                        "in_launch": on, "tile": int(k.filled_tile_tokens),
                        "tokens": c["prefix_tokens"] + c["suffix_tokens"]})
    return out


def context_ratios(records: list[dict]) -> list[dict]:
    """Within shapes that differ only in their private tokens: each one's time over the shortest context's,
    measured, as whole tiles of the fit's launch price it, and in proportion to the tokens."""
    sets: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        c = r["config"]
        sets[(r["kind"], c["kv_dtype"], c["prefix_tokens"], c["group_size"], c["n_groups"], c["q_per_kv"],
              c["num_kv_heads"])].append(r)
    out = []
    for key, rs in sorted(sets.items()):
        rs = sorted(rs, key=lambda r: r["tokens"])
        base = rs[0]
        for r in rs[1:]:
            tile = r["tile"]
            whole = (math.ceil(r["tokens"] / tile) / math.ceil(base["tokens"] / tile) if r["in_launch"]
                     else r["tokens"] / base["tokens"])
            out.append({"set": key, "tokens": r["tokens"], "base_tokens": base["tokens"],
                        "measured": r["measured_s"] / base["measured_s"], "planner": whole,
                        "tokens_rule": r["tokens"] / base["tokens"], "in_launch": r["in_launch"]})
    return out


def main(argv: list[str]) -> None:
    from pathlib import Path

    from cascade_plan.calibration.calibration_file import load_probe

    rows = json.load(open(argv[0]))["rows"]
    probe = load_probe(Path(argv[1] if len(argv) > 1 else "calibrations/h200-probe-2026-12-01.json"))
    fits = {kv: per["triton"] for kv, per in probe.fits.kv_dtypes.items() if "triton" in per}
    recs = compare(rows, fits, probe.l2_bytes)
    print(f"{'shape':<44} {'kernel':<13} {'measured':>10} {'fit':>10} {'fit/meas':>8} {'gain':>5}")
    for r in recs:
        c = r["config"]
        shape = (f"{c['n_groups']}x{c['group_size']} G{c['q_per_kv']} Hkv{c['num_kv_heads']} {c['kv_dtype']} "
                 f"P{c['prefix_tokens']}+{c['suffix_tokens']}")
        print(f"{shape:<44} {r['kind']:<13} {r['measured_s'] * 1e6:>8.1f}us {r['fit_s'] * 1e6:>8.1f}us "
              f"{r['fit_s'] / r['measured_s']:>8.3f} {r['gain']:>5.2f}")
    print("\nTime over the shortest context of each set: measured, whole tiles (the planner in the launch), tokens")
    for r in context_ratios(recs):
        kind, kv, p, g, n, q, h = r["set"]
        print(f"{kind:<13} {kv:<4} {n}x{g} G{q} Hkv{h} {r['tokens']:>5} / {r['base_tokens']:>5} tokens: "
              f"measured {r['measured']:.3f}  planner {r['planner']:.3f}  tokens {r['tokens_rule']:.3f}"
              f"{'' if r['in_launch'] else '  (below the launch)'}")


if __name__ == "__main__":
    main(sys.argv[1:])
