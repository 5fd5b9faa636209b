"""The rest of the decode step on one GPU: weight GEMMs (bf16, and fp8 through torch._scaled_mm where the
GPU has fp8), the engine glue (fused FlashInfer and plain torch), and whole model-shaped decode steps
per attention backend (``whole_steps``; on 2+ GPUs also through ``multi_gpu``). Same method as the
attention rows: correctness first, then CUDA-graph replays between CUDA events with L2 flushed before
each, medians. Rows go into the calibration file's
``step_ops`` (fitted by the planner) and ``steps`` (never fitted: validation only).
"""

from __future__ import annotations

import time

import torch

from kernels_probe.attention.reference import rel_err
from kernels_probe.options import STEP_SETS
from kernels_probe.steps.step_shapes import (
    GEMM_FIT_MODELS,
    GEMM_FIT_MODELS_QUICK,
    GLUE_M_GRID,
    GLUE_M_GRID_QUICK,
    M_GRID,
    M_GRID_QUICK,
    REGIME_FIT_MODELS,
    REGIME_GLUE_M_GRID,
    REGIME_M_GRID,
    STEP_BACKENDS,
    LayerShape,
    held_out_points,
    layer_shape,
    regime_held_out_points,
    step_points,
)
from kernels_probe.steps.whole_steps import STEP_TOLERANCE, measure_steps
from kernels_probe.timing import time_fn

GEMM_TOLERANCE = 2e-2      # bf16/fp8 GEMM vs float32 reference (fp8: against the quantized inputs)


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
                        err = rel_err(fn(), ref) if m <= 512 else None
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
        from kernels_probe.steps.glue import AppendTarget, make_glue, rope_cache

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
    return max(rel_err(yb, ya), rel_err(b.x, a.x), rel_err(b.res, a.res), rel_err(b.qkv, a.qkv), rel_err(b.kc, a.kc),
               rel_err(b.vc, a.vc))


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


def _checkpoint(out: dict) -> None:
    """With PROBE_STEP_PARTIAL set, write what has been measured so far there (debugging a long run)."""
    import json
    import os

    path = os.environ.get("PROBE_STEP_PARTIAL")
    if path:
        with open(path, "w") as f:
            json.dump(out, f, default=str)


def step_set_shapes(step_set: str, quick: bool = False) -> tuple[dict, dict]:
    """The GEMM and glue keyword arguments of a step set: {} for the default (Llama-3-8B at TP 1 and 2, M to
    2048), the small fit models at M to 1024 for "regimes" (kernels_probe/steps/step_shapes.py)."""
    if step_set not in STEP_SETS:
        raise ValueError(f"step set must be one of {', '.join(STEP_SETS)}, got {step_set!r}")
    if step_set == "default":
        return {}, {}
    models = REGIME_FIT_MODELS[:1] if quick else REGIME_FIT_MODELS
    shapes = [layer_shape(m, tp) for m, tp in models]
    return {"shapes": shapes, "m_grid": REGIME_M_GRID}, {"shapes": shapes, "m_grid": REGIME_GLUE_M_GRID}


def run_step_ops(flusher, device, *, quick: bool, plan=None, step_set: str = "default") -> dict:
    """Phase 1 (no FlashInfer needed, runs while its kernels build): GEMMs and the torch glue.
    With a WorkloadProbePlan: that workload's GEMM shapes, weight dtype and tokens only."""
    out = {"step_ops": [], "steps": [], "skipped": [], "timings_s": {}}
    budget = 0.01 if quick else 0.015
    t0 = time.perf_counter()
    wkw, gkw = step_set_shapes(step_set, quick)
    if plan is not None:
        wkw = {"shapes": [plan.shape], "m_grid": plan.gemm_m, "dtypes": [plan.weight_dtype]}
        gkw = {"shapes": [plan.shape], "m_grid": plan.gemm_m}
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
        from kernels_probe.moe.moe_probe import measure_moe

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
                   held_out: bool = True, plan=None, step_set: str = "default") -> dict:
    """Phase 2: fused glue (FlashInfer), single-GPU steps, then all-reduce and TP-2 steps where 2+ GPUs
    are visible. Adds to `out` (phase 1's dict) and returns it. The "regimes" step set: its fit models' fused
    glue and layer graphs and its held-out steps only (no stepped workloads, no multi-GPU part)."""
    budget = 0.01 if quick else 0.015
    t0 = time.perf_counter()
    _, set_glue = step_set_shapes(step_set, quick)
    if plan is not None:
        set_glue = {"shapes": [plan.shape], "m_grid": plan.gemm_m}
    glue = "torch"
    if fi_ok:
        shape = layer_shape(GEMM_FIT_MODELS[0][0], 1)
        try:
            err = check_glue(shape, device)
            out["glue_fused_vs_torch_rel_err"] = err
            if err <= STEP_TOLERANCE:
                glue = "fused"
                r, s = measure_glue(flusher, device, ["fused"], quick=quick, budget_s=budget, **set_glue)
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
    from kernels_probe.steps.layer_graph import measure_layer_graphs

    lg_shapes = set_glue.get("shapes") or [layer_shape(GEMM_FIT_MODELS[0][0], 1)]
    lg_dtypes = (["bf16"] + (["fp8"] if has_fp8(device) else [])) if plan is None else [plan.weight_dtype]
    for shape in lg_shapes:
        r, s = measure_layer_graphs(flusher, device, shape, glue=glue, dtypes=lg_dtypes, quick=quick, budget_s=budget,
                                    m_grid=None if plan is None else plan.gemm_m)
        out["step_ops"] += r
        out["skipped"] += s
    out["timings_s"]["layer_graph_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    backends = [b for b in STEP_BACKENDS if fi_ok or b == "triton"]
    if step_set == "regimes":
        pts = regime_held_out_points(quick) if held_out else []
    else:
        pts = step_points(quick) + (held_out_points(quick) if held_out else [])
    moe_plan = plan is not None and getattr(plan, "moe", None) is not None
    if plan is not None:
        pts = [] if moe_plan else list(plan.steps)       # a MoE model's steps: the MoE step model below
    r, s = measure_steps(flusher, device, sm_count, quick=quick, backends=backends, glue=glue, points=pts,
                         shapes=None if plan is None else {plan.shape.model: plan.shape})
    out["steps"] += r
    out["skipped"] += s
    mpts = plan.moe_steps() if moe_plan else []
    if mpts:
        from kernels_probe.moe.moe_steps import GQA_MODES, measure_moe_steps

        modes = tuple(m for m in GQA_MODES if m[0] in backends)
        r, s = measure_moe_steps(flusher, device, sm_count, mpts, glue=glue, modes=modes, log=lambda msg: None)
        out["steps"] += r
        out["skipped"] += s
    out["timings_s"]["steps_s"] = time.perf_counter() - t0
    _checkpoint(out)
    out["step_glue"] = glue
    out["step_backends"] = backends
    n_gpu = torch.cuda.device_count()
    if n_gpu >= 2 and plan is None and step_set == "default":
        from kernels_probe.multi_gpu.collectives import run_multi_gpu

        t0 = time.perf_counter()
        out["multi_gpu_error"] = {}
        # every GPU count this host has (2, 4, 8): all-reduce rows and whole TP steps at each
        from kernels_probe.steps.step_shapes import multi_gpu_plan

        for n in [p["world"] for p in multi_gpu_plan(n_gpu, quick)]:
            mg = run_multi_gpu(n, quick=quick, backends=backends, glue=glue, tp_steps=True)
            out["step_ops"] += mg.get("step_ops", [])
            out["steps"] += mg.get("steps", [])
            out["skipped"] += mg.get("skipped", [])
            out["multi_gpu_error"][str(n)] = mg.get("error")
        out["timings_s"]["multi_gpu_s"] = time.perf_counter() - t0
    out["gpus_visible"] = n_gpu
    return out
