"""Rich rendering of a log analysis (the `analyze` command's human output)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from cascade_plan.logs.analysis import MAX_REPLICA_TABLES, METRICS, QUANTILES, Analysis
from cascade_plan.render.console import written as as_written
from cascade_plan.units import fmt_seconds, fmt_speedup

REPLICA_ROWS = 32        # per-replica rows printed per table (--json has them all)


def _num(x: float) -> str:
    if x != x:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 or x == int(x) else f"{x:.3g}"


def distribution_table(a: Analysis) -> Table:
    t = Table(title="Sharing per decode step (distribution over steps)", title_justify="left")
    t.add_column("metric")
    t.add_column("scope")
    for name in ("mean", *(f"p{round(q * 100)}" for q in QUANTILES), "max"):
        t.add_column(name, justify="right")
    for key, (unit, _) in METRICS.items():
        rows = [("all", a.overall[key])] + ([(r, ds[key]) for r, ds in list(a.per_replica.items())[:REPLICA_ROWS]]
                                            if len(a.per_replica) > 1 else [])
        for n, (scope, d) in enumerate(rows):
            t.add_row(f"{key} ({unit})" if n == 0 else "", as_written(scope), _num(d.mean),
                      *(_num(v) for v in d.quantiles.values()), _num(d.max))
    return t


def verdict_table(a: Analysis) -> Table:
    t = Table(title="Decode time over the log (model of the steps logged)", title_justify="left")
    for col in ("scope", "steps", "per-sequence", "cascade always", "cascade where it pays", "saving",
                "steps where it pays", "time where it pays"):
        t.add_column(col, justify="right" if col != "scope" else "left")
    rows = [("all", a.verdict)] + ([(r, v) for r, v in list(a.verdict_per_replica.items())[:REPLICA_ROWS]]
                                   if len(a.verdict_per_replica) > 1 else [])
    for scope, v in rows:
        t.add_row(as_written(scope), f"{v.steps:,}", fmt_seconds(v.per_sequence_s),
                  f"{fmt_seconds(v.cascade_s)} ({fmt_speedup(v.speedup)})", fmt_seconds(v.best_s),
                  f"{fmt_seconds(v.saving_s)} ({v.saving_fraction:.1%})", f"{v.share_steps_paying:.1%}",
                  f"{v.share_time_paying:.1%}")
    return t


def render_analysis(a: Analysis, console: Console, params_label: str, scenario_line: str,
                    written: list[str]) -> None:
    t = a.tables
    console.print(f"[bold]{len(t.files)} file(s), {a.records:,} records, {t.steps:,} decode steps on "
                  f"{len(a.replica_names)} replica(s), {t.request_steps.size:,} requests[/bold]")
    # replica names, file names, records and the workload's names are the user's: printed as written
    console.print(as_written(f"{scenario_line}; numbers: {params_label}"))
    if a.malformed:
        console.print(Text.assemble((f"{a.malformed:,} malformed record(s) skipped ", "yellow"),
                                    ", ".join(f"{f}: {m:,}" for f, _, m in t.files if m)))
        for b in a.bad:
            console.print(as_written(f"  {b}"))
        if len(a.bad) < a.malformed:
            console.print(f"  ... {a.malformed - len(a.bad):,} more (--show-bad N lists more; --strict stops at "
                          "the first)")
    console.print(distribution_table(a))
    console.print(verdict_table(a))
    n = len(a.replica_names)
    if a.per_replica_left_out:
        console.print(f"{n:,} replicas: per-replica figures are kept for up to {MAX_REPLICA_TABLES:,} replicas; "
                      "these are the whole log's.")
    elif n > REPLICA_ROWS:
        console.print(f"per-replica rows: the first {REPLICA_ROWS} of {n:,} replicas (--json lists every one)")
    v = a.verdict
    console.print(f"Cascade would pay in {v.share_steps_paying:.1%} of the steps, {v.share_time_paying:.1%} of the "
                  f"decode time; using it there saves {fmt_seconds(v.saving_s)} of {fmt_seconds(v.per_sequence_s)} "
                  f"({v.saving_fraction:.1%}) over the log.")
    e = a.engine.to_json(a.times.pays)
    console.print(f"vLLM (FlashAttention backend, opted in with --no-disable-cascade-attn) would cascade "
                  f"{e['share_of_steps_vllm_would_cascade']:.1%} of the steps (only a prefix shared by every request "
                  f"counts); in {e['share_of_steps_model_pays_vllm_does_not']:.1%} the model says cascade pays but "
                  "vLLM would not use it.")
    if a.vllm_logged is not None:
        g = a.vllm_logged.to_json()
        console.print(f"vLLM's own count (num_common_prefix_blocks, {g['steps_with_vllm_fields']:,} logged steps): "
                      f"its gate, opted in, would cascade {g['share_of_steps_vllm_would_cascade']:.1%} of them, the "
                      f"planner's model of the same steps {g['share_of_steps_planner_predicts_cascade']:.1%}; they "
                      f"agree on "
                      f"{g['share_of_steps_agreeing']:.1%} (common prefix {_num(g['mean_common_prefix_tokens_vllm'])} "
                      f"vs {_num(g['mean_common_prefix_tokens_planner'])} tokens on average).")
    for w in written:
        console.print(as_written(f"wrote {w}"))
