"""The per-step breakdown of an estimate as rows of formatted cells, shared by the terminal table
(render_estimate.py) and the markdown report (report.py); and each mode's step as its ops (the terminal's
op table)."""

from __future__ import annotations

from cascade_plan.cost.estimate import Estimate
from cascade_plan.units import fmt_bytes_binary, fmt_bytes_decimal, fmt_count, fmt_seconds, fmt_speedup


def glue_label(est: Estimate, detail: str = "") -> str:
    """What the step's glue time holds, the same words in the step table, the step-times plot and the report:
    for an MoE model whose calibration prices its layer term, the router, alignment and combine as well."""
    priced = est.params.step is not None and est.params.step.moe_layer is not None
    if est.moe_source and priced:
        return "engine glue + MoE routing, alignment, combine"
    return f"engine glue {detail}".rstrip()


def step_rows(est: Estimate) -> list[tuple[str, list[str], bool]]:
    """The per-step breakdown as (label, one cell per summarised step, emphasised) rows, shared by the
    terminal table and the markdown report."""
    cols = est.steps
    rows = [
        ("sequences decoding", [str(s.active_seqs) for s in cols], False),
        ("weights read", [fmt_bytes_decimal(s.weight_bytes) for s in cols], False),
        ("GEMMs (qkv, o, MLP, lm_head)", [fmt_seconds(s.weight_s) for s in cols], False),
    ]
    if any(s.glue_s for s in cols):
        rows.append((glue_label(est, "(norms, RoPE, KV append, ...)"), [fmt_seconds(s.glue_s) for s in cols], False))
    if any(s.comm_s for s in cols):
        rows.append(("all-reduce (2 per layer, TP)", [fmt_seconds(s.comm_s) for s in cols], False))
    rows += [
        ("per-sequence: KV read", [fmt_bytes_binary(s.per_sequence.attention_bytes) for s in cols], False),
    ]
    if any(abs(s.per_sequence.hbm_bytes - s.per_sequence.attention_bytes) > 1 for s in cols):
        rows.append(("per-sequence: KV from HBM (rest from L2)",
                     [fmt_bytes_binary(s.per_sequence.hbm_bytes) for s in cols],
                     False))
    rows += [
        ("per-sequence: attention time", [fmt_seconds(s.per_sequence.attention_s) for s in cols], False),
        ("cascade: shared prefix read", [fmt_bytes_binary(s.cascade.prefix_bytes) for s in cols], False),
        ("cascade: private suffix read", [fmt_bytes_binary(s.cascade.suffix_bytes) for s in cols], False),
        ("cascade: merge traffic", [fmt_bytes_binary(s.cascade.merge_bytes) for s in cols], False),
        ("cascade: attention time", [fmt_seconds(s.cascade.attention_s) for s in cols], False),
        ("step, per-sequence", [fmt_seconds(s.per_sequence.step_s) for s in cols], True),
        ("step, cascade", [fmt_seconds(s.cascade.step_s) for s in cols], True),
        ("speedup", [fmt_speedup(s.speedup) for s in cols], True),
    ]
    return rows


MODE_WORDS = {"both": "both", "per_sequence": "per-sequence", "cascade": "cascade"}


def fmt_op_seconds(s: float) -> str:
    """An op's time; one a fit put below a nanosecond (a merge whose cost the fit gave to the passes it overlaps)
    reads "< 1 ns", not a figure of 1e-14 s."""
    return "< 1 ns" if 0 < s < 1e-9 else fmt_seconds(s)


def op_rows(est: Estimate) -> tuple[list[tuple[str, str, list[str], str, str]], list[tuple[list[str], str]]]:
    """Each mode's step as its ops (cost/ops/registry.py): (op, the modes it is in, its time at each summarised
    step, its bytes and FLOP at the final step) for every op with a cost at any of them, then the sources, each
    with the ops it prices."""
    cols, final = est.steps, est.steps[-1]
    ps_names = [op.name for op in final.per_sequence.ops]
    cas_names = [op.name for op in final.cascade.ops]
    modes = {n: "both" if n in cas_names else "per_sequence" for n in ps_names}
    modes.update({n: "cascade" for n in cas_names if n not in modes})
    rows: list[tuple[str, str, list[str], str, str]] = []
    sources: dict[str, list[str]] = {}
    for name in sorted(modes, key=lambda n: list(MODE_WORDS).index(modes[n])):   # stable: the step's order within
        mode = modes[name]
        in_mode = [{op.name: op for op in (s.per_sequence.ops if mode != "cascade" else s.cascade.ops)}[name]
                   for s in cols]
        if not any(op.time_s or op.bytes or op.flops for op in in_mode):
            continue
        last = in_mode[-1]
        rows.append((name, MODE_WORDS[mode], [fmt_op_seconds(op.time_s) for op in in_mode],
                     fmt_bytes_binary(last.bytes) if last.bytes else "", fmt_count(last.flops) if last.flops else ""))
        if last.source:
            sources.setdefault(last.source, []).append(name)
    return rows, [(ops, source) for source, ops in sources.items()]
