"""A calibration turned into the planner's parameters: CostParams for one backend and KV dtype (its
kernel fits, step parts, measured rows and the notes on what it covers), the default backend, and the
check that a file describes the GPU it is applied to."""

from __future__ import annotations

import msgspec

from cascade_plan.calibration.aic.rows import decode_measured
from cascade_plan.calibration.calibration_file import ProbeData
from cascade_plan.calibration.fitting import surface_of
from cascade_plan.calibration.measured_grid import (
    coverage_notes,
    measured_grid,
    measured_rows,
)
from cascade_plan.calibration_schema.kernel_fit import BackendFit, KernelFit
from cascade_plan.cost.cost_params import CostParams, KernelParams
from cascade_plan.cost.ops.page_blocks import page_blocks_of
from cascade_plan.errors import InputError
from cascade_plan.inputs.hardware import HardwareProfile


def step_parts_of(probe: ProbeData):
    """The fitted StepParts of a calibration, or the documented defaults when it has none (once per document)."""
    return probe.derived("step_parts", _step_parts)


def _step_parts(probe: ProbeData):
    from cascade_plan.calibration.moe_rows import with_moe_tables
    from cascade_plan.calibration.step_parts_doc import step_parts_from_doc
    from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS

    doc = probe.fits.step_parts if probe.fits is not None else None
    parts = DEFAULT_STEP_PARTS if doc is None else step_parts_from_doc(doc)
    # the measured routed-expert rows, where it has them
    return with_moe_tables(parts, probe.step_ops, probe.moe_rows, probe.moe_skew, probe.path)


def _kernel_params(k: KernelFit | None, hw: HardwareProfile) -> KernelParams:
    if k is None:   # folded into another kind: costs nothing of its own
        return KernelParams(bw_eff=1e9, flop_eff=1e9)
    return KernelParams(bw_eff=k.bw_bytes_per_s / hw.hbm_bytes_per_s, flop_eff=k.flop_per_s / hw.dense_bf16_flop_per_s,
                        overhead_s=k.overhead_s, row_s=k.row_s, q_row_s=k.q_row_s, token_latency_s=k.token_latency_s,
                        surface=surface_of(k), filled_rows=k.filled_rows, filled_min_tokens=k.filled_min_tokens,
                        filled_tile_tokens=k.filled_tile_tokens, filled_gain=k.filled_gain,
                        program_token_s=k.program_token_s)


def default_backend(probe: ProbeData, kv_dtype: str | None = None) -> str:
    """The backend a command uses when none is asked for: FlashInfer (what engines ship) where it is
    fitted, else the next; for a KV dtype, the first fitted for that dtype, so that fp8 KV is priced by
    a backend measured with fp8 KV when one exists."""
    kvs = probe.fits.kv_dtypes if probe.fits is not None else {}
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
    fitted = probe.fits
    if fitted is None or not fitted.kv_dtypes:
        raise InputError("the calibration file has no fitted parameters: run `cascade-plan calibrate` on it first",
                         file=probe.path)
    per_dtype = fitted.kv_dtypes
    asked = backend
    backend = backend or default_backend(probe, kv_dtype)
    key = kv_dtype if kv_dtype in per_dtype and backend in per_dtype[kv_dtype] else "bf16"
    if backend not in per_dtype.get(key, {}):
        have = sorted(per_dtype.get(key, {}))
        raise InputError(f"backend {backend!r} is not in this calibration; it has: {', '.join(have)}", file=probe.path)
    k = per_dtype[key][backend]
    mla = model is not None and model.attention == "mla" and k.decode_mla is not None
    # the probe's own MLA kernels (an AIConfigurator file's `decode_mla` alone is not these)
    probe_mla = mla and k.prefix_mla is not None and k.suffix_mla is not None
    notes = (coverage_notes(probe, model, "probe" if probe_mla else mla, kv_dtype if key == kv_dtype else None, backend)
             if model is not None else [])
    notes_info: tuple[str, ...] = ()
    if key != kv_dtype:
        # never a stand-in: the note turns the verdict into a range over the sources we have
        # (verdict_evidence.py), and no bf16 row is interpolated for it (measured=None below)
        notes.append(f"{backend} is not calibrated for {kv_dtype} KV (no {kv_dtype} rows; "
                     "fp8 decode is not bf16 decode "
                     f"at half the bytes): its bf16 numbers are shown only as one end of a range")
    elif asked is None and backend != default_backend(probe):
        stand_in = (f"{default_backend(probe)} has no {kv_dtype} KV rows, so {backend} "
                    f"(measured with {kv_dtype} KV) prices it")
        notes_info = (stand_in,)
    notes += k.notes                     # what an imported file says about its own coverage
    notes_info += tuple(k.info)          # ... and about its numbers (shown in the label, not a verdict's caveat)
    if probe_mla:
        notes += k.mla_notes
    decode_shared, decode_dup = k.decode_shared, k.decode_dup
    prefix, suffix, merge, overlap = k.prefix, k.suffix, k.merge, k.prefix_suffix_overlap
    if probe_mla and k.decode_mla is not None and k.prefix_mla is not None and k.suffix_mla is not None:
        # the probe's own MLA kernels: decode over shared pages (own L2 gain), prefix, suffix + merge
        decode_shared = k.decode_mla
        decode_dup = msgspec.structs.replace(decode_shared, l2_hit_max=0.0)
        prefix, suffix = k.prefix_mla, k.suffix_mla
        merge, overlap = None, 0.0
    elif k.decode_mla is not None and mla:   # the measured MLA decode, with the GQA fit's L2 gain over shared pages
        decode_dup = k.decode_mla
        decode_shared = msgspec.structs.replace(k.decode_mla, **{f: getattr(k.decode_shared, f) for f in
                                                                 ("l2_hit_max", "l2_window_bytes", "l2_bytes_per_s")})
    # the probe's GQA decode's page blocks (an MLA decode, the probe's or a measured one, has none)
    blocks = page_blocks_of(k.page_blocks.sm_count, k.page_blocks.tune) if k.page_blocks and not mla else None
    origin = probe.source_kind
    ceil = fitted.ceilings
    gemm = KernelParams(bw_eff=min(1.0, ceil.hbm_read_bytes_per_s / hw.hbm_bytes_per_s),
                        flop_eff=min(1.0, ceil.bf16_matmul_flop_per_s / hw.dense_bf16_flop_per_s))

    step = step_parts_of(probe)
    origin_aic = origin == "aic"
    if origin == "probe" and probe.hardware_id == hw.id:
        from cascade_plan.calibration.allreduce_source import prefer_measured_allreduce

        step = prefer_measured_allreduce(step, hw, probe.step_ops)
    if step.source == "default":
        notes.append("no step parts in this calibration: GEMMs, glue and all-reduce use the defaults")
    return CostParams(
        mode="calibrated", decode=_kernel_params(decode_shared, hw), prefix=_kernel_params(prefix, hw),
        suffix=_kernel_params(suffix, hw), merge=_kernel_params(merge, hw), gemm=gemm,
        l2_hit_max=decode_shared.l2_hit_max, l2_window_bytes=decode_shared.l2_window_bytes or None,
        l2_bytes_per_s=decode_shared.l2_bytes_per_s or None, source=probe.path, backend=backend,
        decode_dup=_kernel_params(decode_dup, hw), notes=tuple(notes),
        prefix_suffix_overlap=overlap, step=step,
        origin=origin, origin_label=probe.source.label if origin == "aic" and probe.source is not None else None,
        measured_grid=(_mla_grid(probe, kv_dtype) if probe_mla else
                       measured_grid(probe, kv_dtype if key == kv_dtype else None)),
        measured=(None if key != kv_dtype
                  else _mla_measured(probe, kv_dtype, k) if probe_mla
                  else measured_rows(probe, backend, kv_dtype, k) if origin == "probe"
                  else decode_measured(probe.decoded, backend, kv_dtype, k, probe.l2_bytes)),
        info=(*notes_info, *(["fitted on all its rows (too few to hold any out)"] if k.train_rows else []),
              *(["per-sequence decode priced with its page blocks (a block of sibling sequences reads their shared "
                 "pages once)"] if blocks else []),
              *([k.mla_train_rows or "MLA: AIConfigurator's MLA decode, the probe's MLA cascade kernels transferred"]
                if probe_mla and origin_aic else
                ["MLA: the probe's own MLA kernels (FlashInfer's MLA wrapper)"] if probe_mla else [])),
        attention_kind="mla" if probe_mla else "gqa",
        prefix_rows="kv_head" if probe_mla else k.prefix_rows,
        decode_rows="q_head" if probe_mla else k.decode_rows,
        margin_backend=k.cascade_from,
        page_blocks=blocks,
    )


def _mla_grid(probe: ProbeData, kv: str) -> dict | None:
    """The measured grid of a file's MLA kernels: the probe's own MLA rows, or the grid an import stored (its
    decode from AIConfigurator's MLA rows, its cascade transferred: aic/importer.py)."""
    if probe.source_kind != "aic":
        from cascade_plan.calibration.mla_fit import mla_grid

        return mla_grid(probe.mla, kv)
    stored = probe.grid.measured_mla
    return msgspec.to_builtins(stored[kv]) if stored and kv in stored else None


def _mla_measured(probe: ProbeData, kv: str, fits: BackendFit):
    """The MLA rows the planner interpolates: the probe's own, or an import's AIConfigurator MLA decode rows."""
    if probe.source_kind != "aic":
        from cascade_plan.calibration.mla_fit import mla_measured

        return mla_measured(probe.mla, kv, fits, probe.l2_bytes)
    from cascade_plan.calibration.aic.mla_rows import mla_decode_measured

    return mla_decode_measured(probe.decoded, kv, fits, probe.l2_bytes)


def check_device(probe: ProbeData, hw: HardwareProfile, force: bool) -> None:
    if probe.hardware_id != hw.id and not force:
        raise InputError(f"calibration measured on {probe.device_name} (hardware_id {probe.hardware_id!r}) cannot "
                         f"describe {hw.id}; use a calibration from that GPU, or --force to apply it anyway",
                         file=probe.path)
