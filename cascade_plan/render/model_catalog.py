"""Rows and tables for the `models` and `hardware` listings."""

from __future__ import annotations

from rich.table import Table

from cascade_plan.cost.cost_model import kv_bytes_per_token, kv_heads_per_gpu, weight_bytes_per_gpu
from cascade_plan.inputs.hardware import builtin_hardware_ids, load_hardware
from cascade_plan.inputs.model_spec import load_preset, preset_ids
from cascade_plan.planning.params_select import shipped_source
from cascade_plan.render.console import make_console, written
from cascade_plan.units import fmt_bytes_binary, fmt_count


def model_rows(kv_dtype: str, weight_dtype: str, tp: int) -> list[dict]:
    rows = []
    for mid in preset_ids():
        m = load_preset(mid)
        rows.append({
            "id": mid, "attention": m.attention, "layers": m.num_layers, "q_heads": m.num_q_heads,
            "kv_heads": m.num_kv_heads, "kv_heads_per_gpu": kv_heads_per_gpu(m, tp),
            "head_dim": m.head_dim, "kv_lora_rank": m.kv_lora_rank, "qk_rope_head_dim": m.qk_rope_head_dim,
            "total_params": m.total_params, "active_params": m.active_params,
            "num_experts": m.num_experts, "experts_per_token": m.experts_per_token,
            "kv_bytes_per_token": kv_bytes_per_token(m, kv_dtype, tp) if m.num_q_heads % tp == 0 else None,
            "weight_bytes_total": (m.total_params * {"bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
                                   [weight_dtype] / tp),
            "weight_bytes_per_token_step": float(weight_bytes_per_gpu(m, weight_dtype, tp, 1)),
            "source": m.source,
        })
    return rows


def render_models(rows: list[dict], kv_dtype: str, weight_dtype: str, tp: int) -> None:
    t = Table(title=f"Built-in models (per GPU at TP {tp}; KV {kv_dtype}, weights {weight_dtype})",
              title_justify="left")
    t.add_column("id", no_wrap=True, min_width=max(len(r["id"]) for r in rows))
    for col in ("attention", "layers", "heads q/kv", "params total / active", "KV bytes per token",
                "weights GB (all / batch 1)"):
        t.add_column(col, justify="left" if col == "attention" else "right")
    for r in rows:
        attn = "MLA" if r["attention"] == "mla" else ("MHA" if r["kv_heads"] == r["q_heads"] else "GQA")
        if r["num_experts"]:
            attn += f", MoE {r['experts_per_token']}/{r['num_experts']}"
        heads = f"{r['q_heads']}/{r['kv_heads']}" if r["attention"] == "gqa" else f"{r['q_heads']}/1 latent"
        kvb = r["kv_bytes_per_token"]
        t.add_row(written(r["id"]), attn, str(r["layers"]), heads,
                  f"{fmt_count(r['total_params'])} / {fmt_count(r['active_params'])}",
                  "n/a (TP does not divide heads)" if kvb is None else f"{kvb:,.0f} B ({fmt_bytes_binary(kvb)})",
                  f"{r['weight_bytes_total'] / 1e9:,.1f} / {r['weight_bytes_per_token_step'] / 1e9:,.1f}")
    console = make_console()
    console.print(t)
    console.print("MoE: a decode step reads the shared parts plus every expert at least one token of the batch "
                    "routes to (uniform routing assumed); at batch 1 that is the active experts only.", style="dim")


def hardware_rows(profile: str | None) -> list[dict]:
    ids = [profile] if profile else builtin_hardware_ids()
    rows = [load_hardware(i).to_dict() for i in ids]
    for r in rows:
        r["calibration"] = shipped_source(r["id"])
    return rows


def render_hardware(rows: list[dict], full: bool) -> None:
    t = Table(title="Hardware profiles (datasheet peaks; measured numbers live in calibration files)",
              title_justify="left")
    t.add_column("id", no_wrap=True)
    for col in ("HBM TB/s", "memory", "bf16 TFLOP/s", "fp8 TFLOP/s", "L2", "SMs/CUs", "calibration"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(written(r["id"]), f"{r['hbm_bytes_per_s'] / 1e12:.3g}", fmt_bytes_binary(r["memory_bytes"]),
                  f"{r['dense_bf16_flop_per_s'] / 1e12:,.0f}",
                  f"{r['dense_fp8_flop_per_s'] / 1e12:,.0f}" if r["dense_fp8_flop_per_s"] else "—",
                  fmt_bytes_binary(r["l2_bytes"]), str(r["sm_count"]), r["calibration"])
    console = make_console()
    console.print(t)
    console.print("calibration: the numbers `estimate` uses for that GPU by default: probe (measured by our probe), "
                  "aic (NVIDIA AIConfigurator's tables, cascade kernels transferred from the H200 probe), "
                  "default (uncalibrated guesses)", style="dim")
    if full:
        for r in rows:
            # a profile YAML's id, name, sources and notes are the user's text: printed as written
            console.print(written(f"{r['id']}: {r['name']} ({r['memory_kind'] or 'memory kind not given'})"))
            for k, v in r["sources"].items():
                console.print(written(f"  source for {k}: {v}"))
            if r.get("notes"):
                console.print(written(f"  notes: {r['notes']}"))
