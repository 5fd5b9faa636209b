"""Triton's rows of two probe runs on one GPU kind, kernel by kernel: new time over old per configuration (the median,
the range, and the rows that moved more than 5%), for the per-sequence decodes and the whole cascade.
With --launch-changed: only the per-sequence decode rows whose launch (`page_block_seqs`, splits) differs between the
runs, with both times and FlashInfer's best decode there (from OLD.json), e.g. after a change of the page-block rule.
Usage: python benchmarks/triton_rows_compare.py OLD.json NEW.json [--launch-changed]"""

import json
import statistics
import sys

KERNELS = ("decode_shared", "decode_dup", "cascade_total")
DECODES = ("decode_shared", "decode_dup")


def rows(path: str, backend: str = "triton") -> dict:
    """(kernel, config) -> the backend's fastest row there."""
    out: dict = {}
    for m in json.load(open(path))["measurements"]:
        k = (m["kernel"], json.dumps(m["config"], sort_keys=True))
        if m["backend"] == backend and m["kernel"] in KERNELS and (k not in out or m["median_s"] < out[k]["median_s"]):
            out[k] = m
    return out


def launch_changed(old_path: str, old: dict, new: dict) -> None:
    fi = rows(old_path, "flashinfer")
    print(f"{'kernel':<14} {'old SEQS':>8} {'new SEQS':>8} {'old split':>9} {'new split':>9} {'old us':>8} "
          f"{'new us':>8} {'new/old':>8} {'FI/old':>7} {'FI/new':>7}  config")
    for (k, c), n in sorted(new.items()):
        o = old.get((k, c))
        if k not in DECODES or o is None:
            continue
        lo, ln = o.get("launch") or {}, n.get("launch") or {}
        if (lo.get("page_block_seqs"), lo.get("splits")) == (ln.get("page_block_seqs"), ln.get("splits")):
            continue
        f = fi[(k, c)]["median_s"] if (k, c) in fi else float("nan")
        print(f"{k:<14} {lo.get('page_block_seqs')!s:>8} {ln.get('page_block_seqs')!s:>8} {lo.get('splits')!s:>9} "
              f"{ln.get('splits')!s:>9} {o['median_s'] * 1e6:>8.1f} {n['median_s'] * 1e6:>8.1f} "
              f"{n['median_s'] / o['median_s']:>8.3f} {f / o['median_s']:>7.2f} {f / n['median_s']:>7.2f}  {c}")


def main(argv: list[str]) -> None:
    old, new = rows(argv[0]), rows(argv[1])
    if "--launch-changed" in argv[2:]:
        launch_changed(argv[0], old, new)
        return
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
