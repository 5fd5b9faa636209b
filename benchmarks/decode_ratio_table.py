"""Triton's per-sequence decode against FlashInfer's best decode (CUDA cores or tensor cores), row by row, from
probe files: FlashInfer's time over ours (>= 1.0: ours at least as fast), per page layout, with the worst rows.
FlashInfer rows may come from other files of the same GPU (given after --flashinfer-from).
Usage: python benchmarks/decode_ratio_table.py RUN.json [RUN.json ...] [--flashinfer-from FILE ...]
e.g. python benchmarks/decode_ratio_table.py benchmarks/raw/h200-2026-12-03/{all13,regimes}.json \\
         --flashinfer-from calibrations/h200-probe-2026-12-01.json"""

import json
import sys

import numpy as np

DECODES = ("decode_dup", "decode_shared")


def decode_times(rows: list[dict], backend: str) -> dict[tuple[str, str], float]:
    """(config, kernel) -> the backend's fastest decode variant there."""
    out: dict[tuple[str, str], float] = {}
    for m in rows:
        if m["backend"] == backend and m["kernel"] in DECODES:
            k = (json.dumps(m["config"], sort_keys=True), m["kernel"])
            out[k] = min(out.get(k, np.inf), m["median_s"])
    return out


def main(argv: list[str]) -> None:
    runs, extra = (argv[:argv.index("--flashinfer-from")], argv[argv.index("--flashinfer-from") + 1:]) \
        if "--flashinfer-from" in argv else (argv, [])
    rows = [m for f in runs for m in json.load(open(f))["measurements"]]
    ours = decode_times(rows, "triton")
    theirs = decode_times([m for f in extra for m in json.load(open(f))["measurements"]] + rows, "flashinfer")
    print(f"{'pages':<11} {'rows':>5} {'median':>7} {'worst':>6} {'>= 1.0':>7}   worst row")
    for kernel in DECODES:
        r = sorted((theirs[k] / t, k[0]) for k, t in ours.items() if k[1] == kernel and k in theirs)
        v = np.array([x for x, _ in r])
        print(f"{kernel.removeprefix('decode_'):<11} {len(v):>5} {np.median(v):>7.2f} {v.min():>6.2f} "
              f"{int((v >= 1.0).sum()):>7}   {r[0][1]}")


if __name__ == "__main__":
    main(sys.argv[1:])
