"""Calibration files: read the probe's measurements, fit the cost model per backend, and turn the
fitted numbers back into CostParams for the planner."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cascade_plan import __version__
from cascade_plan.calibration.aic_rows import decode_measured
from cascade_plan.calibration.calibration_schema import check_calibration, normalised_fits
from cascade_plan.calibration.fitting import (
    KernelFit,
    features,
    fit_kernel,
    fit_l2,
    fit_merge_overlap,
    fit_surface,
    fixed_part,
    predict,
)
from cascade_plan.calibration.measured_grid import coverage_notes, measured_grid, measured_rows
from cascade_plan.cost.cost_params import CostParams, KernelParams
from cascade_plan.errors import InputError
from cascade_plan.inputs.hardware import HardwareProfile
from cascade_plan.inputs.yaml_source import load_json
from cascade_plan.resources import data_dir

KIND = "cascade-plan-calibration"
FIT_VERSION = 1

# Where each backend's kernels come from in the probe file: (backend, variant) per planner kernel kind.
# FlashInfer's cascade is timed as prefix level and whole cascade; its suffix level and merge are
# fitted together from (whole - prefix).
BACKENDS: dict[str, dict[str, tuple[str, str | None]]] = {
    "triton": {"decode": ("triton", None), "prefix": ("triton", None), "suffix": ("triton", None),
               "merge": ("triton", None)},
    "torch": {"decode": ("torch", None), "prefix": ("torch", None), "suffix": ("torch", None),
              "merge": ("torch", None)},
    "flashinfer": {"decode": ("flashinfer", "tensor_cores"), "prefix": ("flashinfer", "auto"),
                   "total": ("flashinfer", "auto")},
    "flashinfer-fa2": {"decode": ("flashinfer", "tensor_cores"), "prefix": ("flashinfer-fa2", "fa2"),
                       "total": ("flashinfer-fa2", "fa2")},
}
BACKEND_HELP = {
    "flashinfer": "FlashInfer as shipped: tensor-core decode, MultiLevelCascadeAttentionWrapper (auto backend)",
    "flashinfer-fa2": "FlashInfer, cascade levels on the FA2 prefill backend",
    "torch": "torch's flash attention (no block table: per-sequence decode over duplicated prefix)",
    "triton": "the probe's own Triton kernels: what is attainable",
}
HOLDOUT_RULE = ("held out: every configuration with a 16,384-token prefix (a whole prefix slice), every one with "
                "1 KV head per GPU (the Llama-3-70B-at-TP-8 shape: a whole model-shape slice), and one in six of "
                "the rest by a stable hash of the configuration")


def config_key(cfg: dict) -> str:
    """One probe configuration as a stable string: the key that pairs kernels timed on the same config."""
    return json.dumps(cfg, sort_keys=True)


def is_held_out(cfg: dict) -> bool:
    if cfg["prefix_tokens"] == 16384 or cfg["num_kv_heads"] == 1:
        return True
    return int(hashlib.sha256(config_key(cfg).encode()).hexdigest(), 16) % 6 == 0


@dataclass(frozen=True)
class ProbeData:
    path: str
    doc: dict

    @property
    def hardware_id(self) -> str | None:
        return self.doc.get("hardware_id")

    @property
    def device_name(self) -> str:
        return self.doc.get("device", {}).get("name", "unknown GPU")

    @property
    def l2_bytes(self) -> float:
        return float(self.doc["device"]["l2_bytes"])

    @property
    def fitted(self) -> dict:
        return self.doc.get("fitted") or {}

    def select(self, backend: str, kernel: str, variant: str | None, kv_dtype: str) -> list[dict]:
        return [m for m in self.doc["measurements"] if m["backend"] == backend and m["kernel"] == kernel
                and (variant is None or m.get("variant") == variant) and m["config"]["kv_dtype"] == kv_dtype
                and m.get("median_s")]


def load_probe(path: Path) -> ProbeData:
    from cascade_plan.inputs.limits import MAX_CALIBRATION_BYTES

    doc = load_json(Path(path), "calibration", MAX_CALIBRATION_BYTES)
    d = doc.data
    if d.get("kind") != KIND:
        raise doc.error(("kind",), f"not a cascade-plan calibration file (kind is {d.get('kind')!r})")
    if d.get("schema_version") != 1:
        raise doc.error(("schema_version",), f"unsupported schema_version {d.get('schema_version')!r}")
    typed = check_calibration(d, doc)   # typed: every measurement, every fitted number finite and in range
    fits = normalised_fits(typed)
    if fits is not None:                # optional fields filled in: readers index them directly
        d = {**d, "fitted": {**d["fitted"], "kv_dtypes": fits}}
    return ProbeData(str(path), d)


# ---- fitting ------------------------------------------------------------------------------------

def _xy(rows: list[dict], kernel: str):
    f = features(kernel, [r["config"] for r in rows])
    return f, np.array([r["median_s"] for r in rows], dtype=float)


def _fit_one(f, t, bw, fl, l2=0.0) -> KernelFit:
    fit = fit_kernel(f, t, bw, fl)
    return dataclasses.replace(fit, surface=fit_surface(fit, f, t, l2))


def _by_config(rows: list[dict]) -> dict[str, dict]:
    return {config_key(r["config"]): r for r in rows}


def _residual_rows(total: list[dict], parts: list[list[dict]]) -> list[dict]:
    """Whole-cascade time minus the parts timed alone, per configuration: what the merge (or, for
    FlashInfer, suffix level + merge) costs inside the cascade."""
    maps = [_by_config(p) for p in parts]
    out = []
    for r in total:
        key = config_key(r["config"])
        if all(key in m for m in maps):
            rest = r["median_s"] - sum(m[key]["median_s"] for m in maps)
            out.append({**r, "median_s": max(rest, 0.02 * r["median_s"])})
    return out


def fit_backend(probe: ProbeData, backend: str, kv_dtype: str, train_only: bool = True) -> dict | None:
    """KernelFits for one backend and KV dtype, from the training subset of the grid."""
    src = BACKENDS[backend]
    ceil = probe.doc["ceilings"]
    bw, fl, l2 = ceil["hbm_read_bytes_per_s"], ceil["bf16_matmul_flop_per_s"], probe.l2_bytes

    def rows(b, k, v):
        sel = probe.select(b, k, v, kv_dtype)
        return [r for r in sel if not (train_only and is_held_out(r["config"]))]

    out: dict[str, dict] = {}
    db, dv = src["decode"]
    dup = rows(db, "decode_dup", dv)
    if len(dup) < 6:
        return None
    f, t = _xy(dup, "decode_dup")
    dup_fit = _fit_one(f, t, bw, fl)
    out["decode_dup"] = dup_fit.to_dict()
    shared = rows(db, "decode_shared", dv)
    if len(shared) >= 6:
        f2, t2 = _xy(shared, "decode_shared")
        sh = fit_l2(dataclasses.replace(dup_fit, surface=None), f2, t2, l2)
        out["decode_shared"] = dataclasses.replace(sh, surface=fit_surface(sh, f2, t2, l2)).to_dict()
    else:
        out["decode_shared"] = dup_fit.to_dict()   # no block table: shared pages are not expressible
    pb, pv = src["prefix"]
    pre = rows(pb, "cascade_prefix", pv)
    if len(pre) < 6:
        return None
    out["prefix"] = _fit_one(*_xy(pre, "cascade_prefix"), bw, fl).to_dict()
    if "total" in src:
        tb, tv = src["total"]
        rest = _residual_rows(rows(tb, "cascade_total", tv), [pre])
        rest = [r for r in rest if r["config"]["suffix_tokens"] > 0]
        out["suffix"] = _fit_one(*_xy(rest, "cascade_suffix"), bw, fl).to_dict()
        out["merge"] = None                       # folded into the suffix fit
    else:
        suf = rows(pb, "cascade_suffix", pv)
        suf_fit = _fit_one(*_xy(suf, "cascade_suffix"), bw, fl)
        out["suffix"] = suf_fit.to_dict()
        merge, overlap = _fit_merge(rows(pb, "cascade_total", pv), pre, suf, KernelFit.from_dict(out["prefix"]),
                                    suf_fit, bw, fl)
        out["merge"] = merge.to_dict() if merge else None
        out["prefix_suffix_overlap"] = overlap
    return out


def _fit_merge(total: list[dict], pre: list[dict], suf: list[dict], pre_fit: KernelFit, suf_fit: KernelFit,
               bw: float, fl: float) -> tuple[KernelFit | None, float]:
    """Merge costs and prefix/suffix overlap from whole cascades whose passes were also timed alone
    (a cascade without suffix tokens has no suffix pass)."""
    pmap, smap = _by_config(pre), _by_config(suf)
    keep = [r for r in total if config_key(r["config"]) in pmap
            and (r["config"]["suffix_tokens"] == 0 or config_key(r["config"]) in smap)]
    if len(keep) < 6:
        return None, 0.0
    cfgs = [r["config"] for r in keep]
    keys = [config_key(c) for c in cfgs]
    t_pre = np.array([pmap[k]["median_s"] for k in keys])
    t_suf = np.array([smap[k]["median_s"] if k in smap else 0.0 for k in keys])
    fp, fs = features("cascade_prefix", cfgs), features("cascade_suffix", cfgs)
    roof_pre = predict(pre_fit, fp) - fixed_part(pre_fit, fp)
    roof_suf = np.where(t_suf > 0, predict(suf_fit, fs) - fixed_part(suf_fit, fs), 0.0)
    return fit_merge_overlap(features("cascade_merge", cfgs), np.array([r["median_s"] for r in keep]), t_pre, t_suf,
                             roof_pre, roof_suf, bw, fl)


def calibrate(probe: ProbeData) -> dict:
    """The `fitted` section: per KV dtype and backend, every kernel kind's parameters."""
    kv_dtypes = sorted({m["config"]["kv_dtype"] for m in probe.doc["measurements"]})
    fitted = {"fit_version": FIT_VERSION, "tool_version": __version__,
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
    if probe.doc.get("step_ops") and probe.hardware_id:
        from cascade_plan.calibration.step_fit import fitted_step_parts_json
        from cascade_plan.inputs.hardware import load_hardware

        sp = fitted_step_parts_json(probe.doc, load_hardware(probe.hardware_id), Path(probe.path).name)
        if sp is not None:
            fitted["step_parts"] = sp
    return fitted


def step_parts_of(probe: ProbeData):
    """The fitted StepParts of a calibration, or the documented defaults when it has none."""
    from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS
    from cascade_plan.cost.step_parts import step_parts_from_json

    doc = probe.fitted.get("step_parts")
    if not doc:
        return DEFAULT_STEP_PARTS
    try:
        return step_parts_from_json(doc)
    except ValueError as exc:
        raise InputError(str(exc), file=probe.path, field="fitted.step_parts") from None


# ---- using a calibration ------------------------------------------------------------------------

def _kernel_params(d: dict | None, hw: HardwareProfile) -> KernelParams:
    if d is None:   # folded into another kind: costs nothing of its own
        return KernelParams(bw_eff=1e9, flop_eff=1e9)
    k = KernelFit.from_dict(d)
    return KernelParams(bw_eff=k.bw_bytes_per_s / hw.hbm_bytes_per_s, flop_eff=k.flop_per_s / hw.dense_bf16_flop_per_s,
                        overhead_s=k.overhead_s, row_s=k.row_s, q_row_s=k.q_row_s, token_latency_s=k.token_latency_s,
                        surface=k.surface)


def default_backend(probe: ProbeData, kv_dtype: str | None = None) -> str:
    """The backend a command uses when none is asked for: FlashInfer (what engines ship) where it is
    fitted, else the next; for a KV dtype, the first fitted for that dtype, so that fp8 KV is priced by
    a backend measured with fp8 KV when one exists."""
    kvs = probe.fitted.get("kv_dtypes", {})
    if kv_dtype is not None and kvs.get(kv_dtype):
        kvs = {kv_dtype: kvs[kv_dtype]}
    available = set().union(*[set(v) for v in kvs.values()]) if kvs else set()
    for b in ("flashinfer", "triton", "torch", "flashinfer-fa2"):
        if b in available:
            return b
    raise InputError("the calibration file has no fitted parameters: run `cascade-plan calibrate` on it first",
                     file=probe.path)


def params_from_probe(probe: ProbeData, backend: str | None, kv_dtype: str, hw: HardwareProfile,
                      model=None) -> CostParams:
    fitted = probe.fitted
    if not fitted.get("kv_dtypes"):
        raise InputError("the calibration file has no fitted parameters: run `cascade-plan calibrate` on it first",
                         file=probe.path)
    per_dtype = fitted["kv_dtypes"]
    asked = backend
    backend = backend or default_backend(probe, kv_dtype)
    key = kv_dtype if kv_dtype in per_dtype and backend in per_dtype[kv_dtype] else "bf16"
    if backend not in per_dtype.get(key, {}):
        have = sorted(per_dtype.get(key, {}))
        raise InputError(f"backend {backend!r} is not in this calibration; it has: {', '.join(have)}", file=probe.path)
    k = per_dtype[key][backend]
    mla = model is not None and model.attention == "mla" and bool(k.get("decode_mla"))
    notes = (coverage_notes(probe, model, mla, kv_dtype if key == kv_dtype else None, backend)
             if model is not None else [])
    notes_info: tuple[str, ...] = ()
    if key != kv_dtype:
        # never a stand-in: the note turns the verdict into a range over the sources we have
        # (verdict_evidence.py), and no bf16 row is interpolated for it (measured=None below)
        notes.append(f"{backend} is not calibrated for {kv_dtype} KV (no {kv_dtype} rows; fp8 decode is not bf16 "
                     f"decode at half the bytes): its bf16 numbers are shown only as one end of a range")
    elif asked is None and backend != default_backend(probe):
        stand_in = (f"{default_backend(probe)} has no {kv_dtype} KV rows, so {backend} (measured with {kv_dtype} "
                    f"KV) prices it")
        notes_info = (stand_in,)
    notes += k.get("notes", [])          # what an imported file says about its own coverage
    decode_shared, decode_dup = k["decode_shared"], k["decode_dup"]
    if mla:   # the measured MLA decode, with the GQA fit's L2 gain over shared pages
        decode_dup = k["decode_mla"]
        decode_shared = {**k["decode_mla"], **{f: k["decode_shared"][f] for f in
                                                ("l2_hit_max", "l2_window_bytes", "l2_bytes_per_s")}}
    origin = source_kind(probe.doc)
    ceil = fitted["ceilings"]
    gemm = KernelParams(bw_eff=min(1.0, ceil["hbm_read_bytes_per_s"] / hw.hbm_bytes_per_s),
                        flop_eff=min(1.0, ceil["bf16_matmul_flop_per_s"] / hw.dense_bf16_flop_per_s))
    shared = KernelFit.from_dict(decode_shared)
    step = step_parts_of(probe)
    if origin == "probe" and probe.hardware_id == hw.id:
        from cascade_plan.calibration.allreduce_source import prefer_measured_allreduce

        step = prefer_measured_allreduce(step, hw, probe.doc)
    if step.source == "default":
        notes.append("no step parts in this calibration: GEMMs, glue and all-reduce use the defaults")
    return CostParams(
        mode="calibrated", decode=_kernel_params(decode_shared, hw), prefix=_kernel_params(k["prefix"], hw),
        suffix=_kernel_params(k["suffix"], hw), merge=_kernel_params(k["merge"], hw), gemm=gemm,
        l2_hit_max=shared.l2_hit_max, l2_window_bytes=shared.l2_window_bytes or None,
        l2_bytes_per_s=shared.l2_bytes_per_s or None, source=probe.path, backend=backend,
        decode_dup=_kernel_params(decode_dup, hw), notes=tuple(notes),
        prefix_suffix_overlap=float(k.get("prefix_suffix_overlap", 0.0)), step=step,
        origin=origin, origin_label=(probe.doc.get("source") or {}).get("label") if origin == "aic" else None,
        measured_grid=measured_grid(probe.doc, kv_dtype if key == kv_dtype else None),
        measured=(None if key != kv_dtype else measured_rows(probe, backend, kv_dtype, k) if origin == "probe"
                  else decode_measured(probe.doc, backend, kv_dtype, k, probe.l2_bytes)),
        info=(*notes_info, *(["fitted on all its rows (too few to hold any out)"] if k.get("train_rows") else [])),
    )


def source_kind(doc: dict) -> str:
    """"probe" (our GPU probe) or "aic" (imported from AIConfigurator's tables)."""
    return "aic" if doc.get("source_kind") == "aic" else "probe"


# The best source first: the project's own probe measures the cascade kernels nobody else does.
SOURCE_PREFERENCE = ("probe", "aic")


def find_committed(hw: HardwareProfile, source: str | None = None) -> ProbeData | None:
    """The shipped calibration for this profile that has fitted numbers: the project's probe file where
    there is one, else one imported from AIConfigurator (newest first within a kind); `source`
    restricts the kind. Shipped files are named <hardware id>-<kind>-....json, so only those are opened,
    the preferred kind first."""
    import msgspec

    for kind in (source,) if source else SOURCE_PREFERENCE:
        found = []
        for p in sorted(data_dir("calibrations").glob(f"{hw.id}-{kind}-*.json")):
            try:
                d = msgspec.json.decode(p.read_bytes())
            except (OSError, msgspec.DecodeError):
                continue
            if (d.get("kind") == KIND and d.get("hardware_id") == hw.id and (d.get("fitted") or {}).get("kv_dtypes")
                    and source_kind(d) == kind):
                found.append((d.get("created_utc", ""), str(p), d))
        if found:
            _, path, doc = max(found, key=lambda x: x[:2])
            return ProbeData(path, doc)
    return None


def check_device(probe: ProbeData, hw: HardwareProfile, force: bool) -> None:
    if probe.hardware_id != hw.id and not force:
        raise InputError(f"calibration measured on {probe.device_name} (hardware_id {probe.hardware_id!r}) cannot "
                         f"describe {hw.id}; use a calibration from that GPU, or --force to apply it anyway",
                         file=probe.path)
