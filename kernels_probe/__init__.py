"""kernels_probe: the GPU side of cascade-plan.

Real decode-attention kernels (Triton, over a paged KV cache), torch's flash attention and, where
importable, FlashInfer, timed with CUDA graphs into a calibration JSON file that the planner reads.

This module imports nothing heavy: torch and triton are imported by the submodules that need them,
so ``kernels_probe.environment`` can say what is missing on a machine without them.
"""

PROBE_VERSION = "1.22.0"  # 1.4: page-aware decode blocks where they pay (page_block_seqs), long-context tiles;
# 1.4.1: one block-table scan chunk (CHECK_CHUNK_PAGES) for every launch, 43 fewer compiles on the default grid;
# 1.5: Triton decode rows record their launch (splits, page_block_seqs) and the page blocks the kernel formed;
# 1.5.1: blocks only where the launch's first split forms one (first_split_blocks);
# 1.5.2: the per-sequence decode splits down to 128 tokens (decode_min_tokens_per_split), not 256
# 1.5.3: blocks no larger than leaves one working program per SM (page_block_min_programs_per_sm); a launch whose
# one split straddles the shared prefix's end without a block splits there (decode_shared_split)
# 1.5.4: the per-sequence decode's base tile runs on two warps (decode_warps), the long-context tile on four
# 1.5.5: the long-context launch targets 8 programs per SM (long_programs_per_sm), not 16
# 1.6.0: tile loops that run long load the next tile's page numbers an iteration ahead (page_prefetch), so that K/V
# loads no longer wait on a page-number load in their own iteration (and the base tile is double-buffered)
# 1.7.0: a split per-sequence decode merges each sequence's splits in the program that stores its last one
# (decode_fused_merge), not in a merge kernel launched after it
# 1.7.1: a pass's first row of each configuration is timed a second time too, not only rows of 100 us or more (a
# first cut timed every row twice: benchmarks/raw/device-2026-12-06d/default-retime-all.json.gz)
# 1.7.2: the long-context launch keeps its merge kernel (fused_merge_long): no faster fused, five fewer compiles
# 1.8.0: a long-context launch over mostly private tokens whose batch fits one wave streams instead: 2 programs per SM
# of long splits on the double-buffered base tile (stream_programs_per_sm)
# 1.9.0: base tiles prefetch page numbers wherever the launch has at most 3 programs per SM
# (prefetch_max_programs_per_sm); a tiny launch of more than 12 splits takes 12, merged in its own programs
# (tiny_fused_programs_per_sm)
# 1.10.0: 9-16 query heads per KV head form page blocks of two sequences in a 32-row dot on 128-token tiles
# (wide_dot_block_n; the coverage and regimes grids' G 12 and 16 rows, none of the default grid's); the kernel's last
# split runs to each sequence's end (what shared_head_min_tokens, off, would launch)
# 1.11.0: at head dim 256 the batch-filled and long-context tiles hold 64 tokens and the base tile never prefetches
# (wide_head_min_dim): tiles of 74 KB of shared memory, not 138-140 KB
# 1.12.0: a prefix no two sequences share launches as the private context it is (sibling_shared_only)
# 1.13.0: fp8 read as int16 pairs in decode launches of <= 2.25 working programs per SM at head dim <= 128
# (decode_fp8_pairs); fp8's streaming launch at 4 programs per SM (fp8_stream_programs_per_sm); at head dim 256 a
# launch too short for page blocks splits its shared prefix so they form (block_fill_programs_per_sm)
# 1.14.0: where two sequences of 9-16 query heads per KV head share the wide dot over a known shared prefix and the
# long-context launch makes 16+ splits, split targets of 2 and 4 programs per SM if the private tail is <= 512 tokens
# (wide_dot_programs_per_sm, wide_dot_min_splits, wide_dot_max_private_tokens)
# 1.15.0: at head dim 256 over private pages, base-tile launches split to fill whole waves of two programs per SM
# (wide_head_wave_ctas); blocks of four sequences of 9-16 query heads on 64-token long-context tiles where they split
# and leave 1.8+ working programs per SM (wide_dot_four_min_programs_per_sm); block fill's split rounded down to
# whole tiles where rounding up would leave too few programs for its blocks of four (block_fill_shorter_min_seqs)
# 1.16.0: head dim 256's whole-wave split over a known shared prefix too, where no page block forms before or after
# (wide_head_wave_shared)
# 1.17.0: a split base-tile launch over a known shared prefix whose batch gives 3.5 to 4 items per SM runs unsplit on
# the batch-filled tile in page blocks no smaller than its own (filled_blocks_min_programs_per_sm)
# 1.18.0: a base-tile launch whose split count only rounds the split target up takes one split fewer where that
# still leaves 3.5 programs per SM, in page blocks no smaller (floor_splits_min_programs_per_sm, _min_splits)
# 1.19.0: over private pages one split fewer down to 2 programs per SM (floor_splits_private_min_programs_per_sm);
# base-tile page-block launches leaving < 1.25 working programs per SM on the 128-token four-warp tile
# (few_programs_tile_max_programs_per_sm); the wide dot's blocks of four in one split fewer where 1.8 working
# programs per SM remain, over private tails of up to 256 tokens (wide_dot_four_fewer_max_private_tokens); fp8's
# batch-filled launch over private pages on the base tile (fp8_private_filled_base_tile)
# 1.20.0: head dim 256's whole-wave split also where the launch's splits run the short tile (wide_head_wave_short)
# 1.21.0: the per-sequence decode's page arithmetic in unsigned integers (decode_unsigned_pages); launches unchanged
# 1.22.0: head dim 256's streaming launch over bf16 at one program per SM on 64-token 3-stage tiles that load page
# numbers ahead (wide_head_stream_programs_per_sm)
__version__ = PROBE_VERSION
