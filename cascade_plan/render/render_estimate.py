"""Rich rendering of an Estimate (the `estimate` command's human output)."""

from __future__ import annotations

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from cascade_plan.cost.coverage import sources_line
from cascade_plan.cost.estimate import Estimate
from cascade_plan.render.step_table import op_rows, step_rows
from cascade_plan.units import (
    fmt_bandwidth,
    fmt_bytes,
    fmt_bytes_binary,
    fmt_bytes_decimal,
    fmt_count,
    fmt_seconds,
    fmt_speedup,
)


def inputs_line(est: Estimate) -> str:
    s, f = est.scenario, est.flat
    return (f"{s.model.id} on {s.hardware.name} ({fmt_bandwidth(s.hardware.hbm_bytes_per_s)}), "
            f"KV {s.kv_dtype}, weights {s.weight_dtype}, TP {s.tp}; {f.total_seqs} sequences, "
            f"{est.decode_steps} decode steps")


def arithmetic_table(est: Estimate) -> Table:
    s, f = est.scenario, est.flat
    t = Table(title="The arithmetic (per GPU)", show_header=False, title_justify="left", box=None, padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    kvb = est.kv_bytes_per_token
    t.add_row("KV bytes per token", f"{kvb:,.0f} B = {fmt_bytes_binary(kvb)}")
    for tok, inst, lvl in zip(f.node_tokens, f.node_instances, f.node_level):
        # The flat tree stores counts as floats (for numpy); they are whole numbers and print as such.
        t.add_row(f"shared prefix, level {lvl}",
                  f"{round(inst):,} x {round(tok):,} tokens, {fmt_bytes(tok * kvb)} each")
    t.add_row("unique prefix KV", fmt_bytes(f.unique_prefix_tokens * kvb))
    first = est.steps[0]
    t.add_row("weights read per step", f"{fmt_bytes_decimal(first.weight_bytes)} "
              f"({fmt_count(first.weight_bytes / (2 if s.weight_dtype in ('bf16', 'fp16') else 1))} params in "
              f"{s.weight_dtype}), GEMMs {fmt_seconds(first.weight_s)}")
    v = est.verdict
    t.add_row("redundant prefix reads", f"{fmt_bytes(v.redundant_prefix_bytes)} per step at step 1 "
              f"= {v.ratio:.2f}x the weight bytes")
    m = est.memory
    if m is not None:
        fits = "fits" if m.fits else "does NOT fit"
        t.add_row("memory per GPU", f"{fmt_bytes_decimal(m.weight_bytes)} weights + "
                  f"{fmt_bytes_binary(m.kv_needed_bytes)} KV by the end of the run, "
                  f"{fmt_bytes_binary(m.usable_bytes)} usable "
                  f"({m.reserve_fraction:.0%} reserve): {fits}; up to {m.max_sequences:,} sequences of this shape fit "
                  f"(the batch has {m.sequences:,})")
    return t


def steps_table(est: Estimate) -> Table:
    t = Table(title="Decode steps: per-sequence vs cascade", title_justify="left")
    t.add_column("per GPU, one decode step")
    for s in est.steps:
        t.add_column(f"{s.label} (k={s.step})", justify="right")
    for label, cells, bold in step_rows(est):
        t.add_row(label, *cells, style="bold" if bold else None)
    return t


def ops_table(est: Estimate) -> Table:
    """Each mode's step as its ops: seconds at each summarised step, bytes and FLOP at the final one."""
    t = Table(title="The step as its operations (per GPU; an op in both modes costs the same in each)",
              title_justify="left")
    t.add_column("op")
    t.add_column("in")
    for s in est.steps:
        t.add_column(f"{s.label} (k={s.step})", justify="right")
    t.add_column("bytes (final)", justify="right")
    t.add_column("FLOP (final)", justify="right")
    rows, _ = op_rows(est)
    for name, mode, cells, bytes_, flops in rows:
        t.add_row(name, mode, *cells, bytes_, flops)
    for label, mode_of in (("step, per-sequence", "per_sequence"), ("step, cascade", "cascade")):
        t.add_row(label, "", *[fmt_seconds(sum(op.time_s for op in getattr(s, mode_of).ops)) for s in est.steps],
                  "", "", style="bold")
    return t


def ops_sources(est: Estimate) -> list[str]:
    """Where each op's numbers come from, one line per source."""
    return [f"{', '.join(ops)}: {source}" for ops, source in op_rows(est)[1]]


def run_table(est: Estimate) -> Table:
    t = Table(title="Whole run (all decode steps)", title_justify="left")
    for col in ("mode", "decode time", "tokens/s", "mean step"):
        t.add_column(col, justify="right" if col != "mode" else "left")
    n = est.decode_steps
    for name, total in (("per-sequence", est.run_per_sequence_s), ("cascade", est.run_cascade_s)):
        t.add_row(name, fmt_seconds(total), f"{est.output_tokens / total:,.0f}", fmt_seconds(total / n))
    return t


def render_estimate(est: Estimate, console: Console) -> None:
    console.print(Text(f"cascade-plan estimate: {est.scenario.name}", style="bold"))
    console.print(Text(inputs_line(est)))     # Text: a profile's or model's name is printed as written, never markup
    console.print(Text(f"Numbers: {est.params.label}", style="dim"))
    if est.attention_source:
        console.print(Text(sources_line(est.attention_source), style="dim"))
    sp = est.params.step
    if sp is not None:
        ar = sp.allreduce_for(est.scenario.tp) if est.scenario.tp > 1 else None
        extra = f"; all-reduce {ar.label}" if ar is not None else ""
        console.print(Text(f"Rest of the step (GEMMs, glue{', all-reduce' if ar else ''}): {sp.source}{extra}",
                           style="dim"))
    if est.moe_source:
        why = f"; {est.moe_source['outside']}" if est.moe_source.get("outside") else ""
        routing = f"; {est.moe_source['routing_note']}" if est.moe_source.get("routing_note") else ""
        console.print(Text(f"MoE experts: {est.moe_source['source']}{why}{routing}", style="dim"))
        if est.moe_source.get("layer"):
            console.print(Text(f"MoE layer: {est.moe_source['layer']}", style="dim"))
    console.print()
    console.print(arithmetic_table(est))
    console.print()
    console.print(steps_table(est))
    console.print()
    console.print(ops_table(est))
    for line in ops_sources(est):
        console.print(Text(line, style="dim"))
    console.print()
    console.print(run_table(est))
    style = {"go": "green", "marginal": "yellow", "no-go": "red"}.get(est.verdict.level, "magenta")
    body = [Text(f"Average speedup over the run: {fmt_speedup(est.run_speedup)} "
                 f"({fmt_seconds(est.run_per_sequence_s)} -> {fmt_seconds(est.run_cascade_s)})", style="bold"),
            Text(est.verdict.text)]
    console.print(Panel(Group(*body), title="Verdict", border_style=style, expand=False))
    if est.numerics:
        console.print(Text(est.numerics["text"], style="dim"))
    for w in est.warnings:
        console.print(Text(f"warning: {w}", style="yellow"))
    for note in est.coverage:
        if note not in est.verdict.text:     # a judged verdict already carries them
            console.print(Text(f"beyond the measurements: {note}", style="yellow"))
