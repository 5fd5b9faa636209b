"""Tile-size sweep for the probe's Triton kernels on a GPU (development tool; prints a table).

    python benchmarks/probe_tune.py [--short]

For a few shapes that decide the targets (large-batch per-sequence decode, small-batch decode,
compute-bound and memory-bound prefix passes) it checks each variant against the float32 reference
and times it the way the probe does, then prints achieved bandwidth / FLOP rate per variant.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

sys.path.insert(0, ".")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", action="store_true")
    ap.add_argument("--cascade-only", action="store_true", help="only the cascade sweep (suffix tiles, prefix splits)")
    ap.add_argument("--large-batch", action="store_true", help="large-batch decode and prefix tile sweep")
    args = ap.parse_args()
    import torch

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.grid import AttentionConfig
    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan
    from kernels_probe.timing import L2Flusher, time_fn

    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    sm = props.multi_processor_count
    flusher = L2Flusher(props.L2_cache_size)
    rows = []

    def record(kind, cfg, tune_desc, res, nbytes, flops, err):
        t = res["median_s"]
        rows.append((kind, cfg.label(), tune_desc, t * 1e6, nbytes / t / 1e12, flops / t / 1e12, err))
        print(f"{kind:8s} {cfg.label():42s} {tune_desc:44s} {t * 1e6:9.1f} us {nbytes / t / 1e12:6.2f} TB/s "
              f"{flops / t / 1e12:7.1f} TF/s err {err:.2e}", flush=True)

    if args.cascade_only:
        return cascade_sweep(rows, record, sm, flusher)
    if args.large_batch:
        return large_batch_sweep(rows, record, sm, flusher)

    # decode variants
    dec_cfgs = [AttentionConfig(prefix_tokens=16384, group_size=64, suffix_tokens=0),
                AttentionConfig(prefix_tokens=4096, group_size=256, suffix_tokens=128),
                AttentionConfig(prefix_tokens=16384, group_size=4, suffix_tokens=128),
                AttentionConfig(prefix_tokens=4096, group_size=64, suffix_tokens=128, q_per_kv=8, num_kv_heads=1)]
    dec_variants = [(64, 4, 3), (64, 4, 4), (128, 4, 3), (128, 8, 3), (32, 4, 4), (64, 8, 3), (128, 8, 2)]
    if args.short:
        dec_variants = dec_variants[:1]
        dec_cfgs = dec_cfgs[1:3]
    for cfg in dec_cfgs:
        d = build_data(cfg, "cuda")
        ref = reference_output(d)
        T = cfg.prefix_tokens + cfg.suffix_tokens
        nbytes = cfg.batch * T * 2 * cfg.num_kv_heads * cfg.head_dim * 2
        flops = 4 * cfg.batch * cfg.num_q_heads * cfg.head_dim * T
        for table_name in ("dup_table", "shared_table"):
            table = getattr(d, table_name)
            for bn, w, st in dec_variants:
                tune = dataclasses.replace(DEFAULT_TUNE, decode_block_n=bn, decode_warps=w, decode_stages=st)
                out = torch.full_like(d.q, float("nan"))
                try:
                    p = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, T, out, sm_count=sm, tune=tune)
                    p()
                    torch.cuda.synchronize()
                    err = max_rel_err(out, ref)
                    res = time_fn(p, flusher)
                    record("dec-" + table_name[:3], cfg, f"bn{bn} w{w} s{st} splits{p.splits}", res, nbytes, flops, err)
                except Exception as exc:
                    print("FAIL", cfg.label(), bn, w, st, type(exc).__name__, str(exc)[:200], flush=True)
        del d, ref
        torch.cuda.empty_cache()

    # prefix variants
    pre_cfgs = [AttentionConfig(prefix_tokens=4096, group_size=256, suffix_tokens=0),
                AttentionConfig(prefix_tokens=32768, group_size=1, suffix_tokens=0),
                AttentionConfig(prefix_tokens=16384, group_size=16, suffix_tokens=0),
                AttentionConfig(prefix_tokens=4096, group_size=256, suffix_tokens=0, q_per_kv=8),
                AttentionConfig(prefix_tokens=32768, group_size=64, suffix_tokens=0)]
    pre_variants = [(64, 8, 3, 128), (128, 8, 2, 128), (64, 4, 3, 128), (64, 4, 3, 64), (128, 8, 3, 128),
                    (64, 8, 4, 128), (32, 4, 4, 64)]
    if args.short:
        pre_variants = [(64, 8, 3, 128), (128, 8, 2, 128), (64, 4, 3, 128), (32, 4, 4, 64), (128, 8, 3, 128)]
        pre_cfgs = pre_cfgs[:3]
    for cfg in pre_cfgs:
        d = build_data(cfg, "cuda", dup_cap_bytes=0)
        ref = reference_output(d)
        nbytes = cfg.n_groups * cfg.prefix_tokens * 2 * cfg.num_kv_heads * cfg.head_dim * 2
        flops = 4 * cfg.batch * cfg.num_q_heads * cfg.head_dim * cfg.prefix_tokens
        for bn, w, st, bm in pre_variants:
            for tps_min in ((256,) if args.short else (256, 1024)):
                tune = dataclasses.replace(DEFAULT_TUNE, prefix_block_n=bn, prefix_warps=w, prefix_stages=st,
                                           prefix_max_block_m=bm, min_tokens_per_split=tps_min)
                out = torch.full_like(d.q, float("nan"))
                try:
                    c = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size,
                                                                  cfg.n_groups)], d.suffix_table, d.suffix_lens, 0, out,
                                    sm_count=sm, tune=tune)
                    c()
                    torch.cuda.synchronize()
                    err = max_rel_err(out, ref)
                    res = time_fn(c.run_prefix, flusher)
                    pp = c.prefix_plans[0]
                    record("prefix", cfg, f"bn{bn} w{w} s{st} bm{pp.block_m} sp{pp.splits} min{tps_min}", res, nbytes,
                           flops, err)
                except Exception as exc:
                    print("FAIL", cfg.label(), bn, w, st, bm, type(exc).__name__, str(exc)[:200], flush=True)
        del d, ref
        torch.cuda.empty_cache()

    # cascade: serial vs concurrent passes
    casc_cfgs = [AttentionConfig(prefix_tokens=4096, group_size=256, suffix_tokens=128),
                 AttentionConfig(prefix_tokens=4096, group_size=64, suffix_tokens=1024),
                 AttentionConfig(prefix_tokens=16384, group_size=16, suffix_tokens=128),
                 AttentionConfig(prefix_tokens=1024, group_size=256, suffix_tokens=128),
                 AttentionConfig(prefix_tokens=32768, group_size=256, suffix_tokens=128)]
    for cfg in casc_cfgs:
        d = build_data(cfg, "cuda", dup_cap_bytes=0)
        ref = reference_output(d)
        kvt = 2 * cfg.num_kv_heads * cfg.head_dim * 2
        nbytes = (cfg.n_groups * cfg.prefix_tokens + cfg.batch * cfg.suffix_tokens) * kvt
        flops = 4 * cfg.batch * cfg.num_q_heads * cfg.head_dim * (cfg.prefix_tokens + cfg.suffix_tokens)
        for conc in (False, True):
            tune = dataclasses.replace(DEFAULT_TUNE, cascade_concurrent=conc)
            out = torch.full_like(d.q, float("nan"))
            try:
                c = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size,
                                                              cfg.n_groups)], d.suffix_table, d.suffix_lens,
                                cfg.suffix_tokens, out, sm_count=sm, tune=tune)
                c()
                torch.cuda.synchronize()
                err = max_rel_err(out, ref)
                res = time_fn(c, flusher)
                record("cascade", cfg, f"concurrent={conc} slots{c.num_slots}", res, nbytes, flops, err)
                if conc:
                    for nm, fn in (("c-pre", c.run_prefix), ("c-suf", c.run_suffix), ("c-mrg", c.run_merge)):
                        record(nm, cfg, "", time_fn(fn, flusher), nbytes, flops, err)
            except Exception as exc:
                print("FAIL cascade", cfg.label(), conc, type(exc).__name__, str(exc)[:300], flush=True)
        del d, ref
        torch.cuda.empty_cache()

    print("\nBEST per (kind, config):")
    best = {}
    for r in rows:
        k = (r[0], r[1])
        if k not in best or r[3] < best[k][3]:
            best[k] = r
    for k, r in best.items():
        print(f"{r[0]:8s} {r[1]:42s} {r[2]:44s} {r[3]:9.1f} us {r[4]:6.2f} TB/s {r[5]:7.1f} TF/s err {r[6]:.1e}")
    return 0


def large_batch_sweep(rows, record, sm, flusher):
    """Per-sequence decode when the batch fills the GPU (shared vs duplicated pages), and prefix tiles."""
    import torch

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.grid import AttentionConfig
    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan
    from kernels_probe.timing import time_fn

    dvars = [dict(), dict(decode_head_major=True), dict(decode_stages_large_batch=2),
             dict(decode_stages_large_batch=4), dict(decode_block_n_large_batch=256, decode_stages_large_batch=2,
                                                     decode_warps_large_batch=8),
             dict(decode_block_n_large_batch=64), dict(decode_warps_large_batch=8),
             dict(decode_head_major=True, decode_stages_large_batch=4)]
    for cfg in (AttentionConfig(prefix_tokens=4096, group_size=256, suffix_tokens=128),
                AttentionConfig(prefix_tokens=16384, group_size=256, suffix_tokens=0, q_per_kv=1)):
        d = build_data(cfg, "cuda")
        ref = reference_output(d)
        T = cfg.prefix_tokens + cfg.suffix_tokens
        nbytes = cfg.batch * T * 2 * cfg.num_kv_heads * cfg.head_dim * 2
        flops = 4 * cfg.batch * cfg.num_q_heads * cfg.head_dim * T
        for tname in ("shared_table", "dup_table"):
            for v in dvars:
                tune = dataclasses.replace(DEFAULT_TUNE, **v)
                desc = ",".join(f"{k}={x}" for k, x in v.items()) or "default"
                out = torch.full_like(d.q, float("nan"))
                try:
                    p = DecodePlan(d.q, d.k_cache, d.v_cache, getattr(d, tname), d.seq_lens, T, out, sm_count=sm,
                                   tune=tune)
                    p()
                    torch.cuda.synchronize()
                    record("dec-" + tname[:3], cfg, desc, time_fn(p, flusher), nbytes, flops, max_rel_err(out, ref))
                except Exception as exc:
                    print("FAIL", cfg.label(), desc, type(exc).__name__, str(exc)[:200], flush=True)
        del d, ref
        torch.cuda.empty_cache()
    pvars = [dict(), dict(prefix_stages=4), dict(prefix_block_n=128, prefix_stages=2),
             dict(prefix_block_n=128, prefix_stages=3), dict(prefix_stages=2), dict(prefix_block_n=32),
             dict(prefix_programs_per_sm=4), dict(prefix_programs_per_sm=1)]
    for cfg in (AttentionConfig(prefix_tokens=4096, group_size=256, suffix_tokens=0),
                AttentionConfig(prefix_tokens=32768, group_size=256, suffix_tokens=0)):
        d = build_data(cfg, "cuda", dup_cap_bytes=0)
        ref = reference_output(d)
        nbytes = cfg.prefix_tokens * 2 * cfg.num_kv_heads * cfg.head_dim * 2
        flops = 4 * cfg.batch * cfg.num_q_heads * cfg.head_dim * cfg.prefix_tokens
        for v in pvars:
            tune = dataclasses.replace(DEFAULT_TUNE, **v)
            desc = ",".join(f"{k}={x}" for k, x in v.items()) or "default"
            out = torch.full_like(d.q, float("nan"))
            try:
                c = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size, 1)],
                                d.suffix_table, d.suffix_lens, 0, out, sm_count=sm, tune=tune)
                c()
                torch.cuda.synchronize()
                record("prefix", cfg, desc + f" sp{c.prefix_plans[0].splits}", time_fn(c.run_prefix, flusher), nbytes,
                       flops, max_rel_err(out, ref))
            except Exception as exc:
                print("FAIL", cfg.label(), desc, type(exc).__name__, str(exc)[:200], flush=True)
        del d, ref
        torch.cuda.empty_cache()
    return 0


def cascade_sweep(rows, record, sm, flusher):
    """Suffix-pass tiles for short per-sequence programs, prefix split targets, whole cascade."""
    import torch

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.grid import AttentionConfig
    from kernels_probe.attention.reference import max_rel_err
    from kernels_probe.attention.triton_plans import CascadePlan
    from kernels_probe.timing import time_fn

    cfgs = [AttentionConfig(prefix_tokens=4096, group_size=256, suffix_tokens=128),
            AttentionConfig(prefix_tokens=16384, group_size=16, suffix_tokens=128),
            AttentionConfig(prefix_tokens=1024, group_size=256, suffix_tokens=128),
            AttentionConfig(prefix_tokens=4096, group_size=64, suffix_tokens=1024),
            AttentionConfig(prefix_tokens=1024, group_size=64, suffix_tokens=128, q_per_kv=8, num_kv_heads=1)]
    variants = [dict(), dict(decode_short_stages=1), dict(decode_short_stages=3), dict(decode_short_block_n=128,
                decode_short_stages=1), dict(decode_short_block_n=32, decode_short_stages=2),
                dict(decode_short_warps=2), dict(target_programs_per_sm=2), dict(cascade_concurrent=False)]
    for cfg in cfgs:
        d = build_data(cfg, "cuda", dup_cap_bytes=0)
        ref = reference_output(d)
        kvt = 2 * cfg.num_kv_heads * cfg.head_dim * 2
        nbytes = (cfg.n_groups * cfg.prefix_tokens + cfg.batch * cfg.suffix_tokens) * kvt
        flops = 4 * cfg.batch * cfg.num_q_heads * cfg.head_dim * (cfg.prefix_tokens + cfg.suffix_tokens)
        sbytes = cfg.batch * cfg.suffix_tokens * kvt
        for v in variants:
            tune = dataclasses.replace(DEFAULT_TUNE, **v)
            desc = ",".join(f"{k}={x}" for k, x in v.items()) or "default"
            out = torch.full_like(d.q, float("nan"))
            try:
                c = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size,
                                                              cfg.n_groups)], d.suffix_table, d.suffix_lens,
                                cfg.suffix_tokens, out, sm_count=sm, tune=tune)
                c()
                torch.cuda.synchronize()
                err = max_rel_err(out, ref)
                record("cascade", cfg, desc + f" slots{c.num_slots}", time_fn(c, flusher), nbytes, flops, err)
                record("c-suf", cfg, desc, time_fn(c.run_suffix, flusher), sbytes, flops, err)
                record("c-pre", cfg, desc, time_fn(c.run_prefix, flusher), nbytes - sbytes, flops, err)
                record("c-mrg", cfg, desc, time_fn(c.run_merge, flusher), nbytes, flops, err)
            except Exception as exc:
                print("FAIL cascade", cfg.label(), desc, type(exc).__name__, str(exc)[:300], flush=True)
        del d, ref
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print(f"tune sweep took {time.time() - t0:.1f} s")
    sys.exit(rc)
