"""One fitted kernel (KernelFit: what `calibrate` fits and writes, and what the planner's KernelParams are derived
from) and one backend's fits per kernel kind (BackendFit), under `fitted.kv_dtypes`."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from cascade_plan.calibration_schema.quantities import Correction, FiniteNonNeg, Fraction, LogValue, Rate, Seconds, Text


class SurfaceDoc(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A kernel's efficiency correction as the file holds it (cost/surface.py Surface is the form the planner
    evaluates): natural-log corrections over log10 bytes per layer x log10 rows per layer."""
    log_bytes: list[LogValue]
    log_rows: list[LogValue]
    values: list[list[Correction]]


class KernelFit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One kernel kind's fitted parameters: what calibration/fitting.py fits and predicts with, and what the file
    holds (fields in the order files have always written them). The planner prices with cost_params.KernelParams,
    derived from it against a GPU's datasheet peaks (calibration/probe_params.py)."""

    # At least 1 MB/s and 1 MFLOP/s (anything slower is a broken fit, and divides a step into infinity);
    # at most 1e30 (a kind folded into another fits as "infinitely fast").
    bw_bytes_per_s: Annotated[float, msgspec.Meta(ge=1e6, le=1e30)]
    flop_per_s: Annotated[float, msgspec.Meta(ge=1e6, le=1e30)]
    overhead_s: Seconds
    row_s: Seconds
    q_row_s: Seconds = 0.0                  # per (sequence, query head) row
    token_latency_s: Seconds = 0.0          # per KV token of the longest row (latency bound of unsplit kernels)
    l2_hit_max: Fraction = 0.0              # share of re-reads of shared pages served by L2 (siblings reading together)
    # one layer's shared prefix beyond which hits fall as window / size; None (or 0): no fall measured
    l2_window_bytes: FiniteNonNeg | None = 0.0
    l2_bytes_per_s: Rate = 0.0              # the rate at which re-read bytes still have to stream from L2
    l2_measured_up_to_bytes: FiniteNonNeg = 0.0   # the largest per-layer shared prefix with re-reads in the fit's data
    n_train: Annotated[int, msgspec.Meta(ge=0)] = 0
    train_median_ape: FiniteNonNeg = 0.0
    surface: SurfaceDoc | None = None
    # The launch a kernel takes once its batch alone fills the GPU (cost/roofline.py filled_gain): at filled_rows
    # (sequence, KV head) rows per layer or more, each streaming more than filled_min_tokens tokens, the probe's
    # Triton decode runs unsplit in tiles of filled_tile_tokens, filled_gain times faster than its roofline says
    # elsewhere over whole tiles (1.0 where the training rows show no gain: whole tiles alone). 0 rows: no such
    # launch (a calibration written before 2026-12-05's fourth session also left it out where the rows showed no gain).
    filled_rows: Annotated[int, msgspec.Meta(ge=0)] = 0
    filled_min_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    filled_tile_tokens: Annotated[int, msgspec.Meta(ge=0)] = 0
    filled_gain: Annotated[float, msgspec.Meta(ge=0.1, le=10.0)] = 1.0
    # Per token of the launch's busiest program, added to the bandwidth and FLOP bounds: the probe's Triton decode
    # over shared pages, whose block's first program streams the shared run and then each sequence's private tokens
    # alone (cost/ops/page_blocks.py longest_program). 0: no such term (other kernels, files before 2026-12-06).
    program_token_s: Seconds = 0.0


class PageBlockRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The launch rule of the probe's own per-sequence decode over shared pages (cascade_plan/own_kernel_launch.py):
    the tune the probe ran (its notes.tune) and the GPU's SM count, from which the planner works out where the
    kernel reads a block of sibling sequences' shared pages once (cost/ops/page_blocks.py)."""
    sm_count: Annotated[int, msgspec.Meta(ge=1)]
    tune: dict[str, int | float | bool]


class BackendFit(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    decode_dup: KernelFit
    decode_shared: KernelFit
    prefix: KernelFit
    suffix: KernelFit
    merge: KernelFit | None = None
    decode_mla: KernelFit | None = None          # MLA (DeepSeek) decode over the latent cache
    prefix_mla: KernelFit | None = None          # the probe's MLA cascade: prefix pass (calibration/mla_fit.py)
    suffix_mla: KernelFit | None = None          # ... and suffix pass with merge_state folded in
    mla_train_rows: Text | None = None              # how the MLA fits were trained (held-out rule, or all rows)
    mla_notes: list[Text] = []                      # what an imported file says about its MLA coverage
    prefix_suffix_overlap: Fraction = 0.0
    # how the prefix pass tiles query rows (cost/ops/tiles.py PREFIX_ROWS); files without it: "kv_head"
    prefix_rows: Literal["kv_head", "q_head"] = "kv_head"
    # how its per-sequence decode computes query rows (DECODE_ROWS); files without it: "q_head"
    decode_rows: Literal["q_head", "kv_head"] = "q_head"
    notes: list[Text] = []                          # what an imported file says about its own coverage
    info: list[Text] = []                           # ... and about its numbers, without qualifying a verdict
    cascade_from: Text | None = None                # the probe backend whose cascade kernels these are (None: its own)
    train_rows: Text | None = None                  # set where too few rows to hold any out: fitted on all
    # where the per-sequence decode's rows read shared pages once per block of siblings: the rule that says where
    # (None: no blocks in its rows, or not the probe's own kernel)
    page_blocks: PageBlockRule | None = None
