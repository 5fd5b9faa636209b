"""The markdown report: one self-contained file (plots beside it) per set of workloads, written in
the seed's style so a design review can check every number."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from cascade_plan.cost.breakeven import BreakevenResult
from cascade_plan.cost.capacity import preemption_warnings
from cascade_plan.cost.coverage import sources_line
from cascade_plan.cost.estimate import Estimate
from cascade_plan.cost.verdict import speedup_words
from cascade_plan.engine.engine_gate import EngineView
from cascade_plan.engine.vllm_source import CASCADE_DISABLED_BY_DEFAULT, CUDA_GRAPH_NOTE, VLLM_VERSION_MODELLED
from cascade_plan.inputs.dtypes import ELEMENT_BYTES
from cascade_plan.inputs.ids import slug as safe_slug  # one rule for every folder named after a workload
from cascade_plan.inputs.workload import TreeNode
from cascade_plan.planning.params_select import sources_note
from cascade_plan.render.breakeven_report import breakeven_cell, memory_line
from cascade_plan.render.check_report import md_cell
from cascade_plan.render.step_table import glue_label, step_rows
from cascade_plan.serving.workload_analysis import WorkloadReport
from cascade_plan.units import fmt_bytes_binary, fmt_bytes_decimal, fmt_count, fmt_seconds
from cascade_plan.version import __version__


def _tree_lines(node: TreeNode, depth: int = 0) -> list[str]:
    pad = "  " * depth
    what = f"{node.name}: " if node.name else ""
    copies = f" x {node.copies} copies" if node.copies > 1 else ""
    if node.children:
        line = f"{pad}- {what}{node.tokens:,} shared tokens{copies}"
        return [line] + [x for c in node.children for x in _tree_lines(c, depth + 1)]
    private = f", {node.private_tokens:,} private prompt tokens each" if node.private_tokens else ""
    return [f"{pad}- {what}{node.tokens:,} shared tokens{copies}, {node.samples} samples each{private}, "
            f"{node.output_tokens:,} output tokens"]


def _inputs(r: WorkloadReport) -> list[str]:
    s = r.est.scenario
    m, hw = s.model, s.hardware
    heads = (f"{m.num_q_heads} query heads over one MLA latent of {m.kv_lora_rank}+{m.qk_rope_head_dim}"
             if m.attention == "mla" else f"{m.num_q_heads} query / {m.num_kv_heads} KV heads of {m.head_dim}")
    moe = (f", MoE {m.experts_per_token} of {m.num_experts} experts ({fmt_count(m.active_params)} active)"
           if m.is_moe else "")
    return [
        "### Inputs", "",
        f"- **Model** `{m.id}`: {m.num_layers} layers, {heads}, {fmt_count(m.total_params)} parameters{moe} "
        f"([config]({m.source}))",
        f"- **GPU** `{hw.id}` ({hw.name}): {hw.hbm_bytes_per_s / 1e12:.3g} TB/s, {fmt_bytes_binary(hw.memory_bytes)}, "
        f"{hw.dense_bf16_flop_per_s / 1e12:,.0f} TFLOP/s dense bf16, {fmt_bytes_binary(hw.l2_bytes)} L2, "
        f"{hw.sm_count} SMs",
        f"- **KV** {s.kv_dtype}, **weights** {s.weight_dtype}, **TP** {s.tp}, prefix caching "
        f"{'on' if s.prefix_caching else 'off'}, {s.block_size}-token KV blocks",
        f"- **Batch**: {r.est.flat.total_seqs} sequences, {r.est.decode_steps:,} decode steps; the sharing tree:",
        "", *["  " + line for line in _tree_lines(s.tree)], "",
    ]


def _arithmetic(r: WorkloadReport) -> list[str]:
    est = r.est
    s, m, f = est.scenario, est.scenario.model, est.flat
    kvb = est.kv_bytes_per_token
    b = ELEMENT_BYTES[s.kv_dtype]
    if m.attention == "mla":
        per_token = (f"{m.num_layers} layers x ({m.kv_lora_rank} + {m.qk_rope_head_dim}) latent values x {b:g} bytes")
    else:
        kvh = -(-m.num_kv_heads // s.tp)
        per_token = f"2 (K and V) x {m.num_layers} layers x {kvh} KV heads per GPU x {m.head_dim} x {b:g} bytes"
    if s.kv_dtype in ("int8", "int4"):
        per_token += " + per-row scales"
    first, final = est.steps[0], est.final_step
    bw = s.hardware.hbm_bytes_per_s
    lines = ["### The arithmetic", "",
             f"One token of KV costs {per_token} = **{kvb:,.0f} bytes** ({fmt_bytes_binary(kvb)}) per GPU."]
    for tok, inst, lvl in zip(f.node_tokens, f.node_instances, f.node_level):
        lines.append(f"A {round(tok):,}-token shared node (level {lvl}, {round(inst):,} in the batch) is "
                     f"{fmt_bytes_binary(tok * kvb)} of KV.")
    wparams = first.weight_bytes / ELEMENT_BYTES[s.weight_dtype] * s.tp
    lines += [
        f"Weights read per step: {fmt_count(wparams)} parameters x {ELEMENT_BYTES[s.weight_dtype]:g} bytes / "
        f"TP {s.tp} = **{fmt_bytes_decimal(first.weight_bytes)}**, {fmt_seconds(first.weight_bytes / bw)} at "
        f"{bw / 1e12:.3g} TB/s "
        f"({fmt_seconds(first.weight_s)} in this mode).",
        *_rest_of_step(est),
        f"At the final step (k = {final.step:,}) per-sequence attention reads "
        f"**{fmt_bytes_binary(final.per_sequence.attention_bytes)}** "
        f"({final.active_seqs} sequences x their whole context), "
        f"{fmt_seconds(final.per_sequence.attention_bytes / bw)} at peak "
        f"bandwidth; cascade reads **{fmt_bytes_binary(final.cascade.attention_bytes)}** (prefix "
        f"{fmt_bytes_binary(final.cascade.prefix_bytes)} once, suffixes "
        f"{fmt_bytes_binary(final.cascade.suffix_bytes)}, "
        f"merge {fmt_bytes_binary(final.cascade.merge_bytes)}), {fmt_seconds(final.cascade.attention_bytes / bw)} at "
        f"peak.",
        f"The step goes from **{fmt_seconds(final.per_sequence.step_s)}** to **{fmt_seconds(final.cascade.step_s)}** "
        f"({final.speedup:.2f}x); at the first step the speedup is {first.speedup:.2f}x.", "",
    ]
    return lines


def _rest_of_step(est: Estimate) -> list[str]:
    """One line on the parts cascade does not touch, and where their numbers come from."""
    sp = est.params.step
    if sp is None:
        return ["The rest of the step (engine glue, all-reduce) is not counted in this mode: the seed's arithmetic."]
    s = est.steps[0]
    ar = sp.allreduce_for(est.scenario.tp) if est.scenario.tp > 1 else None
    comm = (f", all-reduce {fmt_seconds(s.comm_s)} (2 per layer; {ar.label}: {ar.basis})" if ar is not None else "")
    return [f"The rest of the step, the same in both modes: GEMMs {fmt_seconds(s.weight_s)}, {glue_label(est)} "
            f"{fmt_seconds(s.glue_s)} ({sp.glue.variant} glue){comm}; step parts from {sp.source}."]


def _steps_table(est: Estimate) -> list[str]:
    cols = est.steps
    rows = ["| per GPU, one decode step | " + " | ".join(f"{s.label} (k={s.step:,})" for s in cols) + " |",
            "| --- |" + " ---: |" * len(cols)]
    for label, cells, bold in step_rows(est):
        mark = "**" if bold else ""
        rows.append(f"| {mark}{label}{mark} | " + " | ".join(f"{mark}{c}{mark}" for c in cells) + " |")
    return ["### Decode steps", "", *rows, ""]


def _run(est: Estimate) -> list[str]:
    n = est.decode_steps
    return ["### The whole run", "",
            "| mode | decode time | tokens/s | mean step |", "| --- | ---: | ---: | ---: |",
            f"| per-sequence | {fmt_seconds(est.run_per_sequence_s)} | "
            f"{est.output_tokens / est.run_per_sequence_s:,.0f} | "
            f"{fmt_seconds(est.run_per_sequence_s / n)} |",
            f"| cascade | {fmt_seconds(est.run_cascade_s)} | {est.output_tokens / est.run_cascade_s:,.0f} | "
            f"{fmt_seconds(est.run_cascade_s / n)} |", "",
            f"Average speedup over the run: **{est.run_speedup:.2f}x** ({est.output_tokens:,} output tokens).", ""]


def _breakeven(res: BreakevenResult) -> list[str]:
    sw = res.sweep
    s = int(sw.suffix_tokens[0])
    lines = ["### Breakeven", "",
             f"One decode step of {sw.n_groups} prompt group(s), each sequence reading {s:,} private tokens (this "
             "workload's middle step). Exact breakevens (every crossing bisected), not grid points; 'A to B' wins "
             "from A to B and loses again above.", "",
             "| sequences per group | shortest winning prefix (tokens) |", "| ---: | ---: |"]
    lines += [f"| {n} | {breakeven_cell(res.prefix_at_group, res.prefix_at_group_fits, i, 0, res.prefix_spans)} |"
              for i, n in enumerate(sw.group_size)]
    lines += ["", "| shared prefix (tokens) | smallest winning group |", "| ---: | ---: |"]
    lines += [f"| {p:,} | {breakeven_cell(res.group_at_prefix, res.group_at_prefix_fits, i, 0, res.group_spans)} |"
              for i, p in enumerate(sw.prefix_tokens)]
    note = memory_line(res)
    return lines + ([""] + [f"Memory: {note}"] if note else []) + [""]


def _capacity(r: WorkloadReport) -> list[str]:
    c, s = r.cap, r.est.scenario
    lines = ["### Memory", "",
             f"{fmt_bytes_binary(c.memory_bytes)} per GPU - {fmt_bytes_decimal(c.weight_bytes)} of weights - "
             f"{fmt_bytes_binary(c.reserve_bytes)} reserve = **{fmt_bytes_binary(c.kv_budget_bytes)} for KV**.", "",
             "| | KV for the whole batch | sequences of this shape that fit |", "| --- | ---: | ---: |",
             f"| prefix stored once (prefix caching) | {fmt_bytes_binary(c.kv_bytes_shared)} | "
             f"{c.max_sequences_shared:,} |",
             f"| every sequence its own copy | {fmt_bytes_binary(c.kv_bytes_unshared)} | "
             f"{c.max_sequences_unshared:,} |", ""]
    warns = preemption_warnings(c, s.prefix_caching)
    lines += [f"> **Warning:** {w}" for w in warns] or [
        f"One sibling group ({c.group_sequences} sequences, {fmt_bytes_binary(c.group_kv_bytes)}) fits; the batch of "
        f"{c.sequences} fits {'with' if s.prefix_caching else 'without'} storage sharing."]
    return lines + [""]


def capacity_section(r: WorkloadReport, rows: int = 8) -> list[str]:
    """`cascade-plan capacity` for the workload: the answer, the best candidates, the launch line."""
    res = r.capacity
    if res is None:
        return []
    from cascade_plan.render.capacity_table import targets_line

    lines = ["### Capacity: which GPUs, TP and batch", "",
             f"The same search as `cascade-plan capacity {md_cell(res.workload)}` ({len(res.candidates):,} "
             f"configurations; {md_cell(targets_line(res))}).", "", f"**Answer:** {md_cell(r.capacity_answer)}", "",
             "| GPU | TP | kernels | KV | cascade | seqs at once | waves | TPOT | rollout | tokens/s per GPU | numbers "
             "| meets |", "| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for c in res.candidates[:rows]:
        meets = "yes" if c.meets else "does not fit" if not c.fits else "no"
        lines.append(f"| {md_cell(c.hardware)} | {c.tp} | {c.backend} | {c.kv_dtype} | {'on' if c.cascade else 'off'} "
                     f"| {c.sequences:,} | {c.waves} | {fmt_seconds(c.tpot_s)} | {fmt_seconds(c.rollout_s)} | "
                     f"{c.tokens_per_s_per_gpu:,.0f} | {c.source} | {meets} |")
    lines.append("")
    how = r.capacity_launch
    if how is not None:
        lines += [f"Launch: `{how.command}`", ""] + [f"- {md_cell(x)}" for x in (how.gate, how.kernels, how.numerics,
                                                                             how.sglang) if x] + [""]
    lines += [f"*Note: {md_cell(n)}*" for n in res.notes] + ([""] if res.notes else [])
    return lines


def _engine(v: EngineView) -> list[str]:
    b = v.backend
    lines = ["### Would the engine turn it on?", "",
             f"Prefix shared by every request in the batch: {v.common_prefix_tokens:,} tokens; "
             f"{v.requests:,} requests. "
             f"Attention backend: `{b.name}`. {b.why}", "",
             f"- vLLM V1 as shipped: **{'cascade' if v.shipped.used else 'no cascade'}**. {v.shipped.reason}",
             f"- vLLM V1 with `--no-disable-cascade-attn`, on `{b.name}`: "
             f"**{'cascade' if v.opted_in.used else 'no cascade'}**. "
             f"{v.opted_in.reason}"]
    if len(v.step.groups) > 1:
        lines += [f"- KV-cache group `{g.group.kind}` ({g.group.num_layers} layers): "
                  + (f"cascade over {g.cascade_prefix_tokens:,} tokens" if g.cascade_prefix_tokens else "no cascade")
                  + f". {g.decision.reason}" for g in v.step.groups]
    if v.opted_in.used:
        lines.append(f"- CUDA graph: {v.step.reason} {CUDA_GRAPH_NOTE}")
    lines += [f"- What that choice is worth, by bytes alone (plus the lost CUDA graph): {v.engine_speedup:.2f}x "
              f"over the run; a cascade over every shared level: {v.multi_level_speedup:.2f}x.", f"- {v.note}", "",
              f"**Finding:** {v.finding}", ""]
    return lines


BACKEND_ROLE = {"flashinfer": "the kernels engines ship today", "flashinfer-fa2": "FlashInfer with FA2 cascade levels",
                "torch": "torch's flash attention",
                "triton": "the probe's own kernels (split prefix, packed query heads)"}


def attainable(ests: list[Estimate]) -> tuple[Estimate, Estimate] | None:
    """(best per-sequence, best cascade): the measured backends whose whole run is fastest in each mode,
    whichever they are; None without measured backends."""
    measured = [e for e in ests if e.params.mode == "calibrated"]
    if not measured:
        return None
    return (min(measured, key=lambda e: e.run_per_sequence_s), min(measured, key=lambda e: e.run_cascade_s))


def _backends(r: WorkloadReport) -> list[str]:
    """Shipped kernels vs attainable vs bytes-only: the gap users need to see."""
    ideal = next(e for e in r.backend_estimates if e.params.mode == "ideal")
    lines = ["### Kernels: shipped vs attainable vs bytes-only", "",
             "| kernels | final step per-seq | final step cascade | run speedup |", "| --- | ---: | ---: | ---: |"]
    best = attainable(r.backend_estimates)
    best_speedup = best[0].run_per_sequence_s / best[1].run_cascade_s if best else None
    for e in sorted(r.backend_estimates, key=lambda e: e.params.mode == "ideal"):
        if e.params.mode == "ideal" and best:
            ps, cas = best
            lines.append(f"| attainable: best per-sequence measured ({ps.params.backend} decode) vs best cascade "
                         f"measured ({cas.params.backend} cascade) | "
                         f"{fmt_seconds(ps.final_step.per_sequence.step_s)} | "
                         f"{fmt_seconds(cas.final_step.cascade.step_s)} | {best_speedup:.2f}x |")
        name = (f"{e.params.backend}: {BACKEND_ROLE.get(e.params.backend or '', '')}" if e.params.mode == "calibrated"
                else "bytes only (ideal: peak bandwidth, no fixed costs)")
        lines.append(f"| {name} | {fmt_seconds(e.final_step.per_sequence.step_s)} | "
                     f"{fmt_seconds(e.final_step.cascade.step_s)} | {e.run_speedup:.2f}x |")
    shipped = next((e for e in r.backend_estimates if e.params.backend == "flashinfer"), None)
    lines.append("")
    if shipped:
        text = (f"The byte count alone promises {ideal.run_speedup:.2f}x; with the kernels engines ship today "
                f"(FlashInfer, per-sequence decode over shared pages with its L2 reuse vs its cascade wrapper) the "
                + ("calibrated answer (per-sequence decode measured by AIConfigurator, cascade kernels transferred "
                   "from the H200 probe)" if shipped.params.origin == "aic" else "measured-calibrated answer")
                + f" is {shipped.run_speedup:.2f}x")
        text += (f", and {best_speedup:.2f}x is attainable: the fastest cascade measured ({best[1].params.backend}) "
                 f"against the fastest per-sequence decode measured ({best[0].params.backend}), each the best of "
                 "every backend over the whole run." if best else ".")
        lines += [text, ""]
    return lines


def speedup_cell(e: Estimate) -> str:
    """The run speedup as a verdict would state it: a range where extrapolated or uncalibrated, none
    where it cannot run."""
    if e.memory is not None and not e.memory.fits:
        return "does not fit"
    return speedup_words(e.verdict, e.run_speedup)


def workload_section(r: WorkloadReport) -> list[str]:
    est = r.est
    title = est.scenario.name
    lines = [f"## {title}", "", f"*Numbers: {est.params.label}.*", ""]
    if est.attention_source:
        lines += [f"*{sources_line(est.attention_source)}.*", ""]
    lines += [f"**Verdict:** {est.verdict.text} Whole-run speedup **{speedup_cell(est)}**.", ""]
    lines += [f"> **Warning:** {w}" for w in est.warnings] + ([""] if est.warnings else [])
    lines += _inputs(r) + _arithmetic(r) + _steps_table(est) + _run(est) + _breakeven(r.breakeven)
    lines += _capacity(r) + capacity_section(r) + _engine(r.engine)
    if r.backend_estimates:
        lines += _backends(r)
    if r.hardware_estimates:
        note = sources_note([(e.scenario.hardware.id, e.params) for e in r.hardware_estimates])
        lines += ["### Across GPUs", "", "Each GPU through the same path as `estimate` and `compare`: its own probe "
                  "calibration where one ships, else one imported from NVIDIA AIConfigurator, else the default "
                  "efficiencies; the `numbers` column says which."
                  + (f" **Mixed sources:** {note}." if note else ""), "",
                  "| GPU | numbers | final step per-seq | final step cascade | run per-seq | run cascade | speedup |",
                  "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for e in r.hardware_estimates:
            numbers = e.params.numbers
            lines.append(f"| {e.scenario.hardware.id} | {numbers} | {fmt_seconds(e.final_step.per_sequence.step_s)} | "
                         f"{fmt_seconds(e.final_step.cascade.step_s)} | {fmt_seconds(e.run_per_sequence_s)} | "
                         f"{fmt_seconds(e.run_cascade_s)} | {speedup_cell(e)} |")
        lines.append("")
    if r.hardware_left_out:
        lines += [f"Left out of the comparison across GPUs: {'; '.join(r.hardware_left_out)} (`--compare-hardware` "
                  "picks the GPUs).", ""]
    if r.plots:
        lines += ["### Plots", ""]
        for caption, path in r.plots.items():
            lines += [f"**{caption}**", "", f"![{caption}]({path})", ""]
    return lines


def _anchor(title: str) -> str:
    return "".join(ch for ch in title.lower().replace(" ", "-") if ch.isalnum() or ch in "-_")


MODE_NOTE = {"probe": "measured kernels, fitted (see `cascade-plan validate` for the error)",
             "aic": "NVIDIA AIConfigurator's measured tables, fitted; the cascade kernels transferred from the H200 "
                    "probe (docs/aic.md; `cascade-plan validate` shows the H200 cross-check)",
             "default": "treat absolute times as estimates; the byte counts are exact",
             "ideal": "lower bounds on time: real kernels add fixed costs and reach less than peak"}


def build_report(reports: list[WorkloadReport]) -> str:
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    every = [r.est for r in reports] + [e for r in reports for e in r.hardware_estimates]
    # One line per kind of source, naming its files and GPUs; each section repeats its own full label.
    kinds: dict[str, dict[str | None, list[str]]] = {}
    for e in every:
        src = Path(e.params.source).name if e.params.mode == "calibrated" and e.params.source else None
        gpus = kinds.setdefault(e.params.numbers.split("/")[0], {}).setdefault(src, [])
        if e.scenario.hardware.id not in gpus:
            gpus.append(e.scenario.hardware.id)
    lines = ["# cascade-plan report", "", f"Generated by cascade-plan {__version__} on {now}.", "",
             "Where the numbers come from (each section names its own source in full):", ""]
    for mode, files in kinds.items():
        used = "; ".join(", ".join(g) + (f" (`{src}`)" if src else "") for src, g in files.items())
        lines.append(f"- **{mode}**: {used}. {MODE_NOTE[mode][0].upper() + MODE_NOTE[mode][1:]}.")
    lines += ["", "## Summary", "",
              "| workload | model | GPU | numbers | seqs | final step per-seq → cascade | run speedup | verdict | "
              "vLLM (shipped / opted in) |", "| --- | --- | --- | --- | ---: | --- | ---: | --- | --- |"]
    for r in reports:
        e, v = r.est, r.engine
        lines.append(
            f"| [{md_cell(e.scenario.name)}](#{_anchor(e.scenario.name)}) | {md_cell(e.scenario.model.id)} | "
            f"{md_cell(e.scenario.hardware.id)} | "
            f"{e.params.numbers} | {e.flat.total_seqs} | {fmt_seconds(e.final_step.per_sequence.step_s)} → "
            f"{fmt_seconds(e.final_step.cascade.step_s)} | "
            f"{speedup_cell(e)} | {e.verdict.level} | {'yes' if v.shipped.used else 'no'} / "
            f"{'yes' if v.opted_in.used else 'no'} |")
    lines.append("")
    for r in reports:
        lines += workload_section(r)
    lines += ["## About these numbers", "",
              "- Every term is a roofline, max(bytes / bandwidth, FLOP / FLOP/s), per GPU after tensor parallelism, "
              "plus fixed costs per kernel launch per layer; a run integrates every decode step (step k reads k "
              "generated tokens).",
              f"- vLLM gate modelled from: {VLLM_VERSION_MODELLED}",
              f"- {CASCADE_DISABLED_BY_DEFAULT}", ""]
    return "\n".join(lines)


def slug(name: str) -> str:
    return safe_slug(name)


def rel(path: Path, base: Path) -> str:
    return Path(path).relative_to(base).as_posix()

