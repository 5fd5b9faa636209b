"""The probe's target figures (docs/probe-notes.md, "Targets") from a calibration document (pure Python), and a rich
summary table."""

from __future__ import annotations

import statistics

NAMED = {"prefix_tokens": 4096, "group_size": 256, "q_per_kv": 4, "num_kv_heads": 8, "kv_dtype": "bf16",
         "n_groups": 1}


def _match(cfg: dict, **kw) -> bool:
    return all(cfg.get(k) == v for k, v in kw.items())


def _rows(doc, backend=None, kernel=None, variant="__any__"):
    for m in doc["measurements"]:
        if backend is not None and m["backend"] != backend:
            continue
        if kernel is not None and m["kernel"] != kernel:
            continue
        if variant != "__any__" and m.get("variant") != variant:
            continue
        yield m


def floor_s(m: dict, ceilings: dict, n_kernels: int = 0) -> float:
    """max(byte floor, FLOP floor) + measured launch costs: the time of a graph of one empty kernel, timed
    as every row is (graph_single_kernel_s), plus graph_kernel_launch_s for each further kernel."""
    t = max(m["bytes"] / ceilings["hbm_read_bytes_per_s"], m["flops"] / ceilings["bf16_matmul_flop_per_s"])
    if n_kernels <= 0:
        return t
    first = ceilings.get("graph_single_kernel_s", ceilings["graph_kernel_launch_s"])
    return t + first + (n_kernels - 1) * ceilings["graph_kernel_launch_s"]


def target_figures(doc: dict) -> dict:
    ce = doc["ceilings"]
    bw, mm = ce["hbm_read_bytes_per_s"], ce["bf16_matmul_flop_per_s"]
    ridge = mm / bw
    out: dict = {"ceilings": dict(ce)}

    # 1. per-sequence decode over duplicated prefix, largest batch x context, each backend/variant
    dec = {}
    for m in _rows(doc, kernel="decode_dup"):
        if m["config"]["kv_dtype"] != "bf16":
            continue
        key = m["backend"] + (f"/{m['variant']}" if m.get("variant") else "")
        if key not in dec or m["bytes"] > dec[key]["bytes"]:
            dec[key] = m
    out["decode_dup_largest"] = {k: {"config": m["config"], "bytes_per_s": m["bytes"] / m["median_s"],
                                     "pct_of_read_bw": 100 * m["bytes"] / m["median_s"] / bw}
                                 for k, m in dec.items()}
    # L2 gain of shared pages: time(dup) / time(shared) at the same config, per backend
    gains: dict = {}
    for m in _rows(doc, kernel="decode_shared"):
        key = m["backend"] + (f"/{m['variant']}" if m.get("variant") else "")
        for d in _rows(doc, backend=m["backend"], kernel="decode_dup", variant=m.get("variant")):
            if d["config"] == m["config"]:
                gains.setdefault(key, []).append((d["median_s"] / m["median_s"], m["bytes"] / m["median_s"],
                                                  m["config"]))
    out["decode_shared_gain"] = {k: {"max_gain": max(g[0] for g in v),
                                     "median_gain": statistics.median(g[0] for g in v),
                                     "max_effective_bytes_per_s": max(g[1] for g in v)} for k, v in gains.items()}

    # 2. cascade prefix pass
    pref: dict = {}
    for m in _rows(doc, kernel="cascade_prefix"):
        if m["config"]["kv_dtype"] != "bf16":
            continue
        key = m["backend"] + (f"/{m['variant']}" if m.get("variant") else "")
        inten = m["flops"] / m["bytes"]
        d = pref.setdefault(key, {"mem_bound_best_pct_bw": 0.0, "mem_bound_large_pct_bw": [],
                                  "compute_bound_best_pct_mm": 0.0, "named_pct_mm": None})
        if inten < ridge:
            pct = 100 * m["bytes"] / m["median_s"] / bw
            d["mem_bound_best_pct_bw"] = max(d["mem_bound_best_pct_bw"], pct)
            if m["bytes"] >= 64 << 20:
                d["mem_bound_large_pct_bw"].append(pct)
        else:
            pct = 100 * m["flops"] / m["median_s"] / mm
            d["compute_bound_best_pct_mm"] = max(d["compute_bound_best_pct_mm"], pct)
        if _match(m["config"], **NAMED):
            d["named_pct_mm"] = 100 * m["flops"] / m["median_s"] / mm
            d["named_pct_bw"] = 100 * m["bytes"] / m["median_s"] / bw
    for d in pref.values():
        v = d.pop("mem_bound_large_pct_bw")
        d["mem_bound_large_median_pct_bw"] = statistics.median(v) if v else None
    out["cascade_prefix"] = pref

    # 3. whole cascade vs floor (+ launches)
    casc: dict = {}
    for m in _rows(doc, kernel="cascade_total"):
        key = m["backend"]
        nk = (m.get("launch") or {}).get("kernels", 3)
        r = m["median_s"] / floor_s(m, ce, nk)
        casc.setdefault(key, []).append((r, m))
    out["cascade_total"] = {}
    for k, v in casc.items():
        named = [r for r, m in v if _match(m["config"], suffix_tokens=128, **NAMED)]
        out["cascade_total"][k] = {"median_ratio_to_floor": statistics.median(r for r, _ in v),
                                   "worst_ratio_to_floor": max(r for r, _ in v),
                                   "share_within_1.5x": sum(r <= 1.5 for r, _ in v) / len(v),
                                   "named_ratio_to_floor": named[0] if named else None}
    errs = [m["max_rel_err"] for m in doc["measurements"] if m.get("max_rel_err") is not None]
    out["max_rel_err"] = max(errs) if errs else None
    out["correctness_failures"] = [s for s in doc["skipped"] if s["reason"].startswith("correctness")]
    return out


def summary_table(doc: dict):
    from rich.table import Table

    f = target_figures(doc)
    ce = f["ceilings"]
    t = Table(title=f"probe {doc['device']['name']}: {len(doc['measurements'])} rows, {len(doc['skipped'])} skipped")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_row("HBM read", f"{ce['hbm_read_bytes_per_s'] / 1e12:.2f} TB/s")
    t.add_row("HBM copy (r+w)", f"{ce['hbm_copy_bytes_per_s'] / 1e12:.2f} TB/s")
    t.add_row("bf16 matmul", f"{ce['bf16_matmul_flop_per_s'] / 1e12:.0f} TFLOP/s")
    t.add_row("graph kernel launch", f"{ce['graph_kernel_launch_s'] * 1e6:.2f} us")
    for k, v in f["decode_dup_largest"].items():
        t.add_row(f"decode_dup largest {k}", f"{v['bytes_per_s'] / 1e12:.2f} TB/s = {v['pct_of_read_bw']:.0f}% BW")
    for k, v in f["decode_shared_gain"].items():
        t.add_row(f"decode_shared gain {k}", f"max {v['max_gain']:.2f}x med {v['median_gain']:.2f}x "
                                             f"eff {v['max_effective_bytes_per_s'] / 1e12:.1f} TB/s")
    for k, v in f["cascade_prefix"].items():
        named = v.get("named_pct_mm")
        t.add_row(f"prefix {k}", f"mem-bound best {v['mem_bound_best_pct_bw']:.0f}% BW "
                                 f"(large med {v['mem_bound_large_median_pct_bw'] or 0:.0f}%), compute best "
                                 f"{v['compute_bound_best_pct_mm']:.0f}% MM, B256P4096G4 "
                                 f"{'-' if named is None else f'{named:.0f}% MM'}")
    for k, v in f["cascade_total"].items():
        named = v["named_ratio_to_floor"]
        t.add_row(f"cascade_total {k}", f"median {v['median_ratio_to_floor']:.2f}x floor, worst "
                                        f"{v['worst_ratio_to_floor']:.2f}x, "
                                        f"{100 * v['share_within_1.5x']:.0f}% <=1.5x, "
                                        f"B256P4096S128 {'-' if named is None else f'{named:.2f}x'}")
    t.add_row("max rel err", f"{f['max_rel_err']}")
    t.add_row("correctness failures", str(len(f["correctness_failures"])))
    for label, value in step_figures(doc):
        t.add_row(label, value)
    return t


def step_figures(doc: dict) -> list[tuple[str, str]]:
    """A few figures of the --step rows: one model's GEMMs and glue per step, the all-reduce, whole steps."""
    ops, steps = doc.get("step_ops") or [], doc.get("steps") or []
    out: list[tuple[str, str]] = []
    for m in (1, 128, 512):
        for dt in ("bf16", "fp8"):
            rows = [r for r in ops if r["op"] == "gemm" and r["config"]["m"] == m and r["config"]["dtype"] == dt
                    and r["config"]["model"] == "llama-3-8b" and r["config"]["tp"] == 1]
            if len(rows) == 5:
                t = sum(r["median_s"] * (1 if r["config"]["gemm"] == "lm_head" else 32) for r in rows)
                out.append((f"GEMMs llama-3-8b M={m} {dt}", f"{t * 1e3:.2f} ms per step"))
    for v in ("fused", "torch"):
        lay = {r["config"]["m"]: r["median_s"] for r in ops if r["op"] == "glue_layer" and r["config"]["variant"] == v
               and r["config"]["tp"] == 1}
        stp = {r["config"]["m"]: r["median_s"] for r in ops if r["op"] == "glue_step" and r["config"]["variant"] == v
               and r["config"]["tp"] == 1}
        for m in sorted(set(lay) & set(stp))[:1] + sorted(set(lay) & set(stp))[-1:]:
            out.append((f"glue {v} M={m}", f"{lay[m] * 1e6:.1f} us/layer + {stp[m] * 1e6:.1f} us/step"))
    for r in ops:
        if r["op"] == "allreduce" and r["config"]["bytes"] in (1 << 13, 1 << 20, 1 << 26):
            out.append((f"all-reduce {r['config']['gpus']} GPUs {r['config']['bytes']} B",
                        f"{r['median_s'] * 1e6:.1f} us"))
    for r in steps:
        if r["position"] == "first" and r["workload"] == "rl-rollouts-64":
            out.append((f"step {r['workload']} first TP{r['tp']} {r['backend']} {r['mode']}",
                        f"{r['median_s'] * 1e3:.2f} ms"))
    return out
