"""Kernel efficiencies, fixed overheads and L2 reuse: the numbers the cost model does not derive.

Three sources: `ideal` (peaks, no overheads: the seed's arithmetic), `default` (documented guesses,
"uncalibrated"), and `calibrated` (fitted from a probe file by `cascade-plan calibrate`, in calibration/)."""

from __future__ import annotations

from pathlib import Path

import msgspec

from cascade_plan.cost.ops.attention import MeasuredAttention
from cascade_plan.cost.ops.page_blocks import PageBlocks
from cascade_plan.cost.step_defaults import DEFAULT_STEP_PARTS
from cascade_plan.cost.step_parts import StepParts
from cascade_plan.cost.surface import Surface


class KernelParams(msgspec.Struct, frozen=True):
    """One kernel kind: achieved fraction of peak bandwidth and FLOP/s, a fixed cost per launch per
    layer (launch, tail), and a cost per (sequence, KV head) row per layer (per-row setup, partial
    waves at small batch) that calibration can fit."""

    bw_eff: float = 1.0
    flop_eff: float = 1.0
    overhead_s: float = 0.0
    row_s: float = 0.0
    q_row_s: float = 0.0               # per (sequence, query head) row, per layer
    token_latency_s: float = 0.0       # per KV token of the longest row, per layer (kernels that do not split it)
    surface: Surface | None = None     # calibrated efficiency correction over (bytes per layer, rows)
    # the launch a batch that fills the GPU alone takes (roofline.filled_gain): from filled_rows (sequence, KV head)
    # rows per layer, each of more than filled_min_tokens tokens, in tiles of filled_tile_tokens, the roofline is
    # filled_gain times faster over whole tiles
    filled_rows: float = 0.0
    filled_min_tokens: float = 0.0
    filled_tile_tokens: float = 0.0
    filled_gain: float = 1.0
    program_token_s: float = 0.0       # per token of the launch's busiest program, per layer (added to the bounds)


class CostParams(msgspec.Struct, frozen=True):
    mode: str                    # "ideal" | "default" | "calibrated"
    decode: KernelParams         # per-sequence paged decode attention over shared prefix pages
    prefix: KernelParams         # cascade prefix pass (one launch per level)
    suffix: KernelParams         # cascade suffix pass (per-sequence decode over private pages)
    merge: KernelParams          # LSE merge (one launch per level)
    gemm: KernelParams           # weight GEMMs
    # Fraction of a per-sequence kernel's redundant prefix re-reads served from L2 (siblings reading the
    # same pages within a wave of each other: temporal reuse, not the prefix fitting in L2); it falls as
    # window / x once one layer's shared prefix exceeds the window (None: no fall, as the H200 probe
    # measured up to 4.3x its L2). Bytes served from L2 still stream at l2_bytes_per_s.
    l2_hit_max: float = 0.0
    l2_window_bytes: float | None = None
    l2_bytes_per_s: float | None = None
    # Count the merge's (output, LSE) state traffic. The seed's arithmetic (ideal mode) leaves it out,
    # as it leaves out every other fixed cost of the cascade.
    merge_traffic: bool = True
    source: str | None = None    # calibration file
    backend: str | None = None   # kernel family the numbers describe
    decode_dup: KernelParams | None = None   # per-sequence decode with private copies (no prefix caching)
    # 0: prefix and suffix passes run one after the other; 1: concurrently (their fixed costs overlap,
    # their bytes share the bus). Calibrated per backend.
    prefix_suffix_overlap: float = 0.0
    notes: tuple[str, ...] = ()
    # The rest of the step (GEMMs from measured ratio tables, glue, all-reduce). None: the weights are
    # one roofline term and nothing else is counted (ideal mode: the seed's arithmetic).
    step: StepParts | None = None
    # Where a calibration's numbers come from: "probe" (our GPU probe on this GPU) or "aic" (NVIDIA
    # AIConfigurator's tables, cascade parts transferred from the H200 probe); `origin_label` says it in words.
    origin: str | None = None
    origin_label: str | None = None
    # What the calibration measured, in workload terms ({"decode": {...}, "cascade": {...}}: longest
    # context, largest batch, largest shared prefix per layer; calibration/measured_grid.py)
    measured_grid: dict | None = None
    # A what-if GPU's numbers: the base GPU's calibration scaled to the user's peaks, in words
    # ("what-if on measured kernels of h100-sxm: ..."); None for numbers of the GPU as it is.
    what_if: str | None = None
    # The measured attention rows of this backend and KV dtype (cost/ops/attention.py): inside their grid
    # the step's attention is interpolated from them, outside it the fitted kernels above price it.
    # None: nothing measured to interpolate (ideal, defaults, a dtype without rows). An imported
    # AIConfigurator file carries per-sequence decode rows over private pages only (calibration/aic/rows.py).
    measured: MeasuredAttention | None = None
    # What the label should say that does not qualify the verdict (unlike notes): which backend stood in
    # for the default one, how a dtype with few rows was fitted.
    info: tuple[str, ...] = ()
    # "gqa", or "mla": the kernel fits are the probe's MLA kernels (cost/ops/mla_attention.py), whose FLOP
    # are counted in whole query tiles of 64/128 rows
    attention_kind: str = "gqa"
    # how the GQA prefix pass tiles query rows (cost/ops/tiles.py PREFIX_ROWS): "kv_head" packs a prompt's
    # sequences x query heads per KV head, "q_head" tiles each query head apart (FlashInfer's FA3 prefill)
    prefix_rows: str = "kv_head"
    # how the per-sequence decode computes query rows (cost/ops/tiles.py DECODE_ROWS): "q_head" useful FLOP,
    # "kv_head" a KV head's query heads as one tile of at least 16 rows (the probe's Triton kernel)
    decode_rows: str = "q_head"
    # where the probe's own decode over shared pages reads a block of siblings' pages once (cost/ops/page_blocks.py);
    # None: no blocks (other kernels, or rows that formed none)
    page_blocks: PageBlocks | None = None
    # the probe backend whose whole steps measure these numbers' error, where not `backend` (an imported GPU's
    # FlashInfer cascade is its FA2 prefill: the probe's flashinfer-fa2 kernels, and their steps' errors)
    margin_backend: str | None = None

    @property
    def numbers(self) -> str:
        """The short tag tables print per row: ideal, default, probe/<backend> or aic/<backend>."""
        if self.mode == "calibrated":
            return f"{self.origin or 'probe'}/{self.backend}" + (" what-if" if self.what_if else "")
        return self.mode

    @property
    def label(self) -> str:
        if self.what_if:
            return f"{self.what_if}; {msgspec.structs.replace(self, what_if=None).label}"
        if self.mode == "calibrated":
            note = "".join(f"; {n}" for n in self.info + self.notes)
            if self.origin == "aic":
                return f"{self.origin_label}, {self.backend} kernels ({Path(self.source or '').name}){note}"
            return f"calibrated: {self.backend} kernels, measured on the GPU ({Path(self.source or '').name}){note}"
        if self.mode == "default":
            return "uncalibrated (default efficiencies; run `cascade-plan probe` and `calibrate` for measured ones)"
        return "ideal (peak bandwidth and FLOP/s, no fixed costs or merge traffic: the seed's arithmetic)"


IDEAL = CostParams(mode="ideal", decode=KernelParams(), prefix=KernelParams(), suffix=KernelParams(),
                   merge=KernelParams(), gemm=KernelParams(), merge_traffic=False)

# Uncalibrated defaults: round figures of the kind well-tuned Hopper kernels reach (decode kernels
# 80% of peak bandwidth, a prefix pass that sees ~45% of dense peak when compute-bound, a few
# microseconds per launch inside a CUDA graph). They are guesses until a probe measures them.
DEFAULT = CostParams(
    mode="default",
    decode=KernelParams(bw_eff=0.80, flop_eff=0.40, overhead_s=4e-6),
    prefix=KernelParams(bw_eff=0.75, flop_eff=0.45, overhead_s=5e-6),
    suffix=KernelParams(bw_eff=0.75, flop_eff=0.40, overhead_s=4e-6),
    merge=KernelParams(bw_eff=0.50, flop_eff=1.0, overhead_s=3e-6),
    gemm=KernelParams(bw_eff=0.85, flop_eff=0.70, overhead_s=0.0),
    l2_hit_max=0.0,
    step=DEFAULT_STEP_PARTS,
)


def with_overheads_scaled(params: CostParams, factor: float) -> CostParams:
    """Scale every fixed overhead (used by sensitivity sweeps and tests)."""
    def s(k: KernelParams) -> KernelParams:
        return msgspec.structs.replace(k, overhead_s=k.overhead_s * factor)
    return msgspec.structs.replace(params, decode=s(params.decode), prefix=s(params.prefix), suffix=s(params.suffix),
                                   merge=s(params.merge), gemm=s(params.gemm))
