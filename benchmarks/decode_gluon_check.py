"""The Gluon decode (kernels_probe/attention/gluon_decode.py) against our Triton decode and FlashInfer's (GPU;
development tool):

    python benchmarks/decode_gluon_check.py [--out gluon.json] [--budget-s 400] [--no-flashinfer]

First every variant (tile tokens / warps and options, and the default launch's split count) runs on shapes chosen
to break it (ragged lengths shorter than a tile, one token, 1-16 query heads per KV head, head dims 64-256, fp8,
3 splits merged in the kernel's last split, the persistent kernel at this GPU's SM count and at 3 SMs, where each
program takes many items) against float32; then the four probe rows our Triton decode loses and held-out shapes are
timed, the Gluon variants (split ones merged in the kernel), our default launch and FlashInfer's best decode
alternating, each launch checked against float32 before and after. Prints the checks, then a table of FlashInfer's
time over each (>= 1.0: at least as fast as FlashInfer's)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, ".")
sys.path.insert(0, "benchmarks")

TOL = 1e-2
# GluonDecode's launch options per (head dim, cache), as (block_n, warps, options): each warp's slice of a tile is
# 16 keys or more; nbuf: buffers each for K and V; q_smem: q read from shared memory; v_widen: fp8 V widened through
# registers; maxnreg: a register cap; swap: the transposed dots (8 query heads per KV head at most); persist: the
# persistent kernel, that many programs an SM (unsplit only); q_lanes: its q a copy a lane or one (persist_q_lanes)
_SW = {"swap": True}
TILES = {(64, "bf16"): ((128, 4, {}), (64, 2, {}), (128, 4, _SW), (128, 4, {"persist": 2}), (128, 4, {"persist": 3})),
         (128, "bf16"): ((128, 4, {}), (128, 4, _SW), (64, 4, {"nbuf": 2, **_SW}), (128, 4, {"nbuf": 2}),
                         (64, 4, {"nbuf": 2}), (128, 4, {"maxnreg": 168}), (128, 4, {"persist": 2}),
                         (64, 4, {"persist": 2}), (64, 4, {"persist": 2, "nbuf": 2}), (128, 4, {"persist": 2, **_SW}),
                         (128, 4, {"persist": 2, "q_lanes": False})),
         (256, "bf16"): ((64, 4, {}), (64, 4, _SW), (64, 4, {"nbuf": 2, **_SW}), (128, 4, _SW),
                         (64, 4, {"q_smem": True}), (32, 2, {"nbuf": 2}), (64, 4, {"persist": 2, **_SW})),
         (128, "fp8"): ((128, 4, {}), (128, 4, {"v_widen": True}), (128, 4, {"v_widen": True, **_SW})),
         (256, "fp8"): ((64, 4, {}), (64, 4, {"v_widen": True}), (64, 4, _SW), (64, 4, {"v_widen": True, **_SW}),
                        (32, 2, {"v_widen": True}))}
_SHORT = {"nbuf": "b", "q_smem": "qs", "v_widen": "vw", "maxnreg": "r", "swap": "sw", "persist": "p", "q_lanes": "ql"}


def tile_label(t) -> str:
    bn, w, opts = t
    parts = [f"{_SHORT[k]}{v if not isinstance(v, bool) else ''}" for k, v in opts.items()]
    return " ".join([f"{bn}/{w}", *parts])


def tiles_for(cfg, options: frozenset = frozenset()) -> list:
    """TILES' entries for cfg's head dim and cache, but transposed dots where it has more than 8 query heads per KV
    head, which they cannot hold; where `options` names some, only the first entry (the kernel's first form) and
    those with one of them."""
    tiles = [t for t in TILES[(cfg.head_dim, cfg.kv_dtype)] if not (t[2].get("swap") and cfg.q_per_kv > 8)]
    return [t for n, t in enumerate(tiles) if not options or n == 0 or options & set(t[2])]


def check_shapes():
    """(config, table name, ragged lengths): shapes meant to break the kernel, each checked, not timed."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [(A(prefix_tokens=16, group_size=2, suffix_tokens=0), "dup_table", False),           # one partial tile
            (A(prefix_tokens=48, group_size=3, suffix_tokens=32, q_per_kv=1), "shared_table", True),
            (A(prefix_tokens=512, group_size=4, suffix_tokens=16, q_per_kv=6, num_kv_heads=2), "shared_table", True),
            (A(prefix_tokens=1024, group_size=2, q_per_kv=16, num_kv_heads=1, head_dim=64), "dup_table", True),
            (A(prefix_tokens=2048, group_size=4, q_per_kv=2, num_kv_heads=4, head_dim=256), "shared_table", True),
            (A(prefix_tokens=4096, group_size=2, q_per_kv=8, num_kv_heads=2), "dup_table", False),
            (A(prefix_tokens=1024, group_size=4, q_per_kv=2, num_kv_heads=4, head_dim=256, kv_dtype="fp8"),
             "dup_table", True),
            (A(prefix_tokens=1024, group_size=4, kv_dtype="fp8"), "shared_table", False),
            # 1,024 items of 1 to 96 tokens: the persistent kernel's programs each take several, ragged
            (A(prefix_tokens=48, group_size=64, n_groups=8, suffix_tokens=48, q_per_kv=3, num_kv_heads=2),
             "shared_table", True)]


def timed_shapes():
    """(config, table name, why): the four probe rows below 1.0 under probe 1.22.0, then held-out shapes."""
    from kernels_probe.attention.grid import AttentionConfig as A

    return [(A(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=1024, q_per_kv=2, num_kv_heads=4,
               head_dim=256), "shared_table", "probe row 0.970"),
            (A(prefix_tokens=4096, group_size=64, q_per_kv=2, num_kv_heads=4, head_dim=256, kv_dtype="fp8"),
             "dup_table", "probe row 0.963"),
            (A(prefix_tokens=1024, group_size=256, suffix_tokens=4096), "shared_table", "probe row 0.984"),
            (A(prefix_tokens=512, group_size=16, n_groups=64, suffix_tokens=1024, q_per_kv=6, num_kv_heads=2),
             "shared_table", "probe row 0.996"),
            (A(prefix_tokens=3072, group_size=32, suffix_tokens=1024, q_per_kv=1, num_kv_heads=4, head_dim=256),
             "shared_table", "held out 0.91"),
            (A(prefix_tokens=1024, group_size=32, n_groups=4, suffix_tokens=2048, q_per_kv=2, num_kv_heads=4,
               head_dim=256), "shared_table", "held out 0.96"),
            (A(prefix_tokens=512, group_size=64, n_groups=8, suffix_tokens=1024), "shared_table", "held out 0.97"),
            (A(prefix_tokens=2048, group_size=64, suffix_tokens=512), "dup_table", "held out, private"),
            (A(prefix_tokens=32768, group_size=8, q_per_kv=8, num_kv_heads=1), "dup_table", "held out, split"),
            (A(prefix_tokens=8192, group_size=32, q_per_kv=4, num_kv_heads=8, head_dim=64), "dup_table",
             "held out, head dim 64"),
            (A(prefix_tokens=16384, group_size=8, q_per_kv=2, num_kv_heads=4, head_dim=256), "dup_table",
             "held out, d256 long")]


def variants(cfg, default_splits: int, options: frozenset = frozenset()):
    """(label, tile, splits): each tile at the default launch's split count (a persistent one unsplit), and the first
    unsplit where it splits."""
    tiles = tiles_for(cfg, options)
    out = [(f"gluon {tile_label(t)} x{1 if 'persist' in t[2] else default_splits}", t,
            1 if "persist" in t[2] else default_splits) for t in tiles]
    if default_splits > 1:
        out.append((f"gluon {tile_label(tiles[0])} x1", tiles[0], 1))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--budget-s", type=float, default=400.0, help="stop starting new timed rows after this long")
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--options", default="",
                    help="comma-separated options (nbuf,q_smem,v_widen,maxnreg,swap,persist,q_lanes): only the tiles "
                         "with one of them, and each list's first")
    ap.add_argument("--quick-checks", action="store_true",
                    help="check only the ragged shapes (every variant still checked on the timed shapes)")
    args = ap.parse_args()
    options = frozenset(o for o in args.options.split(",") if o)
    if options - set(_SHORT):
        ap.error(f"--options: unknown {sorted(options - set(_SHORT))}; known: {sorted(_SHORT)}")
    import torch
    from decode_timing import checked_err, gpu_with_flashinfer

    from cascade_plan.atomic import write_text_atomic
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.attention.data import build_data, reference_output
    from kernels_probe.attention.gluon_plans import GluonDecode
    from kernels_probe.attention.reference import reference_paged
    from kernels_probe.attention.triton_plans import DecodePlan
    from kernels_probe.timing import L2Flusher, time_fn

    t0 = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    print("device:", props.name, flush=True)
    # the checks first: FlashInfer's JIT build (the run script's fi-bg stage) goes on meanwhile
    sm, flusher = props.multi_processor_count, L2Flusher(props.L2_cache_size)

    checks, wrong = [], 0
    rows: list = []

    def save():    # after the checks and every timed row, atomically: a call cut short keeps what it finished
        if args.out:
            write_text_atomic(Path(args.out), json.dumps({"device": props.name, "sm_count": sm, "checks": checks,
                                                          "rows": rows}))
    for cfg, tname, ragged in check_shapes():
        if args.quick_checks and not ragged:
            continue
        d = build_data(cfg, "cuda")
        bt = getattr(d, tname)
        T = cfg.prefix_tokens + cfg.suffix_tokens
        lens = d.seq_lens
        if ragged:
            g = torch.Generator(device="cpu").manual_seed(cfg.batch * 7 + T)
            lens = torch.randint(1, T + 1, (cfg.batch,), generator=g).to(torch.int32).cuda()
            lens[0] = 1
        ref = reference_paged(d.q, d.k_cache, d.v_cache, bt, lens)
        tiles_all = tiles_for(cfg, options)
        persist = [t for t in tiles_all if "persist" in t[2]]
        # split (merged in the kernel's last split): the first tile and the first transposed one
        split_tiles = tiles_all[:1] + [t for t in tiles_all if t[2].get("swap") and "persist" not in t[2]][:1]
        for splits, tiles, sms in ((1, tiles_all, sm), (3, split_tiles, sm), (1, persist, 3)):
            for t in tiles:
                bn, w, opts = t
                out = torch.empty_like(d.q)
                try:
                    gd = GluonDecode(d.q, d.k_cache, d.v_cache, bt, lens, T, out, sm_count=sms, splits=splits,
                                     block_n=bn, warps=w, **opts)
                    err = checked_err(gd, out, ref)
                except Exception as exc:
                    err = float("nan")
                    print("FAIL", cfg.label(), tile_label(t), splits, type(exc).__name__, str(exc)[:300], flush=True)
                ok = err < TOL
                wrong += not ok
                checks.append({"config": cfg.as_dict(), "table": tname, "ragged": ragged, "tile": tile_label(t),
                               "splits": gd.splits if ok else splits, "sm_count": sms, "err": err, "ok": ok})
                print(f"check {cfg.label()} {tname[:3]}{' ragged' if ragged else ''} {tile_label(t)} x{splits}"
                      f"{'' if sms == sm else f' on {sms} SMs'}: err {err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
        del d, ref
    print(f"checks: {len(checks) - wrong} of {len(checks)} right, at {time.perf_counter() - t0:.0f} s", flush=True)
    save()

    why = "not asked for"
    if not args.no_flashinfer:
        _, _, why = gpu_with_flashinfer()
        print("FlashInfer:", why or "built", f"at {time.perf_counter() - t0:.0f} s", flush=True)
    table = []
    last_row_s = 0.0
    for cfg, tname, why_row in timed_shapes():
        if time.perf_counter() - t0 + last_row_s > args.budget_s:
            print("budget reached", flush=True)
            break
        row_t0 = time.perf_counter()
        d = build_data(cfg, "cuda")
        ref = reference_output(d)
        bt = getattr(d, tname)
        T = cfg.prefix_tokens + cfg.suffix_tokens
        shared = cfg.prefix_tokens if tname == "shared_table" else 0
        fns: dict = {}
        if not why:
            for tc in (False, True):
                try:
                    f = flashinfer_backend.FlashInferDecode(d, shared=tname == "shared_table", tensor_cores=tc)
                    if checked_err(f, f.out, ref) < TOL:
                        fns["fi tc" if tc else "fi cc"] = (f, f.out)
                except Exception as exc:
                    print("FI FAIL", cfg.label(), tc, type(exc).__name__, str(exc)[:120], flush=True)
        dout = torch.empty_like(d.q)
        default = DecodePlan(d.q, d.k_cache, d.v_cache, bt, d.seq_lens, T, dout, sm_count=sm, tune=DEFAULT_TUNE,
                             shared_prefix_tokens=shared)
        if checked_err(default, dout, ref) < TOL:
            fns["default"] = (default, dout)
        for label, (bn, w, opts), splits in variants(cfg, default.splits, options):
            out = torch.empty_like(d.q)
            try:
                gd = GluonDecode(d.q, d.k_cache, d.v_cache, bt, d.seq_lens, T, out, sm_count=sm, splits=splits,
                                 block_n=bn, warps=w, **opts)
                err = checked_err(gd, out, ref)
            except Exception as exc:
                print("FAIL", cfg.label(), label, type(exc).__name__, str(exc)[:300], flush=True)
                continue
            if err < TOL:
                fns[label] = (gd, out)
            else:
                print("WRONG", cfg.label(), label, err, flush=True)
        times: dict = {k: [] for k in fns}
        for _ in range(3):     # alternating, so that a drift of the clock hits every launch alike
            for k, (fn, _) in fns.items():
                times[k].append(time_fn(fn, flusher)["median_s"])
        for k, (fn, out) in list(fns.items()):
            if not checked_err(fn, out, ref) < TOL:
                print("WRONG after timing", cfg.label(), k, flush=True)
                times.pop(k)
        best = {k: min(v) for k, v in times.items()}
        fi = min((v for k, v in best.items() if k.startswith("fi")), default=None)
        gl_keys = [k for k in best if k.startswith("gluon")]
        g_best = min(gl_keys, key=best.get) if gl_keys else None
        rows.append({"config": cfg.as_dict(), "table": tname, "why": why_row, "times_s": times, "best_s": best,
                     "default_launch": default.launch_record()})
        table.append((why_row, cfg.label(), tname[:3], fi, best.get("default"), g_best,
                      best.get(g_best) if g_best else None))
        ranked = sorted(best.items(), key=lambda x: x[1])
        print(f"{cfg.label()} {tname[:3]}: " + ", ".join(f"{k} {v * 1e6:.1f}" for k, v in ranked), flush=True)
        del d, ref, fns
        torch.cuda.empty_cache()
        save()
        last_row_s = time.perf_counter() - row_t0
    print(f"\nchecks against float32: {len(checks) - wrong} of {len(checks)} right")
    print(f"times in us; ratios are FlashInfer's best decode over each (>= 1.0: at least as fast); "
          f"{time.perf_counter() - t0:.0f} s")
    print(f"{'FI':>8s} {'default':>8s} {'gluon':>8s} {'def x':>6s} {'gl x':>6s} {'gl/def':>6s}  best gluon"
          "            shape")
    for why_row, label, tn, fi, de, gk, gv in table:
        def r(a, b):
            return f"{a / b:6.3f}" if a and b else "     -"
        print(f"{(fi or 0) * 1e6:8.1f} {(de or 0) * 1e6:8.1f} {(gv or 0) * 1e6:8.1f} {r(fi, de)} {r(fi, gv)} "
              f"{r(de, gv)}  {gk or '-':20s} {label} {tn} ({why_row})")
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
