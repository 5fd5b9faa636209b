"""What AIConfigurator cannot give, transferred from the H200 probe and labelled.

AIConfigurator measures no shared-prefix kernels. For another GPU the cascade parts (prefix pass,
suffix pass with its merge, the L2 gain of per-sequence decode over shared pages) are the H200 probe's
fits with their rates scaled by what AIConfigurator measured on both GPUs:

- bandwidths by the ratio of the two GPUs' fitted decode bandwidths (same tables, same kernel family);
- FLOP rates by the ratio of the best bf16 GEMM rates they reached;
- fixed costs (launch, per row, per token of latency) by the ratio of their decode launch floors;
- the L2 window by the ratio of L2 sizes (hardware profiles; a fit without a window, None, keeps none);
  the L2 hit share is kept;
- the rows from which the probe's Triton decode takes its batch-filled launch (cost/roofline.py filled_gain) by the
  ratio of SM counts (the launch rule counts programs per SM); its gain is kept.

Efficiency surfaces (relative corrections over bytes per layer and rows) are kept as measured on the H200.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from cascade_plan.gpus import HOPPER, ids_of


@dataclass(frozen=True)
class TransferRatios:
    bandwidth: float
    flop: float
    fixed: float
    l2: float
    sm: float = 1.0

    def to_dict(self) -> dict:
        return {"bandwidth": self.bandwidth, "flop": self.flop, "fixed": self.fixed, "l2": self.l2, "sm": self.sm}


def transfer_fit(d: dict | None, r: TransferRatios) -> dict | None:
    """One KernelFit as plain data (calibration_schema/kernel_fit.py) moved to the other GPU."""
    if d is None:
        return None
    out = dict(d)
    out["bw_bytes_per_s"] = d["bw_bytes_per_s"] * r.bandwidth
    out["flop_per_s"] = d["flop_per_s"] * r.flop
    for k in ("overhead_s", "row_s", "q_row_s", "token_latency_s"):
        out[k] = d[k] * r.fixed
    if d.get("program_token_s"):      # a latency like the fixed costs (files before 2026-12-06 lack it)
        out["program_token_s"] = d["program_token_s"] * r.fixed
    # None: the probe saw no fall of L2 hits with the prefix size (no window); it stays None
    window = d.get("l2_window_bytes", 0.0)
    out["l2_window_bytes"] = None if window is None else window * r.l2
    out["l2_bytes_per_s"] = (d.get("l2_bytes_per_s") or 0.0) * r.bandwidth
    if d.get("filled_rows"):
        out["filled_rows"] = max(1, round(d["filled_rows"] * r.sm))
    return out


def with_l2_of(decode: dict, shared_probe: dict, r: TransferRatios) -> dict:
    """The measured per-sequence decode plus the probe's L2 gain over shared pages, transferred."""
    moved = transfer_fit(shared_probe, r)
    out = dict(decode)
    for k in ("l2_hit_max", "l2_window_bytes", "l2_bytes_per_s"):
        out[k] = moved.get(k, 0.0)
    return out


# GPUs where FlashInfer's automatic prefill choice is FA3 (Hopper, SM 9.0), as on the H200 the probe measured;
# elsewhere it is FA2, whose cascade the probe times as flashinfer-fa2.
FA3_GPUS = frozenset(ids_of(HOPPER))


def transfer_backend(probe_fits: dict, decode: dict, r: TransferRatios) -> dict:
    """A backend's fitted kernels for the other GPU: decode measured (AIConfigurator), the rest moved."""
    return {
        "decode_dup": decode,
        "decode_shared": with_l2_of(decode, probe_fits["decode_shared"], r),
        "prefix": transfer_fit(probe_fits["prefix"], r),
        "suffix": transfer_fit(probe_fits["suffix"], r),
        "merge": transfer_fit(probe_fits.get("merge"), r),
        "prefix_suffix_overlap": float(probe_fits.get("prefix_suffix_overlap", 0.0)),
        # the prefix fit's parameters hold only with the row tiling they were fitted with
        **({"prefix_rows": probe_fits["prefix_rows"]} if "prefix_rows" in probe_fits else {}),
    }


# The probe's fused glue runs five kernels per layer (kernels_probe/steps/glue.py: add-RMSNorm twice, RoPE, the
# paged K/V append, SiLU-and-mul); the append's share of the per-layer fixed cost is one of them.
GLUE_LAYER_KERNELS = 5


def transfer_glue(glue, r: TransferRatios, kv_append_in_attention: bool = True):
    """The engine's glue (norms, RoPE, KV append, activation, sampling: memory-bound elementwise work)
    moved to the other GPU: per-token costs by the bandwidth ratio, fixed costs by the launch-floor ratio.

    AIConfigurator's generation attention includes the K/V append (its collector times vLLM's attention
    layer forward, which writes the new token's K and V into the paged cache before the decode kernel),
    so by default the imported glue leaves it out: one of the five per-layer kernels' fixed cost is kept
    apart (`kv_append_per_layer_s`), and ops/glue.py prices the per-token part over the bytes without the
    append. The decode then counts the write once; the cascade step, whose kernels come from the probe
    and do not write the cache, adds it once (StepTerms.kv_append_s)."""
    out = msgspec.structs.replace(glue, per_layer_s=glue.per_layer_s * r.fixed, per_step_s=glue.per_step_s * r.fixed,
                                  per_token_layer_s=glue.per_token_layer_s / r.bandwidth,
                                  per_token_step_s=glue.per_token_step_s / r.bandwidth)
    if not kv_append_in_attention or out.kv_append_in_attention:
        return out
    share = out.per_layer_s / GLUE_LAYER_KERNELS
    return msgspec.structs.replace(out, per_layer_s=out.per_layer_s - share, kv_append_in_attention=True,
                                   kv_append_per_layer_s=share)


MLA_KERNELS = ("decode_mla", "prefix_mla", "suffix_mla")


def transfer_mla(probe_fits: dict, r: TransferRatios) -> dict | None:
    """The probe's MLA kernels (calibration/mla_fit.py: per-sequence decode over shared pages with its L2
    gain, the cascade's prefix pass, its suffix pass with merge_state folded in) moved to the other GPU the
    way the GQA kernels are; None where the probe fitted none."""
    if not all(probe_fits.get(k) for k in MLA_KERNELS):
        return None
    return {k: transfer_fit(probe_fits[k], r) for k in MLA_KERNELS}
