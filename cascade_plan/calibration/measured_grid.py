"""The grid a calibration measured, in the workload's terms: the longest context per sequence, the
largest batch, and the largest shared prefix per layer (all groups' prefixes of one layer, the L2
working set), separately for the per-sequence decode kernel and for the cascade kernels, which may
come from different sources (an AIConfigurator import measures decode and transfers the cascade
kernels from the probe). cost/coverage.py checks workloads against it."""

from __future__ import annotations

KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}


def grid_of_configs(cfgs: list[dict]) -> dict | None:
    """{context_tokens, sequences, layer_prefix_bytes} over probe-style configurations (None: none)."""
    if not cfgs:
        return None

    def kvb(c):   # K and V of one token, one layer, this GPU's KV heads
        return 2 * c["num_kv_heads"] * c["head_dim"] * KV_BYTES.get(c["kv_dtype"], 2.0)

    return {"context_tokens": int(max(c["prefix_tokens"] + c["suffix_tokens"] for c in cfgs)),
            "sequences": int(max(c["group_size"] * c["n_groups"] for c in cfgs)),
            "layer_prefix_bytes": float(max(c["n_groups"] * c["prefix_tokens"] * kvb(c) for c in cfgs))}


def measured_grid(doc: dict, kv_dtype: str | None = None) -> dict | None:
    """{"decode": grid, "cascade": grid} of a calibration document: written by the importer
    (grid.measured), else computed from the probe's measurement rows (of `kv_dtype` only, where given:
    a grid measured in bf16 says nothing about fp8); None when neither exists."""
    stored = (doc.get("grid") or {}).get("measured")
    if stored:
        return stored
    rows = [r for r in doc.get("measurements") or [] if kv_dtype is None or r["config"]["kv_dtype"] == kv_dtype]
    if not rows:
        return None
    out = {"decode": grid_of_configs([r["config"] for r in rows if r["kernel"].startswith("decode")]),
           "cascade": grid_of_configs([r["config"] for r in rows if r["kernel"].startswith("cascade")])}
    return {k: v for k, v in out.items() if v} or None
