"""Page blocks of the probe's own per-sequence decode over shared pages: where the kernel reads the pages a block of
consecutive sibling sequences share once for all of them (cascade_plan/own_kernel_launch.py decides where, from
the tune the probe ran and the GPU's SM count). Those tokens are neither read from HBM nor streamed through L2 nor
computed again for the block's other sequences; the rest of the siblings' re-reads are left to the L2 term."""

from __future__ import annotations

from functools import lru_cache

import msgspec
import numpy as np

from cascade_plan.cost.step_shape import StepLoad
from cascade_plan.own_kernel_blocks import block_saved_tokens
from cascade_plan.own_kernel_launch import TuneParams


class PageBlocks(msgspec.Struct, frozen=True):
    """The rule in the planner's form: the GPU's SM count and the probe's tune."""

    sm_count: int
    tune: TuneParams


def page_blocks_of(sm_count: int, tune: dict) -> PageBlocks:
    """A rule from a calibration's record (BackendFit.page_blocks): fields of TuneParams this version does not know
    are ignored, and the ones the record lacks keep their defaults."""
    known = TuneParams.__dataclass_fields__
    return PageBlocks(sm_count, TuneParams(**{k: v for k, v in tune.items() if k in known}))


@lru_cache(maxsize=4096)
def _saved(rule: PageBlocks, seqs: int, kv_heads: int, q_per_kv: int, group_size: int, prefix: int,
           seq_len: int) -> float:
    return block_saved_tokens(seqs, kv_heads, q_per_kv, group_size, prefix, seq_len, rule.sm_count, rule.tune)


def saved_tokens(rule: PageBlocks | None, seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len) -> np.ndarray:
    """Shared tokens per sequence that its page block read for it (0 without a rule, or where no block forms), for
    `seqs` sequences in groups of `group_size` consecutive ones sharing `prefix_tokens`, `seq_len` tokens each;
    arrays broadcast (a sweep prices each distinct shape once)."""
    args = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in
                                 (seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len)))
    if rule is None or not args[0].size:
        return np.zeros(args[0].shape)
    shapes, where = np.unique(np.rint(np.stack([a.ravel() for a in args], axis=1)).astype(np.int64), axis=0,
                              return_inverse=True)
    per_shape = np.array([_saved(rule, *(int(v) for v in row)) if row[0] >= 2 and row[3] >= 2 and row[4] > 0
                          and row[1] > 0 and row[2] > 0 else 0.0 for row in shapes])
    return per_shape[where.ravel()].reshape(args[0].shape)


def load_saved_tokens(rule: PageBlocks | None, load: StepLoad, kv_heads: int, q_per_kv: int) -> np.ndarray:
    """Shared tokens that page blocks spare a step's per-sequence decode, summed over its sequences (shape of
    load.active_seqs). A block lies inside one innermost group of siblings and reads the whole path of shared nodes
    above it once (the pages its sequences have in common from the start), so a tree is priced as if uniform: groups
    of active sequences / instances of its most-replicated shared node, each sequence sharing its mean shared
    tokens (on the probe's three-level trees, the kernel's recorded launches are exactly these)."""
    node_tokens = np.asarray(load.node_tokens, dtype=float)
    inst_tokens = np.asarray(load.node_instance_tokens, dtype=float)
    node_tokens, inst_tokens = np.broadcast_arrays(node_tokens, inst_tokens)
    if rule is None or not node_tokens.shape[0]:
        return np.zeros(np.shape(load.active_seqs))
    instances = np.divide(node_tokens, inst_tokens, out=np.zeros(node_tokens.shape), where=inst_tokens > 0).max(0)
    # the load's arrays broadcast over steps (or a sweep) each in its own shape: one shape for all of them
    seqs, instances, prefix_sum, suffix_sum = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (load.active_seqs, instances, load.ps_prefix_tokens, load.suffix_tokens)))
    group_size = np.divide(seqs, instances, out=np.zeros(seqs.shape), where=instances > 0)
    shared = np.divide(prefix_sum, seqs, out=np.zeros(seqs.shape), where=seqs > 0)
    private = np.divide(suffix_sum, seqs, out=np.zeros(seqs.shape), where=seqs > 0)
    return seqs * saved_tokens(rule, seqs, kv_heads, q_per_kv, group_size, shared, shared + private)
