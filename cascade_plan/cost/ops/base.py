"""What every operation module returns: what it moves, what it computes, how long it takes (the call itself,
`cost(ctx: StepContext) -> OpCost | None`, and the list of op modules: cost/ops/registry.py).

Arrays broadcast over the step grid (one value per decode step, or per sweep point); SI units."""

from __future__ import annotations

import msgspec
import numpy as np


class OpCost(msgspec.Struct, frozen=True):
    """One operation kind's cost for a whole step on one GPU (every layer it runs in, summed)."""

    name: str                  # the breakdown key: the op module's NAME ("gemm", "decode", "cascade_prefix", ...)
    bytes: np.ndarray          # HBM bytes moved
    flops: np.ndarray          # floating-point operations (useful ones: padded tiles count in time_s only)
    time_s: np.ndarray         # time, fixed costs included
    source: str = ""           # where the parameters came from ("measured table", "fitted model", "default", ...)
    # the bandwidth / compute part of time_s, without fixed costs: what two passes running concurrently share
    # (the cascade's prefix and suffix, CostParams.prefix_suffix_overlap); None where no rule reads it
    bound_s: np.ndarray | None = None


def map_arrays(op: OpCost, fn) -> OpCost:
    """The op with `fn` applied to each of its arrays (run_load broadcasts, slices and joins step costs)."""
    return msgspec.structs.replace(op, bytes=fn(op.bytes), flops=fn(op.flops), time_s=fn(op.time_s),
                                   bound_s=None if op.bound_s is None else fn(op.bound_s))


def distinct(x: np.ndarray) -> np.ndarray:
    """np.unique(x) for arrays without NaN, from one sort: a plain np.unique imports numpy.ma on its first
    call (15-60 ms), which every `estimate` paid at start-up."""
    a = np.sort(np.asarray(x).ravel())
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


def median0(t: np.ndarray) -> np.ndarray:
    """np.median(t, axis=0), the same numbers (NaN where a column has one), without numpy.ma: np.median
    imports it on its first call."""
    s = np.sort(np.asarray(t, float), axis=0)
    n = s.shape[0]
    if n == 0:
        return np.full(s.shape[1:], np.nan)
    m = n // 2
    med = s[m] if n % 2 else (s[m - 1] + s[m]) / 2
    return np.where(np.isnan(s[-1]), np.nan, med)
