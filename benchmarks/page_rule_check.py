"""Triton's per-sequence decode rows of two probe runs on one GPU kind, where the page-aware launch rule changed
between them (probe 1.5.0 -> 1.5.1: blocks only where the first split forms one): each configuration whose
`page_block_seqs` differs, with both times and FlashInfer's best decode there (from the first file).
Usage: python benchmarks/page_rule_check.py OLD.json NEW.json"""

import json
import sys


def rows(path: str) -> dict:
    out = {}
    for m in json.load(open(path))["measurements"]:
        if m["kernel"] in ("decode_shared", "decode_dup"):
            out.setdefault((m["backend"], m["kernel"], json.dumps(m["config"], sort_keys=True)), []).append(m)
    return out


def main(argv: list[str]) -> None:
    old, new = rows(argv[0]), rows(argv[1])
    print(f"{'kernel':<14} {'old SEQS':>8} {'new SEQS':>8} {'old us':>8} {'new us':>8} {'new/old':>8} "
          f"{'FI/old':>7} {'FI/new':>7}  config")
    for (b, k, c), ms in sorted(new.items()):
        if b != "triton" or (b, k, c) not in old:
            continue
        o, n = old[(b, k, c)][0], ms[0]
        so, sn = (o.get("launch") or {}).get("page_block_seqs"), (n.get("launch") or {}).get("page_block_seqs")
        if so == sn:
            continue
        fi = min((m["median_s"] for m in old.get(("flashinfer", k, c), [])), default=float("nan"))
        print(f"{k:<14} {so!s:>8} {sn!s:>8} {o['median_s'] * 1e6:>8.1f} {n['median_s'] * 1e6:>8.1f} "
              f"{n['median_s'] / o['median_s']:>8.3f} {fi / o['median_s']:>7.2f} {fi / n['median_s']:>7.2f}  {c}")


if __name__ == "__main__":
    main(sys.argv[1:])
