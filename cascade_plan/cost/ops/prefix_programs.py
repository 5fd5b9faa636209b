"""The probe's own cascade prefix pass in the planner's terms: the work its busiest program streams, per level
(own_kernel_prefix.program_tile_tokens), for arrays of shapes. The rule is the one a calibration's page blocks carry
(page_blocks.PageBlocks: the GPU's SM count and the probe's tune); without it, the level's whole prefix, as other
backends' fits take it."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from cascade_plan.cost.ops.page_blocks import PageBlocks, each_shape
from cascade_plan.own_kernel_prefix import program_tile_tokens


@lru_cache(maxsize=4096)
def _one(rule: PageBlocks, seqs_per_group: int, q_per_kv: int, kv_heads: int, n_groups: int, tokens: int) -> float:
    return program_tile_tokens(seqs_per_group, q_per_kv, kv_heads, n_groups, tokens, rule.sm_count, rule.tune)


def prefix_program(rule: PageBlocks | None, seqs_per_group, q_per_kv, kv_heads, n_groups, prefix_tokens) -> np.ndarray:
    """The latency feature of a prefix level (calibration/fitting.py Features.longest_tokens): with the rule, the
    busiest program's tokens x row tile / 64; without, the prefix's tokens. Arrays broadcast; each distinct shape is
    computed once; 0 where a level has no tokens, sequences or groups."""
    args = (seqs_per_group, q_per_kv, kv_heads, n_groups, prefix_tokens)
    if rule is None:
        return np.array(np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in args))[4])
    return each_shape(lambda *shape: _one(rule, *shape), lambda row: row.min() >= 1, *args)
