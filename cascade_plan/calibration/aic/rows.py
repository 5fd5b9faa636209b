"""AIConfigurator's per-sequence decode rows, shipped in an imported calibration so that the planner
interpolates them inside their grid (cost/ops/attention.py) instead of pricing from the decode model
fitted to them.

AIConfigurator's `generation_attention_perf` is a full grid per attention shape: batch 1-2048 by context
(isl + step) 2-131072 tokens in powers of two, trimmed where one layer's cache would not fit. Its
estimator interpolates in it; the fitted model misses its own rows by 2.7-4.7% median on Hopper and
Blackwell (13% on the A100). The rows are timed over private pages only (no shared prefix, no cascade)
and include the new token's K/V write (glue.kv_append_in_attention).

On disk (`decode_rows` of the file): the two axes once, then per KV dtype and attention shape
("query heads per KV head/KV heads per GPU/head dim") a matrix of times in microseconds, 4 significant
digits, one row per batch, one column per context, null where the table has no row. Only the shapes of
power-of-two query groups (KEEP_Q_PER_KV, the GQA shapes of Llama-3, Mistral and Mixtral at any TP) are
kept, which holds each file near 40 KB of rows; other shapes use the fit (and outputs say so)."""

from __future__ import annotations

import math

import numpy as np

from cascade_plan.calibration_schema.kernel_fit import BackendFit
from cascade_plan.cost.ops.attention import MEASURED_AIC, MeasuredAttention

KEEP_Q_PER_KV = (1, 2, 4, 8, 16)
DIGITS = 4


def _shape_key(q: int, h: int, d: int) -> str:
    return f"{q}/{h}/{d}"


def _us(t_s: float) -> float:
    v = float(f"{t_s * 1e6:.{DIGITS}g}")
    return int(v) if v >= 10 ** (DIGITS - 1) else v


def encode_rows(decode: dict[str, tuple[list[dict], np.ndarray]], kernel: str, table: str) -> dict | None:
    """The file's `decode_rows` from decode_rows()' configurations and times per KV dtype (None: no rows
    of a kept shape)."""
    kept = {kv: [(c, t) for c, t in zip(cfgs, times) if c["q_per_kv"] in KEEP_Q_PER_KV] for kv, (cfgs, times) in
            decode.items()}
    got = matrices(kept, lambda c: _shape_key(c["q_per_kv"], c["num_kv_heads"], c["head_dim"]))
    if got is None:
        return None
    seqs, ctx, out = got
    return {"table": table, "kernel": kernel, "unit": "us", "kept_q_per_kv": list(KEEP_Q_PER_KV),
            "sequences": seqs, "context_tokens": ctx, "kv_dtypes": out}


def matrices(kept: dict[str, list[tuple[dict, float]]], shape_key) -> tuple[list, list, dict] | None:
    """(sequences axis, context axis, {KV dtype: {shape key: matrix in us}}) of private-page rows
    (configurations with n_groups sequences of prefix_tokens context); None when there are none."""
    kept = {kv: r for kv, r in kept.items() if r}
    if not kept:
        return None
    seqs = sorted({c["n_groups"] for r in kept.values() for c, _ in r})
    ctx = sorted({c["prefix_tokens"] for r in kept.values() for c, _ in r})
    si, ci = {v: i for i, v in enumerate(seqs)}, {v: i for i, v in enumerate(ctx)}
    out: dict[str, dict] = {}
    for kv, rows in kept.items():
        per: dict[str, list] = {}
        for c, t in rows:
            m = per.setdefault(shape_key(c), [[None] * len(ctx) for _ in seqs])
            m[si[c["n_groups"]]][ci[c["prefix_tokens"]]] = _us(max(float(t), 1e-9))
        out[kv] = dict(sorted(per.items(), key=lambda kv_: tuple(int(x) for x in kv_[0].split("/"))))
    return seqs, ctx, out


def decode_measured(doc: dict, backend: str, kv_dtype: str, fits: BackendFit | None,
                    l2_bytes: float) -> MeasuredAttention | None:
    """The rows of one KV dtype as the planner interpolates them: kernel "per_sequence_dup" at points
    (sequences, 1, context, 0), each with the backend's fitted decode time there (the rows' ratio to the
    fit is what is interpolated); None when the file ships none for that dtype."""
    from cascade_plan.calibration.fitting import KV_ELEMENT_BYTES, features, predict

    block = doc.get("decode_rows") or {}
    per = (block.get("kv_dtypes") or {}).get(kv_dtype)
    if not per:
        return None
    seqs = [float(v) for v in block["sequences"]]
    ctx = [float(v) for v in block["context_tokens"]]
    rows = []
    for key, matrix in per.items():      # Python floats cell by cell: numpy scalars per cell cost ~10 ms a file
        q, h, d = (int(x) for x in key.split("/"))
        for i, r in enumerate(matrix):
            for j, v in enumerate(r):
                if v is not None and math.isfinite(v):
                    rows.append(((q, h, d), (seqs[i], 1.0, ctx[j], 0.0), float(v) * 1e-6))
    if not rows:
        return None
    fit = [None] * len(rows)
    if fits:    # the fitted decode at every row, from columns (not a configuration dict per row)
        shape, point = np.array([r[0] for r in rows], float), np.array([r[1] for r in rows], float)
        cols = {"n_groups": point[:, 0], "group_size": point[:, 1], "prefix_tokens": point[:, 2],
                "suffix_tokens": point[:, 3], "q_per_kv": shape[:, 0], "num_kv_heads": shape[:, 1],
                "head_dim": shape[:, 2], "kv_element_bytes": np.full(len(rows), KV_ELEMENT_BYTES[kv_dtype], float)}
        fit = predict(fits.decode_dup, features("decode_dup", cols), l2_bytes).tolist()
    return MeasuredAttention(backend, kv_dtype, {"per_sequence_dup": [(*r, f) for r, f in zip(rows, fit)]},
                             label=MEASURED_AIC, private=True)
