"""Page blocks of the probe's own per-sequence decode over shared pages: where the kernel reads the pages a block of
consecutive sibling sequences share once for all of them (cascade_plan/own_kernel_launch.py decides where, from
the tune the probe ran and the GPU's SM count). Those tokens are neither read from HBM nor streamed through L2 nor
computed again for the block's other sequences; the rest of the siblings' re-reads are left to the L2 term. A
block's first program streams the shared run and then each sequence's private tokens alone: the longest program's
tokens (longest_program) price its latency."""

from __future__ import annotations

from functools import lru_cache

import msgspec
import numpy as np

from cascade_plan.cost.step_shape import StepLoad
from cascade_plan.own_kernel_blocks import block_saved_tokens, longest_program_tokens
from cascade_plan.own_kernel_tune import TuneParams


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
def _saved(rule: PageBlocks, seqs: int, kv_heads: int, q_per_kv: int, group_size: int, prefix: int, seq_len: int,
           head_dim: int) -> float:
    return block_saved_tokens(seqs, kv_heads, q_per_kv, group_size, prefix, seq_len, rule.sm_count, rule.tune,
                              head_dim=head_dim)


@lru_cache(maxsize=4096)
def _longest(rule: PageBlocks, seqs: int, kv_heads: int, q_per_kv: int, group_size: int, prefix: int,
             seq_len: int, head_dim: int) -> float:
    return float(longest_program_tokens(seqs, kv_heads, q_per_kv, group_size, prefix, seq_len, rule.sm_count,
                                        rule.tune, head_dim=head_dim))


def each_shape(fn, valid, *arrays) -> np.ndarray:
    """fn(*shape) for every broadcast element of the arrays (rounded to integers), each distinct shape computed once
    (a sweep prices each shape once); 0 where valid(shape) is False."""
    args = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in arrays))
    if not args[0].size:
        return np.zeros(args[0].shape)
    shapes, where = np.unique(np.rint(np.stack([a.ravel() for a in args], axis=1)).astype(np.int64), axis=0,
                              return_inverse=True)
    per_shape = np.array([fn(*(int(v) for v in row)) if valid(row) else 0.0 for row in shapes])
    return per_shape[where.ravel()].reshape(args[0].shape)


def _per_shape(fn, rule: PageBlocks | None, seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len,
               blocks_only: bool, head_dim) -> np.ndarray:
    """fn(rule, *shape, head_dim) for every distinct shape (each_shape); 0 without a rule, for an empty shape, and
    (blocks_only) where no block can form (fewer than two sequences or siblings, no shared tokens)."""
    if rule is None:
        return np.zeros(np.broadcast(*(np.asarray(x) for x in
                                       (seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len,
                                        head_dim))).shape)

    def valid(row) -> bool:
        if blocks_only:
            return row[0] >= 2 and row[3] >= 2 and row[4] > 0 and row[1] > 0 and row[2] > 0
        return row[0] >= 1 and row[1] > 0 and row[2] > 0 and row[5] > 0 and row[3] >= 1

    return each_shape(lambda *shape: fn(rule, *shape), valid, seqs, kv_heads, q_per_kv, group_size, prefix_tokens,
                      seq_len, head_dim)


def saved_tokens(rule: PageBlocks | None, seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len, *,
                 head_dim=128) -> np.ndarray:
    """Shared tokens per sequence that its page block read for it (0 without a rule, or where no block forms), for
    `seqs` sequences in groups of `group_size` consecutive ones sharing `prefix_tokens`, `seq_len` tokens each, at
    `head_dim` (whose tiles the launch runs: own_kernel_launch.tune_at_head_dim); arrays broadcast."""
    return _per_shape(_saved, rule, seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len, True, head_dim)


def longest_program(rule: PageBlocks | None, seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len,
                    blocks_only: bool = True, *, head_dim=128) -> np.ndarray:
    """Tokens the decode's busiest program streams (own_kernel_blocks.longest_program_tokens) for the same shapes as
    saved_tokens: with blocks_only, 0 where no block can form (the busiest program's own term is then left out);
    without, the launch's longest split there (the tokens one program streams: the kernel's latency bound). 0
    without a rule."""
    return _per_shape(_longest, rule, seqs, kv_heads, q_per_kv, group_size, prefix_tokens, seq_len, blocks_only,
                      head_dim)


def _load_shape(load: StepLoad) -> tuple[np.ndarray, ...] | None:
    """A step's load as uniform groups: (sequences, group size, shared tokens per sequence, its tokens). A block lies
    inside one innermost group of siblings and reads the whole path of shared nodes above it once (the pages its
    sequences have in common from the start), so a tree is priced as if uniform: groups of active sequences /
    instances of its most-replicated shared node, each sequence sharing its mean shared tokens (on the probe's
    three-level trees, the kernel's recorded launches are exactly these). None where the load has no shared node."""
    node_tokens = np.asarray(load.node_tokens, dtype=float)
    inst_tokens = np.asarray(load.node_instance_tokens, dtype=float)
    node_tokens, inst_tokens = np.broadcast_arrays(node_tokens, inst_tokens)
    if not node_tokens.shape[0]:
        return None
    instances = np.divide(node_tokens, inst_tokens, out=np.zeros(node_tokens.shape), where=inst_tokens > 0).max(0)
    # the load's arrays broadcast over steps (or a sweep) each in its own shape: one shape for all of them
    seqs, instances, prefix_sum, suffix_sum = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (load.active_seqs, instances, load.ps_prefix_tokens, load.suffix_tokens)))
    group_size = np.divide(seqs, instances, out=np.zeros(seqs.shape), where=instances > 0)
    shared = np.divide(prefix_sum, seqs, out=np.zeros(seqs.shape), where=seqs > 0)
    private = np.divide(suffix_sum, seqs, out=np.zeros(seqs.shape), where=seqs > 0)
    return seqs, group_size, shared, shared + private


def load_saved_tokens(rule: PageBlocks | None, load: StepLoad, kv_heads: int, q_per_kv: int, *,
                      head_dim: int = 128) -> np.ndarray:
    """Shared tokens that page blocks spare a step's per-sequence decode, summed over its sequences (shape of
    load.active_seqs), the step's load taken as uniform groups (_load_shape)."""
    shape = _load_shape(load) if rule is not None else None
    if shape is None:
        return np.zeros(np.shape(load.active_seqs))
    seqs, group_size, shared, tokens = shape
    return seqs * saved_tokens(rule, seqs, kv_heads, q_per_kv, group_size, shared, tokens, head_dim=head_dim)


def load_longest_program(rule: PageBlocks | None, load: StepLoad, kv_heads: int, q_per_kv: int,
                         blocks_only: bool = True, private: bool = False, head_dim: int = 128) -> np.ndarray:
    """Tokens the busiest program of a step's per-sequence decode streams, per layer (shape of load.active_seqs), as
    longest_program gives them; `private`: over private copies of the shared pages (no blocks: the longest split)."""
    shape = _load_shape(load) if rule is not None else None
    if shape is None:
        if rule is None or blocks_only:
            return np.zeros(np.shape(load.active_seqs))
        seqs, tokens = np.broadcast_arrays(np.asarray(load.active_seqs, float), np.asarray(load.longest_context,
                                                                                          float))
        return longest_program(rule, seqs, kv_heads, q_per_kv, 1, 0, tokens, blocks_only=False, head_dim=head_dim)
    seqs, group_size, shared, tokens = shape
    return longest_program(rule, seqs, kv_heads, q_per_kv, group_size, 0 if private else shared, tokens, blocks_only,
                           head_dim=head_dim)
