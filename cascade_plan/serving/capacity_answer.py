"""What a capacity search tells a user: the one-line answer, and how to launch the best candidate in vLLM.

The best candidate is priced once more through `assess` (the estimate with its verdict and evidence), so
the verdict, the measured kernel error and vLLM's gate quoted beside the launch line are `estimate`'s for
that configuration, not a second model of it."""

from __future__ import annotations

import msgspec

from cascade_plan.cost.estimate import Estimate
from cascade_plan.inputs.model_spec import ModelSpec
from cascade_plan.inputs.workload import Scenario
from cascade_plan.serving.capacity_search import (
    TARGET_WORDS,
    UNCALIBRATED_BACKEND,
    Candidate,
    SearchResult,
    candidate_choice,
    candidate_scenario,
)
from cascade_plan.units import fmt_seconds

# What each priced backend's cascade is, next to what vLLM runs (its FLASH_ATTN backend's cascade path).
BACKEND_WORDS = {
    "flashinfer": "FlashInfer's MultiLevelCascadeAttentionWrapper (FA3 prefill on Hopper), as engines calling "
                  "FlashInfer's cascade API run it",
    "flashinfer-fa2": "FlashInfer's cascade with its FA2 prefill levels",
    "triton": "the probe's own Triton kernels: what is attainable, shipped in no engine",
    "torch": "torch's flash attention (duplicated prefixes, no block table): a baseline",
    UNCALIBRATED_BACKEND: "the default efficiencies (no kernel measured for this GPU and KV dtype)",
}
SGLANG_NOTE = ("SGLang: no cascade decode on main (its radix cache shares prefix storage, not the reads); it runs "
               "the cascade-off numbers")


def model_ref(model: ModelSpec) -> str:
    """What `vllm serve` takes for the model: the Hugging Face repo a preset cites, else its id or file."""
    from cascade_plan.inputs.hf_ids import repo_in_source

    return repo_in_source(model.source or "") or model.id


class Launch(msgspec.Struct, frozen=True):
    command: str                  # vllm serve ...
    vllm_cascades: bool | None    # vLLM's gate on the first step, opted in (None: cascade off asked)
    gate: str                     # why, in words
    kernels: str                  # what the numbers priced, beside what vLLM runs
    sglang: str
    verdict: str                  # estimate's go/no-go for the candidate's first wave
    numerics: str | None          # the chosen kernels' measured error against float32

    def to_json(self) -> dict:
        return msgspec.structs.asdict(self)


def best_estimate(scn: Scenario, result: SearchResult, c: Candidate, reserve: float) -> Estimate:
    """`estimate` with its evidence for the candidate's configuration (its first wave)."""
    from cascade_plan.planning.params_select import select_params
    from cascade_plan.planning.verdict_evidence import assess

    at = candidate_scenario(scn, result, c)
    return assess(at, select_params(at, candidate_choice(c)), reserve)


def launch(scn: Scenario, c: Candidate, est: Estimate) -> Launch:
    from cascade_plan.engine.attention_backend import attention_backend
    from cascade_plan.engine.engine_gate import engine_view

    m = scn.model
    at = est.scenario
    kv = "fp8" if c.kv_dtype == "fp8" else "auto"
    parts = [f"vllm serve {model_ref(m)}", f"-tp {c.tp}", f"--kv-cache-dtype {kv}"]
    if c.weight_dtype == "fp8":
        parts.append("--quantization fp8")
    parts.append(f"--max-num-seqs {c.sequences}")
    if not at.prefix_caching:
        parts.append("--no-enable-prefix-caching")
    gate, cascades = "cascade off: vLLM's default (cascade disabled) runs this", None
    if c.cascade:
        default = attention_backend(at.hardware, m.attention == "mla", None)
        if m.attention == "mla":
            gate, cascades = "vLLM's MLA backends have no cascade path: vLLM would not cascade this model", False
        else:
            parts.append("--no-disable-cascade-attn")
            if default.name != "FLASH_ATTN":
                parts.append("--attention-backend FLASH_ATTN")
            view = engine_view(est, "FLASH_ATTN")
            cascades = view.opted_in.used
            gate = (f"vLLM's gate (opted in, FLASH_ATTN) {'would' if cascades else 'would not'} cascade the first "
                    f"step: {view.opted_in.reason}")
            if not cascades:
                gate += (" vLLM would run this batch at the cascade-off numbers; a cascade over every shared level "
                         "needs an engine that calls FlashInfer's multi-level cascade")
    numerics = est.numerics.get("text") if est.numerics is not None else None
    return Launch(command=" ".join(parts), vllm_cascades=cascades, gate=gate,
                  kernels=f"priced: {BACKEND_WORDS.get(c.backend, c.backend)}; vLLM's cascade runs FlashAttention's "
                          "kernels (FLASH_ATTN)",
                  sglang=SGLANG_NOTE, verdict=est.verdict.text, numerics=numerics)


def _describe(c: Candidate) -> str:
    gpus = f"{c.gpus} x {c.hardware.upper()}" + (f" at TP {c.tp}" if c.tp > 1 else "")
    kern = c.backend if c.backend != UNCALIBRATED_BACKEND else "default efficiencies (uncalibrated)"
    return (f"{gpus}, {kern}, cascade {'on' if c.cascade else 'off'}, {c.kv_dtype} KV"
            + (f", {c.weight_dtype} weights" if c.weight_dtype != "bf16" else ""))


def one_line_answer(result: SearchResult) -> str:
    """"2 x H200 at TP 2, triton, cascade on, fp8 KV: 23 ms TPOT, rollout 41 s; cascade off needs 4 GPUs"."""
    best = result.best
    if best is None:
        return no_candidate_line(result)
    waves = f" in {best.waves} waves" if best.waves > 1 else ""
    head = (f"{_describe(best)}: {fmt_seconds(best.tpot_s)} TPOT, rollout {fmt_seconds(best.rollout_s)}{waves} "
            f"({best.sequences:,} sequences at once)")
    other = result.best_with(not best.cascade)
    mode = "off" if best.cascade else "on"
    if other is None:
        tail = f"no configuration searched meets the targets with cascade {mode}"
    elif other.gpus > best.gpus:
        tail = f"cascade {mode} needs {other.gpus} GPUs"
    else:
        tail = (f"cascade {mode} needs as many GPUs ({other.gpus}) at "
                f"{other.tokens_per_s_per_gpu / best.tokens_per_s_per_gpu:.2f}x the tokens/s per GPU")
    return f"{head}; {tail}"


def no_candidate_line(result: SearchResult) -> str:
    c = result.closest
    if c is None:
        return "no configuration searched fits in memory: give more GPUs (--tp, --max-gpus) or a smaller KV dtype"
    name, ratio = max(c.misses, key=lambda m: m[1])
    bound = result.targets.given()[name]
    slow = (c.margin.get("time_range") or [1.0, 1.0])[1]      # uncalibrated: judged at the slow end of its range
    value = {"tpot_s": c.tpot_s, "worst_step_s": c.worst_step_s, "rollout_s": c.rollout_s,
             "min_tokens_per_s": c.tokens_per_s}[name]
    shown = (f"{value / slow:,.0f} < {bound:,.0f} tokens/s" if name == "min_tokens_per_s"
             else f"{fmt_seconds(value * slow)} > {fmt_seconds(bound)}")
    worst = " (the slow end of its uncalibrated range)" if slow != 1.0 else ""
    return (f"no configuration meets every target; the closest is {_describe(c)} ({c.sequences:,} sequences at "
            f"once), whose {TARGET_WORDS[name]} misses by {ratio - 1:.1%}: {shown}{worst}")
