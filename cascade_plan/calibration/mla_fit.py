"""The probe's MLA rows (the calibration file's top-level `mla` list: FlashInfer's BatchMLAPagedAttentionWrapper,
one latent KV head of kv_lora_rank + rope dims read by every query head of a GPU) fitted and tabulated for the
planner, apart from the GQA rows.

Three kernel kinds, as the planner prices them (cost/cost_model.py with an MLA GpuShape: one KV "head" of
576 values per token, 2 x (576 + 512) FLOP per query head and token):
* `decode_mla`: per-sequence decode over shared prefix pages (the wrapper's one pass), with its own L2 gain;
* `prefix_mla`: the cascade's prefix pass (a group's sequences as the query rows of one request);
* `suffix_mla`: the rest of the measured cascade (suffix pass + merge_state, timed as cascade_total minus the
  prefix pass, which the probe also timed alone), as FlashInfer's GQA cascade fit folds its merge in.
Features use the planner's formulas, so a fit predicts what the planner then computes. Each KV dtype from its
own rows (fp8 latents are not bf16 at half the bytes: on the H200 they measured 3-4x slower).

Held out from the fit (scored by `validate`): every row at 32 query heads per GPU (TP 4 of DeepSeek-V3: a head
count the fit never sees), every row with a 16,384-token prefix, and one in six of the rest by a stable hash."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from cascade_plan.calibration.fitting import (
    KV_ELEMENT_BYTES,
    STATE_BYTES,
    Features,
    config_column,
    fit_kernel,
    fit_l2,
    fit_surface,
    predict,
    surface_doc,
)
from cascade_plan.calibration.holdout import config_key, stable_sixth
from cascade_plan.calibration_schema.device import Ceilings
from cascade_plan.calibration_schema.kernel_fit import BackendFit, KernelFit
from cascade_plan.calibration_schema.mla import MlaConfig, MlaRow
from cascade_plan.cost.ops.attention import MeasuredAttention
from cascade_plan.cost.ops.mla_attention import (
    MLA_BACKEND,
    mla_shape_key,
    mla_tile_factor,
)

MLA_HOLDOUT_RULE = ("MLA rows held out: every row at 32 query heads per GPU (a head count the fit never sees), every "
                    "one with a 16,384-token prefix, and one in six of the rest by a stable hash")
MIN_ROWS = 6
KINDS = ("decode_mla", "prefix_mla", "suffix_mla")


MlaConfigs = Sequence[MlaConfig] | Sequence[Mapping[str, Any]]


def is_mla_held_out(cfg: MlaConfig) -> bool:
    if cfg.num_heads == 32 or cfg.prefix_tokens == 16384:
        return True
    return stable_sixth(cfg)


def mla_features(kernel: str, configs: MlaConfigs) -> Features:
    """Per-layer work of MLA rows in the planner's terms (rows: sequences, q_rows: sequences x query heads)."""
    c = {k: np.array(config_column(configs, k), dtype=float)
         for k in ("prefix_tokens", "group_size", "n_groups", "suffix_tokens", "num_heads", "kv_lora_rank",
                   "qk_rope_head_dim")}
    el = np.array([KV_ELEMENT_BYTES[kv] for kv in config_column(configs, "kv_dtype")], dtype=float)
    tb = (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * el
    hq = c["num_heads"]
    f_tok = 2 * (2 * c["kv_lora_rank"] + c["qk_rope_head_dim"]) * hq       # QK over 576, PV over 512
    seqs = c["group_size"] * c["n_groups"]
    P, S = c["prefix_tokens"], c["suffix_tokens"]
    zero = np.zeros_like(P)
    shared = c["n_groups"] * P * tb
    one = mla_tile_factor(hq)                      # a decoding sequence's query heads in their tile
    if kernel == "decode_mla":
        b = seqs * (P + S) * tb
        red = c["n_groups"] * (c["group_size"] - 1) * P * tb
        return Features(b, seqs * (P + S) * f_tok * one, seqs, red, shared, b, P + S, seqs * hq, zero)
    if kernel == "prefix_mla":                     # FLOP as computed: whole tiles of a prompt's query rows
        tiles = mla_tile_factor(c["group_size"] * hq)
        return Features(shared, seqs * P * f_tok * tiles, seqs, zero, shared, shared, P, seqs * hq, zero)
    if kernel == "suffix_mla":
        b = seqs * S * tb
        return Features(b, seqs * S * f_tok * one, seqs, zero, shared, b, S, seqs * hq, zero)
    if kernel == "merge_mla":
        return Features(3 * seqs * hq * (c["kv_lora_rank"] + 1) * STATE_BYTES, zero, seqs, zero, shared,
                        shared + seqs * S * tb, P + S, seqs * hq, zero)
    raise ValueError(f"no MLA features for kernel {kernel!r}")


def mla_rows(rows: Sequence[MlaRow], kernel: str, kv_dtype: str, backend: str = MLA_BACKEND) -> list[MlaRow]:
    """The timed rows of one probe kernel and KV dtype."""
    return [r for r in rows if r.kernel == kernel and r.backend == backend and r.config.kv_dtype == kv_dtype]


def _suffix_rows(rows: Sequence[MlaRow], kv_dtype: str) -> list[MlaRow]:
    """Whole cascade minus its prefix pass per configuration (at least 2% of the cascade)."""
    pre = {config_key(r.config): r.median_s for r in mla_rows(rows, "cascade_prefix", kv_dtype)}
    out = []
    for r in mla_rows(rows, "cascade_total", kv_dtype):
        k = config_key(r.config)
        if k in pre and r.config.suffix_tokens > 0:
            out.append(msgspec.structs.replace(r, median_s=max(r.median_s - pre[k], 0.02 * r.median_s)))
    return out


def _xy(kind: str, rows: list[MlaRow]) -> tuple[Features, np.ndarray]:
    return mla_features(kind, [r.config for r in rows]), np.array([r.median_s for r in rows], float)


def _fit(kind: str, rows: list[MlaRow], bw: float, fl: float, l2: float) -> KernelFit:
    f, t = _xy(kind, rows)
    fit = fit_kernel(f, t, bw, fl)
    return msgspec.structs.replace(fit, surface=surface_doc(fit_surface(fit, f, t, l2)))


def fit_mla(rows: Sequence[MlaRow], ceilings: Ceilings, kv_dtype: str, l2_bytes: float,
            train_only: bool = True) -> dict | None:
    """{decode_mla, prefix_mla, suffix_mla} KernelFit dicts for one KV dtype (None: too few rows). The
    decode has no private-page rows to fit its own parameters on (as the GQA decode has), so they are
    fitted on the bytes it must read at the least (each shared page once: every re-read from L2), then its
    L2 share and rate on the logical bytes, then the correction surface."""
    bw, fl = ceilings.hbm_read_bytes_per_s, ceilings.bf16_matmul_flop_per_s

    def keep(sel: list[MlaRow]) -> list[MlaRow]:
        return [r for r in sel if not (train_only and is_mla_held_out(r.config))]

    dec = keep(mla_rows(rows, "decode_shared", kv_dtype))
    pre = keep(mla_rows(rows, "cascade_prefix", kv_dtype))
    suf = keep(_suffix_rows(rows, kv_dtype))
    if min(len(dec), len(pre), len(suf)) < MIN_ROWS:
        return None
    f, t = _xy("decode_mla", dec)
    base = fit_kernel(msgspec.structs.replace(f, bytes=f.bytes - f.redundant_bytes), t, bw, fl)
    decode = fit_l2(base, f, t, l2_bytes)
    decode = msgspec.structs.replace(decode, surface=surface_doc(fit_surface(decode, f, t, l2_bytes)))
    return {"decode_mla": msgspec.to_builtins(decode),
            "prefix_mla": msgspec.to_builtins(_fit("prefix_mla", pre, bw, fl, l2_bytes)),
            "suffix_mla": msgspec.to_builtins(_fit("suffix_mla", suf, bw, fl, l2_bytes))}


def _mla_fits(fits: BackendFit | Mapping[str, Any]) -> dict[str, KernelFit]:
    """The three MLA fits of a backend: its typed section, or (an import transferring them) plain fit dicts."""
    if isinstance(fits, Mapping):
        missing = [n for n in KINDS if not fits.get(n)]
        if missing:
            raise ValueError(f"no MLA fit {', '.join(missing)} in this backend's section")
        return {n: msgspec.convert(fits[n], KernelFit) for n in KINDS}
    docs: dict[str, KernelFit | None] = {n: getattr(fits, n) for n in KINDS}
    missing = [n for n, d in docs.items() if d is None]
    if missing:
        raise ValueError(f"no MLA fit {', '.join(missing)} in this backend's section")
    return {n: d for n, d in docs.items() if d is not None}


def predict_mla(fits: BackendFit | Mapping[str, Any], kernel: str, cfgs: MlaConfigs, l2_bytes: float) -> np.ndarray:
    """The fitted per-layer time of a probe kernel (decode_shared, cascade_prefix, cascade_total) at MLA
    configurations, as the planner computes it (prefix + suffix/merge run one after the other)."""
    k = _mla_fits(fits)
    if kernel == "decode_shared":
        return predict(k["decode_mla"], mla_features("decode_mla", cfgs), l2_bytes)
    pre = predict(k["prefix_mla"], mla_features("prefix_mla", cfgs), l2_bytes)
    if kernel == "cascade_prefix":
        return pre
    has = np.array(config_column(cfgs, "suffix_tokens")) > 0
    return pre + np.where(has, predict(k["suffix_mla"], mla_features("suffix_mla", cfgs), l2_bytes), 0.0)


def mla_measured(rows: Sequence[MlaRow], kv_dtype: str, fits: BackendFit, l2_bytes: float) -> MeasuredAttention | None:
    """The MLA rows the planner interpolates (kernels per_sequence and cascade), each with the fit's time
    at its configuration; shape key (query heads per GPU, 1, latent width)."""
    out: dict[str, list] = {}
    for kernel, name in (("per_sequence", "decode_shared"), ("cascade", "cascade_total")):
        sel = mla_rows(rows, name, kv_dtype)
        cfgs = [r.config for r in sel]
        fit = predict_mla(fits, name, cfgs, l2_bytes).tolist() if cfgs else []
        out[kernel] = [(mla_shape_key(c.num_heads, c.kv_lora_rank + c.qk_rope_head_dim),
                        (c.n_groups, c.group_size, c.prefix_tokens, c.suffix_tokens), r.median_s, f)
                       for r, c, f in zip(sel, cfgs, fit)]
    return MeasuredAttention(MLA_BACKEND, kv_dtype, out, kind="mla") if any(out.values()) else None


def mla_grid(rows: Sequence[MlaRow], kv_dtype: str) -> dict | None:
    """The measured grid of the MLA rows of one KV dtype in workload terms (calibration/measured_grid.py)."""
    cfgs = [r.config for r in rows if r.config.kv_dtype == kv_dtype]
    if not cfgs:
        return None

    def tb(c: MlaConfig) -> int:
        return (c.kv_lora_rank + c.qk_rope_head_dim) * KV_ELEMENT_BYTES[c.kv_dtype]

    g = {"context_tokens": int(max(c.prefix_tokens + c.suffix_tokens for c in cfgs)),
         "sequences": int(max(c.group_size * c.n_groups for c in cfgs)),
         "layer_prefix_bytes": float(max(c.n_groups * c.prefix_tokens * tb(c) for c in cfgs))}
    return {"decode": g, "cascade": dict(g)}
