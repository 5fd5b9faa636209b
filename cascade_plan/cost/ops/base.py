"""The one interface every operation module shares: what it moves, what it computes, how long it takes.

Arrays broadcast over the step grid (one value per decode step, or per sweep point); SI units."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OpCost:
    """One operation kind's cost for a whole step on one GPU (every layer it runs in, summed)."""

    name: str                  # the breakdown key: "attention", "gemm", "moe", "glue", "allreduce", "lm_head"
    bytes: np.ndarray          # HBM bytes moved
    flops: np.ndarray          # floating-point operations
    time_s: np.ndarray         # time, fixed costs included
    source: str = ""           # where the parameters came from ("measured table", "fitted model", "default", ...)


def total_time_s(ops: list[OpCost]) -> np.ndarray:
    """A step is the sum of its operations (they run back to back on one stream)."""
    return sum((np.asarray(o.time_s, float) for o in ops), np.zeros(()))
