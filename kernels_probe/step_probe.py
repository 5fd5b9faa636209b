"""The rest of the decode step on one GPU: weight GEMMs (bf16, and fp8 through torch._scaled_mm where the
GPU has fp8), the engine glue (fused FlashInfer and plain torch), and whole model-shaped decode steps
per attention backend. Same method as the attention rows: correctness first, then CUDA-graph replays
between CUDA events with L2 flushed before each, medians. Rows go into the calibration file's
``step_ops`` (fitted by the planner) and ``steps`` (never fitted: validation only).
"""

from __future__ import annotations

import gc
import time

import torch

from kernels_probe.step_shapes import (
    GEMM_FIT_MODELS,
    GEMM_FIT_MODELS_QUICK,
    GLUE_M_GRID,
    GLUE_M_GRID_QUICK,
    M_GRID,
    M_GRID_QUICK,
    STEP_BACKENDS,
    LayerShape,
    StepPoint,
    held_out_points,
    layer_shape,
    step_points,
)
from kernels_probe.timing import time_fn

STEP_TOLERANCE = 1e-2      # attention output vs float32 reference, and per-sequence vs cascade
GEMM_TOLERANCE = 2e-2      # bf16/fp8 GEMM vs float32 reference (fp8: against the quantized inputs)


def _rel(out, ref) -> float:
    o, r = out.float(), ref.float()
    return float(((o - r).norm() / r.norm().clamp_min(1e-30)).item())


def _row(op: str, res: dict, **kw) -> dict:
    return {"op": op, **kw, **res}


# ------------------------------------------------------------------------------------------------ GEMMs


def has_fp8(device) -> bool:
    major, minor = torch.cuda.get_device_capability(device)
    return (major, minor) >= (8, 9) and hasattr(torch, "_scaled_mm")


def measure_gemms(flusher, device, *, quick: bool, budget_s: float, progress=None, shapes=None, m_grid=None,
                  dtypes=None) -> tuple[list, list]:
    rows, skipped = [], []
    dtypes = dtypes or (["bf16"] + (["fp8"] if has_fp8(device) else []))
    dtypes = [d for d in dtypes if d == "bf16" or has_fp8(device)]
    m_grid = m_grid or (M_GRID_QUICK if quick else M_GRID)
    if shapes is None:
        shapes = [layer_shape(model, tp) for model, tp in (GEMM_FIT_MODELS_QUICK if quick else GEMM_FIT_MODELS)]
    for shape in shapes:
        model, tp = shape.model, shape.tp
        for name, (n, k) in shape.gemms().items():
            w = torch.randn((n, k), dtype=torch.bfloat16, device=device) / (k ** 0.5)
            for dtype in dtypes:
                wq = w.to(torch.float8_e4m3fn) if dtype == "fp8" else w
                one = torch.ones((), dtype=torch.float32, device=device)
                for m in m_grid:
                    cfg = {"model": model, "tp": tp, "gemm": name, "m": m, "n": n, "k": k, "dtype": dtype}
                    try:
                        x = torch.randn((m, k), dtype=torch.bfloat16, device=device)
                        if dtype == "fp8":
                            xq = x.to(torch.float8_e4m3fn)
                            fn = (lambda xq=xq, wq=wq, one=one:
                                  torch._scaled_mm(xq, wq.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
                            ref = xq.float() @ wq.float().t()
                        else:
                            fn = (lambda x=x, w=w: torch.nn.functional.linear(x, w))
                            ref = x.float() @ w.float().t()
                        err = _rel(fn(), ref) if m <= 512 else None
                        del ref
                        if err is not None and not err <= GEMM_TOLERANCE:
                            skipped.append({"op": "gemm", "config": cfg, "reason": f"correctness: rel err {err:.3g}"})
                            continue
                        res = time_fn(fn, flusher, budget_s=budget_s)
                    except Exception as exc:  # e.g. a shape _scaled_mm refuses
                        skipped.append({"op": "gemm", "config": cfg, "reason": f"{type(exc).__name__}: {exc}"[:300]})
                        torch.cuda.synchronize()
                        continue
                    eb = 1 if dtype == "fp8" else 2
                    nbytes, flops = n * k * eb + m * (n + k) * 2, 2 * m * n * k
                    rows.append(_row("gemm", res, config=cfg, bytes=nbytes, weight_bytes=n * k * eb, flops=flops,
                                     achieved_bytes_per_s=nbytes / res["median_s"],
                                     achieved_flop_per_s=flops / res["median_s"], max_rel_err=err))
                    if progress:
                        progress()
            del w
    torch.cuda.empty_cache()
    return rows, skipped


# ------------------------------------------------------------------------------------------------ glue


class _GlueBench:
    """One layer's glue (and once-per-step glue) of a model shape at m tokens (= m sequences)."""

    def __init__(self, shape: LayerShape, m: int, variant: str, device):
        from kernels_probe.glue import AppendTarget, make_glue, rope_cache

        s = shape
        self.s, self.m = s, m
        d = s.head_dim
        self.glue = make_glue(variant, rope_cache(4096, d, s.rope_theta, device))
        bf = torch.bfloat16
        self.x = torch.randn((m, s.hidden), dtype=bf, device=device)
        self.res = torch.randn_like(self.x)
        self.w = torch.ones(s.hidden, dtype=bf, device=device)
        self.qkv = torch.randn((m, (s.q_heads + 2 * s.kv_heads) * d), dtype=bf, device=device)
        self.gu = torch.randn((m, 2 * s.intermediate), dtype=bf, device=device)
        pages = 4
        self.kc = torch.zeros((m * pages, 16, s.kv_heads, d), dtype=bf, device=device)
        self.vc = torch.zeros_like(self.kc)
        table = torch.arange(m * pages, dtype=torch.int32, device=device).view(m, pages)
        lens = torch.randint(1, pages * 16 + 1, (m,), dtype=torch.int32, device=device)
        self.target = AppendTarget(table, lens, 16)
        self.tokens = torch.randint(0, s.vocab, (m,), device=device)
        self.embed = torch.randn((s.vocab, s.hidden), dtype=bf, device=device)
        self.logits = torch.randn((m, s.vocab), dtype=bf, device=device)

    def layer(self):
        s, g, d = self.s, self.glue, self.s.head_dim
        hq, hkv = s.q_heads, s.kv_heads
        g.add_rmsnorm(self.x, self.res, self.w)
        q, k, v = self.qkv[:, :hq * d], self.qkv[:, hq * d:(hq + hkv) * d], self.qkv[:, (hq + hkv) * d:]
        g.rope(q, k, self.target.positions, d)
        g.append(k.view(self.m, hkv, d), v.view(self.m, hkv, d), self.kc, self.vc, self.target)
        g.add_rmsnorm(self.x, self.res, self.w)
        return g.silu_mul(self.gu)

    def step(self):
        h = torch.nn.functional.embedding(self.tokens, self.embed)
        self.glue.add_rmsnorm(h, self.res, self.w)
        return torch.argmax(self.logits, dim=-1)


def check_glue(shape: LayerShape, device) -> float:
    """Max relative difference between the fused and torch glue of one layer on the same inputs."""
    torch.manual_seed(0)
    a = _GlueBench(shape, 64, "torch", device)
    torch.manual_seed(0)
    b = _GlueBench(shape, 64, "fused", device)
    for t in ("x", "res", "qkv", "gu", "kc", "vc"):
        getattr(b, t).copy_(getattr(a, t))
    b.target = a.target
    ya, yb = a.layer(), b.layer()
    return max(_rel(yb, ya), _rel(b.x, a.x), _rel(b.res, a.res), _rel(b.qkv, a.qkv), _rel(b.kc, a.kc),
               _rel(b.vc, a.vc))


def measure_glue(flusher, device, variants: list[str], *, quick: bool, budget_s: float, progress=None, shapes=None,
                 m_grid=None):
    rows, skipped = [], []
    if shapes is None:
        shapes = [layer_shape(m, tp) for m, tp in (GEMM_FIT_MODELS_QUICK if quick else GEMM_FIT_MODELS)]
    for shape in shapes:
        for variant in variants:
            for m in (m_grid or (GLUE_M_GRID_QUICK if quick else GLUE_M_GRID)):
                cfg = {"model": shape.model, "tp": shape.tp, "m": m, "variant": variant, "hidden": shape.hidden,
                       "intermediate": shape.intermediate, "vocab": shape.vocab}
                try:
                    gb = _GlueBench(shape, m, variant, device)
                    r_layer = time_fn(gb.layer, flusher, budget_s=budget_s)
                    r_step = time_fn(gb.step, flusher, budget_s=budget_s)
                except Exception as exc:
                    skipped.append({"op": "glue", "config": cfg, "reason": f"{type(exc).__name__}: {exc}"[:300]})
                    torch.cuda.synchronize()
                    continue
                rows.append(_row("glue_layer", r_layer, config=cfg))
                rows.append(_row("glue_step", r_step, config=cfg))
                del gb
                if progress:
                    progress()
    torch.cuda.empty_cache()
    return rows, skipped


# ----------------------------------------------------------------------------------------- whole steps


def time_step(step, flusher, *, budget_s: float = 0.15) -> dict:
    return time_fn(step, flusher, budget_s=budget_s, lo=5, hi=30)


def compare_modes(kv, steps: dict, pt: StepPoint) -> dict:
    """Run each step once eagerly on the same random q of layer 0: every attention output against a
    float32 reference on a few sequences, and each cascade against its per-sequence twin on all of them."""
    from kernels_probe.step_model import check_rows, reference_attention

    q0 = torch.randn_like(next(iter(steps.values())).q)
    rows = check_rows(pt)
    ref = reference_attention(kv, 0, q0, rows)
    outs, errs = {}, {}
    for key, st in steps.items():
        st.q.copy_(q0)
        st.attn.out.fill_(float("nan"))
        o = st.attn(0).clone()
        outs[key] = o
        errs[key] = _rel(o[torch.tensor(rows, device=o.device)], ref)
    pairs = {}
    for (b, mode), o in outs.items():
        if mode == "cascade":
            twin = ("triton" if b == "triton" else "flashinfer", "per_sequence")
            if twin in outs:
                pairs[(b, mode)] = _rel(o, outs[twin])
    return {"ref_err": errs, "mode_err": pairs}


def measure_steps(flusher, device, sm_count: int, *, quick: bool, backends: list[str], glue: str,
                  budget_s: float = 0.15, tp: int = 1, allreduce=None, rank: int = 0, points=None,
                  timer=None, progress=None, seed: int = 0, shapes=None) -> tuple[list, list]:
    """Whole decode steps at each step point, per attention backend and mode."""
    from kernels_probe.step_model import DecodeStep, StepKV, StepWeights

    rows, skipped = [], []
    pts = points if points is not None else step_points(quick)
    by_model: dict[tuple[str, str], list[StepPoint]] = {}
    for pt in pts:
        by_model.setdefault((pt.model, pt.weight_dtype), []).append(pt)
    timer = timer or time_step
    for (model, wdtype), mpts in by_model.items():
        from kernels_probe.step_shapes import model_config

        try:
            shape = (shapes or {}).get(model) or layer_shape(model, tp)
            mcfg = None if (shapes or {}).get(model) else model_config(model)
        except ValueError as exc:       # a held-out config missing from this install, a shape TP cannot split
            skipped += [{"workload": pt.workload, "model": model, "tp": tp, "position": pt.position,
                         "reason": str(exc)[:300]} for pt in mpts]
            continue
        weights = StepWeights(shape, device, seed=seed, weight_dtype=wdtype)
        for pt in mpts:
            base = {"workload": pt.workload, "model": model, "tp": tp, "position": pt.position,
                    "config": pt.as_dict(), "glue": glue, "kv_dtype": pt.kv_dtype, "weight_dtype": wdtype}
            if mcfg is not None and model_held_out(model):
                base["model_config"] = mcfg   # validation prices the step from this config
            kv = StepKV(shape, pt, device, seed=seed + 1)
            steps = {}
            for b in backends:
                modes = ["cascade"] if b == "flashinfer-fa2" else ["per_sequence", "cascade"]
                for mode in modes:
                    try:
                        steps[(b, mode)] = DecodeStep(shape, weights, kv, b, mode, glue=glue, allreduce=allreduce,
                                                      sm_count=sm_count, seed=seed)
                    except Exception as exc:
                        skipped.append({**base, "backend": b, "mode": mode,
                                        "reason": f"{type(exc).__name__}: {exc}"[:300]})
            try:
                chk = compare_modes(kv, steps, pt)
            except Exception as exc:
                for (b, mode) in list(steps):
                    skipped.append({**base, "backend": b, "mode": mode,
                                    "reason": f"check failed: {type(exc).__name__}: {exc}"[:300]})
                steps = {}
                chk = {"ref_err": {}, "mode_err": {}}
            for (b, mode), st in steps.items():
                e_ref = chk["ref_err"].get((b, mode))
                e_mode = chk["mode_err"].get((b, mode))
                bad = [x for x in (e_ref, e_mode) if x is not None and not x <= STEP_TOLERANCE]
                if e_ref is None or bad:
                    skipped.append({**base, "backend": b, "mode": mode,
                                    "reason": f"correctness: ref err {e_ref}, vs per-sequence {e_mode}"})
                    continue
                try:
                    res = timer(st, flusher, budget_s=budget_s)
                except Exception as exc:
                    skipped.append({**base, "backend": b, "mode": mode,
                                    "reason": f"timing failed: {type(exc).__name__}: {exc}"[:300]})
                    torch.cuda.synchronize()
                    continue
                rows.append({**base, "backend": b, "mode": mode, "attention_variant": st.attn.variant,
                             "kv_cache_bytes": kv.bytes(), **res, "max_rel_err": e_ref,
                             "max_rel_err_vs_per_sequence": e_mode})
                if progress:
                    progress()
            del steps, kv
            gc.collect()
            torch.cuda.empty_cache()
        del weights
        gc.collect()
        torch.cuda.empty_cache()
    return rows, skipped


def model_held_out(model: str) -> bool:
    from cascade_plan.inputs.model_presets import PRESETS

    return model not in PRESETS


def _checkpoint(out: dict) -> None:
    """With PROBE_STEP_PARTIAL set, write what has been measured so far there (debugging a long run)."""
    import json
    import os

    path = os.environ.get("PROBE_STEP_PARTIAL")
    if path:
        with open(path, "w") as f:
            json.dump(out, f, default=str)


def run_step_ops(flusher, device, *, quick: bool, plan=None) -> dict:
    """Phase 1 (no FlashInfer needed, runs while its kernels build): GEMMs and the torch glue.
    With a WorkloadProbePlan: that workload's GEMM shapes, weight dtype and tokens only."""
    out = {"step_ops": [], "steps": [], "skipped": [], "timings_s": {}}
    budget = 0.01 if quick else 0.015
    t0 = time.perf_counter()
    wkw = {} if plan is None else {"shapes": [plan.shape], "m_grid": plan.gemm_m, "dtypes": [plan.weight_dtype]}
    gkw = {} if plan is None else {"shapes": [plan.shape], "m_grid": plan.gemm_m}
    r, s = measure_gemms(flusher, device, quick=quick, budget_s=budget, **wkw)
    out["step_ops"] += r
    out["skipped"] += s
    out["timings_s"]["gemm_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r, s = measure_glue(flusher, device, ["torch"], quick=quick, budget_s=budget, **gkw)
    out["step_ops"] += r
    out["skipped"] += s
    out["timings_s"]["glue_torch_s"] = time.perf_counter() - t0
    if plan is not None and getattr(plan, "moe", None) is not None:    # a MoE workload: its routed experts
        from kernels_probe.moe_probe import measure_moe

        t0 = time.perf_counter()
        dtypes = [d for d in [plan.weight_dtype] if d == "bf16" or has_fp8(device)]
        r, s = measure_moe(flusher, device, [plan.moe], m_grid=plan.gemm_m, dtypes=dtypes,
                           backends=("triton", "grouped_mm"), budget_s=budget, log=lambda msg: None)
        out["step_ops"] += r
        out["skipped"] += s
        out["timings_s"]["moe_s"] = time.perf_counter() - t0
    _checkpoint(out)
    return out


def run_step_probe(flusher, device, sm_count: int, *, quick: bool, fi_ok: bool, out: dict,
                   held_out: bool = True, plan=None) -> dict:
    """Phase 2: fused glue (FlashInfer), single-GPU steps, then all-reduce and TP-2 steps where 2+ GPUs
    are visible. Adds to `out` (phase 1's dict) and returns it."""
    budget = 0.01 if quick else 0.015
    t0 = time.perf_counter()
    glue = "torch"
    if fi_ok:
        shape = layer_shape(GEMM_FIT_MODELS[0][0], 1)
        try:
            err = check_glue(shape, device)
            out["glue_fused_vs_torch_rel_err"] = err
            if err <= STEP_TOLERANCE:
                glue = "fused"
                r, s = measure_glue(flusher, device, ["fused"], quick=quick, budget_s=budget,
                                    **({} if plan is None else {"shapes": [plan.shape], "m_grid": plan.gemm_m}))
                out["step_ops"] += r
                out["skipped"] += s
            else:
                out["skipped"].append({"op": "glue", "config": {"variant": "fused"},
                                       "reason": f"fused glue differs from torch glue: rel err {err:.3g}"})
        except Exception as exc:
            out["skipped"].append({"op": "glue", "config": {"variant": "fused"},
                                   "reason": f"{type(exc).__name__}: {exc}"[:300]})
    out["timings_s"]["glue_fused_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    from kernels_probe.layer_graph import measure_layer_graphs

    shape = layer_shape(GEMM_FIT_MODELS[0][0], 1) if plan is None else plan.shape
    lg_dtypes = (["bf16"] + (["fp8"] if has_fp8(device) else [])) if plan is None else [plan.weight_dtype]
    r, s = measure_layer_graphs(flusher, device, shape, glue=glue, dtypes=lg_dtypes, quick=quick, budget_s=budget,
                                m_grid=None if plan is None else plan.gemm_m)
    out["step_ops"] += r
    out["skipped"] += s
    out["timings_s"]["layer_graph_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    backends = [b for b in STEP_BACKENDS if fi_ok or b == "triton"]
    pts = step_points(quick) + (held_out_points(quick) if held_out else [])
    if plan is not None:
        pts = list(plan.steps)
    r, s = measure_steps(flusher, device, sm_count, quick=quick, backends=backends, glue=glue, points=pts,
                         shapes=None if plan is None else {plan.shape.model: plan.shape})
    out["steps"] += r
    out["skipped"] += s
    out["timings_s"]["steps_s"] = time.perf_counter() - t0
    _checkpoint(out)
    out["step_glue"] = glue
    out["step_backends"] = backends
    n_gpu = torch.cuda.device_count()
    if n_gpu >= 2 and plan is None:
        from kernels_probe.multi_gpu import run_multi_gpu

        t0 = time.perf_counter()
        out["multi_gpu_error"] = {}
        # every GPU count this host has (2, 4, 8): all-reduce rows and whole TP steps at each
        from kernels_probe.step_shapes import multi_gpu_plan

        for n in [p["world"] for p in multi_gpu_plan(n_gpu, quick)]:
            mg = run_multi_gpu(n, quick=quick, backends=backends, glue=glue, tp_steps=True)
            out["step_ops"] += mg.get("step_ops", [])
            out["steps"] += mg.get("steps", [])
            out["skipped"] += mg.get("skipped", [])
            out["multi_gpu_error"][str(n)] = mg.get("error")
        out["timings_s"]["multi_gpu_s"] = time.perf_counter() - t0
    out["gpus_visible"] = n_gpu
    return out
