"""Fitting a probe file: per KV dtype and backend, every kernel kind's parameters from the training rows
(holdout.py says which are held out), and the step parts where the file has op rows. The result is the
file's `fitted` section."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from cascade_plan.calibration.backends import BACKENDS, DECODE_ROWS_BY_BACKEND, PREFIX_ROWS_BY_BACKEND
from cascade_plan.calibration.calibration_file import ProbeData
from cascade_plan.calibration.fitting import (
    Features,
    features,
    fit_kernel,
    fit_l2,
    fit_merge_overlap,
    fit_surface,
    fixed_part,
    predict,
    surface_doc,
)
from cascade_plan.calibration.holdout import HOLDOUT_RULE, config_key, is_held_out
from cascade_plan.calibration.launch_rules import filled_launch, page_block_rule
from cascade_plan.calibration_schema.attention import Measurement
from cascade_plan.calibration_schema.kernel_fit import KernelFit
from cascade_plan.cost.ops.page_blocks import PageBlocks, page_blocks_of
from cascade_plan.version import __version__

FIT_VERSION = 1


def _xy(rows: list[Measurement], kernel: str, prefix_rows: str = "kv_head",
        decode_rows: str = "q_head", page_blocks: PageBlocks | None = None) -> tuple[Features, np.ndarray]:
    f = features(kernel, [r.config for r in rows], prefix_rows, decode_rows, page_blocks)
    return f, np.array([r.timed_s for r in rows], dtype=float)


def _fit_one(f: Features, t: np.ndarray, bw: float, fl: float, l2: float = 0.0,
             filled: tuple[int, int, int] | None = None) -> KernelFit:
    fit = fit_kernel(f, t, bw, fl, filled)
    return msgspec.structs.replace(fit, surface=surface_doc(fit_surface(fit, f, t, l2)))


def _with_filled(fit: KernelFit, decode: KernelFit) -> KernelFit:
    """The suffix pass is the per-sequence decode kernel over private tokens, launched by the same rule: where its
    own rows did not show the batch-filled launch's gain and the decode's did, it takes the decode's gain there."""
    if not decode.filled_rows or decode.filled_gain == 1.0 or (fit.filled_rows and fit.filled_gain != 1.0):
        return fit
    return msgspec.structs.replace(fit, filled_rows=decode.filled_rows, filled_min_tokens=decode.filled_min_tokens,
                                   filled_tile_tokens=decode.filled_tile_tokens, filled_gain=decode.filled_gain)


def _by_config(rows: list[Measurement]) -> dict[str, Measurement]:
    return {config_key(r.config): r for r in rows}


def _residual_rows(total: list[Measurement], parts: list[list[Measurement]]) -> list[Measurement]:
    """Whole-cascade time minus the parts timed alone, per configuration: what the merge (or, for
    FlashInfer, suffix level + merge) costs inside the cascade."""
    maps = [_by_config(p) for p in parts]
    out = []
    for r in total:
        key = config_key(r.config)
        if all(key in m for m in maps):
            rest = r.timed_s - sum(m[key].timed_s for m in maps)
            out.append(msgspec.structs.replace(r, median_s=max(rest, 0.02 * r.timed_s), sustained_s=None))
    return out


def fit_backend(probe: ProbeData, backend: str, kv_dtype: str, train_only: bool = True) -> dict | None:
    """KernelFits for one backend and KV dtype, from the training subset of the grid."""
    src = BACKENDS[backend]
    ceil = probe.ceilings
    bw, fl, l2 = ceil.hbm_read_bytes_per_s, ceil.bf16_matmul_flop_per_s, probe.l2_bytes

    def rows(b: str, k: str, v: str | None) -> list[Measurement]:
        sel = probe.select(b, k, v, kv_dtype)
        return [r for r in sel if not (train_only and is_held_out(r.config))]

    out: dict[str, Any] = {}
    db, dv = src["decode"]
    dup = rows(db, "decode_dup", dv)
    if len(dup) < 6:
        return None
    dec_rows = DECODE_ROWS_BY_BACKEND.get((backend, kv_dtype), "q_head")
    filled = filled_launch(probe, backend)
    rule, rule_line = page_block_rule(probe, db, kv_dtype)
    blocks = page_blocks_of(rule.sm_count, rule.tune) if rule else None
    f, t = _xy(dup, "decode_dup", decode_rows=dec_rows, page_blocks=blocks)
    dup_fit = _fit_one(f, t, bw, fl, filled=filled)
    out["decode_dup"] = msgspec.to_builtins(dup_fit)
    if dec_rows != "q_head":
        out["decode_rows"] = dec_rows
    shared = rows(db, "decode_shared", dv)
    if rule:
        out["page_blocks"] = msgspec.to_builtins(rule)
    elif rule_line:
        out["notes"] = [rule_line]
    if len(shared) >= 6:
        f2, t2 = _xy(shared, "decode_shared", decode_rows=dec_rows, page_blocks=blocks)
        sh = fit_l2(msgspec.structs.replace(dup_fit, surface=None), f2, t2, l2, fl if blocks is not None else None)
        sh = msgspec.structs.replace(sh, surface=surface_doc(fit_surface(sh, f2, t2, l2)))
        out["decode_shared"] = msgspec.to_builtins(sh)
    else:
        out["decode_shared"] = msgspec.to_builtins(dup_fit)   # no block table: shared pages are not expressible
    pb, pv = src["prefix"]
    pre = rows(pb, "cascade_prefix", pv)
    if len(pre) < 6:
        return None
    tiling = PREFIX_ROWS_BY_BACKEND.get((backend, kv_dtype), "kv_head")
    pre_fit = _fit_one(*_xy(pre, "cascade_prefix", tiling, page_blocks=blocks), bw, fl)
    out["prefix"] = msgspec.to_builtins(pre_fit)
    if tiling != "kv_head":
        out["prefix_rows"] = tiling
    if "total" in src:
        tb, tv = src["total"]
        rest = _residual_rows(rows(tb, "cascade_total", tv), [pre])
        rest = [r for r in rest if r.config.suffix_tokens > 0]
        out["suffix"] = msgspec.to_builtins(_fit_one(*_xy(rest, "cascade_suffix"), bw, fl))
        out["merge"] = None                       # folded into the suffix fit
    else:
        suf = rows(pb, "cascade_suffix", pv)
        suf_fit = _with_filled(_fit_one(*_xy(suf, "cascade_suffix"), bw, fl, filled=filled), dup_fit)
        out["suffix"] = msgspec.to_builtins(suf_fit)
        merge, overlap = _fit_merge(rows(pb, "cascade_total", pv), pre, suf, pre_fit, suf_fit, bw, fl, blocks)
        out["merge"] = msgspec.to_builtins(merge) if merge else None
        out["prefix_suffix_overlap"] = overlap
    return out


def _fit_merge(total: list[Measurement], pre: list[Measurement], suf: list[Measurement], pre_fit: KernelFit,
               suf_fit: KernelFit, bw: float, fl: float,
               blocks: PageBlocks | None = None) -> tuple[KernelFit | None, float]:
    """Merge costs and prefix/suffix overlap from whole cascades whose passes were also timed alone
    (a cascade without suffix tokens has no suffix pass); `blocks`: the launch rule the prefix fit took."""
    pmap, smap = _by_config(pre), _by_config(suf)
    keep = [r for r in total if config_key(r.config) in pmap
            and (r.config.suffix_tokens == 0 or config_key(r.config) in smap)]
    if len(keep) < 6:
        return None, 0.0
    cfgs = [r.config for r in keep]
    keys = [config_key(c) for c in cfgs]
    t_pre = np.array([pmap[k].timed_s for k in keys])
    t_suf = np.array([smap[k].timed_s if k in smap else 0.0 for k in keys])
    fp, fs = features("cascade_prefix", cfgs, page_blocks=blocks), features("cascade_suffix", cfgs)
    roof_pre = predict(pre_fit, fp) - fixed_part(pre_fit, fp)
    roof_suf = np.where(t_suf > 0, predict(suf_fit, fs) - fixed_part(suf_fit, fs), 0.0)
    return fit_merge_overlap(features("cascade_merge", cfgs), np.array([r.timed_s for r in keep]), t_pre, t_suf,
                             roof_pre, roof_suf, bw, fl)


def calibrate(probe: ProbeData) -> dict:
    """The `fitted` section: per KV dtype and backend, every kernel kind's parameters."""
    kv_dtypes = sorted({m.config.kv_dtype for m in probe.measurements})
    # the ceilings as the probe wrote them (its key order; none of the optional ones added)
    fitted: dict = {"fit_version": FIT_VERSION, "tool_version": __version__,
                    "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "holdout_rule": HOLDOUT_RULE, "ceilings": probe.doc["ceilings"], "kv_dtypes": {}}
    for kv in kv_dtypes:
        # Each KV dtype from its own rows only. A dtype measured on too few configurations to hold any out
        # (the first fp8 rows: 9 per kernel) is fitted on all of them, and says so (`train_rows`).
        per = {}
        for b in BACKENDS:
            fit = fit_backend(probe, b, kv)
            if fit is None:
                fit = fit_backend(probe, b, kv, train_only=False)
                if fit is not None:
                    fit["train_rows"] = "all (too few rows to hold any out)"
            if fit is not None:
                per[b] = fit
        if per:
            fitted["kv_dtypes"][kv] = per
    _add_mla_fits(probe, fitted)
    if probe.step_ops and probe.hardware_id:
        from cascade_plan.calibration.step_fit import fitted_step_parts_json
        from cascade_plan.inputs.hardware import load_hardware

        sp = fitted_step_parts_json(probe, load_hardware(probe.hardware_id), Path(probe.path).name)
        if sp is not None:
            fitted["step_parts"] = sp
    return fitted


def _add_mla_fits(probe: ProbeData, fitted: dict) -> None:
    """The MLA rows' fits (calibration/mla_fit.py) into the MLA backend's section of each KV dtype they
    cover: every other fit stays as it is."""
    from cascade_plan.calibration.mla_fit import MLA_HOLDOUT_RULE, fit_mla
    from cascade_plan.cost.ops.mla_attention import MLA_BACKEND

    for kv in sorted({r.config.kv_dtype for r in probe.mla}):
        per = fitted["kv_dtypes"].get(kv, {}).get(MLA_BACKEND)
        if per is None:
            continue
        fit, how = fit_mla(probe.mla, probe.ceilings, kv, probe.l2_bytes), MLA_HOLDOUT_RULE
        if fit is None:
            fit, how = (fit_mla(probe.mla, probe.ceilings, kv, probe.l2_bytes, train_only=False),
                        "all (too few rows to hold any out)")
        if fit is not None:
            per.update(fit)
            per["mla_train_rows"] = how
