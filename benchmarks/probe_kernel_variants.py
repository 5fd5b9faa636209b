"""How many distinct Triton specialisations the default grid's Triton pass compiles, counted on the CPU: the plans'
launch arithmetic for every default-grid configuration (per-sequence decode over shared and private pages, the
cascade's suffix pass and prefix level), one key per set of constexprs and launch options, per tune. Each key is one
compile on a fresh machine (benchmarks/probe_compile_times.py times them on a GPU). Runs without a GPU (under
Triton's interpreter, no kernel launched).

    python benchmarks/probe_kernel_variants.py
"""

from __future__ import annotations

import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, ".")


def variants(tune, sm_count: int = 132, cfgs=None) -> tuple[set, set]:
    """(decode keys, prefix-pass keys) of the default grid (or of `cfgs`) under `tune`."""
    import torch

    from cascade_plan.own_kernel_launch import fused_merge_slots
    from kernels_probe.attention.data import TORCH_KV_DTYPES
    from kernels_probe.attention.grid import build_grid
    from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan

    if cfgs is None:
        cfgs, _ = build_grid(coverage=False)
    dec: set = set()
    pre: set = set()
    for c in cfgs:
        q = torch.empty((c.batch, c.num_q_heads, c.head_dim), dtype=torch.bfloat16)
        k = torch.empty((1, c.page_size, c.num_kv_heads, c.head_dim), dtype=TORCH_KV_DTYPES[c.kv_dtype])
        bt = torch.zeros((c.batch, 1), dtype=torch.int32)
        lens = torch.zeros(c.batch, dtype=torch.int32)
        T = c.root_tokens + c.prefix_tokens + c.suffix_tokens
        plans = [DecodePlan(q, k, k, bt, lens, T, q, sm_count=sm_count, tune=tune, shared_prefix_tokens=shared)
                 for shared in (c.root_tokens + c.prefix_tokens, 0)]
        casc = CascadePlan(q, k, k, [(bt, c.prefix_tokens, c.group_size, c.n_groups)], bt, lens, c.suffix_tokens, q,
                           sm_count=sm_count, tune=tune)
        plans += [casc.suffix_plan] if casc.suffix_plan is not None else []
        for p in plans:
            merge = fused_merge_slots(p.G, p.D, p.splits, p.warps) if p.fused_merge else (1, 1)
            dec.add((c.kv_dtype, p.HKV, p.G, p.D, p.PS, p.block_n, p.stages, p.warps, p.write_final, p.seqs,
                     p.prefetch, p.fused_merge, merge, p.pairs))
        for pp in casc.prefix_plans:
            pre.add((c.kv_dtype, pp.HKV, pp.G, pp.D, pp.PS, pp.block_m, pp.prefetch))
    return dec, pre


def main() -> int:
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from cascade_plan.own_kernel_tunes import (
        PROBE_1_5_5_TUNE,
        PROBE_1_6_0_TUNE,
        PROBE_1_7_1_TUNE,
        PROBE_1_7_2_TUNE,
        PROBE_1_8_0_TUNE,
        PROBE_1_12_0_TUNE,
        PROBE_1_21_0_TUNE,
    )
    from kernels_probe.attention.grid import build_grid, regimes_grid

    print(f"{'tune':12s} {'decode':>7s} {'prefix pass':>12s}")
    for name, tune in (("probe 1.5.5", PROBE_1_5_5_TUNE), ("probe 1.6.0", PROBE_1_6_0_TUNE),
                       ("probe 1.7.1", PROBE_1_7_1_TUNE), ("probe 1.7.2", PROBE_1_7_2_TUNE),
                       ("probe 1.8.0", PROBE_1_8_0_TUNE), ("probe 1.12.0", PROBE_1_12_0_TUNE),
                       ("default", DEFAULT_TUNE)):
        dec, pre = variants(tune)
        print(f"{name:12s} {len(dec):7d} {len(pre):12d}")
    # the probe's other grids (--grid coverage, --grid regimes): the last probe before the current one and the current
    for grid, cfgs in (("coverage", build_grid(coverage=True)[0]), ("regimes", regimes_grid())):
        keys = {name: variants(tune, cfgs=cfgs)[0] for name, tune in (("probe 1.21.0", PROBE_1_21_0_TUNE),
                                                                      ("default", DEFAULT_TUNE))}
        new = keys["default"] - keys["probe 1.21.0"]
        gone = keys["probe 1.21.0"] - keys["default"]
        print(f"{grid} grid, decode keys: probe 1.21.0 {len(keys['probe 1.21.0'])}, default {len(keys['default'])}"
              f" ({len(new)} new, {len(gone)} gone)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
