"""run_probe: ceilings, correctness and the timing grid on one CUDA GPU, into a calibration file."""

from __future__ import annotations

import gc
import os
import pathlib
import platform
import subprocess
import threading
import time

from cascade_plan.calibration_schema.quantities import FLOP_PER_S, HBM_BYTES_PER_S
from kernels_probe import PROBE_VERSION
from kernels_probe.attention.accounting import kernel_cost
from kernels_probe.attention.grid import BACKEND_MODULES, BACKENDS, KERNELS, AttentionConfig, named_grid
from kernels_probe.attention.precompile import precompile
from kernels_probe.attention.timed import SkippedKernel, TimedKernel
from kernels_probe.calibration_file import new_document, write_atomic

TOLERANCE = 1e-2  # max row-wise relative L2 error against the float32 reference
# Rows of at least RETIME_MIN_S, rows whose replays spread (p90 over RETIME_SPREAD x p10) and each pass's first row of
# a configuration are timed again after its other rows and keep the faster median (the first round's kept beside it).
# On an H100 first rows ran up to 17% slow at times (benchmarks/raw/device-2026-12-05c/conditions.json, docs/probe-
# notes.md "Probe 1.7.1"), and a 65 us row whose replays split between 58 and 67 us read 14% slow (device-2026-12-06e).
# A long row's ~20 ms budget holds only 10 replays; a second round costs ~27 ms a short row.
RETIME_MIN_S, RETIME_SPREAD = 100e-6, 1.1
NOTES = {
    "units": "seconds, bytes, FLOP; one attention layer (all KV heads of one layer on one GPU)",
    "bytes": "decode_*: every sequence reads its whole context (per-sequence floor, no cache reuse); "
             "unique_bytes: each distinct byte once. cascade_prefix/suffix: their KV + q + one fp32 state per row; "
             "cascade_merge: 2 states per row + bf16 output; cascade_total: prefix once per group + suffixes + q + "
             "output (the fused floor). See docs/probe.md.",
    "timing": "CUDA graph replays between CUDA events; L2 flushed by a read of >= 4x L2 before each repetition, "
              "outside the events; warm-up; median of 10-100 repetitions (p10/p90 given); rows of >= 100 us, rows "
              "whose p90 exceeds 1.1x their p10 and each pass's first row of a configuration timed again after the "
              "configuration's other rows, the faster round kept (first_round_median_s: the other).",
    "max_rel_err": "max over (sequence, query head) rows of ||out - ref||2 / ||ref||2 against a float32 reference "
                   "computed directly (no LSE merge) on fresh random data; outputs owned by the probe are "
                   "poisoned with NaN first; null on rows that time a piece whose output is not final.",
    "layout": "paged KV [pages, page_size, kv_heads, head_dim] (NHD); pages of one sequence contiguous",
}
# What a run that skips the ceilings writes instead: the lowest numbers the format accepts
# (calibration_schema/quantities.py), so that its file is written and reads, and no real GPU's.
UNMEASURED_CEILINGS = {"hbm_read_bytes_per_s": HBM_BYTES_PER_S[0], "hbm_copy_bytes_per_s": HBM_BYTES_PER_S[0],
                       "bf16_matmul_flop_per_s": FLOP_PER_S[0], "graph_kernel_launch_s": 1.0}
STEP_NOTES = {
    "step_ops": "gemm: F.linear (bf16) or torch._scaled_mm (fp8, per-tensor scales, inputs pre-quantized) of M "
                "tokens against an N x K weight; bytes = weight + M (N + K) x 2; glue_layer: one layer's add-RMSNorm "
                "x2, RoPE, K/V append, SiLU-and-mul at M tokens; glue_step: embedding gather, final add-RMSNorm, "
                "argmax over the vocabulary; allreduce: marginal cost of one NCCL all-reduce of `bytes` in a graph "
                "of back-to-back ones (ranks aligned by a host barrier). Same timing as the attention rows.",
    "steps": "whole decode steps of a model preset with random bf16 weights, all layers in one CUDA graph; "
             "validation only, never fitted. lm_head under TP is vocab-parallel without the logits gather.",
}


def _device_info(torch, flashinfer_version) -> dict:
    import triton

    props = torch.cuda.get_device_properties(0)
    driver = None
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        if r.returncode == 0:
            driver = r.stdout.strip().splitlines()[0].strip() or None
    except Exception:
        pass
    return {
        "name": props.name,
        "sm_count": props.multi_processor_count,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
        "memory_bytes": int(props.total_memory),
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "flashinfer": flashinfer_version,
        "python": platform.python_version(),
    }


class _Ctx:
    def __init__(self, torch, device, sm_count, flusher, tune, progress=None, task=None):
        self.torch, self.device, self.sm_count, self.flusher, self.tune = torch, device, sm_count, flusher, tune
        self.measurements: list[dict] = []
        self.skipped: list[dict] = []

    def skip(self, cfg: AttentionConfig, backend: str, kernel: str, reason: str, variant=None):
        row = {"config": cfg.as_dict(), "backend": backend, "kernel": kernel, "reason": reason[:400]}
        if variant:
            row["variant"] = variant
        self.skipped.append(row)


def _background(torch, fn) -> threading.Thread:
    """fn() in a daemon thread, on a CUDA stream of its own (a JIT build beside the rows being timed)."""
    def run():
        with torch.cuda.stream(torch.cuda.Stream()):
            fn()
    th = threading.Thread(target=run, daemon=True)
    th.start()
    return th


def _err(torch, out, ref) -> float:
    from kernels_probe.attention.reference import max_rel_err

    c = ref.shape
    return max_rel_err(out.reshape(c), ref)


def _finite_or_none(x):
    import math

    return x if (x is not None and math.isfinite(x)) else None


def _backend_kernels(backend: str, data, ctx: _Ctx):
    """The kernels one backend module times on this configuration (imported only when asked for)."""
    import importlib

    mod = importlib.import_module(BACKEND_MODULES[backend])
    return mod.timed_kernels(data, sm_count=ctx.sm_count, tune=ctx.tune)


def _measure_config(ctx: _Ctx, cfg: AttentionConfig, backends: list[str], seed: int) -> None:
    torch = ctx.torch
    from kernels_probe.attention.data import build_data, reference_output

    try:
        data = build_data(cfg, ctx.device, seed=seed)
        ref = reference_output(data)
    except torch.cuda.OutOfMemoryError as exc:
        for b in backends:
            for k in KERNELS:
                ctx.skip(cfg, b, k, f"out of memory building inputs: {exc}")
        gc.collect()
        torch.cuda.empty_cache()
        return
    B, HQ, D = data.q.shape
    items: list[TimedKernel] = []
    for backend in (b for b in BACKEND_MODULES if b in backends):
        for k in _backend_kernels(backend, data, ctx):
            if isinstance(k, SkippedKernel):
                ctx.skip(cfg, k.backend, k.kernel, k.reason, k.variant)
            else:
                items.append(k)

    # correctness first, then timing
    errs: dict = {}
    failed: set = set()
    outs = {}
    for it in items:
        if it.check is None:
            continue
        try:
            o = it.check()
            torch.cuda.synchronize()
            e = _err(torch, o, ref)
            errs[it.key] = e
            outs[it.key] = o.detach().reshape(B, HQ, D).clone() if it.keep_output else None
            if not (e <= TOLERANCE):
                failed.add(it.backend if it.kernel == "cascade_total" else it.key)
                ctx.skip(cfg, it.backend, it.kernel, f"correctness: max_rel_err={e:.3g} > {TOLERANCE}", it.variant)
        except Exception as exc:
            failed.add(it.key)
            ctx.skip(cfg, it.backend, it.kernel, f"{type(exc).__name__}: {exc}", it.variant)
    vs_decode = {}     # a backend's cascade against its own per-sequence decode over shared pages
    for it in items:
        casc, dec = (it.backend, "cascade_total", it.variant), (it.backend, "decode_shared", it.variant)
        if it.kernel == "cascade_total" and it.keep_output and outs.get(casc) is not None \
                and outs.get(dec) is not None:
            from kernels_probe.attention.reference import max_rel_err

            vs_decode[casc] = max_rel_err(outs[casc], outs[dec].float())
    del outs

    casc_err = {it.backend: errs.get(it.key) for it in items if it.kernel == "cascade_total"}
    second_round: list[tuple[dict, object]] = []
    first_row = len(ctx.measurements)     # the index the first row timed here takes
    for it in items:
        backend, kernel, variant = it.key
        if it.key in failed or (kernel.startswith("cascade") and backend in failed):
            if it.check is None:
                ctx.skip(cfg, backend, kernel, "not timed: the composite failed its correctness check", variant)
            continue
        sustained = (backend, kernel, variant) == ("flashinfer", "cascade_total", "auto")   # FA3: timing.SUSTAIN_S
        try:
            fn = it.timed_callable()
            res = _time(ctx, fn)
            if sustained:
                res["sustained_s"] = _time(ctx, fn, sustained=True)["median_s"]
        except Exception as exc:
            ctx.skip(cfg, backend, kernel, f"timing failed: {type(exc).__name__}: {exc}", variant)
            torch.cuda.synchronize()
            continue
        row = {"backend": backend, "kernel": kernel, "variant": variant, "config": cfg.as_dict(),
               **kernel_cost(cfg, kernel), **res,
               "max_rel_err": _finite_or_none(errs.get(it.key)) if it.check is not None else None}
        if kernel == "cascade_total" and it.keep_output:
            row["max_rel_err_vs_decode"] = _finite_or_none(vs_decode.get(it.key))
        if sustained:
            from kernels_probe.timing import SUSTAINED

            row["timing"] = SUSTAINED
        if kernel in ("cascade_prefix", "cascade_suffix", "cascade_merge"):
            row["composite_max_rel_err"] = _finite_or_none(casc_err.get(backend))
        if it.launch is not None:
            row["launch"] = it.launch() if callable(it.launch) else it.launch
        ctx.measurements.append(row)
        spread = row.get("p90_s", 0.0) > RETIME_SPREAD * row.get("p10_s", float("inf"))
        if row["median_s"] >= RETIME_MIN_S or spread or len(ctx.measurements) == first_row + 1:
            second_round.append((row, fn))
    for row, fn in second_round:
        try:
            keep_faster(row, _time(ctx, fn))
        except Exception:   # the first round's figure stands
            torch.cuda.synchronize()
    del items, data, ref
    gc.collect()
    if torch.cuda.memory_reserved() > (16 << 30):
        torch.cuda.empty_cache()


def keep_faster(row: dict, again: dict) -> None:
    """A row timed a second time: it records its first round's median and keeps the faster round's figures."""
    row["first_round_median_s"] = row["median_s"]
    if again["median_s"] < row["median_s"]:
        row.update({k: again[k] for k in ("median_s", "p10_s", "p90_s", "n_reps") if k in again})


def _time(ctx: _Ctx, fn, sustained: bool = False) -> dict:
    """The row's burst timing (median, p10, p90 of ~20 ms of flushed replays), or with `sustained` the same replays
    back to back for timing.SUSTAIN_S (a step runs every layer's kernel so)."""
    from kernels_probe.timing import time_fn, time_sustained

    return time_sustained(fn, ctx.flusher) if sustained else time_fn(fn, ctx.flusher, budget_s=ctx.budget_per_item)


def run_probe(out_path: pathlib.Path, *, quick: bool = False, backends: list[str] | None = None, page_size: int = 16,
              console=None, time_budget_s: float | None = None, tune=None, configs: list[AttentionConfig] | None = None,
              skip_ceilings: bool = False, step: bool = False, attention: bool = True, grid: str = "full",
              held_out: bool = True, plan=None, mla: bool | str = False, step_set: str = "default",
              owed: dict[str, list[AttentionConfig]] | None = None) -> dict:
    """Run ceilings, correctness and the timing grid; write the calibration JSON atomically; return it.
    `owed`: per backend, the only configurations to time (what an earlier file lacks: --only-missing)."""
    import torch
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from kernels_probe.attention import flashinfer_backend
    from kernels_probe.environment import missing_requirements
    from kernels_probe.timing import L2Flusher, measure_ceilings

    t_start = time.perf_counter()
    console = console or Console()
    missing = missing_requirements()
    if missing:
        raise RuntimeError("; ".join(missing))
    out_path = pathlib.Path(out_path)
    wanted = list(backends) if backends else list(BACKEND_MODULES)
    for b in wanted:
        if b not in BACKENDS:
            raise ValueError(f"unknown backend {b!r}; choose from {', '.join(BACKENDS)}")
    if "flashinfer-fa2" in wanted and "flashinfer" not in wanted:
        wanted.append("flashinfer")
    wanted = [b for b in wanted if b != "flashinfer-fa2"]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    tune = tune or DEFAULT_TUNE

    fi_ok, fi_reason = (False, "not requested")
    if "flashinfer" in wanted:
        fi_ok, fi_reason = flashinfer_backend.available()
    device_info = _device_info(torch, flashinfer_backend.version() if fi_ok else None)
    cfgs, grid_desc = named_grid(grid, quick=quick, page_size=page_size)
    if plan is not None:     # probe --workload: exactly that workload's shapes
        cfgs, step = list(plan.attention), plan.shape is not None     # an MLA plan builds no GQA layer
        grid_desc = {**grid_desc, "mode": "workload", "n_configs": len(cfgs), "workload": plan.describe()}
    if configs is not None:
        cfgs = list(configs)
        grid_desc = {**grid_desc, "mode": "custom", "n_configs": len(cfgs)}
    grid_desc["backends"] = wanted

    # FlashInfer JIT-compiles its kernels (minutes on a fresh machine): build them in a thread while
    # the Triton and torch rows are measured, then measure FlashInfer's rows in a second pass.
    fi_build: dict = {}
    fi_thread = glue_thread = None
    if fi_ok and not ((attention and cfgs) or step):   # MLA alone (or an MLA plan): its modules build on first use
        fi_build.update({"ok": True, "seconds": 0.0, "errors": [], "note": "decode/prefill modules not needed"})
    elif fi_ok:
        owed_fi = None if owed is None else {(c.head_dim, c.kv_dtype) for c in owed.get("flashinfer", ())}
        fi_thread = _background(torch, lambda: fi_build.update(
            flashinfer_backend.warm_build(device, {c.head_dim for c in cfgs}, owed_fi)))
        if step:  # the glue modules build concurrently (each is one ninja job of a few files)
            from kernels_probe.steps.glue import warm_build_glue

            glue_thread = _background(torch, lambda: fi_build.update(glue_errors=warm_build_glue(device)))

    flusher = L2Flusher(device_info["l2_bytes"] or (50 << 20), device)
    ctx = _Ctx(torch, device, device_info["sm_count"], flusher, tune)
    ctx.budget_per_item = 0.012 if quick else 0.02
    main_backends = [b for b in wanted if b != "flashinfer"]
    if not attention:
        cfgs = []
    def pass_configs(bs: list[str]) -> list[AttentionConfig]:
        return cfgs if owed is None else [c for c in cfgs if any(c in owed.get(b, ()) for b in bs)]

    passes = [(main_backends, pass_configs(main_backends))]
    if fi_ok:
        passes.append((["flashinfer"], pass_configs(["flashinfer"])))
    elif "flashinfer" in wanted:
        for c in cfgs:
            ctx.skip(c, "flashinfer", "*", fi_reason)
    total_steps = sum(len(p[1]) for p in passes) + 1
    deadline = (t_start + time_budget_s) if time_budget_s else None
    ceil_details: dict = {}
    timings: dict = {}
    precompiled: dict = {}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as progress:
        task = progress.add_task("ceilings", total=total_steps)
        t0 = time.perf_counter()
        if skip_ceilings:
            ceilings = dict(UNMEASURED_CEILINGS)
        else:
            ceilings, ceil_details = measure_ceilings(flusher, quick=quick)
        timings["ceilings_s"] = time.perf_counter() - t0
        progress.advance(task)
        step_out = None
        for pass_backends, pass_cfgs in passes:
            t0 = time.perf_counter()
            if step and step_out is None and (pass_backends == ["flashinfer"] or not pass_cfgs):
                from kernels_probe.steps.step_probe import run_step_ops

                progress.update(task, description="step parts: GEMMs and torch glue")
                step_out = run_step_ops(flusher, device, quick=quick, plan=plan, step_set=step_set)
                timings["step_ops_s"] = time.perf_counter() - t0
                t0 = time.perf_counter()
            if "triton" in pass_backends and pass_cfgs:   # every launch compiled at once, in threads
                progress.update(task, description="compiling the Triton kernels")
                precompiled.update(precompile(pass_cfgs, device, sm_count=ctx.sm_count, tune=tune))
            if pass_backends == ["flashinfer"] and fi_thread is not None:
                progress.update(task, description="building FlashInfer kernels (JIT)")
                fi_thread.join()
                timings["flashinfer_build_wait_s"] = time.perf_counter() - t0
                if not fi_build.get("ok"):
                    for c in pass_cfgs:
                        ctx.skip(c, "flashinfer", "*",
                                 "FlashInfer build failed: " + "; ".join(fi_build.get("errors", [])))
                    progress.advance(task, len(pass_cfgs))
                    continue
            for i, cfg in enumerate(pass_cfgs):
                progress.update(task, description=f"{'/'.join(pass_backends)} {cfg.label()}")
                if deadline is not None and time.perf_counter() > deadline:
                    for b in pass_backends:
                        ctx.skip(cfg, b, "*", "time budget of the run exhausted")
                else:
                    _measure_config(ctx, cfg, pass_backends, seed=1000 + i)
                progress.advance(task)
            timings["pass_" + "+".join(pass_backends) + "_s"] = time.perf_counter() - t0
        mla_out = None
        if (mla or getattr(plan, "mla", ())) and fi_ok and fi_build.get("ok"):   # a grid name, or a plan's shapes
            from kernels_probe.attention.mla import measure_mla
            progress.update(task, description="MLA (FlashInfer, DeepSeek-V3 shape)")
            t0 = time.perf_counter()
            mla_out = measure_mla(flusher, device, quick=quick, budget_s=ctx.budget_per_item, grid=mla, plan=plan,
                                  deadline=deadline)
            timings["mla_s"] = time.perf_counter() - t0
        moe_out = None
        if plan is not None and plan.shape is None and plan.moe is not None:   # an MLA + MoE plan (DeepSeek)
            moe_out = _mla_moe_plan(plan, flusher, device, device_info["sm_count"], fi_ok and fi_build.get("ok"),
                                    ctx.budget_per_item, deadline, timings)
        if step:
            from kernels_probe.steps.step_probe import run_step_ops, run_step_probe

            if step_out is None:
                step_out = run_step_ops(flusher, device, quick=quick, plan=plan, step_set=step_set)
            progress.update(task, description="step parts: fused glue, whole steps, all-reduce")
            t0 = time.perf_counter()
            for th in filter(None, (fi_thread, glue_thread)):
                th.join()
            if fi_ok and fi_build.get("ok") and fi_build.get("glue_errors"):  # retry once, alone
                fi_build["glue_errors_first_try"] = fi_build["glue_errors"]
                fi_build["glue_errors"] = warm_build_glue(device)
            timings["step_flashinfer_wait_s"] = time.perf_counter() - t0
            fi_step = fi_ok and bool(fi_build.get("ok")) and not fi_build.get("glue_errors")
            step_out = run_step_probe(flusher, device, device_info["sm_count"], quick=quick, fi_ok=fi_step,
                                      out=step_out, held_out=held_out, plan=plan, step_set=step_set)
            timings["step_probe_s"] = time.perf_counter() - t0
    timings["total_s"] = time.perf_counter() - t_start
    timings["measuring_s"] = timings["total_s"] - timings.get("flashinfer_build_wait_s", 0.0) - \
        timings.get("step_flashinfer_wait_s", 0.0) - timings.get("moe_glue_build_s", 0.0)   # JIT builds apart
    notes = {**NOTES, "ceiling_details": ceil_details, "run_timings_s": timings,
             "flashinfer": {"importable": fi_ok, "reason": fi_reason or None, "build": fi_build or None},
             "tune": {k: getattr(tune, k) for k in tune.__dataclass_fields__},
             "triton_precompile": precompiled or None, "tolerance": TOLERANCE,
             "env": {k: os.environ.get(k) for k in ("FLASHINFER_CUDA_ARCH_LIST", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS")}}
    ceilings = {k: float(v) for k, v in ceilings.items()}
    doc = new_document(device=device_info, ceilings=ceilings, grid=grid_desc, measurements=ctx.measurements,
                       skipped=ctx.skipped, notes=notes)
    doc["probe_version"] = PROBE_VERSION
    if mla_out is not None:
        doc["mla"], doc["mla_skipped"] = mla_out
    if moe_out is not None:
        doc["step_ops"], doc["steps"], doc["step_skipped"] = moe_out
    if step_out is not None:
        doc["step_ops"], doc["steps"], doc["step_skipped"] = (step_out.pop(k) for k in ("step_ops", "steps", "skipped"))
        doc["notes"]["step_probe"] = {**step_out, **STEP_NOTES}
    write_atomic(out_path, doc)
    return doc


def _mla_moe_plan(plan, flusher, device, sm_count: int, fi_ok: bool, budget_s: float, deadline, timings: dict):
    """An MLA + MoE workload's routed experts (grouped GEMM rows at its M, Triton, both routings) and its whole
    first / middle / final steps as one GPU's shard (kernels_probe/moe/moe_steps.py): (step_ops, steps, skipped)."""
    from kernels_probe.moe.moe_probe import measure_moe
    from kernels_probe.moe.moe_steps import measure_moe_steps
    from kernels_probe.steps.step_probe import has_fp8

    t0 = time.perf_counter()
    if fi_ok:                 # the steps' FlashInfer glue modules (JIT on a fresh machine): built first, apart
        from kernels_probe.steps.glue import warm_build_glue

        warm_build_glue(device)   # a failure shows in the steps' skipped rows
        timings["moe_glue_build_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
    dtypes = [d for d in [plan.weight_dtype] if d == "bf16" or has_fp8(device)]
    ops, skipped = measure_moe(flusher, device, [plan.moe], m_grid=plan.gemm_m, dtypes=dtypes, backends=("triton",),
                               budget_s=budget_s, deadline_s=deadline, log=lambda msg: None)
    timings["moe_s"] = time.perf_counter() - t0
    steps: list = []
    pts = plan.moe_steps()
    if pts and fi_ok:
        t0 = time.perf_counter()
        steps, sk = measure_moe_steps(flusher, device, sm_count, pts, deadline_s=deadline, log=lambda msg: None)
        skipped += sk
        timings["moe_steps_s"] = time.perf_counter() - t0
    return ops, steps, skipped
