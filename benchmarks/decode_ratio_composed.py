"""FlashInfer's best decode over ours, composed across calls where no one call timed both under the current launch:
a decode_vs_flashinfer.py stage file whose rows hold both kernels (its "default" variant against FlashInfer, in one
call), times, for each later stage file given as FILE:FROM:TO, the speed-up of its variant TO over its variant FROM
at the same shape and page layout (each within its own call; 1.0 where the file lacks the row). Prints the table of
decode_ratio_table.py (median, worst, rows at 1.0x or better per page layout) for the measured ratios and the
composed ones, and the composed rows below 1.0x with each factor.
Usage: python benchmarks/decode_ratio_composed.py BASE.json FILE:FROM:TO [FILE:FROM:TO ...]
e.g. python benchmarks/decode_ratio_composed.py benchmarks/raw/device-2026-12-06h/regimes-decode.json \\
         "benchmarks/raw/device-2026-12-06j/regimes-losers.json:probe 1.11.0:default" \\
         "benchmarks/raw/device-2026-12-06j/next-rules.json:default:all three\""""

import json
import statistics
import sys

from decode_ratio_table import shape_label  # the benchmarks folder is the script's own

TABLES = ("shared_table", "dup_table")


def rows_by_config(path: str) -> dict[str, dict]:
    with open(path) as f:
        return {json.dumps(r["config"], sort_keys=True): r for r in json.load(f)["rows"]}


def speedup(row: dict | None, table: str, src: str, dst: str) -> float:
    """Variant dst's speed-up over src in one stage row and page layout (1.0 where either is missing)."""
    timed = ((row or {}).get("triton") or {}).get(table) or {}
    if src not in timed or dst not in timed:
        return 1.0
    return timed[src]["median_s"] / timed[dst]["median_s"]


def main(argv: list[str]) -> None:
    base = rows_by_config(argv[0])
    steps = []
    for arg in argv[1:]:
        path, src, dst = arg.rsplit(":", 2)
        steps.append((rows_by_config(path), src, dst))
    out = []
    for key, r in base.items():
        for table in TABLES:
            fi, ours = (r.get("flashinfer") or {}).get(table), ((r.get("triton") or {}).get(table) or {}).get("default")
            if not fi or not ours:
                continue
            measured = min(fi.values()) / ours["median_s"]
            factors = [speedup(rows.get(key), table, src, dst) for rows, src, dst in steps]
            composed = measured
            for f in factors:
                composed *= f
            out.append((composed, measured, factors, table, shape_label(r["config"])))
    print(f"{'pages':<8} {'rows':>5}  {'measured: median worst >=1.0':<30} composed: median worst >=1.0")
    for table in TABLES:
        m = [o[1] for o in out if o[3] == table]
        c = [o[0] for o in out if o[3] == table]
        if c:
            print(f"{table[:-6]:<8} {len(c):>5}  {statistics.median(m):>8.2f} {min(m):>6.2f} "
                  f"{sum(x >= 1 for x in m):>6}{'':<9}{statistics.median(c):>8.2f} {min(c):>6.2f} "
                  f"{sum(x >= 1 for x in c):>6}")
    print("\ncomposed  measured  factors  pages  shape")
    for composed, measured, factors, table, s in sorted(out, key=lambda o: o[0]):
        if composed < 1.0:
            print(f"{composed:8.2f}  {measured:8.2f}  {' x '.join(f'{f:.2f}' for f in factors)}  {table[:-6]:<6} {s}")


if __name__ == "__main__":
    main(sys.argv[1:])
