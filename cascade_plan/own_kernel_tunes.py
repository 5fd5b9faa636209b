"""The tunes of past probes (TuneParams as each version launched its kernels): for the benchmarks that time the
current launch against an earlier one and the tests that pin each version's launches. A calibration's own recorded
tune (notes.tune) is what the planner reads; nothing here is."""

from __future__ import annotations

from dataclasses import replace

from cascade_plan.own_kernel_tune import TuneParams

# The tune of probe 1.15.0 (head dim 256's whole-wave split over private pages only).
PROBE_1_15_0_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                               split_launch_shared_split_max=5, wide_dot_block_n=128, wide_head_min_dim=256,
                               sibling_shared_only=True, fp8_pairs=True, fp8_pairs_max_programs_per_sm=2.25,
                               fp8_pairs_max_head_dim=128, block_fill_programs_per_sm=1, block_fill_min_tokens=256,
                               block_fill_min_head_dim=256, fp8_stream_programs_per_sm=4, wide_dot_programs_per_sm=2,
                               wide_dot_min_splits=16, wide_dot_max_private_tokens=512, wide_head_wave_ctas=2,
                               wide_dot_four_min_programs_per_sm=1.8, block_fill_shorter_min_seqs=4)
# The tune of probe 1.16.0 (a batch just short of the split target split, not run unsplit in page blocks).
PROBE_1_16_0_TUNE = replace(PROBE_1_15_0_TUNE, wide_head_wave_shared=True)
# The tune of probe 1.17.0 (a split count rounded up past the split target kept, not one split fewer).
PROBE_1_17_0_TUNE = replace(PROBE_1_16_0_TUNE, filled_blocks_min_programs_per_sm=3.5)
# The tune of probe 1.18.0 (base tiles where page blocks leave about one program per SM; the wide dot's blocks of
# four in the split count its target rounds up to; one split fewer over private pages only down to 3.5 programs per
# SM; fp8's batch-filled launch on the 128-token tile everywhere).
PROBE_1_18_0_TUNE = replace(PROBE_1_17_0_TUNE, floor_splits_min_programs_per_sm=3.5, floor_splits_min_splits=1)
# The tune of probe 1.19.0 (head dim 256's whole-wave split over base-tile launches only, not short-tile ones).
PROBE_1_19_0_TUNE = replace(PROBE_1_18_0_TUNE, floor_splits_private_min_programs_per_sm=2.0,
                            few_programs_tile_max_programs_per_sm=1.25, wide_dot_four_fewer_max_private_tokens=256,
                            fp8_private_filled_base_tile=True)
# The tune of probe 1.20.0 (the per-sequence decode's page arithmetic in signed integers).
PROBE_1_20_0_TUNE = replace(PROBE_1_19_0_TUNE, wide_head_wave_short=True)
# The tune of probe 1.21.0 (head dim 256's streaming launch at 2 programs per SM on the base tile, which never
# prefetches there).
PROBE_1_21_0_TUNE = replace(PROBE_1_20_0_TUNE, decode_unsigned_pages=True)
# The tune of probe 1.14.0 (head dim 256 at the base split target over private pages; blocks of two in the wide dot
# everywhere).
PROBE_1_14_0_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                               split_launch_shared_split_max=5, wide_dot_block_n=128, wide_head_min_dim=256,
                               sibling_shared_only=True, fp8_pairs=True, fp8_pairs_max_programs_per_sm=2.25,
                               fp8_pairs_max_head_dim=128, block_fill_programs_per_sm=1, block_fill_min_tokens=256,
                               block_fill_min_head_dim=256, fp8_stream_programs_per_sm=4, wide_dot_programs_per_sm=2,
                               wide_dot_min_splits=16, wide_dot_max_private_tokens=512)
# The tune of probe 1.13.0 (no wide-dot split targets).
PROBE_1_13_0_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                               split_launch_shared_split_max=5, wide_dot_block_n=128, wide_head_min_dim=256,
                               sibling_shared_only=True, fp8_pairs=True, fp8_pairs_max_programs_per_sm=2.25,
                               fp8_pairs_max_head_dim=128, block_fill_programs_per_sm=1, block_fill_min_tokens=256,
                               block_fill_min_head_dim=256, fp8_stream_programs_per_sm=4)
# The tune of probe 1.12.0 (fp8 converted everywhere; no block fill; fp8 streaming as bf16's).
PROBE_1_12_0_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                               split_launch_shared_split_max=5, wide_dot_block_n=128, wide_head_min_dim=256,
                               sibling_shared_only=True)
# The tune of probe 1.11.0 (one sequence's prefix launched as a shared one).
PROBE_1_11_0_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                               split_launch_shared_split_max=5, wide_dot_block_n=128, wide_head_min_dim=256)
# The tune of probe 1.10.0 (head dim 256 on the same tiles as 128).
PROBE_1_10_0_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                               split_launch_shared_split_max=5, wide_dot_block_n=128)
# The tune of probe 1.9.0 (no page blocks where one sequence's query heads fill the 16-row dot).
PROBE_1_9_0_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                              split_launch_shared_split_max=5)
# The tune of probe 1.8.0 (a tiny launch keeps every split its base target gives, merged by a merge kernel past 12).
PROBE_1_8_0_TUNE = TuneParams(stream_programs_per_sm=2)
# The tune of probe 1.7.2 (many short long-context splits on the single-buffered 128-token tile everywhere).
PROBE_1_7_2_TUNE = TuneParams()
# The tune of probes 1.7.0-1.7.1 (the long-context launch merged its own splits too).
PROBE_1_7_1_TUNE = TuneParams(fused_merge_long=True)
# The tune of probe 1.6.0 (a merge kernel after a split decode).
PROBE_1_6_0_TUNE = TuneParams(decode_fused_merge=False)
# The tune of probe 1.5.5 (page numbers loaded in the iteration that uses them).
PROBE_1_5_5_TUNE = TuneParams(page_prefetch=False, decode_fused_merge=False)
# The tune of probe 1.5.4 (16 long-context programs per SM).
PROBE_1_5_4_TUNE = TuneParams(long_programs_per_sm=16, page_prefetch=False, decode_fused_merge=False)
# The tune of probe 1.5.3 (four warps for every decode tile).
PROBE_1_5_3_TUNE = TuneParams(decode_warps=4, long_programs_per_sm=16, page_prefetch=False,
                              decode_fused_merge=False)
# The tune of probe 1.3, which measured the Triton rows of 2026-12-03: 8 programs per SM at long contexts, base tiles.
PROBE_1_3_TUNE = TuneParams(decode_warps=4, long_programs_per_sm=8, long_block_n=0, decode_page_group=1,
                            decode_min_tokens_per_split=256, page_prefetch=False, decode_fused_merge=False)
# The tune of probe 1.2, which measured the shipped H200 file (its notes.tune): split target 4 throughout, bf16
# dots over an fp8 cache, the slot-at-a-time merge.
PROBE_1_2_TUNE = TuneParams(decode_warps=4, long_programs_per_sm=4, fp8_dot_fp16=False, merge_slots_min=1 << 30,
                            decode_page_group=1, decode_min_tokens_per_split=256, page_prefetch=False,
                            decode_fused_merge=False)
# The tune of 2026-12-03's second session (the long-context launch, never shipped as rows): no page-aware blocks.
LONG_TILE_TUNE = TuneParams(decode_warps=4, long_programs_per_sm=16, decode_page_group=1,
                            decode_min_tokens_per_split=256, page_prefetch=False, decode_fused_merge=False)
# The tune of probe 1.5.1 (blocks where they form; the decode's split floor still 256 tokens).
PROBE_1_5_1_TUNE = TuneParams(decode_warps=4, long_programs_per_sm=16, decode_min_tokens_per_split=256,
                              page_block_min_programs_per_sm=0, decode_shared_split=False, page_prefetch=False,
                              decode_fused_merge=False)
# The tune of probe 1.5.2 (the 128-token floor for tiny launches; no cap on blocks by the programs left running, no
# split at the shared prefix).
PROBE_1_5_2_TUNE = TuneParams(decode_warps=4, long_programs_per_sm=16, page_block_min_programs_per_sm=0,
                              decode_shared_split=False, page_prefetch=False, decode_fused_merge=False)
