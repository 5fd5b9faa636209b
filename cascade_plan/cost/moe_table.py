"""Measured routed-expert times: the probe's grouped-GEMM rows (`step_ops`, op "moe_grouped_gemm",
kernels_probe/moe/moe_probe.py) of one expert shape per GPU and weight dtype, as one table over tokens per
step M. Pure data + lookup; calibration/moe_rows.py builds it from a calibration file, cost/ops/moe.py
prices with it.

A table holds, per measured M, one MoE layer's gate_up + down grouped GEMMs (seconds, launches
included) at one routing (balanced: the uniform routing the planner assumes by default; or skewed: the
probe's Zipf-skewed router, kernels_probe/moe/moe_shapes.py) from one backend (the fused Triton kernel where
measured: what engines run). A skew ratio (MoeSkew) carries the H200 probe's skewed / balanced time of one
expert shape to a GPU whose rows are balanced only (an AIConfigurator import)."""

from __future__ import annotations

import msgspec
import numpy as np

MEASURED = "measured grouped-GEMM rows (interpolated in M)"
MEASURED_AIC = "AIConfigurator's MoE rows (moe_perf, interpolated in M)"
MODELLED = "the GEMM table (touched experts as one grouped GEMM per projection, uniform routing)"


class MoeTable(msgspec.Struct, frozen=True):
    hidden: int
    intermediate: int          # one expert's width on one GPU (moe_intermediate_size / tp)
    experts: int
    top_k: int
    dtype: str                 # weight dtype
    m: tuple[float, ...]       # ascending tokens per step
    seconds: tuple[float, ...]  # gate_up + down, one layer
    backend: str = "triton"
    routing: str = "balanced"
    origin: str = "probe"       # or "aic": AIConfigurator's moe_perf rows (whole fused MoE layer)
    source_dtype: str = ""      # the measured rows' own dtype name where it differs (AIConfigurator's fp8_block)

    def matches(self, model, tp: int, dtype: str) -> bool:
        return (self.dtype == dtype and self.hidden == model.hidden_size and self.experts == model.num_experts
                and self.top_k == model.experts_per_token and self.intermediate * tp == model.moe_intermediate_size)

    def inside(self, m) -> np.ndarray:
        m = np.asarray(m, float)
        return (m >= self.m[0]) & (m <= self.m[-1]) & (m > 0)

    @property
    def label(self) -> str:
        lo, hi = int(self.m[0]), int(self.m[-1])
        dtype = f"{self.dtype} ({self.source_dtype})" if self.source_dtype and self.source_dtype != self.dtype \
            else self.dtype
        what = MEASURED_AIC if self.origin == "aic" else MEASURED
        return f"{what}: {self.backend}, {dtype} weights, {self.routing} routing, M {lo}-{hi}"


def table_for(tables, model, tp: int, dtype: str, routing: str = "balanced") -> MoeTable | None:
    """The measured table of this model's experts at this TP, weight dtype and routing, if any (the probe's
    rows before AIConfigurator's, in the order given)."""
    return next((t for t in tables if t.matches(model, tp, dtype) and t.routing == routing), None)


def interpolate(table: MoeTable, m, modelled_s) -> np.ndarray:
    """Seconds per layer at m: the rows' ratio to the model (modelled_s(M) at the rows' M), interpolated in
    log2 M and applied to the model at m; exactly the row at a measured M. Outside the table: the model."""
    m = np.asarray(m, float)
    grid = np.asarray(table.m, float)
    ratio = np.asarray(table.seconds, float) / np.maximum(np.asarray(modelled_s(grid), float), 1e-300)
    r = np.interp(np.log2(np.maximum(m, 1.0)), np.log2(grid), ratio)
    base = np.asarray(modelled_s(m), float)
    return np.where(table.inside(m), base * r, base)


ROUTINGS = ("balanced", "skewed")


class MoeSkew(msgspec.Struct, frozen=True):
    """Skewed / balanced time of one expert shape and weight dtype over tokens per step M, as measured by
    the probe on another GPU (`source`: its file), to scale balanced times where skewed was not measured."""

    hidden: int
    intermediate: int
    experts: int
    top_k: int
    dtype: str
    m: tuple[float, ...]
    ratio: tuple[float, ...]
    source: str = ""

    matches = MoeTable.matches

    def at(self, m) -> np.ndarray:
        """The ratio at m, interpolated in log2 M, held at the end values outside the measured M."""
        return np.interp(np.log2(np.maximum(np.asarray(m, float), 1.0)), np.log2(np.asarray(self.m, float)),
                         np.asarray(self.ratio, float))


def skew_for(skews, model, tp: int, dtype: str) -> MoeSkew | None:
    return next((s for s in skews if s.matches(model, tp, dtype)), None)


def skew_ratio(skewed: MoeTable, balanced: MoeTable, source: str = "") -> MoeSkew | None:
    """The skewed / balanced ratio of two tables of one shape, at the M both measured."""
    both = sorted(set(skewed.m) & set(balanced.m))
    if not both:
        return None
    r = tuple(float(f"{skewed.seconds[skewed.m.index(x)] / balanced.seconds[balanced.m.index(x)]:.4g}") for x in both)
    return MoeSkew(hidden=skewed.hidden, intermediate=skewed.intermediate, experts=skewed.experts,
                   top_k=skewed.top_k, dtype=skewed.dtype, m=tuple(both), ratio=r, source=source)
