"""What the per-sequence decode's alternating K/V half-step loop (decode_alternate) compiles to, against the default
loop, on the rows the alternate stage times first (development tool; no GPU, no torch):

    python benchmarks/decode_variant_resources.py

Each bf16 row's launch as DecodePlan plans it on 132 SMs (decode_launch_plan at the cache's dtype, then
alternate_tile), compiled for sm_90 by whichever Triton this Python has (pipelining.decode_pipeline: its kernel
carries the fused merge): shared memory, K/V buffers, registers and bytes spilled per thread, and the programs an SM
holds by both. Run it under the device's Triton too (a virtual environment with that version): its register counts
differ from a newer one's."""

from __future__ import annotations

import sys

sys.path.insert(0, ".")
sys.path.insert(0, "benchmarks")

SM_COUNT = 132


def rows():
    """The four rows probe 1.22.0 loses (decode_body_stages.stagger_configs' first) but the fp8 one, whose launch the
    loop leaves alone, and the held-out head-dim-256 row at 0.91 (32 x 4 KV heads at 3K + 1K, G 1, shared)."""
    from decode_body_stages import stagger_configs

    from kernels_probe.attention.grid import AttentionConfig as C

    return [c for c in stagger_configs()[:4] if c.kv_dtype == "bf16"] + [C(3072, 32, 1, 1024, 1, 4, 256)]


def launch(cfg, tune) -> tuple[int, int, int, int, bool, bool]:
    """(block_n, stages, warps, sequences a block, prefetch, alternate) of cfg's decode over shared pages."""
    from cascade_plan.own_kernel_launch import alternate_tile
    from cascade_plan.own_kernel_pages import tune_at_kv_dtype
    from cascade_plan.own_kernel_plan import decode_launch_plan

    tune = tune_at_kv_dtype(tune, cfg.kv_dtype)
    la = decode_launch_plan(cfg.batch, cfg.num_kv_heads, cfg.q_per_kv, cfg.prefix_tokens + cfg.suffix_tokens,
                            cfg.prefix_tokens, SM_COUNT, tune, head_dim=cfg.head_dim)
    bn, st, w = la.block_n, la.stages, la.warps
    if tune.decode_alternate:
        bn, st, w = alternate_tile(bn, cfg.head_dim, 2, tune)
    return bn, st, w, la.seqs, la.prefetch, tune.decode_alternate


def main() -> int:
    import triton
    from decode_body_stages import alternate_variants

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention.pipelining import decode_pipeline

    print(f"Triton {triton.__version__}, sm_90")
    print(f"{'row':42s} {'loop':22s} {'tile':>8s} {'KB':>6s} {'bufs':>4s} {'regs':>4s} {'spill':>5s} {'per SM':>6s}")
    for cfg in rows():
        for name, tune in alternate_variants(DEFAULT_TUNE):
            bn, st, w, seqs, pf, alt = launch(cfg, tune)
            r = decode_pipeline(bn, st, w, prefetch=pf, seqs=seqs, head_dim=cfg.head_dim, q_per_kv=cfg.q_per_kv,
                                uindex=tune.decode_unsigned_pages, alternate=alt)
            res = r["resident"]
            per_sm = min(n for n in (res["by_registers"], res["by_shared"]) if n is not None)
            print(f"{cfg.label():42s} {name:22s} {f'{bn}/{st}/{w}':>8s} {r['shared_bytes'] / 1024:6.1f} "
                  f"{r['kv_buffers']:4d} {r['registers']!s:>4s} {r['stack_bytes']!s:>5s} {per_sm:6d}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
