"""One workload's answer: bytes, step times at chosen steps, run totals, and the seed's go/no-go."""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.capacity import DEFAULT_RESERVE_FRACTION
from cascade_plan.cost.cost_model import ATTENTION_OPS, StepCosts, gpu_shape, kv_bytes_per_token
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.coverage import attention_sources, grid_notes
from cascade_plan.cost.flat_tree import FlatTree, flatten
from cascade_plan.cost.memory_fit import MemoryFit, memory_fit
from cascade_plan.cost.ops.attention import FITTED, MEASURED
from cascade_plan.cost.ops.moe import source as moe_source
from cascade_plan.cost.ops.shape_anchor import ANCHORED_SOURCE
from cascade_plan.cost.run_load import tree_costs_at, tree_run_costs
from cascade_plan.cost.verdict import GO_RATIO, MARGINAL_RATIO, Verdict, does_not_fit, go_no_go  # noqa: F401
from cascade_plan.envelope import envelope
from cascade_plan.inputs.workload import Scenario


class OpStep(msgspec.Struct, frozen=True):
    """One op of one summarised step (cost/ops/registry.py): what `estimate --json` lists per mode."""

    name: str
    bytes: float
    flops: float
    time_s: float
    source: str


class ModeStep(msgspec.Struct, frozen=True):
    attention_bytes: float   # logical KV (+ merge) bytes the attention kernels read
    hbm_bytes: float         # after L2 hits (per-sequence over shared pages); equals attention_bytes for cascade
    prefix_bytes: float
    suffix_bytes: float
    merge_bytes: float
    attention_flops: float
    attention_s: float
    step_s: float
    attention_source: str = ""   # "measured (interpolated)" or "fitted model" (cost/ops/attention.py)
    ops: tuple[OpStep, ...] = ()  # the mode's step as its ops; their times add up to step_s


class StepSummary(msgspec.Struct, frozen=True):
    label: str
    step: int                # 1-based decode step
    active_seqs: int
    weight_bytes: float
    weight_s: float          # the weight GEMMs (lm_head included)
    per_sequence: ModeStep
    cascade: ModeStep
    glue_s: float = 0.0      # engine glue (norms, RoPE, KV append, activation, embedding, sampling)
    comm_s: float = 0.0      # tensor-parallel all-reduces

    def breakdown(self, mode: ModeStep) -> dict:
        """A mode's step split into its parts (seconds; they add up to step_s)."""
        return {"attention_s": mode.attention_s, "gemm_s": self.weight_s, "glue_s": self.glue_s,
                "comm_s": self.comm_s}

    @property
    def speedup(self) -> float:
        return self.per_sequence.step_s / self.cascade.step_s


class Estimate(msgspec.Struct, frozen=True):
    scenario: Scenario
    params: CostParams
    flat: FlatTree
    costs: StepCosts             # at the steps the run is summed over (every step of all but very long runs)
    step_weights: np.ndarray     # run total of a per-step array x: (x * step_weights).sum()
    decode_steps: int
    kv_bytes_per_token: float
    steps: list[StepSummary]
    run_per_sequence_s: float
    run_cascade_s: float
    output_tokens: int
    verdict: Verdict
    warnings: list[str] = msgspec.field(default_factory=list)
    memory: MemoryFit | None = None
    # where this workload leaves the calibration's measured grid (cost/coverage.py); joins params.notes
    coverage: tuple[str, ...] = ()
    # per mode: where the attention times come from (measured rows or the fitted model), cost/coverage.py
    attention_source: dict | None = None
    # MoE models: where the routed experts' times come from (measured rows or the model), cost/ops/moe.py
    moe_source: dict | None = None
    # the measured error against float32 of the kernels behind the numbers (cascade_plan/planning/kernel_numerics.py,
    # KernelNumerics.to_json); None for the defaults and the ideal bound, which have no kernel behind them
    numerics: dict | None = None

    @property
    def run_speedup(self) -> float:
        return self.run_per_sequence_s / self.run_cascade_s

    @property
    def final_step(self) -> StepSummary:
        return self.steps[-1]


def _source(mask, idx: int, mode: str, measured: str | None = None, anchored=None) -> str:
    if mask is None:
        return mode if mode in ("ideal", "default") else FITTED
    if mask[idx] > 0:
        return measured or MEASURED
    return ANCHORED_SOURCE if anchored is not None and anchored[idx] > 0 else FITTED


def _ops(ops, idx: int, attention_source: str) -> tuple[OpStep, ...]:
    """A mode's ops at one summarised step; its attention passes say where this step's attention comes from."""
    return tuple(OpStep(name=op.name, bytes=float(np.asarray(op.bytes)[idx]), flops=float(np.asarray(op.flops)[idx]),
                        time_s=float(np.asarray(op.time_s)[idx]),
                        source=attention_source if op.name in ATTENTION_OPS else op.source) for op in ops)


def _summary(c: StepCosts, idx: int, label: str, mode: str = "calibrated", measured: str | None = None) -> StepSummary:
    ps_source = _source(c.ps_measured, idx, mode, measured, c.ps_anchored)
    cas_source = _source(c.cas_measured, idx, mode, measured, c.cas_anchored)
    # what the priced kernel reads: the probe's own kernel reads a page block's shared pages once for its siblings
    spared = float(c.ps_spared_bytes[idx])
    ps = ModeStep(attention_bytes=float(c.ps_attention_bytes[idx]) - spared, hbm_bytes=float(c.ps_hbm_bytes[idx]),
                  prefix_bytes=float(c.ps_prefix_bytes[idx]) - spared,
                  suffix_bytes=float(c.ps_attention_bytes[idx] - c.ps_prefix_bytes[idx]), merge_bytes=0.0,
                  attention_flops=float(c.ps_flops[idx]), attention_s=float(c.ps_attention_s[idx]),
                  step_s=float(c.ps_step_s[idx]), attention_source=ps_source, ops=_ops(c.ps_ops, idx, ps_source))
    cas_bytes = float(c.cas_attention_bytes[idx])
    cas = ModeStep(attention_bytes=cas_bytes, hbm_bytes=cas_bytes, prefix_bytes=float(c.cas_prefix_bytes[idx]),
                   suffix_bytes=float(c.cas_suffix_bytes[idx]), merge_bytes=float(c.cas_merge_bytes[idx]),
                   attention_flops=float(c.cas_prefix_flops[idx] + c.cas_suffix_flops[idx]),
                   attention_s=float(c.cas_attention_s[idx]), step_s=float(c.cas_step_s[idx]),
                   attention_source=cas_source, ops=_ops(c.cas_ops, idx, cas_source))
    return StepSummary(label=label, step=int(c.steps[idx]), active_seqs=int(c.active_seqs[idx]),
                       weight_bytes=float(c.weight_bytes[idx]), weight_s=float(c.weight_s[idx]),
                       per_sequence=ps, cascade=cas, glue_s=0.0 if c.glue_s is None else float(c.glue_s[idx]),
                       comm_s=0.0 if c.comm_s is None else float(c.comm_s[idx]))


def with_routing(params: CostParams, routing: str) -> CostParams:
    """The parameters with their routed experts priced at the workload's routing (unchanged for balanced)."""
    if params.step is None or params.step.moe_routing == routing:
        return params
    return msgspec.structs.replace(params, step=msgspec.structs.replace(params.step, moe_routing=routing))


def _priced_run(scn: Scenario, params: CostParams):
    """(params at the workload's routing, its flat tree, its GPU shape, the whole run's costs, the longest context,
    where the run reaches beyond the measured grid): what `estimate` and `run_speedup` both price the run from."""
    params = with_routing(params, scn.moe_routing)
    flat = flatten(scn.tree)
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    run = tree_run_costs(flat, g, scn.model, scn.weight_dtype, scn.tp, params, scn.prefix_caching)
    longest = int((flat.leaf_shared + flat.leaf_private + flat.leaf_output).max())
    coverage = grid_notes(run.costs, params, g.layers, g.kv_heads, g.kv_bytes_per_token, longest, scn.prefix_caching)
    return params, flat, g, run, longest, coverage


def run_speedup(scn: Scenario, params: CostParams) -> tuple[float, list[str]]:
    """The whole run's speedup and where it reaches beyond the measured grid, priced exactly as `estimate` prices
    them, without its per-step summaries, memory fit and verdict: what a verdict's evidence compares across
    sources of numbers."""
    _, _, _, run, _, coverage = _priced_run(scn, params)
    return run.run_total(run.costs.ps_step_s) / run.run_total(run.costs.cas_step_s), coverage


def estimate(scn: Scenario, params: CostParams, reserve_fraction: float = DEFAULT_RESERVE_FRACTION) -> Estimate:
    """The answer for one workload. A configuration whose weights or batch do not fit in memory (after
    `reserve_fraction` of it) gets its numbers but no go/no-go: the verdict says why and what fits."""
    params, flat, g, run, longest, coverage = _priced_run(scn, params)
    k = run.decode_steps
    picks = [1, (k - 1) // 2 + 1, k]
    at = tree_costs_at(flat, np.array(sorted(set(picks)), float), g, scn.model, scn.weight_dtype, scn.tp, params,
                       scn.prefix_caching)
    index = {int(step): i for i, step in enumerate(at.steps)}
    words = params.measured.label if params.measured else None
    steps = [_summary(at, index[p], label, params.mode, words) for p, label in zip(picks, ("first", "middle", "final"))]

    first = steps[0]
    run_ps, run_cas = run.run_total(run.costs.ps_step_s), run.run_total(run.costs.cas_step_s)
    redundant = first.per_sequence.prefix_bytes - first.cascade.prefix_bytes
    mem = memory_fit(scn, reserve_fraction, flat)
    verdict = (go_no_go(redundant, first.weight_bytes, run_ps / run_cas, params.mode) if mem.fits
               else does_not_fit(mem, redundant, first.weight_bytes, params.mode))

    warnings = []
    m = scn.model
    if m.sliding_window and longest > m.sliding_window:
        warnings.append(f"{m.id} uses a {m.sliding_window}-token sliding window, shorter than the longest context "
                        f"({longest}); the model here assumes full attention, and engines do not cascade such layers.")
    if m.alibi:
        warnings.append(f"{m.id} uses ALiBi; vLLM does not use cascade attention with ALiBi.")
    if not scn.prefix_caching:
        warnings.append("prefix_caching is off: each sequence holds its own copy of the prefix, so there are no "
                        "shared physical blocks and engines cannot cascade over them.")

    return Estimate(
        scenario=scn, params=params, flat=flat, costs=run.costs, step_weights=run.weights, decode_steps=k,
        kv_bytes_per_token=kv_bytes_per_token(m, scn.kv_dtype, scn.tp), steps=steps,
        run_per_sequence_s=run_ps, run_cascade_s=run_cas,
        output_tokens=int((flat.leaf_seqs * flat.leaf_output).sum()), verdict=verdict, warnings=warnings,
        memory=mem, coverage=coverage, attention_source=attention_sources(run.costs, run.weights, params),
        moe_source=_with_layer(moe_source(m, scn.tp, scn.weight_dtype, run.costs.active_seqs, run.weights,
                                          params.step), m, params.step, scn.tp, scn.weight_dtype),
    )


def _with_layer(src: dict | None, model, parts, tp: int, weight_dtype: str) -> dict | None:
    """The MoE source with what prices the rest of each MoE layer (router, alignment, combine)."""
    from cascade_plan.cost.ops.moe_dispatch import describe

    return None if src is None else {**src, "layer": describe(model, parts, tp, weight_dtype)}


def _mode_json(m: ModeStep) -> dict:
    return {"attention_bytes": m.attention_bytes, "hbm_bytes": m.hbm_bytes, "prefix_bytes": m.prefix_bytes,
            "suffix_bytes": m.suffix_bytes, "merge_bytes": m.merge_bytes, "attention_flops": m.attention_flops,
            "attention_s": m.attention_s, "step_s": m.step_s, "attention_source": m.attention_source,
            "ops": [msgspec.structs.asdict(op) for op in m.ops]}


def _step_json(s: StepSummary) -> dict:
    return {"step": s.step, "active_sequences": s.active_seqs, "weight_bytes": s.weight_bytes,
            "weight_s": s.weight_s, "gemm_s": s.weight_s, "glue_s": s.glue_s, "comm_s": s.comm_s,
            "per_sequence": {**_mode_json(s.per_sequence), "breakdown": s.breakdown(s.per_sequence)},
            "cascade": {**_mode_json(s.cascade), "breakdown": s.breakdown(s.cascade)}, "speedup": s.speedup}


def step_parts_json(params: CostParams, tp: int) -> dict | None:
    """Where the non-attention parts of the step come from (None: the seed's single weights term)."""
    sp = params.step
    if sp is None:
        return None
    ar = sp.allreduce_for(tp)
    return {"source": sp.source, "glue_variant": sp.glue.variant, "gemm_tables": sorted(sp.gemm),
            "allreduce": None if ar is None else {"gpus": ar.gpus, "origin": ar.origin, "algorithm": ar.algorithm,
                                          "label": ar.label, "basis": ar.basis},
            "notes": list(sp.notes)}


def run_breakdown(c: StepCosts) -> dict:
    """Seconds over the whole run, per part and mode."""
    other = {"gemm_s": float(c.weight_s.sum()), "glue_s": float(0 if c.glue_s is None else c.glue_s.sum()),
             "comm_s": float(0 if c.comm_s is None else c.comm_s.sum())}
    return {"per_sequence": {"attention_s": float(c.ps_attention_s.sum()), **other},
            "cascade": {"attention_s": float(c.cas_attention_s.sum()), **other}}


def to_json(est: Estimate, version: str | None = None) -> dict:
    """Stable keys (documented in README.md); SI units throughout. `version`: the writer's (default: this one)."""
    scn, flat = est.scenario, est.flat
    first = est.steps[0]
    return {
        **envelope(tool_version=version),
        "workload": scn.name,
        "model": scn.model.id,
        "hardware": scn.hardware.id,
        "kv_dtype": scn.kv_dtype,
        "weight_dtype": scn.weight_dtype,
        "tp": scn.tp,
        "mode": est.params.mode,
        "calibration": {"mode": est.params.mode, "source": est.params.source, "backend": est.params.backend,
                        "numbers": est.params.numbers, "label": est.params.label},
        "sequences": flat.total_seqs,
        "decode_steps": est.decode_steps,
        "output_tokens": est.output_tokens,
        "kv_bytes_per_token": est.kv_bytes_per_token,
        "prefix_nodes": [{"tokens": int(t), "instances": int(n), "level": int(lv),
                          "kv_bytes": float(t * est.kv_bytes_per_token)}
                         for t, n, lv in zip(flat.node_tokens, flat.node_instances, flat.node_level)],
        "unique_prefix_kv_bytes": float(flat.unique_prefix_tokens * est.kv_bytes_per_token),
        "weight_bytes": first.weight_bytes,
        "weight_s": first.weight_s,
        **{f"{s.label}_step": _step_json(s) for s in est.steps},
        "step_parts": step_parts_json(est.params, scn.tp),
        "run": {"per_sequence_s": est.run_per_sequence_s, "cascade_s": est.run_cascade_s,
                "speedup": est.run_speedup, "breakdown": run_breakdown(est.costs),
                "per_sequence_tokens_per_s": est.output_tokens / est.run_per_sequence_s,
                "cascade_tokens_per_s": est.output_tokens / est.run_cascade_s},
        "go_no_go": est.verdict.to_json(),
        "numerics": est.numerics,
        "memory": est.memory.to_json() if est.memory else None,
        "warnings": est.warnings,
        "coverage": list(est.coverage),
        "attention_source": est.attention_source,
        **({"moe_source": est.moe_source} if est.moe_source is not None else {}),
    }
