"""Triton's rows of two probe runs on one GPU kind, kernel by kernel: new time over old per configuration (the median,
the range, and the rows that moved more than 5%), for the per-sequence decodes and the whole cascade.
Usage: python benchmarks/triton_rows_compare.py OLD.json NEW.json"""

import json
import statistics
import sys

KERNELS = ("decode_shared", "decode_dup", "cascade_total")


def rows(path: str) -> dict:
    return {(m["kernel"], json.dumps(m["config"], sort_keys=True)): m
            for m in json.load(open(path))["measurements"] if m["backend"] == "triton" and m["kernel"] in KERNELS}


def main(argv: list[str]) -> None:
    old, new = rows(argv[0]), rows(argv[1])
    for kernel in KERNELS:
        pairs = [(k[1], old[k], new[k]) for k in new if k[0] == kernel and k in old]
        r = [n["median_s"] / o["median_s"] for _, o, n in pairs]
        if not r:
            continue
        print(f"{kernel}: {len(r)} rows, new/old median {statistics.median(r):.3f}, min {min(r):.3f}, max {max(r):.3f}")
        for c, o, n in sorted(pairs, key=lambda p: p[2]["median_s"] / p[1]["median_s"]):
            x = n["median_s"] / o["median_s"]
            if abs(x - 1) > 0.05:
                lo, ln = o.get("launch") or {}, n.get("launch") or {}
                print(f"  {x:6.3f}  {o['median_s'] * 1e6:8.1f} -> {n['median_s'] * 1e6:8.1f} us  splits "
                      f"{lo.get('splits')} -> {ln.get('splits')}  {c}")


if __name__ == "__main__":
    main(sys.argv[1:])
