"""What the interpreter tests of the per-sequence decode's kernel-body variants share: a tune of 32-token tiles on
two warps whatever the launch's tile kind (two lanes of 16 keys where decode_lanes), or of 64 tokens on four
(wide_tiles); launch rules for 132 SMs; a small shape; one plan run on a poisoned output. Import it after
kernels_probe.interpret.enable_interpreter() has held, as its test modules do."""

from dataclasses import replace

import torch

from cascade_plan.own_kernel_tune import TuneParams
from kernels_probe.attention.grid import AttentionConfig
from kernels_probe.attention.triton_plans import DecodePlan

SMALL_TILES = TuneParams(decode_block_n=32, decode_warps=2, decode_short_block_n=32, decode_short_warps=2,
                         decode_block_n_large_batch=32, decode_warps_large_batch=2, long_block_n=0, prefix_block_n=16,
                         min_tokens_per_split=16, decode_min_tokens_per_split=16, prefix_max_block_m=16,
                         page_block_min_programs_per_sm=0, decode_shared_split=False)


def wide_tiles(tune: TuneParams) -> TuneParams:
    """`tune` on 64-token four-warp tiles whatever the launch's tile kind, head dim 256 included (no wide-head tiles):
    head dim 256's tiles in SMALL_TILES' tests."""
    return replace(tune, decode_block_n=64, decode_warps=4, long_warps=4, decode_short_block_n=64, decode_short_warps=4,
                   decode_block_n_large_batch=64, decode_warps_large_batch=4, wide_head_min_dim=0)


def small_config(**kw) -> AttentionConfig:
    """Two groups of 4 sequences of 2 KV heads x 4 query heads at 64 shared + 8 private tokens, head dim 16, pages of
    8 tokens, bf16; `kw` overrides."""
    base = dict(prefix_tokens=64, group_size=4, n_groups=2, suffix_tokens=8, q_per_kv=4, num_kv_heads=2,
                head_dim=16, page_size=8, kv_dtype="bf16")
    base.update(kw)
    return AttentionConfig(**base)


def run_plan(d, table, T, tune, *, splits, shared):
    """(output, plan): the decode of data `d` over block table `table` of T tokens, `splits` splits forced, told of
    `shared` shared prefix tokens, run once on an output filled with NaN."""
    out = torch.full_like(d.q, float("nan"))
    plan = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, T, out, sm_count=2, tune=tune,
                      force_splits=splits, shared_prefix_tokens=shared)
    plan()
    return out, plan
