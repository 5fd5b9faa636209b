"""The regimes grid's ratio table (FlashInfer's best per-sequence decode over ours) for the launches probe 1.10.0
makes, on the H100, from three calls of 2026-12-06 (benchmarks/raw/device-2026-12-06g/), each ratio taken within
one call:

* regimes-decode.json: every shape of the grid (84), probe 1.9.0's launches except that 1,024 sequences at 512 + 1K
  ran shared_head_split's two splits (on then, off since);
* head-split-3.json: those shapes' probe 1.9.0 launch (variant "probe 1.9.0"), which replaces them;
* wide-dot.json: the 12-query-head shapes, with blocks of two in a 32-row dot ("wide dot") where probe 1.10.0 forms
  them (128-token tiles: wide_dot_block_n) and without ("default", probe 1.9.0's) elsewhere.

    python benchmarks/regimes_ratio_2026_12_06g.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

RAW = Path(__file__).resolve().parent / "raw" / "device-2026-12-06g"
TABLES = ("shared_table", "dup_table")


def key(c: dict) -> tuple:
    return (c["prefix_tokens"], c["group_size"], c["n_groups"], c["suffix_tokens"], c["q_per_kv"], c["num_kv_heads"],
            c["head_dim"], c["kv_dtype"])


def label(k: tuple) -> str:
    p, n, g, s, q, h, d, dt = k
    return f"P={p} n={n}x{g} S={s} G={q} Hkv={h} D={d} {dt}"


def ratio(row: dict, table: str, variant: str) -> float | None:
    fi = row["flashinfer"].get(table)
    ours = row["triton"].get(table, {}).get(variant)
    return min(fi.values()) / ours["median_s"] if fi and ours else None


def table() -> dict[tuple, tuple[float, str]]:
    from cascade_plan.own_kernel_blocks import page_blocks
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE

    out: dict[tuple, tuple[float, str]] = {}
    for row in json.loads((RAW / "regimes-decode.json").read_text())["rows"]:
        for t in TABLES:
            r = ratio(row, t, "default")
            if r is not None:
                out[(key(row["config"]), t)] = (r, "regimes-decode")
    for row in json.loads((RAW / "head-split-3.json").read_text())["rows"]:
        k = (key(row["config"]), "shared_table")
        r = ratio(row, "shared_table", "probe 1.9.0")
        if r is not None and k in out:
            out[k] = (r, "head-split-3, probe 1.9.0")
    for row in json.loads((RAW / "wide-dot.json").read_text())["rows"]:
        c = row["config"]
        k = (key(c), "shared_table")
        if k not in out:
            continue
        blocks = page_blocks(c["group_size"] * c["n_groups"], c["num_kv_heads"], c["q_per_kv"], c["group_size"],
                             c["prefix_tokens"], c["prefix_tokens"] + c["suffix_tokens"], 132, DEFAULT_TUNE)
        variant = "wide dot" if blocks["page_block_seqs"] > 1 else "default"
        r = ratio(row, "shared_table", variant)
        if r is not None:
            out[k] = (r, f"wide-dot, {variant}")
    return out


def main() -> int:
    rows = table()
    for t in TABLES:
        got = sorted((v[0], k[0], v[1]) for k, v in rows.items() if k[1] == t)
        vals = [g[0] for g in got]
        print(f"{t}: {len(vals)} rows, median {statistics.median(vals):.3f}, worst {min(vals):.3f}, "
              f"{sum(v >= 0.9995 for v in vals)} at 1.00x or better")
        for r, k, src in got:
            if r < 0.9995:
                print(f"  {r:.3f}  {label(k):48s} ({src})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
