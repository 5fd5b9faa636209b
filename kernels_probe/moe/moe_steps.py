"""Whole MoE / MLA decode steps (kernels_probe/moe/moe_step.py, all layers in one CUDA graph) per attention backend
and mode: the attention of layer 0 checked against a float32 reference and each cascade against its
per-sequence twin, the whole step run eagerly once (finite output), then timed like every step row (graph
replays between CUDA events, L2 flushed before each, median). Rows go to the calibration file's ``steps``
with ``step_kind`` "moe" (GQA + MoE) or "mla_moe", the (possibly truncated) config.json the planner prices
them from, and ``allreduce: false`` (one GPU's shard: a TP > 1 model is compared with the planner's step
without its all-reduce terms). Never fitted: validation only.

Run: ``python -m kernels_probe.moe.moe_steps --out moe_steps.json [--quick] [--workload NAME ...] [--budget-s S]``
(the file is rewritten after every step point, so a run cut short keeps what it measured).
"""

from __future__ import annotations

import gc
import json
import os
import time

import torch

from kernels_probe.attention.reference import rel_err
from kernels_probe.moe.moe_step_shapes import MoeStepPoint, moe_step_points, moe_step_shape, truncated_config
from kernels_probe.steps.whole_steps import compare_modes, passing_steps, time_step

GQA_MODES = (("flashinfer", "per_sequence"), ("flashinfer", "cascade"), ("flashinfer-fa2", "cascade"),
             ("triton", "per_sequence"), ("triton", "cascade"))
MLA_MODES = (("flashinfer", "per_sequence"), ("flashinfer", "cascade"))


def _free(checkpoint=None, rows=None, skipped=None) -> None:
    """Give the GPU memory of what was just dropped back, then write what was measured so far."""
    gc.collect()
    torch.cuda.empty_cache()
    if checkpoint:
        checkpoint(rows, skipped)


def compare_mla_modes(kv, steps: dict, pt) -> dict:
    """Layer 0's MLA attention of each step on the same random queries against the float32 reference on a
    few sequences, and the cascade against its per-sequence twin on all of them."""
    from kernels_probe.moe.moe_step import reference_mla_layer
    from kernels_probe.steps.step_model import check_rows

    st0 = next(iter(steps.values()))
    qn, qp = torch.randn_like(st0.q_nope), torch.randn_like(st0.q_pe)
    rows = check_rows(pt)
    ref = reference_mla_layer(kv, 0, qn, qp, rows)
    outs, errs = {}, {}
    for key, st in steps.items():
        st.q_nope.copy_(qn)
        st.q_pe.copy_(qp)
        o = st.attn(0).clone()
        outs[key] = o
        errs[key] = rel_err(o[torch.tensor(rows, device=o.device)], ref)
    pairs = {k: rel_err(o, outs[(k[0], "per_sequence")]) for k, o in outs.items()
             if k[1] == "cascade" and (k[0], "per_sequence") in outs}
    return {"ref_err": errs, "mode_err": pairs}


def measure_moe_steps(flusher, device, sm_count: int, points: list[MoeStepPoint], *, glue: str = "fused",
                      budget_s: float = 0.15, modes=None, deadline_s: float | None = None, seed: int = 0,
                      checkpoint=None, log=print, timer=None) -> tuple[list, list]:
    from kernels_probe.moe.moe_step import MoeDecodeStep, MoeStepWeights, make_kv

    rows: list[dict] = []
    skipped: list[dict] = []
    timer = timer or time_step
    groups: dict[tuple, list[MoeStepPoint]] = {}
    for p in points:
        groups.setdefault((p.step.model, p.tp, p.layers, p.step.weight_dtype), []).append(p)
    for (model, tp, layers, wd), pts in groups.items():
        if deadline_s is not None and time.perf_counter() > deadline_s:
            skipped += [{"workload": p.step.workload, "position": p.step.position, "reason": "time budget"}
                        for p in pts]
            continue
        t0 = time.perf_counter()
        shape = moe_step_shape(model, tp, layers=layers)
        cfg = truncated_config(model, layers)
        try:
            weights = MoeStepWeights(shape, device, seed=seed, weight_dtype=wd)
        except Exception as exc:  # noqa: BLE001 -- a model the GPU cannot hold is a skipped group
            skipped += [{"workload": p.step.workload, "position": p.step.position,
                         "reason": f"weights: {type(exc).__name__}: {exc}"[:300]} for p in pts]
            torch.cuda.empty_cache()
            continue
        log(f"{model} tp{tp} {shape.layers} layers, {wd} weights: {time.perf_counter() - t0:.1f} s to build")
        kind = "mla_moe" if shape.attention == "mla" else "moe"
        for p in pts:
            pt = p.step
            if deadline_s is not None and time.perf_counter() > deadline_s:
                skipped.append({"workload": pt.workload, "position": pt.position, "reason": "time budget"})
                continue
            base = {"workload": pt.workload, "model": model, "tp": tp, "position": pt.position, "config": pt.as_dict(),
                    "glue": glue, "kv_dtype": pt.kv_dtype, "weight_dtype": wd, "step_kind": kind,
                    "layers": shape.layers, "model_config": cfg, "allreduce": False, "gpus": 1}
            kv = make_kv(shape, pt, device, seed=seed + 1)
            steps = {}
            for b, mode in (modes or (MLA_MODES if kind == "mla_moe" else GQA_MODES)):
                try:
                    steps[(b, mode)] = MoeDecodeStep(shape, weights, kv, b, mode, glue=glue, sm_count=sm_count,
                                                     seed=seed)
                except Exception as exc:  # noqa: BLE001
                    skipped.append({**base, "backend": b, "mode": mode,
                                    "reason": f"{type(exc).__name__}: {exc}"[:300]})
            check = compare_mla_modes if kind == "mla_moe" else compare_modes
            for (b, mode), st, e_ref, e_mode in passing_steps(check, kv, steps, pt, base, skipped):
                try:
                    st()
                    if not torch.isfinite(st.hidden_out.float()).all():
                        raise RuntimeError("non-finite step output")
                    res = timer(st, flusher, budget_s=budget_s)
                except Exception as exc:  # noqa: BLE001
                    skipped.append({**base, "backend": b, "mode": mode,
                                    "reason": f"timing failed: {type(exc).__name__}: {exc}"[:300]})
                    torch.cuda.synchronize()
                    continue
                ec = st.experts.cfg.as_dict() if st.experts is not None else None
                rows.append({**base, "backend": b, "mode": mode, "attention_variant": st.attn.variant,
                             "kv_cache_bytes": kv.bytes(), **res, "max_rel_err": e_ref,
                             "max_rel_err_vs_per_sequence": e_mode, "expert_block_config": ec})
                log(f"  {pt.workload} {pt.position} {b} {mode}: {res['median_s'] * 1e3:.3f} ms")
            st = None      # the loop's last step holds the weights: nothing may outlive the group
            del steps, kv, st
            _free(checkpoint, rows, skipped)
        del weights
        _free()
    return rows, skipped


# Diagnosis and composition rows (``step_ops``): the whole step with parts left out, the way the step runs
# them (one graph). op "moe_step_part": a step point with the attention kernels and / or the MoE MLP left out
# (which term a prediction misses); op "moe_step_no_attention": the step without its attention kernels at
# M sequences over a tiny cache (the non-attention time of every layer as the step runs it, over M).
PART_SKIPS = ((), ("attention",), ("experts",), ("expert_gemms",), ("attention", "experts"))
PART_M_GRID = (1, 8, 16, 32, 64, 128, 256, 512)
# (model, TP, layers kept, weight dtype, diagnosis workloads, M grid of the no-attention rows)
PART_GROUPS = (
    ("deepseek-v3", 8, 32, "fp8", ("deepseek-v3-grpo-tp8", "mla-ds-16x1-16k"), PART_M_GRID),
    ("mixtral-8x7b", 1, None, "bf16", ("moe-mixtral-64x2", "moe-mixtral-8-32k"), PART_M_GRID),
    ("qwen3-30b-a3b", 1, None, "bf16", ("moe-qwen3-16x32",), ()),    # held out: diagnosis only
)


def measure_parts(flusher, device, sm_count: int, groups=PART_GROUPS, *, glue: str = "fused",
                  budget_s: float = 0.1, deadline_s: float | None = None, seed: int = 0, checkpoint=None,
                  log=print, timer=None) -> tuple[list, list]:
    from kernels_probe.moe.moe_step import MoeDecodeStep, MoeStepWeights, make_kv
    from kernels_probe.steps.step_shapes import WorkloadStep

    rows: list[dict] = []
    skipped: list[dict] = []
    timer = timer or time_step
    for model, tp, layers, wd, diag, m_grid in groups:
        if deadline_s is not None and time.perf_counter() > deadline_s:
            skipped.append({"op": "moe_step_part", "config": {"model": model}, "reason": "time budget"})
            continue
        shape = moe_step_shape(model, tp, layers=layers)
        weights = MoeStepWeights(shape, device, seed=seed, weight_dtype=wd)
        first = {p.step.workload: p.step for p in moe_step_points() if p.step.position == "first"}
        jobs = [(first[w], skip, "moe_step_part") for w in diag for skip in PART_SKIPS]
        jobs += [(WorkloadStep(f"m{m}", model, "first", 16, m, 1, 0, 1, 1, weight_dtype=wd), ("attention",),
                  "moe_step_no_attention") for m in m_grid]
        for pt, skip, op in jobs:
            if deadline_s is not None and time.perf_counter() > deadline_s:
                skipped.append({"op": op, "config": {"model": model, "workload": pt.workload}, "reason": "time budget"})
                continue
            cfg = {"model": model, "tp": tp, "layers": shape.layers, "weight_dtype": wd, "kv_dtype": pt.kv_dtype,
                   "workload": pt.workload, "m": pt.batch, "prefix_tokens": pt.prefix_tokens,
                   "suffix_tokens": pt.suffix_tokens, "skip": list(skip), "glue": glue}
            try:
                kv = make_kv(shape, pt, device, seed=seed + 1)
                st = MoeDecodeStep(shape, weights, kv, "flashinfer", "per_sequence", glue=glue, sm_count=sm_count,
                                   seed=seed, skip=frozenset(skip))
                st()
                if not torch.isfinite(st.hidden_out.float()).all():
                    raise RuntimeError("non-finite step output")
                res = timer(st, flusher, budget_s=budget_s)
            except Exception as exc:  # noqa: BLE001
                skipped.append({"op": op, "config": cfg, "reason": f"{type(exc).__name__}: {exc}"[:300]})
                torch.cuda.synchronize()
                continue
            ec = st.experts.cfg.as_dict() if st.experts is not None else None
            rows.append({"op": op, "config": cfg, **res, "expert_block_config": ec,
                         "per_layer_s": res["median_s"] / shape.layers})
            log(f"  {op} {model} {pt.workload} M={pt.batch} skip={'+'.join(skip) or '-'}: "
                f"{res['median_s'] * 1e3:.3f} ms")
            st = kv = None
            _free(checkpoint, rows, skipped)
        del weights
        _free()
    return rows, skipped


def table(rows: list[dict]) -> str:
    """workload, position, per backend: per-sequence / cascade ms and the step speedup."""
    idx = {(r["workload"], r["position"], r["backend"], r["mode"]): r["median_s"] for r in rows}
    out = ["| workload | step | backend | per-seq ms | cascade ms | speedup |",
           "| --- | --- | --- | ---: | ---: | ---: |"]
    for (wl, pos, b, mode), t in idx.items():
        if mode != "cascade":
            continue
        ps = idx.get((wl, pos, "triton" if b == "triton" else "flashinfer", "per_sequence"))
        out.append(f"| {wl} | {pos} | {b} | {ps * 1e3 if ps else float('nan'):.3f} | {t * 1e3:.3f} | "
                   f"{ps / t if ps else float('nan'):.2f}x |")
    return "\n".join(out)


def main(argv=None) -> int:
    from kernels_probe.options import command_parser

    ap = command_parser("kernels_probe.moe.moe_steps", __doc__, budget_s=480.0)
    ap.add_argument("--workload", action="append", help="only these step workloads (moe_step_shapes.py)")
    ap.add_argument("--glue", choices=("fused", "torch"), default="fused")
    ap.add_argument("--parts", action="store_true", help="then the diagnosis and no-attention rows (step_ops)")
    ap.add_argument("--no-steps", action="store_true", help="no whole steps (with --parts: the parts only)")
    from kernels_probe.timing import start_command

    started = start_command(ap, argv, "moe_steps")
    if started is None:
        return 2
    args, t_start, device, props, flusher = started
    pts = moe_step_points(args.quick, tuple(args.workload) if args.workload else None)
    head = {"kind": "moe_step_rows", "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "device": {"name": props.name, "sm_count": props.multi_processor_count, "torch": torch.__version__,
                       "cuda": torch.version.cuda}}
    args.out.parent.mkdir(parents=True, exist_ok=True)

    acc: dict = {"steps": [], "step_skipped": [], "step_ops": [], "skipped": []}

    def write(rows=None, skipped=None, complete=False, key="steps"):
        if rows is not None:
            acc[key], acc["step_skipped" if key == "steps" else "skipped"] = rows, skipped
        doc = {**head, "complete": complete, **acc, "elapsed_s": time.perf_counter() - t_start}
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=1, default=str))
        os.replace(tmp, args.out)

    print(f"moe_steps: {props.name}, torch {torch.__version__}; {len(pts)} step points", flush=True)
    rows, skipped = [], []
    if not args.no_steps:
        rows, skipped = measure_moe_steps(flusher, device, props.multi_processor_count, pts, glue=args.glue,
                                          deadline_s=t_start + args.budget_s, checkpoint=write,
                                          log=lambda s: print(s, flush=True))
        write(rows, skipped)
    if args.parts:
        pr, ps = measure_parts(flusher, device, props.multi_processor_count, glue=args.glue,
                               deadline_s=t_start + args.budget_s,
                               checkpoint=lambda r, k: write(r, k, key="step_ops"), log=lambda s: print(s, flush=True))
        write(pr, ps, key="step_ops")
        for r in pr:
            c = r["config"]
            sk = "+".join(c["skip"]) or "-"
            print(f"{r['op']:22s} {c['model']:14s} {c['workload']:24s} M={c['m']:4d} skip={sk:18s}"
                  f" {r['median_s'] * 1e3:8.3f} ms")
    write(complete=True)
    for s in skipped:
        print("skipped:", s.get("workload"), s.get("position"), s.get("backend"), s.get("mode"), s["reason"][:200])
    print(f"\n{len(rows)} rows, {len(skipped)} skipped, {time.perf_counter() - t_start:.0f} s; wrote {args.out}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
