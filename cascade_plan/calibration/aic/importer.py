"""`import-aic`: a calibration file for one GPU from NVIDIA AIConfigurator's measured tables.

Measured (AIConfigurator): per-sequence decode attention (GQA, and MLA where the tables have it), the
weight GEMMs' time over their roofline by (M, weight bytes) and dtype, MoE expert GEMMs, all-reduce by
GPU count and message size. Transferred from our H200 probe (aic/transfer.py, labelled in the file
and in every output): the cascade prefix pass, suffix pass and merge, and the L2 gain of decode over
shared pages. The file has the probe files' layout (`fitted.kv_dtypes.<kv>.<backend>`), so the
planner reads both through one path, plus `source` (what it came from) and `fitted.step_parts`
(where the probe calibration keeps its own).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import msgspec
import numpy as np

from cascade_plan.calibration.aic import fit as aic_fit
from cascade_plan.calibration.aic import tables as aic_tables
from cascade_plan.calibration.aic.moe_import import moe_rows
from cascade_plan.calibration.aic.rows import encode_rows
from cascade_plan.calibration.aic.transfer import (
    FA3_GPUS,
    TransferRatios,
    transfer_backend,
    transfer_glue,
    transfer_mla,
)
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.measured_grid import grid_of_configs, measured_grid
from cascade_plan.calibration.moe_rows import skew_ratios
from cascade_plan.calibration.probe_fit import FIT_VERSION
from cascade_plan.calibration.probe_params import step_parts_of
from cascade_plan.calibration.step_parts_doc import step_parts_json
from cascade_plan.calibration_schema.document import KIND
from cascade_plan.cost.step_parts import GlueParams, StepParts
from cascade_plan.errors import InputError
from cascade_plan.inputs.hardware import HardwareProfile, load_hardware
from cascade_plan.version import __version__

SOURCE_KIND = "aic"
# Backends whose cascade kernels are transferred. torch's per-sequence decode has no block table (it
# reads duplicated prefixes), so its cascade numbers mean nothing beside a paged engine decode.
TRANSFER_BACKENDS = ("flashinfer", "flashinfer-fa2", "triton")
ATTN_COLUMNS = ["kernel_source", "batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim",
                "beam_width", "kv_cache_dtype", "window_size", "latency"]
GEMM_COLUMNS = ["gemm_dtype", "m", "n", "k", "latency"]
MOE_COLUMNS = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
               "moe_ep_size", "distribution", "latency"]
MLA_COLUMNS = ["kernel_source", "kv_cache_dtype", "gemm_type", "num_heads", "batch_size", "isl", "step", "latency"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _require(table, what: str, system: str, framework: str):
    if table is None:
        raise InputError(f"AIConfigurator has no {what} table for {system} under framework {framework!r}")
    return table


class _Gpu:
    """One system's tables and the fits both the GPU itself and the transfer ratios need."""

    def __init__(self, root: Path, hw: HardwareProfile, framework: str):
        self.hw, self.system = hw, aic_tables.AIC_SYSTEMS[hw.id]
        load = lambda op, name, cols: aic_tables.load(root, self.system, op, framework, name, cols)  # noqa: E731
        self.attn = _require(load("attention", "generation_attention_perf", ATTN_COLUMNS), "generation attention",
                             self.system, framework)
        self.gemm = _require(load("gemm", "gemm_perf", GEMM_COLUMNS), "GEMM", self.system, framework)
        self.decode: dict[str, tuple] = {}
        self.decode_raw: dict[str, tuple] = {}      # (configurations, times s) per KV dtype, shipped as rows
        for kv in ("bf16", "fp8"):
            cfgs, t, kernel = aic_fit.decode_rows(self.attn.columns, kv)
            if kv == "bf16":
                self.decode_cfgs = cfgs
            if len(cfgs) >= 12:
                self.decode[kv] = (aic_fit.fit_decode(cfgs, t, hw.hbm_bytes_per_s, hw.dense_bf16_flop_per_s),
                                   kernel, len(cfgs))
                self.decode_raw[kv] = (cfgs, t)
        if "bf16" not in self.decode:
            raise InputError(f"AIConfigurator's {self.attn.rel_path} has too few bf16 decode rows at head dim 128")
        self.gemm_rows = {d: aic_fit.gemm_rows(self.gemm.columns, a) for a, d in aic_fit.GEMM_DTYPES.items()}
        self.gemm_rows = {d: r for d, r in self.gemm_rows.items() if r["t"].size >= 12}
        self.ceilings = aic_fit.gemm_ceilings(self.gemm_rows["bf16"], "bf16")
        self.launch_floor_s = aic_fit.launch_floor_s(self.attn.columns)


def transfer_ratios(gpu: _Gpu, ref: _Gpu | None) -> TransferRatios:
    if ref is None:
        return TransferRatios(1.0, 1.0, 1.0, 1.0)
    return TransferRatios(
        bandwidth=gpu.decode["bf16"][0].bw_bytes_per_s / ref.decode["bf16"][0].bw_bytes_per_s,
        flop=gpu.ceilings["matmul_flop_per_s"] / ref.ceilings["matmul_flop_per_s"],
        fixed=gpu.launch_floor_s / ref.launch_floor_s,
        l2=gpu.hw.l2_bytes / ref.hw.l2_bytes,
        sm=gpu.hw.sm_count / ref.hw.sm_count)


def _step_parts(root: Path, gpu: _Gpu, framework: str, probe, ratios: TransferRatios,
                source: str) -> tuple[StepParts, list[dict], list[dict]]:
    hw, used = gpu.hw, []
    gemm, shapes = {}, {}
    for d, rows in gpu.gemm_rows.items():
        gemm[d] = aic_fit.gemm_efficiency(rows, d, hw.hbm_bytes_per_s, hw.flop_per_s(d))
        shapes[d] = aic_fit.gemm_shape_table(rows, d, hw.hbm_bytes_per_s, hw.flop_per_s(d), gemm[d])
    used.append({"table": gpu.gemm.name, "path": gpu.gemm.rel_path,
                 "rows": int(sum(r["t"].size for r in gpu.gemm_rows.values()))})
    moe = aic_tables.load(root, gpu.system, "moe", framework, "moe_perf", MOE_COLUMNS + ["kernel_source"])
    if moe is not None:
        n_used = 0
        for a, d in aic_fit.GEMM_DTYPES.items():
            got = aic_fit.moe_efficiency(moe.columns, a, d, hw.hbm_bytes_per_s, hw.flop_per_s(d))
            if got:
                gemm[f"moe:{d}"], n = got
                n_used += n
        if n_used:
            used.append({"table": moe.name, "path": moe.rel_path, "rows": n_used})
    allreduce, notes = {}, []
    op, fw, name = aic_tables.ALLREDUCE_TABLES[framework]
    ar = aic_tables.load(root, gpu.system, op, fw, name, ["num_gpus", "message_size", "latency", "kernel_source",
                                                          "allreduce_dtype"])
    if ar is not None:
        ks = ar.columns["kernel_source"]
        graph = np.char.find(ks.astype(str), "graph") >= 0
        pick = graph if graph.any() else np.ones(ks.size, bool)
        allreduce = aic_fit.allreduce_fits(ar.columns, pick,
                                           f"{ar.rel_path} ({', '.join(sorted(set(ks[pick].tolist())))})",
                                           "allreduce_dtype")
        used.append({"table": ar.name, "path": ar.rel_path, "rows": int(pick.sum())})
    if not allreduce:
        op, fw, name = aic_tables.NCCL_TABLE
        nc = aic_tables.load(root, gpu.system, op, fw, name,
                             ["op_name", "nccl_dtype", "num_gpus", "message_size", "latency"])
        if nc is not None:
            pick = (nc.columns["op_name"] == "all_reduce") & (nc.columns["nccl_dtype"] == "half")
            allreduce = aic_fit.allreduce_fits(nc.columns, pick, f"{nc.rel_path} (NCCL all_reduce, half)", "nccl_dtype")
            used.append({"table": nc.name, "path": nc.rel_path, "rows": int(pick.sum())})
    if probe.step_parts_doc:
        glue = transfer_glue(step_parts_of(probe).glue, ratios)
        notes.append("glue (norms, RoPE, sampling): not in AIConfigurator's tables; transferred from the "
                     "H200 probe (per-token costs by the bandwidth ratio, fixed costs by the launch-floor ratio); "
                     "the K/V append left out of it: AIConfigurator's decode attention includes it")
    else:
        glue = GlueParams(variant="not measured")
        notes.append("glue (norms, RoPE, KV append, sampling): not in AIConfigurator's tables and not measured by the "
                     "H200 probe file used; left at zero")
    if probe.step_parts_doc:
        source += f"; glue transferred from the {probe.hardware_id.upper()} probe"
    notes.append("GEMMs: AIConfigurator's gemm_perf kept per (M, N, K) and interpolated in it (N, K >= 256, "
                 "M <= 8192); shapes outside it (e.g. a lm_head of N > 65536) from its (M, weight bytes) ratio table")
    return StepParts(gemm=gemm, glue=glue, allreduce=allreduce, source=source, notes=tuple(notes),
                     gemm_shapes=shapes), used, (moe_rows(moe.columns) if moe is not None else [])


def import_aic(hardware_id: str, framework: str = "vllm", aic_data: Path | None = None) -> dict:
    """The calibration document for one GPU (not written)."""
    if framework not in aic_tables.FRAMEWORKS:
        raise InputError(f"--framework: use one of {', '.join(aic_tables.FRAMEWORKS)}")
    hw = load_hardware(hardware_id)
    if hw.id not in aic_tables.AIC_SYSTEMS:
        raise InputError(f"AIConfigurator has no tables for {hw.id}; it covers "
                         f"{', '.join(sorted(aic_tables.AIC_SYSTEMS))}")
    root = aic_tables.data_root(aic_data)
    ref_hw = load_hardware(aic_tables.REFERENCE_HW)
    probe = find_committed(ref_hw, source="probe")
    if probe is None:
        raise InputError(f"import-aic transfers the cascade kernels from the {ref_hw.id} probe calibration, and none "
                         "is shipped")
    gpu = _Gpu(root, hw, framework)
    ref = None if hw.id == ref_hw.id else _Gpu(root, ref_hw, framework)
    ratios = transfer_ratios(gpu, ref)
    version = aic_tables.package_version(aic_data)
    fw_version = gpu.attn.version
    label = (f"calibrated from AIConfigurator {framework} {fw_version} tables ({aic_tables.PACKAGE} {version}, "
             f"{gpu.system}); cascade parts transferred from the {ref_hw.id.upper()} probe")
    probe_name = Path(probe.path).name
    kv_fits: dict = {}
    for kv, (dec, kernel, n) in gpu.decode.items():
        src = probe.fitted["kv_dtypes"].get(kv) or probe.fitted["kv_dtypes"]["bf16"]
        per = {}
        for b in TRANSFER_BACKENDS:
            if b in src:
                fa2 = b == "flashinfer" and hw.id not in FA3_GPUS and "flashinfer-fa2" in src
                per[b] = transfer_backend(src["flashinfer-fa2" if fa2 else b], msgspec.to_builtins(dec), ratios)
                if kv not in probe.fitted["kv_dtypes"]:
                    per[b]["notes"] = [f"{kv} KV: decode measured by AIConfigurator, the cascade kernels transferred "
                                       "from the probe's bf16 fits"]
                if fa2:     # the same transfer as every cascade kernel here, of the kernels FlashInfer runs here
                    per[b]["info"] = ["FlashInfer's cascade here is its FA2 prefill (FA3 needs a Hopper GPU): the "
                                      "probe's FA2 cascade kernels transferred"]
                    per[b]["cascade_from"] = "flashinfer-fa2"
        kv_fits[kv] = per
    mla_used = None
    mla = aic_tables.load(root, gpu.system, "mla", framework, "mla_generation_module_perf", MLA_COLUMNS)
    if mla is not None:
        for kv in list(kv_fits):
            b, ctx, h, t = aic_fit.mla_attention_rows(mla.columns, kv)
            fit = aic_fit.fit_mla_decode(b, ctx, h, t, kv, hw.hbm_bytes_per_s, hw.dense_bf16_flop_per_s)
            if fit is not None:
                for per in kv_fits[kv].values():
                    per["decode_mla"] = msgspec.to_builtins(fit)
                mla_used = {"table": mla.name, "path": mla.rel_path, "rows": int(b.size)}
    mla_rows, mla_grids = _mla_kernels(kv_fits, probe, ratios, mla, hw)
    steps, used, moe_tables = _step_parts(root, gpu, framework, probe, ratios,
                                          f"aic:{aic_tables.PACKAGE} {version}, {framework} {fw_version}, {gpu.system}")
    tables = [{"table": gpu.attn.name, "path": gpu.attn.rel_path, "rows": int(sum(v[2] for v in gpu.decode.values())),
               "kernel": gpu.decode["bf16"][1]}] + used + ([mla_used] if mla_used else [])
    ceilings = {"hbm_read_bytes_per_s": gpu.ceilings["stream_bytes_per_s"],
                "bf16_matmul_flop_per_s": gpu.ceilings["matmul_flop_per_s"]}
    if not np.isfinite(ceilings["hbm_read_bytes_per_s"]):
        ceilings["hbm_read_bytes_per_s"] = gpu.decode["bf16"][0].bw_bytes_per_s
    created = _now()
    own_probe = find_committed(hw, source="probe")
    cross = None
    if own_probe is not None:      # both exist: keep what the cross-check needs from the tables
        from cascade_plan.calibration.aic.crosscheck import pairs_at_import

        cross = pairs_at_import(gpu.attn.columns, gpu.decode["bf16"][1], gpu.gemm_rows, own_probe)
    doc = {
        "schema_version": 1, "kind": KIND, "source_kind": SOURCE_KIND, "created_utc": created,
        "hardware_id": hw.id,
        "device": {"name": hw.name, "l2_bytes": hw.l2_bytes, "sm_count": hw.sm_count},
        "ceilings": ceilings,
        "source": {"package": aic_tables.PACKAGE, "version": version, "system": gpu.system, "framework": framework,
                   "framework_version": fw_version, "tables": tables, "label": label,
                   "measured": ["decode_dup", "decode_shared (without its L2 gain)"]
                   + (["decode_mla"] if mla_used else [])
                   + ["step_parts: GEMMs" + (", MoE experts" if any(k.startswith("moe:") for k in steps.gemm) else "")
                      + (", all-reduce" if steps.allreduce else "")],
                   "transferred": {"from": probe_name, "kernels": ["prefix", "suffix", "merge", "decode_shared L2 gain"]
                                   + (["prefix_mla", "suffix_mla", "decode_mla L2 gain"] if mla_grids else [])
                                   + (["step_parts glue"] if probe.step_parts_doc else []),
                                   "ratios": ratios.to_dict(), "method": "aic/transfer.py: rates scaled by the "
                                   "ratio of what AIConfigurator measured on this GPU and on the reference GPU"}},
        # the cascade kernels are the probe's: their coverage (query heads per KV head, head dim) is the probe's
        "grid": {"head_dim": probe.grid.head_dim if probe.grid.head_dim is not None else aic_fit.HEAD_DIM,
                 "axes": {"q_per_kv": probe.grid.axes.q_per_kv or _q_per_kv(gpu)},
                 # decode measured here, the cascade kernels' grid is the probe's (cost/coverage.py checks both)
                 "measured": {"decode": grid_of_configs(gpu.decode_cfgs),
                              "cascade": (measured_grid(probe) or {}).get("cascade")},
                 # MLA: decode from AIConfigurator's MLA rows (or transferred), the cascade grid the probe's
                 "measured_mla": mla_grids},
        "measurements": [],
        # AIConfigurator's per-sequence MLA decode rows, interpolated inside their grid (aic/mla_rows.py)
        "mla_decode_rows": mla_rows,
        # AIConfigurator's MoE layer rows of the shipped MoE models' expert shapes (aic/moe_import.py)
        "moe_rows": moe_tables,
        # the probe's skewed / balanced routing ratios, to price skewed routing here (cost/ops/moe.py)
        "moe_skew": skew_ratios(step_parts_of(probe).moe, probe_name),
        # AIConfigurator's per-sequence decode rows, interpolated inside their grid (aic/rows.py)
        "decode_rows": encode_rows(gpu.decode_raw, gpu.decode["bf16"][1], gpu.attn.rel_path),
        "fitted": {"fit_version": FIT_VERSION, "tool_version": __version__, "created_utc": created,
                   "ceilings": ceilings, "kv_dtypes": kv_fits, "step_parts": step_parts_json(steps)},
    }
    if cross is not None:
        doc["crosscheck"] = cross
    return doc


# Where AIConfigurator's MLA decode and the probe's (FlashInfer's MLA wrapper, the family the cascade's passes
# come from) differ by more than this at GAP_POINT, the per-sequence and cascade sides are different kernel
# families by more than a fit's error, and the output says so (a note: the verdict becomes a range).
KERNEL_GAP = 1.5
GAP_POINT = {"prefix_tokens": 8192, "group_size": 1, "n_groups": 256, "suffix_tokens": 0, "num_heads": 16,
             "kv_lora_rank": aic_fit.MLA_V_DIM, "qk_rope_head_dim": aic_fit.MLA_LATENT - aic_fit.MLA_V_DIM}


def _mla_kernels(kv_fits: dict, probe, ratios: TransferRatios, mla, hw: HardwareProfile) -> tuple[dict | None, dict]:
    """The MLA kernels of the MLA backend (FlashInfer's MLA wrapper in the probe), in place: the cascade's
    prefix and suffix passes transferred from the probe's MLA fits, the per-sequence decode fitted on
    AIConfigurator's MLA decode rows where it has them (its L2 gain over shared pages the probe's,
    transferred), else the probe's MLA decode transferred, and labelled so. Returns the rows to ship and
    the measured MLA grid per KV dtype."""
    from cascade_plan.calibration.aic.mla_rows import encode_mla_rows, mla_decode_grid
    from cascade_plan.calibration.mla_fit import mla_grid
    from cascade_plan.cost.ops.mla_attention import MLA_BACKEND

    rows: dict[str, tuple] = {}
    kernels: dict[str, str] = {}
    grids = {}
    ref = probe.hardware_id.upper()
    for kv, per in kv_fits.items():
        moved = transfer_mla(((probe.fitted["kv_dtypes"].get(kv) or {}).get(MLA_BACKEND) or {}), ratios)
        if moved is None or MLA_BACKEND not in per:
            continue
        got = _aic_mla_decode(mla, kv, moved, hw) if mla is not None else None
        notes: list[str] = []
        if got is not None:
            fit, rows[kv], kernels[kv] = got
            how = (f"MLA: per-sequence decode measured by AIConfigurator ({mla.rel_path}, {kernels[kv]}); the "
                   f"cascade's prefix and suffix passes the {ref} probe's MLA kernels, transferred")
            notes = _kernel_gap(kv, kernels[kv], {**moved, "decode_mla": fit}, moved, hw, ref)
            moved["decode_mla"] = fit
        else:
            how = f"MLA: the {ref} probe's MLA kernels transferred (decode, prefix and suffix passes)"
            notes = [f"MLA per-sequence decode: AIConfigurator has no {kv} MLA decode table for this GPU, so the "
                     f"{ref} probe's is transferred (not measured here)"]
        per[MLA_BACKEND].update(moved)
        per[MLA_BACKEND]["mla_train_rows"] = how
        if notes:
            per[MLA_BACKEND]["mla_notes"] = notes
        cas = (mla_grid(probe.mla, kv) or {}).get("cascade")
        grids[kv] = {"decode": mla_decode_grid({"mla_decode_rows": encode_mla_rows({kv: rows[kv]}, kernels, "")}, kv)
                     if kv in rows else cas, "cascade": cas}
    return (encode_mla_rows(rows, kernels, mla.rel_path) if rows else None), grids


def _aic_mla_decode(mla, kv: str, moved: dict, hw: HardwareProfile):
    """(decode_mla fit dict, (configurations, attention times), kernel) from AIConfigurator's MLA module rows
    of one KV dtype, or None where it has too few."""
    from cascade_plan.calibration.mla_fit import predict_mla

    cfgs, above, base_ctx, kern = aic_fit.mla_decode_configs(mla.columns, kv)
    if not cfgs:
        return None
    # the module's attention at its smallest context is not separable from its projections: the probe's
    # MLA decode, transferred, prices that part
    base = predict_mla(moved, "decode_shared", [{**c, "prefix_tokens": int(b)} for c, b in zip(cfgs, base_ctx)],
                       hw.l2_bytes)
    t = above + base
    fit = aic_fit.fit_mla_decode_planner(cfgs, t, hw.hbm_bytes_per_s, hw.dense_bf16_flop_per_s, moved["decode_mla"])
    return None if fit is None else (msgspec.to_builtins(fit), (cfgs, t), kern)


def _kernel_gap(kv: str, kernel: str, aic_fits: dict, probe_fits: dict, hw: HardwareProfile, ref: str) -> list[str]:
    """A note where AIConfigurator's MLA decode and the probe's differ by more than KERNEL_GAP."""
    from cascade_plan.calibration.mla_fit import predict_mla

    cfg = [{**GAP_POINT, "kv_dtype": kv}]
    a, p = (float(predict_mla(f, "decode_shared", cfg, hw.l2_bytes)[0]) for f in (aic_fits, probe_fits))
    if 1 / KERNEL_GAP <= a / p <= KERNEL_GAP:
        return []
    return [f"{kv} MLA: AIConfigurator's per-sequence decode ({kernel}) takes {a / p:.2f}x the time of the {ref} "
            "probe's FlashInfer MLA decode, transferred (256 sequences of 8K tokens, 16 query heads per GPU), the "
            "kernel family the cascade's passes come from, so the speedup depends on which decode the engine runs"]


def _q_per_kv(gpu: _Gpu) -> list[int]:
    c = gpu.attn.columns
    ok = c["head_dim"] == aic_fit.HEAD_DIM
    return [int(x) for x in np.unique(c["num_heads"][ok] // np.maximum(c["num_key_value_heads"][ok], 1))]


def default_out(hardware_id: str, framework: str, cwd: Path | None = None) -> Path:
    """`./calibrations/GPU-aic-FRAMEWORK.json` in the current folder: never into the installed package
    (site-packages may be read-only or shared, and a reinstall would silently drop the file)."""
    return (Path.cwd() if cwd is None else cwd) / "calibrations" / f"{hardware_id}-aic-{framework}.json"


def _rounded(x, digits: int = 6):
    """Floats to `digits` significant digits (the fits are not more precise; the files stay small)."""
    if isinstance(x, float):
        return float(f"{x:.{digits}g}")
    if isinstance(x, dict):
        return {k: _rounded(v, digits) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_rounded(v, digits) for v in x]
    return x


def to_json_text(doc: dict) -> str:
    import json

    return json.dumps(_rounded(doc), separators=(",", ":")) + "\n"
