"""Does the configuration run at all? Weights and the batch's KV against GPU memory, the reason when
they do not fit, and what would: the smallest tensor-parallel degree, a smaller dtype, the largest
batch. A speedup for a configuration that cannot run is no answer, so the verdict defers to this."""

from __future__ import annotations

import msgspec
import numpy as np

from cascade_plan.cost.capacity import (
    DEFAULT_RESERVE_FRACTION,
    Capacity,
    capacity,
    kv_budget_bytes,
    stored_weight_bytes,
)
from cascade_plan.cost.cost_model import kv_bytes_per_token
from cascade_plan.cost.flat_tree import FlatTree, flatten
from cascade_plan.inputs.workload import Scenario
from cascade_plan.units import fmt_bytes, fmt_bytes_binary, fmt_count

TP_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)
SMALLER_DTYPES = {"bf16": ("fp8", "int4"), "fp16": ("fp8", "int4"), "fp8": ("int4",), "int8": ("int4",), "int4": ()}


class MemoryFit(msgspec.Struct, frozen=True):
    weights_fit: bool
    batch_fits: bool                 # the whole batch at its longest, stored as the workload says
    group_fits: bool                 # one sibling group with its prefix chain
    weight_bytes: float              # per GPU
    usable_bytes: float              # memory minus the reserve
    kv_needed_bytes: float
    kv_budget_bytes: float
    sequences: int
    max_sequences: int               # of this shape, at once
    reserve_fraction: float
    reason: str | None               # why it does not fit; None when it does
    would_fit: tuple[str, ...]       # concrete alternatives that do fit

    @property
    def fits(self) -> bool:
        return self.weights_fit and self.batch_fits

    def to_json(self) -> dict:
        return {"fits": self.fits, "weights_fit": self.weights_fit, "batch_fits": self.batch_fits,
                "group_fits": self.group_fits, "weight_bytes": self.weight_bytes, "usable_bytes": self.usable_bytes,
                "kv_needed_bytes": self.kv_needed_bytes, "kv_budget_bytes": self.kv_budget_bytes,
                "sequences": self.sequences, "max_sequences": self.max_sequences,
                "reserve_fraction": self.reserve_fraction, "reason": self.reason, "would_fit": list(self.would_fit)}


def _needed(cap: Capacity, prefix_caching: bool) -> float:
    return cap.kv_bytes_shared if prefix_caching else cap.kv_bytes_unshared


def _valid_tps(scn: Scenario) -> list[int]:
    return [t for t in TP_CANDIDATES if t > scn.tp and scn.model.num_q_heads % t == 0]


def _fits(scn: Scenario, reserve: float, flat: FlatTree) -> MemoryFit:
    return memory_fit(scn, reserve, flat, alternatives=False)


def _batch_hint(m: MemoryFit) -> str:
    return ("the whole batch" if m.batch_fits
            else f"then at most {m.max_sequences:,} of {m.sequences:,} sequences at once")


def _first(variants: list[tuple[str, Scenario]], reserve: float, flat: FlatTree) -> str | None:
    """The first variant under which everything fits, else the first under which the weights do
    (with the batch that then fits)."""
    fits = [(label, _fits(v, reserve, flat)) for label, v in variants]
    for label, m in fits:
        if m.fits:
            return label
    for label, m in fits:
        if m.weights_fit and m.max_sequences >= 1:
            return f"{label}, {_batch_hint(m)}"
    return None


def _alternatives(scn: Scenario, reserve: float, flat: FlatTree, here: MemoryFit) -> list[str]:
    """Single changes to the configuration under which it runs: the smallest tensor-parallel degree,
    the next smaller dtype, the largest batch of this shape."""
    tps = [(f"tensor parallelism {t} (--tp {t})", msgspec.structs.replace(scn, tp=t)) for t in _valid_tps(scn)]
    out = [_first(tps, reserve, flat)]
    if not here.weights_fit:
        dts = [(f"{dt} weights (--weight-dtype {dt})", msgspec.structs.replace(scn, weight_dtype=dt))
               for dt in SMALLER_DTYPES.get(scn.weight_dtype, ())]
        return [a for a in out + [_first(dts, reserve, flat)] if a]
    kvs = [(f"{dt} KV cache (--kv-dtype {dt})", msgspec.structs.replace(scn, kv_dtype=dt))
           for dt in SMALLER_DTYPES.get(scn.kv_dtype, ())]
    out.append(_first(kvs, reserve, flat))
    if here.max_sequences >= 1:
        out.append(f"a batch of at most {here.max_sequences:,} sequences of this shape (the engine would run "
                   f"{here.max_sequences:,} of {here.sequences:,} at a time)")
    else:
        tokens = here.kv_budget_bytes // kv_bytes_per_token(scn.model, scn.kv_dtype, scn.tp)
        out.append(f"at most {fmt_count(tokens)} tokens of KV in all ({tokens:,.0f}: shorter prompts or outputs)")
    return [a for a in out if a]


def memory_fit(scn: Scenario, reserve_fraction: float = DEFAULT_RESERVE_FRACTION,
               flat: FlatTree | None = None, alternatives: bool = True) -> MemoryFit:
    flat = flat or flatten(scn.tree)
    cap = capacity(scn, reserve_fraction, flat)
    usable = cap.memory_bytes - cap.reserve_bytes
    needed = _needed(cap, scn.prefix_caching)
    weights_fit = cap.weight_bytes <= usable
    batch_fits = weights_fit and needed <= cap.kv_budget_bytes
    group_fits = weights_fit and cap.group_fits
    n = cap.max_sequences_shared if scn.prefix_caching else cap.max_sequences_unshared
    reason = None
    mem = (f"{fmt_bytes_binary(cap.memory_bytes)} {scn.hardware.id} less a {reserve_fraction:.0%} reserve "
           f"({fmt_bytes_binary(usable)})")
    if not weights_fit:
        reason = (f"the weights alone do not fit: {fmt_bytes(cap.weight_bytes)} per GPU "
                  f"({scn.weight_dtype}, TP {scn.tp}) against {mem}")
    elif not group_fits:
        reason = (f"not even one sibling group fits: {cap.group_sequences:,} sequences need "
                  f"{fmt_bytes_binary(cap.group_kv_bytes)} of KV by the end of the run, and "
                  f"{fmt_bytes_binary(cap.kv_budget_bytes)} is left after the weights")
    elif not batch_fits:
        reason = (f"the batch needs {fmt_bytes_binary(needed)} of KV by the end of the run, and "
                  f"{fmt_bytes_binary(cap.kv_budget_bytes)} is left after the weights: {n:,} of "
                  f"{cap.sequences:,} sequences fit at once, so the engine would not run this batch as one")
    fit = MemoryFit(weights_fit=weights_fit, batch_fits=batch_fits, group_fits=group_fits,
                     weight_bytes=cap.weight_bytes, usable_bytes=usable, kv_needed_bytes=needed,
                     kv_budget_bytes=cap.kv_budget_bytes, sequences=cap.sequences,
                     max_sequences=n if weights_fit else 0, reserve_fraction=reserve_fraction, reason=reason,
                     would_fit=())
    if reason and alternatives:
        fit = msgspec.structs.replace(fit, would_fit=tuple(_alternatives(scn, reserve_fraction, flat, fit)))
    return fit


def single_level_fits(scn: Scenario, prefix_tokens, group_size, suffix_tokens, n_groups: int,
                      reserve_fraction: float = DEFAULT_RESERVE_FRACTION) -> np.ndarray:
    """For a sweep of one decode step (n_groups prompts of `prefix_tokens`, `group_size` sequences each
    reading `suffix_tokens` of their own): whether weights and that step's KV fit, broadcast."""
    kvb = kv_bytes_per_token(scn.model, scn.kv_dtype, scn.tp)
    mem = scn.hardware.memory_bytes
    weights_fit = stored_weight_bytes(scn) <= mem * (1 - reserve_fraction)
    p, n, s = (np.asarray(x, dtype=float) for x in (prefix_tokens, group_size, suffix_tokens))
    tokens = n_groups * (p + n * s) if scn.prefix_caching else n_groups * n * (p + s)
    return np.asarray(tokens * kvb <= kv_budget_bytes(scn, reserve_fraction)) & weights_fit
