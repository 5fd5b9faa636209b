"""What AIConfigurator cannot give, transferred from the H200 probe and labelled.

AIConfigurator measures no shared-prefix kernels. For another GPU the cascade parts (prefix pass,
suffix pass with its merge, the L2 gain of per-sequence decode over shared pages) are the H200 probe's
fits with their rates scaled by what AIConfigurator measured on both GPUs:

- bandwidths by the ratio of the two GPUs' fitted decode bandwidths (same tables, same kernel family);
- FLOP rates by the ratio of the best bf16 GEMM rates they reached;
- fixed costs (launch, per row, per token of latency) by the ratio of their decode launch floors;
- the L2 window by the ratio of L2 sizes (hardware profiles; a fit without a window, None, keeps none);
  the L2 hit share is kept.

Efficiency surfaces (relative corrections over bytes per layer and rows) are kept as measured on the H200.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransferRatios:
    bandwidth: float
    flop: float
    fixed: float
    l2: float

    def to_dict(self) -> dict:
        return {"bandwidth": self.bandwidth, "flop": self.flop, "fixed": self.fixed, "l2": self.l2}


def transfer_fit(d: dict | None, r: TransferRatios) -> dict | None:
    """One KernelFit dict (probe_calibration's format) moved to the other GPU."""
    if d is None:
        return None
    out = dict(d)
    out["bw_bytes_per_s"] = d["bw_bytes_per_s"] * r.bandwidth
    out["flop_per_s"] = d["flop_per_s"] * r.flop
    for k in ("overhead_s", "row_s", "q_row_s", "token_latency_s"):
        out[k] = d[k] * r.fixed
    # None: the probe saw no fall of L2 hits with the prefix size (no window); it stays None
    window = d.get("l2_window_bytes", 0.0)
    out["l2_window_bytes"] = None if window is None else window * r.l2
    out["l2_bytes_per_s"] = (d.get("l2_bytes_per_s") or 0.0) * r.bandwidth
    return out


def with_l2_of(decode: dict, shared_probe: dict, r: TransferRatios) -> dict:
    """The measured per-sequence decode plus the probe's L2 gain over shared pages, transferred."""
    moved = transfer_fit(shared_probe, r)
    out = dict(decode)
    for k in ("l2_hit_max", "l2_window_bytes", "l2_bytes_per_s"):
        out[k] = moved.get(k, 0.0)
    return out


def transfer_backend(probe_fits: dict, decode: dict, r: TransferRatios) -> dict:
    """A backend's fitted kernels for the other GPU: decode measured (AIConfigurator), the rest moved."""
    return {
        "decode_dup": decode,
        "decode_shared": with_l2_of(decode, probe_fits["decode_shared"], r),
        "prefix": transfer_fit(probe_fits["prefix"], r),
        "suffix": transfer_fit(probe_fits["suffix"], r),
        "merge": transfer_fit(probe_fits.get("merge"), r),
        "prefix_suffix_overlap": float(probe_fits.get("prefix_suffix_overlap", 0.0)),
    }


def transfer_glue(glue, r: TransferRatios):
    """The engine's glue (norms, RoPE, KV append, activation, sampling: memory-bound elementwise work)
    moved to the other GPU: per-token costs by the bandwidth ratio, fixed costs by the launch-floor ratio."""
    import dataclasses

    return dataclasses.replace(glue, per_layer_s=glue.per_layer_s * r.fixed, per_step_s=glue.per_step_s * r.fixed,
                               per_token_layer_s=glue.per_token_layer_s / r.bandwidth,
                               per_token_step_s=glue.per_token_step_s / r.bandwidth)
