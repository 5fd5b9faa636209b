"""Why Qwen2.5-1.5B's first fp8 step at 1,024 sequences (held-out regime step `heldout-grpo-1024-fp8kv`) is ~12%
short on FlashInfer and FA2, and two ways to close it that the shipped rows do not support. Reads the shipped H200
calibration; needs no GPU.

1. FlashInfer's tensor-core decode (its FA2 paged kernel with a packed query tile of 16 rows) walks each
   (sequence, KV head) row's context in whole KV tiles whose length its launcher picks from the shared-memory
   budget: two blocks per SM where they fit, K and V slices of 64 tokens per unit, at most 8 units, rounded down to
   a power of two. On Hopper (228 KiB per SM, 227 KiB per block) that gives 256 / 128 / 64 tokens at head dim
   64 / 128 / 256 with 16-bit KV, and 256 tokens at head dim 128 with fp8 KV. A 512-token prefix with one new token
   therefore takes 5 tiles instead of 4 in bf16 (+25%) and 3 instead of 2 in fp8 (+50%).
2. The rows show that jump: at 512 tokens x 1,024 sequences the first 16 suffix tokens cost kappa tiles' worth of
   private tokens beyond their own 16 (kappa per shape printed below). The planner interpolates the suffix linearly
   between the 0- and 16-token rows, so a first step (1 token) is priced at the no-suffix row.
3. Standing in the bf16 twin's measured/fitted ratio where fp8 rows are missing (same backend, same shape) would
   price that step's cascade almost exactly, but over every untrained fp8 row it is worse than the fp8 fit alone:
   the check below.

Usage: python benchmarks/fi_first_step_gaps.py [CALIBRATION.json]"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

import numpy as np

# Hopper (H100, H200): shared memory per SM and the largest a block may opt into (cudaDevAttr values)
SMEM_PER_SM = 233472
SMEM_PER_BLOCK = 232448
WARPS_KV = 4            # FlashInfer's FA2 kernel at a 16-row query tile: one warp along queries, four along KV
QUERY_TILE = 16


def kv_tile_tokens(head_dim: int, kv_bytes: int, q_bytes: int = 2) -> int:
    """KV tokens per tile of FlashInfer's FA2 paged kernel at a 16-row query tile (a decode of at most 16 packed
    query heads per KV head), from its shared-memory rule as stated in the module docstring."""
    unit = 2 * head_dim * 16 * WARPS_KV * kv_bytes          # K and V slices of 16 tokens per KV warp
    fixed = QUERY_TILE * head_dim * q_bytes                 # the query tile
    blocks = 2 if SMEM_PER_SM >= 2 * (fixed + unit) else 1
    budget = min(SMEM_PER_SM // blocks, SMEM_PER_BLOCK)
    units = min((budget - fixed) // unit, 8)
    units = max(u for u in (1, 2, 4, 8) if u <= max(units, 1))
    return units * 16 * WARPS_KV


def tile_jumps(doc: dict) -> list[tuple]:
    """(kernel, shape, kappa, rise): per bf16 FlashInfer tensor-core decode shape with rows at 0, 16 and a longer
    tile-aligned suffix, the 16-token row's rise over the no-suffix row in tiles' worth of private tokens (the
    slope from the longer row), and that rise in percent."""
    rows: dict[tuple, dict[int, float]] = defaultdict(dict)
    for m in doc["measurements"]:
        c = m["config"]
        if (m["backend"] == "flashinfer" and m["kernel"] in ("decode_shared", "decode_dup")
                and m.get("variant") == "tensor_cores" and c["kv_dtype"] == "bf16" and not c.get("root_tokens")):
            key = (m["kernel"], c["head_dim"], c["q_per_kv"], c["num_kv_heads"], c["prefix_tokens"],
                   c["group_size"], c["n_groups"])
            rows[key][c["suffix_tokens"]] = m["median_s"]
    out = []
    for key, by_s in sorted(rows.items()):
        tile = kv_tile_tokens(key[1], 2)
        longer = [s for s in by_s if s >= tile and (key[4] + s) % tile == 0]
        if 0 not in by_s or 16 not in by_s or not longer or key[4] % tile:
            continue
        s1 = max(longer)
        slope = (by_s[s1] - by_s[0]) / s1
        kappa = ((by_s[16] - by_s[0]) / slope - 16) / (tile - 16)
        out.append((key, tile, kappa, by_s[16] / by_s[0] - 1))
    return out


def twin_check(path: str) -> list[tuple]:
    """Per backend and planner kernel: |error| median and max over the untrained fp8 rows, of the fp8 fit alone and
    of the fp8 fit times the bf16 twin's measured/fitted ratio at the same point (interpolated where the twin's rows
    bracket it, else regressed as the planner anchors a shape)."""
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.calibration.measured_grid import measured_rows
    from cascade_plan.cost.ops.attention import MeasuredTable
    from cascade_plan.cost.ops.shape_anchor import anchored_ratio

    probe = load_probe(path)
    assert probe.fits is not None
    out = []
    for b in ("flashinfer", "flashinfer-fa2", "triton"):
        m8 = measured_rows(probe, b, "fp8", probe.fits.kv_dtypes["fp8"].get(b))
        for kernel in ("per_sequence", "per_sequence_dup", "cascade"):
            # FlashInfer's automatic cascade falls back to FA2 with fp8 KV: its twin is FA2's bf16 cascade
            tb = "flashinfer-fa2" if (b, kernel) == ("flashinfer", "cascade") else b
            m16 = measured_rows(probe, tb, "bf16", probe.fits.kv_dtypes["bf16"].get(tb))
            if m8 is None or m16 is None:
                continue
            fit_err, twin_err = [], []
            for shape, point, t, fit, trained in m8.rows[kernel]:
                twin = [r for r in m16.rows[kernel] if r[0] == shape]
                if trained or not twin:
                    continue
                pts = np.array([r[1] for r in twin], float)
                ratios = np.array([r[2] / r[3] for r in twin])
                q = np.array([point], float)
                r = MeasuredTable(pts, ratios)(q)[0]
                r = r if np.isfinite(r) else anchored_ratio(pts, ratios, q, kernel)[0]
                if not np.isfinite(r):
                    continue
                fit_err.append(abs(fit / t - 1))
                twin_err.append(abs(r * fit / t - 1))
            if fit_err:
                out.append((b, kernel, len(fit_err), float(np.median(fit_err)), float(np.max(fit_err)),
                            float(np.median(twin_err)), float(np.max(twin_err))))
    return out


def main(argv: list[str]) -> None:
    path = argv[0] if argv else "calibrations/h200-probe-2026-12-01.json"
    doc = json.load(open(path))
    print("FlashInfer FA2 paged decode, 16-row query tile, Hopper: KV tile (tokens)")
    for kv, e in (("bf16", 2), ("fp8", 1)):
        print(f"  {kv}: " + ", ".join(f"head dim {d}: {kv_tile_tokens(d, e)}" for d in (64, 128, 256)))
    print("\nbf16 rows: the first 16 suffix tokens after a tile-aligned prefix (kappa: tiles' worth of private "
          "tokens beyond their own 16)")
    print(f"  {'kernel':<14} {'D':>4} {'G':>3} {'Hkv':>4} {'prefix':>7} {'seqs':>5} {'tile':>5} {'kappa':>6} "
          f"{'rise':>7}")
    for (kernel, d, g, h, p, gs, ng), tile, kappa, rise in tile_jumps(doc):
        print(f"  {kernel:<14} {d:>4} {g:>3} {h:>4} {p:>7} {gs * ng:>5} {tile:>5} {kappa:>6.2f} {rise:>7.1%}")
    print("\nUntrained fp8 rows: the fp8 fit alone against the fp8 fit x the bf16 twin's measured/fitted ratio")
    print(f"  {'backend':<15} {'kernel':<17} {'rows':>4} {'fit median':>10} {'fit max':>8} {'twin median':>11} "
          f"{'twin max':>8}")
    for b, kernel, n, fm, fx, tm, tx in twin_check(path):
        print(f"  {b:<15} {kernel:<17} {n:>4} {fm:>10.1%} {fx:>8.1%} {tm:>11.1%} {tx:>8.1%}")


if __name__ == "__main__":
    main(sys.argv[1:])
