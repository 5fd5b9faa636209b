"""The parts of a decode step that cascade does not touch: weight GEMMs, engine glue, tensor-parallel
all-reduce. Their parameters and how they price a step (their form in calibration files: calibration/step_parts_doc.py).

Pure numpy, SI units. Filled by three sources (see DESIGN.md): the project's probe
(`kernels_probe`, fitted in calibration/), AIConfigurator's measured tables (calibration/aic/importer.py),
or documented defaults (DEFAULT_STEP_PARTS, "uncalibrated"). Every parameter set says where it came
from in `source`, and each all-reduce GPU count says whether it was measured or extrapolated.
"""

from __future__ import annotations

from functools import cached_property

import msgspec
import numpy as np

from cascade_plan.cost.glue_widths import (
    LEGACY_BASIS,
    LEGACY_LAYER_BYTES_PER_TOKEN,
    LEGACY_STEP_BYTES_PER_TOKEN,
)


class GemmEfficiency(msgspec.Struct, frozen=True, dict=True):
    """Achieved GEMM time relative to its roofline, max(weight bytes / HBM bandwidth, FLOP / peak), over
    tokens per step M and the weight matrix size N x K x element bytes, for one weight dtype.

    A ratio table rather than two efficiencies: near the ridge point (M ~ 100-300 on Hopper) measured
    GEMMs reach neither roof, which a pair of constant efficiencies cannot express. Bilinear in
    (log2 M, log2 weight bytes), clamped at the table's edges (no extrapolated trend)."""

    dtype: str
    log2_m: tuple[float, ...]                  # ascending grid of log2(tokens per step)
    log2_weight_bytes: tuple[float, ...]       # ascending grid of log2(N * K * element bytes)
    ratio: tuple[tuple[float, ...], ...]       # [i_m][j_w]: measured time / roofline time, >= ~1
    overhead_s: float = 0.0                    # fixed cost per GEMM launch (inside a CUDA graph)

    @cached_property
    def _grid(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The table as arrays, built once per table (a step prices every GEMM of every step against it)."""
        return np.asarray(self.log2_m), np.asarray(self.log2_weight_bytes), np.asarray(self.ratio, float)

    def ratio_at(self, m, weight_bytes) -> np.ndarray:
        x = np.log2(np.maximum(np.asarray(m, float), 1.0))
        y = np.log2(np.maximum(np.asarray(weight_bytes, float), 1.0))
        gx, gy, r = self._grid
        if y.ndim == 0:     # one weight size (one GEMM's): only its two bracketing columns
            j0, j1, t0 = _bracket(gy, y)
            lo0, hi0 = np.interp(x, gx, r[:, j0]), np.interp(x, gx, r[:, j1])
            return lo0 + t0 * (hi0 - lo0)
        x, y = np.broadcast_arrays(x, y)
        # interpolate along M for every weight-size column, then along weight size
        cols = np.stack([np.interp(x, gx, r[:, j]) for j in range(gy.size)], axis=-1)
        if gy.size == 1:
            return cols[..., 0]
        j = np.clip(np.searchsorted(gy, y) - 1, 0, gy.size - 2)
        t = np.clip((y - gy[j]) / (gy[j + 1] - gy[j]), 0.0, 1.0)
        lo = np.take_along_axis(cols, j[..., None], -1)[..., 0]
        hi = np.take_along_axis(cols, (j + 1)[..., None], -1)[..., 0]
        return lo + t * (hi - lo)


class GemmShapeTable(msgspec.Struct, frozen=True, dict=True):
    """Measured GEMM time over its roofline per (M, N, K), for one weight dtype: AIConfigurator's
    `gemm_perf` grid kept per shape (its estimator interpolates in (m, n, k) too). Trilinear in
    (log2 M, log2 N, log2 K); M clamped at the grid's edges, and N above the widest measured too (a wider
    GEMM runs as column blocks of the widest one: the same ratio to its roofline, e.g. a 128K-vocab
    lm_head); a shape with N below the grid or K outside it is not covered (the (M, weight bytes) table
    prices it instead). The ratio holds the launch."""

    dtype: str
    log2_m: tuple[float, ...]
    log2_n: tuple[float, ...]
    log2_k: tuple[float, ...]
    ratio: tuple[tuple[tuple[float, ...], ...], ...]     # [i_m][i_n][i_k]

    def covers(self, n: float, k: float) -> bool:
        ln, lk = np.log2(max(float(n), 1.0)), np.log2(max(float(k), 1.0))
        return bool(self.log2_n[0] - 1e-9 <= ln and self.log2_k[0] - 1e-9 <= lk <= self.log2_k[-1] + 1e-9)

    @cached_property
    def _grid(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The table as arrays, built once per table (its ratios are a nested tuple of every (M, N, K))."""
        return np.asarray(self.ratio, float), np.asarray(self.log2_n), np.asarray(self.log2_k), np.asarray(self.log2_m)

    def ratio_at(self, m, n: float, k: float) -> np.ndarray:
        r, gn, gk, gm = self._grid
        n0, n1, tn = _bracket(gn, np.log2(max(float(n), 1.0)))
        k0, k1, tk = _bracket(gk, np.log2(max(float(k), 1.0)))
        plane = ((1 - tn) * (1 - tk) * r[:, n0, k0] + tn * (1 - tk) * r[:, n1, k0]
                 + (1 - tn) * tk * r[:, n0, k1] + tn * tk * r[:, n1, k1])
        x = np.log2(np.maximum(np.asarray(m, float), 1.0))
        return np.interp(x, gm, plane)


def _bracket(g: np.ndarray, v) -> tuple[int, int, float]:
    """The grid points either side of one value on an ascending axis and its weight towards the upper one,
    clamped at the edges (a one-point axis: that point)."""
    if g.size == 1:
        return 0, 0, 0.0
    j = int(np.clip(np.searchsorted(g, v) - 1, 0, g.size - 2))
    return j, j + 1, float(np.clip((v - g[j]) / (g[j + 1] - g[j]), 0.0, 1.0))


def gemm_time_s(eff: GemmEfficiency, m, n: float, k: float, element_bytes: float, hbm_bytes_per_s: float,
                flop_per_s: float, shapes: GemmShapeTable | None = None) -> np.ndarray:
    """One GEMM of M tokens against an N x K weight: roofline times the measured ratio, plus its launch.
    Activation bytes (M x (N + K)) count towards the bytes term; they matter only at large M.
    With `shapes` (a per-(M, N, K) measured table), a shape inside it is read from it instead."""
    m = np.asarray(m, float)
    w_bytes = n * k * element_bytes
    bytes_ = w_bytes + m * (n + k) * 2.0
    roof = np.maximum(bytes_ / hbm_bytes_per_s, 2.0 * m * n * k / flop_per_s)
    if shapes is not None and shapes.covers(n, k):
        ratio, overhead = shapes.ratio_at(m, n, k), 0.0     # measured per shape, launch included
    else:
        ratio, overhead = eff.ratio_at(m, w_bytes), eff.overhead_s
    return np.where(m > 0, roof * ratio + overhead, 0.0)


class GlueParams(msgspec.Struct, frozen=True):
    """Everything between the GEMMs and attention, as the engine runs it (`variant`: "fused" as vLLM
    and SGLang fuse it with FlashInfer's kernels, or "torch" unfused): add-RMSNorm twice, RoPE, the new
    token's K/V append into the paged cache, SiLU-and-mul; once per step: embedding gather, final norm,
    argmax sampling. Linear in tokens per step, per layer and per step."""

    variant: str = "fused"
    per_layer_s: float = 0.0
    per_token_layer_s: float = 0.0
    per_step_s: float = 0.0
    per_token_step_s: float = 0.0
    # The per-token costs above hold for the shape they were fitted on; these are that shape's glue bytes
    # per token (cost/glue_widths.py), so another shape's per-token cost scales by its bytes over these.
    layer_bytes_per_token: float = LEGACY_LAYER_BYTES_PER_TOKEN
    step_bytes_per_token: float = LEGACY_STEP_BYTES_PER_TOKEN
    basis: str = LEGACY_BASIS
    # True where the calibration's decode attention already writes the new token's K/V (AIConfigurator's
    # generation attention does): the glue's costs then exclude the append (per_layer_s without the append
    # kernel's share, which is kept here; per-token costs over the bytes without it), cost/ops/glue.py.
    kv_append_in_attention: bool = False
    kv_append_per_layer_s: float = 0.0

    def time_s(self, tokens, layers: int, layer_bytes: float | None = None,
               step_bytes: float | None = None) -> np.ndarray:
        """Seconds of glue for steps of `tokens`; layer_bytes / step_bytes: the priced model's glue bytes
        per token per GPU (None: the fitted shape's own)."""
        t = np.asarray(tokens, float)
        lay = self.per_token_layer_s * (1.0 if layer_bytes is None else layer_bytes / self.layer_bytes_per_token)
        stp = self.per_token_step_s * (1.0 if step_bytes is None else step_bytes / self.step_bytes_per_token)
        return np.where(t > 0, layers * (self.per_layer_s + t * lay) + self.per_step_s + t * stp, 0.0)


class AllReduceFit(msgspec.Struct, frozen=True):
    """One all-reduce over `gpus` GPUs: latency + message bytes / bus rate (the rate that already folds in
    the ring's 2(n-1)/n traffic). `origin`: "measured" (our probe), "aic" (AIConfigurator's table: the
    framework's custom all-reduce, or NCCL's where it has none; `algorithm` says which)
    or "extrapolated" (a model; `basis` names its inputs)."""

    gpus: int
    latency_s: float
    bytes_per_s: float
    origin: str = "measured"
    basis: str = ""
    algorithm: str = ""      # what was timed or modelled: "NCCL", "vLLM custom all-reduce", ...
    # The measured curve (message bytes ascending, seconds): NCCL and custom all-reduces switch protocol
    # with size, so the time is a curve with steps. Where present it prices every message: log-log
    # interpolation inside, the smallest message's time below it, the last segment's slope above it.
    # The line (latency, rate) then only summarises it for output.
    table_bytes: tuple[float, ...] = ()
    table_s: tuple[float, ...] = ()

    def time_s(self, message_bytes) -> np.ndarray:
        b = np.asarray(message_bytes, float)
        if len(self.table_bytes) >= 2:
            x, y = np.log(np.asarray(self.table_bytes)), np.log(np.asarray(self.table_s))
            inside = np.exp(np.interp(np.log(np.maximum(b, 1.0)), x, y))
            slope = (self.table_s[-1] - self.table_s[-2]) / (self.table_bytes[-1] - self.table_bytes[-2])
            above = self.table_s[-1] + (b - self.table_bytes[-1]) * max(slope, 0.0)
            return np.where(b > 0, np.where(b > self.table_bytes[-1], above, inside), 0.0)
        return np.where(b > 0, self.latency_s + b / self.bytes_per_s, 0.0)

    @property
    def label(self) -> str:
        """One phrase for output: GPU count, algorithm and where the number comes from."""
        where = {"measured": "measured by the probe", "aic": "measured by AIConfigurator",
                 "extrapolated": "extrapolated (a model, not measured)"}.get(self.origin, self.origin)
        return f"{self.gpus} GPUs: {self.algorithm or infer_algorithm(self.origin, self.basis)}, {where}"


def carried_curve(base: AllReduceFit, n: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A measured `base.gpus`-GPU curve carried to `n` GPUs (a model, not a measurement): every GPU keeps
    its bus bandwidth, so a message of b bytes moves like one of b x ring(n) / ring(base) on the measured
    count (ring traffic 2(k-1)/k), and the fixed part grows with log2 of the count (NCCL's tree for small
    messages), by the base line's latency x (log2 n / log2 base - 1)."""
    scale = (2 * (n - 1) / n) / (2 * (base.gpus - 1) / base.gpus)
    extra = base.latency_s * (np.log2(n) / np.log2(base.gpus) - 1.0)
    return base.table_bytes, tuple(float(base.time_s(b * scale)) + float(extra) for b in base.table_bytes)


AIC_FRAMEWORKS = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}


def infer_algorithm(origin: str, basis: str) -> str:
    """The all-reduce algorithm of a fit written before fits named it: AIConfigurator's framework tables
    time the framework's own custom all-reduce (docs/aic.md); everything else here is NCCL."""
    if "custom_allreduce" in basis:
        fw = next((name for key, name in AIC_FRAMEWORKS.items() if f"/comm/{key}/" in basis), "the framework's")
        return f"{fw} custom all-reduce (not NCCL)"
    return "NCCL" if origin != "extrapolated" else "NCCL (modelled)"


class Composition(msgspec.Struct, frozen=True):
    """How one layer's GEMMs and glue run back to back in one CUDA graph against the sum of the same ops
    priced one by one (each fitted on its own isolated rows): factor(M) = measured layer / summed ops, per
    weight dtype, over tokens per step M (interpolated in log2 M, clamped at the ends). The step model
    multiplies its GEMM and glue seconds by it."""

    log2_m: tuple[float, ...]
    factor: dict[str, tuple[float, ...]]       # by weight dtype: one factor per log2_m point
    basis: str = ""
    applied: bool = True                       # False: measured and kept, but the step model does not use it
    # A weight dtype's factor over the bf16 factor at the same M, on that dtype's own points (log2_m, factor):
    # what a layer of that dtype costs back to back beyond what a bf16 layer does. Isolated fp8 GEMM rows take
    # inputs quantised beforehand; a step quantises each GEMM's activation (one more kernel per GEMM), and the
    # bf16 steps are priced from isolated rows as they are (the absolute factor is not applied).
    over_bf16: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = msgspec.field(default_factory=dict)

    def factor_at(self, dtype: str, m) -> np.ndarray:
        f = self.factor.get(dtype) or self.factor.get("bf16") or next(iter(self.factor.values()))
        x = np.log2(np.maximum(np.asarray(m, float), 1.0))
        return np.interp(x, np.asarray(self.log2_m), np.asarray(f, float))

    def over_bf16_at(self, dtype: str, m) -> np.ndarray:
        """`dtype`'s layer back to back over the bf16 layer's at m tokens per step (1 where not measured)."""
        curve = self.over_bf16.get(dtype)
        if curve is None:
            return np.ones_like(np.asarray(m, float))
        x = np.log2(np.maximum(np.asarray(m, float), 1.0))
        return np.interp(x, np.asarray(curve[0]), np.asarray(curve[1], float))


def moe_layer_key(model, tp: int, weight_dtype: str) -> str:
    """The MoE layer shape a measured MoE-layer table holds for: hidden size, experts, top-k, expert width per GPU,
    TP and weight dtype (models of one shape share it)."""
    width = (model.moe_intermediate_size or model.intermediate_size or 0) // max(tp, 1)
    return (f"h{model.hidden_size}-e{model.num_experts}-k{model.experts_per_token}-w{width}-tp{tp}-{weight_dtype}")


class MoeLayerTable(msgspec.Struct, frozen=True):
    """The MoE layer term as measured for one layer shape (moe_layer_key): seconds per MoE layer beyond what the
    planner prices otherwise, at batch sizes 2^log2_m, from whole steps with attention left out."""

    key: str
    log2_m: tuple[float, ...]
    per_layer_s: tuple[float, ...]
    label: str = ""


class MoeLayerParams(msgspec.Struct, frozen=True):
    """Per MoE layer, what the step spends beyond the routed experts' grouped GEMMs (router GEMM, top-k, token
    alignment, weighted combine, the grouped GEMM's per-expert cost inside a step): fixed + per token per
    hidden element + per expert touched; per MLA layer, the absorbed form's extra glue. Fitted on whole
    steps with attention left out (calibration/moe_layer_fit.py), never on whole steps."""

    per_layer_s: float
    per_token_hidden_layer_s: float
    per_expert_layer_s: float
    mla_per_layer_s: float = 0.0
    basis: str = ""
    n_train: int = 0
    train_median_ape: float = 0.0
    train_max_ape: float = 0.0
    # the same term as measured, per layer shape: inside a table's batch range the planner interpolates the
    # measured / fitted ratio (cost/ops/moe_dispatch.py), elsewhere the fit alone
    measured: tuple[MoeLayerTable, ...] = ()

    def table_for(self, key: str) -> MoeLayerTable | None:
        return next((t for t in self.measured if t.key == key), None)


class StepParts(msgspec.Struct, frozen=True):
    """Parameters of the non-attention part of a decode step on one GPU kind."""

    gemm: dict[str, GemmEfficiency]            # by weight dtype ("bf16", "fp8")
    glue: GlueParams
    allreduce: dict[int, AllReduceFit] = msgspec.field(default_factory=dict)   # by GPU count
    source: str = "default"                    # "probe:<file>", "aic:<package version, framework>", "default"
    notes: tuple[str, ...] = ()
    gemm_shapes: dict[str, GemmShapeTable] = msgspec.field(default_factory=dict)   # by weight dtype, where measured
    composition: Composition | None = None     # back-to-back layer vs summed ops (None: not measured)
    moe_layer: MoeLayerParams | None = None    # an MoE layer's routing / dispatch / combine (None: not measured)
    # measured routed-expert grouped GEMMs (cost/moe_table.py), built from the file's step_ops rows at load
    # time, not stored under fitted.step_parts
    moe: tuple = ()
    # skewed / balanced ratios of expert shapes measured by the probe on another GPU (cost/moe_table.py MoeSkew)
    moe_skew: tuple = ()
    # the routing the routed experts are priced at: the workload's (balanced, or skewed), set by estimate
    moe_routing: str = "balanced"

    def allreduce_for(self, gpus: int) -> AllReduceFit | None:
        if gpus <= 1:
            return None
        if gpus in self.allreduce:
            return self.allreduce[gpus]
        known = sorted(self.allreduce)
        return self.allreduce[min(known, key=lambda n: abs(n - gpus))] if known else None
