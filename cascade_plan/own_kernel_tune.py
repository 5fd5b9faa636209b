"""The tune of the probe's Triton kernels: every tile size, split target and launch rule the host arithmetic
(own_kernel_launch, own_kernel_pages) reads, and the one the current probe launches. A leaf of the planner's
package: a calibration records its tune and the planner gives back that tune's launches."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TuneParams:
    """Tile sizes and launch shape (docs/probe-notes.md). Fields added since probe 1.7.2 default to off, so that a
    calibration's recorded tune that lacks them gives back its launches; DEFAULT_TUNE turns them on."""

    decode_block_n: int = 64
    # two warps for the base tile (64 tokens, 3 stages): on an H100 (benchmarks/raw/device-2026-12-05e/tiles-1.json)
    # 256 sequences x 1 KV head at 1K + 128 over shared pages went from 0.81x FlashInfer's decode to 1.11x, 64 x 8
    # at G 1 from 0.88x to 1.24x; the long-context tile keeps four (long_warps), where two lost 10-30%, and so do
    # head dims above narrow_max_head_dim (head dim 256, 16 sequences x 4 KV heads at 4K: 1.06x -> 0.85x with two)
    decode_warps: int = 2
    narrow_max_head_dim: int = 128
    decode_stages: int = 3
    prefix_block_n: int = 64
    prefix_warps: int = 4
    prefix_stages: int = 3
    prefix_max_block_m: int = 128
    min_tokens_per_split: int = 256
    # ... but a tiny per-sequence decode (at most tiny_work_items (sequence, KV head) items over at most
    # tiny_max_tokens tokens: latency-bound, 11-40 us) splits down to this many tokens. On an H100
    # (benchmarks/raw/device-2026-12-05/tiny.json, triton152.json) such launches went from 0.78-0.97x FlashInfer's
    # decode to 1.02-1.37x; applied everywhere the floor cost 64 sequences x 1 KV head at 1K tokens 18% (4 -> 9 splits),
    # 64 x 8 at 256 tokens 27% (1 -> 2) and one sequence at 32K 18% (103 -> 257 splits and a merge over all of them)
    decode_min_tokens_per_split: int = 128
    tiny_work_items: int = 32
    tiny_max_tokens: int = 8192
    target_programs_per_sm: int = 4  # split-K target for per-sequence decode (and the suffix pass)
    # ... raised to this many programs per SM where every split still holds long_min_tokens_per_split tokens and
    # the batch alone gives fewer than target_programs_per_sm per SM (decode_splits). 16 before probe 1.5.5: on an
    # H100 (benchmarks/raw/device-2026-12-05f/long.json, the 30 default-grid shapes whose launch the two targets
    # split differently, both page layouts) 8 took the rows below FlashInfer's decode from 20 of 70 to 13 and the
    # worst from 0.85x to 0.93x (16 x 8 KV heads at 4K + 4K over shared pages; over private pages 32K at 4 sequences
    # 0.97x -> 1.00x), at a cost only where page blocks already put ours 1.2x+ ahead (32K at 16 sequences over shared
    # pages 1.87x -> 1.45x)
    long_programs_per_sm: int = 8
    long_min_tokens_per_split: int = 512
    # ... and, where above 0, among split counts within 2x of that target the one whose programs fill their last wave
    # of this many resident programs per SM best (splits_filling_waves; benchmarks/decode_vs_flashinfer.py waves)
    long_wave_ctas: int = 0
    # ... and there 128-token tiles in a 2-stage pipeline (0: the base tile): on the H200 these two took the decode of
    # 8-16 sequences at 32K-256K from 0.59-0.65x FlashInfer's to 0.74-0.75x over shared pages and from 0.85-0.90x to
    # 1.01-1.02x over duplicated ones (benchmarks/raw/h200-2026-12-03b/splits.json; 8 programs per SM and 64-token
    # tiles before)
    long_block_n: int = 128
    long_stages: int = 2
    long_warps: int = 4
    # split target for the prefix pass: 2 programs per SM leaves room for the concurrent suffix pass and
    # halves the merge's state traffic (H200: cascade 110 -> 97.5 us at B=256 P=4096 S=128; 58 -> 41 us
    # at B=16 P=16384), although the prefix pass alone is slower (56 -> 68 us at B=256)
    prefix_programs_per_sm: int = 2
    merge_block_r: int = 16  # upper bound; smaller when there are few rows (see MergePlan)
    merge_block_d: int = 64
    merge_stages: int = 3
    # per-sequence programs with few tokens (the cascade's suffix pass): their own tile / pipeline depth
    decode_short_tokens: int = 256
    decode_short_block_n: int = 64
    decode_short_stages: int = 2
    decode_short_warps: int = 4
    # decode tiles of 128 tokens once the batch alone fills the GPU (no split): +8% over shared pages
    decode_block_n_large_batch: int = 128
    decode_stages_large_batch: int = 2
    decode_warps_large_batch: int = 4
    decode_head_major: bool = False  # program order: (sequence, head) [False] or (head, sequence) [True]
    # cascade: run the suffix pass on a second stream, concurrently with the prefix pass (graph branches)
    cascade_concurrent: bool = True
    # fp8 KV: widen to fp16 (one conversion instruction per two values) and run the dots in fp16, q converted
    fp8_dot_fp16: bool = True
    # ... and read an fp8 cache as int16 pairs of head dims, widened by shifts into two fp16 tiles (even and odd
    # head dims: two dots of half the head dim each, triton_attend.kv_tile), so that K and V leave shared memory by
    # ldmatrix; widened by conversion, Triton reads an fp8 tile from shared memory by scalar loads (353-401 ld.shared
    # per tile at head dim 128 against 89-105 ldmatrix over bf16: kernels_probe/attention/pipelining.py). Off: the
    # fp8 cache read and converted as it is (probes up to 1.12.0). Only with fp8_dot_fp16
    fp8_pairs: bool = False
    # ... everywhere (0), or only in decode launches of at most this many working programs per SM at head dims up to
    # fp8_pairs_max_head_dim (0: any; own_kernel_pages.decode_fp8_pairs). H100, 2.25 and 128 (device-2026-12-06j:
    # fp8-capped.json, next-rules.json): every decode row it changes over private pages 1.00-1.07x, shared 0.97-1.21x
    fp8_pairs_max_programs_per_sm: float = 0.0
    fp8_pairs_max_head_dim: int = 0
    # per-sequence decode: dots transposed (S^T = K q^T, acc^T += V^T P^T), keys and head dims as their M rows: on four
    # warps, sm_90 warpgroup MMAs from shared memory in fewer registers (kernels_probe/attention/pipelining.py); off
    # (slower on an H100). fp8 pairs keep the untransposed dots (a converted fp8 tile transposed spills)
    decode_swap_ab: bool = False
    # per-sequence decode: its K/V loads hinted to L2 (triton_attend.attend_hinted). 0: none (every probe so far); 1:
    # tokens past the shared prefix the launch is told load evict_first; 2: and the shared prefix's evict_last. Over
    # shared pages FlashInfer's decode gained 18% of the 20% a 1K shared prefix ahead of 4K private tokens allows
    # (256 x 8 KV heads), ours 14%, as if the private stream pushed shared pages out of L2. It did not: H100
    # (device-2026-12-07g, l2-hints.json, 8 grid rows and 7 held out) over shared pages both hints were slower on all
    # 15 shapes, median 0.98x, 0.89-1.00x (the 256 x 8 row 0.996x); over private pages median 0.997x
    decode_l2_hints: int = 0
    # per-sequence decode in lanes (triton_lanes): each warp attends its own slice of every K/V tile with its own
    # softmax state, merged once per token range, where each slice holds 16+ keys and the dots are plain (no fp8
    # pairs, transposed dots or halves). Compiled for sm_90 (Triton 3.9), the 128-token four-warp tile's loop at head
    # dim 128 then holds 2 barriers where it held 10, for 250 registers where it took 166. H100 (device-2026-12-07h,
    # lanes.json, 28 shapes): over shared pages median 0.853x, 0.018-1.039x (page blocks in wide dots spill: 0.02x);
    # over private pages 0.976x, 0.675-1.006x; unsplit launches of 1.5K+ tokens 0.98-1.04x. Off
    decode_lanes: bool = False
    # per-sequence decode: a token's page and its place in it (triton_lanes.token_page) in unsigned arithmetic, where a
    # power-of-two page size costs a shift and a mask. Signed, each also corrects for a negative token that never
    # comes: compiled for sm_90, head dim 256's 64-token tile loops over 496 PTX instructions where it took 688. Nsight
    # Compute on an H100 (device-2026-12-07h, counters-2) counted 24% more instructions in ours than in FlashInfer's
    # decode on head dim 256's 64 groups of 16 x 4 at 512 + 1K. H100 (device-2026-12-07i, unsigned-pages.json, 119
    # shapes: lanes' rows, held-out ones and the default grid's), speed-up over signed: shared pages median 1.021x
    # (0.976-1.149x), private 1.002x (0.974-1.057x); below 0.99 only three launches of 12-15 us. Head dim 256 shared
    # 1.017x, fp8 (2 shapes) 1.03-1.08x; FlashInfer's decode over ours at 512 + 1K, 16 x 64, head dim 256: 0.96 -> 0.98.
    # Probes up to 1.20.0: signed
    decode_unsigned_pages: bool = False
    # per-sequence decode: the next tile's K and V carried in registers while this tile's math runs (triton_stagger;
    # one stage, plain dots only). H100 (device-2026-12-07k, stagger.json, 83 shapes) over probe 1.22.0: shared pages
    # median 0.80x (0.54-1.00x), private 0.98x (0.67-1.05x); none of the four rows it loses gained. Off
    decode_stagger: bool = False
    # ... on tiles cut to at most this many of a K tile's elements per thread (both tiles live in registers; 64
    # spills nothing at head dims 128 and 256 on four warps, sm_90, Triton 3.9)
    stagger_thread_elements: int = 64
    # per-sequence decode: unsplit launches without page blocks over a bf16 cache at head dims 64 and 128 run the
    # Gluon decode (kernels_probe/attention/gluon_decode.py: K and V in buffers of their own, each waited for apart,
    # each warp its own keys) on 128-token tiles of four warps. H100 (device-2026-12-08, gluon-1.json, the 4 such
    # launches it timed): 1.004-1.045x the default; FlashInfer's decode over ours 0.980 -> 0.994 (256 x 8 at 1K + 4K,
    # G 4, shared), 0.984 -> 1.021 (64 groups of 16 x 2 at 512 + 1K, G 6). The grids' launches it changes (stage
    # gluon-route) not timed: off
    decode_gluon: bool = False
    # ... and, where this is above 0, on its persistent kernel (gluon_decode_persist: this many programs an SM at
    # most, each taking (sequence, KV head) items strided by the program count, copies running on across an item's
    # end); and head dim 256 too (G <= 8, transposed dots on 64-token tiles) where decode_gluon_wide. Never run: off
    decode_gluon_persist: int = 0
    decode_gluon_wide: bool = False
    # merges of at least this many slots load BLOCK_S slots at once (merge_slots_kernel): one slot per dependent
    # iteration made a 100-slot merge the larger part of a 40 us decode at one sequence and a 32K context
    merge_slots_min: int = 16
    merge_block_s: int = 16
    # page-aware per-sequence decode: up to this many consecutive sequences (their query rows within one padded dot)
    # read the pages they share once (paged_decode_kernel, SEQS); 1 turns it off
    decode_page_group: int = 16
    # ... and no larger than leaves page_block_min_programs_per_sm working programs per SM (a block's other programs
    # exit; 0 = no cap). On an H100 (benchmarks/raw/device-2026-12-05b/losers.json) one per SM took 64 sequences x 8
    # KV heads at 1K + 128 (one query head per KV head: blocks of 16 left 64 of 1,024 programs for 132 SMs) from 0.71x
    # FlashInfer's decode to 0.92x (blocks of 4). Three per SM gained elsewhere (16 x 8 at 1K + 1K: 0.91x -> 0.99x) but
    # lost more where blocks of 4 over long shared splits had paid (16 x 8 at 4K + 128: 1.26x -> 0.98x;
    # device-2026-12-05c/default.json against device-2026-12-05b/default.json)
    page_block_min_programs_per_sm: int = 1
    # page blocks of two where one sequence's query heads fill the 16-row dot (9-16 query heads per KV head), in a
    # dot of twice the rows for the whole launch (decode_block_g), on launches whose tile holds at least this many
    # tokens (0: no blocks there, probes up to 1.9.0). H100 (benchmarks/raw/device-2026-12-06g/wide-dot.json, the 18
    # coverage and regimes shapes of 12 and 16 query heads per KV head, shared pages): the 14 on 128-token tiles ran
    # 1.05-1.47x faster (16 x 32 groups at 2K + 16, G 12: 0.89x FlashInfer's decode -> 1.18x; 128 sequences at
    # 16K + 128: 0.77x -> 1.14x), the 4 on 64-token tiles (two warps, or splits of 128 tokens) 2-27% slower. The
    # rule was read off those rows: no shape outside them has timed it
    wide_dot_block_n: int = 0
    wide_dot_seqs: int = 2      # ... in blocks of this many sequences (a dot of decode_block_g(q_per_kv, this) rows)
    # ... and there, over a known shared prefix, split targets of this many programs per SM (base) and twice that
    # (long-context) instead of target_programs_per_sm and long_programs_per_sm (own_kernel_pages.tune_at_launch;
    # 0: those). H100, 2 (device-2026-12-06k): 12 held-out shapes 0.77-1.31x (median 1.16x), the grids' 12 0.87-1.28x;
    # they lost on launches of 3-8 splits and won every long-context one of 16+, hence the key below
    wide_dot_programs_per_sm: int = 0
    wide_dot_min_splits: int = 0    # ... only where the tune's own long-context launch makes this many splits or more
    # ... and only where a sequence's private tail (tokens past the shared prefix) is at most this many tokens (0: any).
    # H100 (device-2026-12-06l): keyed on 16+ splits, 2 per SM won 4 of 5 held-out rows 1.17-1.22x and lost 0.87x on
    # a 1,024-token tail; with tails of at most 512, 10 further held-out rows (GLM-4.5, Command-R+, Qwen3-Coder-480B,
    # ChatGLM3-6B, Llama-3.1-405B, Qwen3-235B, Mistral-Large-2 layers, fp8 and head dim 64 among them) 1.07-1.38x,
    # and the two rows of 768- and 1,536-token tails it leaves alone ran 0.86x and 0.98x under the key alone
    wide_dot_max_private_tokens: int = 0
    # a launch whose blocks of two fill the wide dot, where blocks of four (wide_dot_seqs 4) on 64-token long-context
    # tiles, wide dots on 64-token tiles too, would split it and leave at least this many working programs per SM
    # (programs over block size) takes that launch (own_kernel_plan.wide_dot_four_launch; 0: off, probes up to
    # 1.14.0). H100 (device-2026-12-06m, wide-dot-4.json, 51 shapes of 9-16 query heads per KV head, shared pages):
    # of the 45 rows that launch changed, the 12 split ones of 240+ working programs (1.8+ per SM) ran 1.03-1.38x
    # faster but one (0.97x), those of 1.0-1.2 per SM 0.74-1.33x, the unsplit 0.75-1.10x, the rest 0.39-0.93x. H100
    # (device-2026-12-07, wide-dot-four.json), 1.8: the 12 held-out launches it changed (GLM-4-9B, Llama-3.1-405B,
    # Qwen3-235B, Mistral-Large-2, Command-R+, GLM-4.5 layers) 0.98-1.33x, 11 faster, median 1.15x (FlashInfer's
    # decode over ours 0.77-1.41 -> 0.76-1.57, rows below 1.0 9 -> 3), the grids' 12 again 0.97-1.38x
    wide_dot_four_min_programs_per_sm: float = 0.0
    # a launch whose first split straddles the end of a known shared prefix and forms no block (it holds more private
    # tokens than the prefix covers: a batch that fills the GPU unsplit) splits at the prefix's end instead, where that
    # gives at most shared_split_max splits: the first split's blocks read the prefix once per block, the second is
    # private. H100, 256 x 8 KV heads: 4K + 4K from 0.88x FlashInfer's decode to 1.04x, 1K + 1K from 0.89x to 0.97x;
    # 1K + 4K in five splits lost (0.99x -> 0.96x), hence two at most
    decode_shared_split: bool = True
    shared_split_max: int = 2
    # ... and up to this many where the launch was split already (0: shared_split_max, probes up to 1.8.0). H100
    # (benchmarks/raw/device-2026-12-06f/prefix-split*.json): 64 x 8 at 1K + 4K over shared pages, 3 splits of 1,792
    # on the long-context tile -> 5 of 1,024, 0.97-0.98x -> 1.02x FlashInfer's decode in two calls; 256 x 8, unsplit,
    # 0.97x -> 0.96x in both
    split_launch_shared_split_max: int = 0
    # ... and an unsplit launch that neither forms a block nor splits at the prefix in equal splits takes two splits
    # where the prefix's whole tiles hold at least this many tokens: the prefix, whose blocks read it once per block,
    # then the rest of each sequence (own_kernel_pages.shared_head_split). 0: off, as in every probe so far. H100
    # (benchmarks/raw/device-2026-12-06g/head-split*.json, 256 at 6 shapes whose launch it changes, three calls):
    # 256 x 8 KV heads at 1K + 4K 0.98x FlashInfer's decode -> 0.98-0.99x; of 1,024 sequences at 512 + 1K, fp8 at
    # G 6 1.12x -> 1.22x, bf16 at G 2 (head dim 256) 0.87x -> 0.89x, but G 4 and G 7 (head dim 64) 1.07-1.09x ->
    # 1.00x, G 6 1.00x -> 0.94x. On the batch-filled tile, or with the prefix in 256-512-token splits, it lost more
    shared_head_min_tokens: int = 0
    # every kernel's tile loop loads the next tile's page numbers an iteration ahead, so that Triton's pipeliner
    # double-buffers K and V (triton_attend.attend_range); off, K/V addresses wait on a load in the same iteration and
    # get one buffer, loaded after the tile's math (the kernels of probes 1.2-1.5.5). Only where a program's loop is
    # long (decode_prefetch, prefix_prefetch): on an H100 (the default grid,
    # benchmarks/raw/device-2026-12-06c/prefetch-everywhere.json) prefetching everywhere took 256 sequences x 8 KV
    # heads at 1K + 4K over shared pages from 0.84x FlashInfer's decode to 0.98x and 4K + 4K from 0.93x to 1.07x, but
    # 64 x 8 at 1K + 128 in blocks of four (576-token splits) from 1.38x to 1.14x, and cascades over 256+ query rows
    # 0.70-0.80x
    page_prefetch: bool = True
    prefetch_min_tokens: int = 1024
    # ... and base tiles over shorter splits where the launch has at most this many programs per SM (0: never, probes
    # up to 1.8.0): all of them resident at once with the second buffer, few enough per SM that each one's own overlap
    # is what hides the loads. H100 (benchmarks/raw/device-2026-12-06e/stream-tiny.json, base tiles of 320-576-token
    # splits): the 6 rows of 0.8-2 programs per SM gained 0-29% (16 x 8 KV heads at 256 + 128: 1.09x -> 1.40x
    # FlashInfer's decode; one sequence x 1 KV head at 32K: 1.02x -> 1.17x); of the 24 rows of 3.2-7.8 per SM, 19 lost
    # up to 18% and 5 gained 0-7%
    prefetch_max_programs_per_sm: int = 0
    # a split per-sequence decode of at most fused_merge_max_splits splits and no page blocks merges its splits in the
    # program that stores a sequence's last split (an atomic count per sequence and KV head) instead of in a merge
    # kernel launched after it (probes up to 1.6.0). One program merges a sequence's rows alone, one slot tile after
    # another: on the H200 (benchmarks/raw/device-2026-12-06d/fused-everywhere.json, the default grid) that took
    # launches of 3-9 splits over 128-320 tokens 1.03-1.10x faster (4 sequences x 8 KV heads at 1K + 128, one query
    # head per KV head: 15.3 -> 13.9 us) and left the others of up to 9 splits within 2%, but 17-103 splits lost 1-54%
    # and blocks of sequences (whose first program merges each of its sequences in turn) 5-38%
    decode_fused_merge: bool = True
    fused_merge_max_splits: int = 12
    # ... and in the long-context launch too (probes 1.7.0-1.7.1): there its 31 launches on the default grid ran
    # 1.001x and 1.002x the merge kernel's median in two H100 calls (0.993-1.015x; benchmarks/raw/device-2026-12-06d/
    # fused-rule.json, fused-rule-2.json), and each of its kernels is one more compile on a fresh machine (5 of the
    # default grid's 53 decode specialisations: benchmarks/probe_kernel_variants.py)
    fused_merge_long: bool = False
    # a long-context launch over mostly private tokens (a known shared prefix of at most half the context: no page
    # block pays) whose batch fits stream_max_programs_per_sm resident programs per SM splits for
    # stream_programs_per_sm per SM instead (stream_splits), on the base tile, double-buffered by its page prefetch.
    # 0: the long-context launch (probes up to 1.7.2, whose tunes lack the field). H100 and H200 (benchmarks/raw/
    # device-2026-12-06e/oracle.json, stream*.json): ~2 programs per SM of 2-16K tokens beat FlashInfer's decode
    # where 6-8 of ~640 on the single-buffered long tile did not (16 x 8 KV heads at 1K-16K + 4K: 0.92-0.98x ->
    # 1.01-1.09x; 4 x 8 at 16K: 0.92-0.98x -> 0.96-1.04x); 512 programs, more than fit at once, lost 8-11% unsplit
    stream_programs_per_sm: int = 0
    stream_max_programs_per_sm: int = 3
    # ... over an fp8 cache this many per SM, up to as many resident (own_kernel_pages.tune_at_kv_dtype; 0: as over
    # bf16, probes up to 1.12.0). H100 (device-2026-12-06j), 4 against 2: read off 3 fp8 shapes (regimes-losers.json:
    # 1.22-1.40x; bf16 0.87-0.96x), then 10 held-out fp8 ones and the grids' (next-rules.json) 0.98-1.43x, private
    fp8_stream_programs_per_sm: int = 0
    # ... and at head dims of at least wide_head_min_dim over a bf16 cache this many per SM (0: off, probes up to
    # 1.21.0; tune_at_kv_dtype clears it over fp8), on tiles of wide_head_stream_tile_n tokens in
    # wide_head_stream_stages stages that load page numbers an iteration ahead (tune_at_head_dim's wide_head_stages
    # tiles; own_kernel_pages.wide_head_stream_tune): the base tile there never prefetches. H100 (device-2026-12-07j):
    # the oracle found 8 x 4 KV heads at 16K + 128 over private pages 0.99x FlashInfer's decode in 8 splits of 2,112
    # on the base tile, 1.03x in 4 of 4,128 prefetching (one program per SM); wide-head-stream.json, 1 per SM on
    # 64-token 3-stage tiles: 16 bf16 launches changed (15 held out), 0.998-1.028x faster (median 1.011x), FlashInfer's
    # decode over ours 0.97-1.03 -> 0.97-1.03, below 1.0 4 -> 1; over fp8, 3 held-out launches 0.70-0.75x (FlashInfer's
    # over ours 0.88-0.98 -> 0.66-0.69); 32-token tiles 0.94-1.03x (median 1.003x)
    wide_head_stream_programs_per_sm: int = 0
    wide_head_stream_tile_n: int = 64
    wide_head_stream_stages: int = 3
    stream_min_tokens: int = 1024
    # a tiny launch split into more than fused_merge_max_splits splits takes that many instead, where they still give
    # this many programs per SM: its splits then merge in its own programs, not in a merge kernel launched after it
    # (merge_capped_splits). 0: off (probes up to 1.8.0). H100 (benchmarks/raw/device-2026-12-06e/oracle.json,
    # stream-tiny.json): 4 sequences x 8 KV heads at 4K + 128 over shared pages, one query head per KV head, 17 splits
    # of 256 tokens in blocks of four ran 0.96x FlashInfer's decode, 11 of 384 with the fused merge 1.08-1.10x
    tiny_fused_programs_per_sm: int = 0
    # head dims of at least wide_head_min_dim (0: none, probes up to 1.10.0) run 64-token batch-filled and
    # long-context tiles and a base tile that never prefetches (tune_at_head_dim): at head dim 256 the 128-token
    # tiles and the double-buffered base tile take 138-140 KB of shared memory, one program per SM, these 74 KB
    # (python -m kernels_probe.attention.pipelining). H100 (benchmarks/raw/device-2026-12-06h/head-dim-256.json and
    # wide-head.log, the regimes grid's 12 head-dim-256 shapes and 13 held out): shared pages' median 1.25x
    # FlashInfer's decode -> 1.88x (held out 1.01x -> 1.16x), private 0.995x -> 1.010x (held out 1.00x -> 1.01x)
    wide_head_min_dim: int = 0
    wide_head_block_n: int = 64
    # ... and there a split target of this many programs per SM for the base tile (0: target_programs_per_sm): every
    # head-dim-256 decode tile takes 226-255 registers per thread at four warps, so two programs fit an SM, not four
    wide_head_programs_per_sm: int = 0
    # ... or only over pages known to be private (own_kernel_pages.tune_at_launch; 0: none). H100 (device-2026-12-06j
    # and -06k): 3 held-out rows 1.02-1.05x, the grids' 10 0.92-1.16x (16 x 4 at 2K + 128: 0.99x FlashInfer's -> 0.9x)
    wide_head_private_programs_per_sm: int = 0
    # ... and, where above 0, every tile there but the short one (base, batch-filled, long-context) of
    # wide_head_tile_n tokens in this many stages, its page numbers loaded an iteration ahead. Compiled for sm_90
    # (python -m kernels_probe.attention.pipelining) each head-dim-256 tile above gets one K/V buffer: a tile's loads
    # wait on its own page numbers, or a 64-token 2-stage pipeline of 74 KB holds one buffer; 32-token tiles of 3
    # stages take 73 KB in two buffers (224 registers, two programs per SM), 16-token ones of 4 stages 57 KB in three
    # (168 registers, three per SM over bf16). 0: off, as in every probe so far. H100 (device-2026-12-06m,
    # wide-head-tiles.json; 13 regimes and 8 held-out shapes), 32 tokens in 3 stages everywhere: over private fp8
    # pages 0.90-0.92x, over shared pages 0.79-1.16x, over private bf16 pages level but on base tiles of short
    # splits: 8 x 4 KV heads at 4K + 128 (12 splits of 352) 0.92x FlashInfer's decode -> 1.01x, 96 x 1 at 2K + 640
    # (6 of 448) 0.95x -> 1.01x; 16 tokens in 4 stages lost up to 41%
    wide_head_stages: int = 0
    wide_head_tile_n: int = 32
    # at those head dims, the per-sequence decode's dots over the first and second half of the head dims
    # (triton_attend.attend_range, HALVES; not with fp8 pairs or transposed dots), and its registers capped at this many
    # per thread (Triton's maxnreg; 0: ptxas's choice). Compiled for sm_90 on the CPU (kernels_probe.attention.
    # pipelining), every head-dim-256 tile takes 224-255 registers at four warps, two programs per SM; the 32-token
    # tile of 3 stages takes 174 in halves and 168 capped without a spill: three programs per SM, two K/V buffers each.
    # H100 (device-2026-12-07g, wide-regs.json, 22 head-dim-256 shapes), median over shared / private pages: the cap
    # on the default tiles (the 64-token one spills) 0.85x / 0.97x; in halves too 0.85x / 0.93x; both on the 32-token
    # tile (168 registers uncapped under Triton 3.6) 0.94x / 0.99x; over fp8 0.60-0.97x but once (1.23x). Off
    wide_head_halves: bool = False
    wide_head_maxnreg: int = 0
    # ... and, where above 0, only in a base-tile launch over pages known to be private and a bf16 cache whose splits,
    # on the tune's own tiles, hold at most this many tokens (own_kernel_pages.tune_at_launch, tune_at_kv_dtype).
    # H200 (device-2026-12-06m, wide-head-short.json), 512: 13 held-out shapes 0.86-1.16x, 9 of them lost, median
    # 0.94x; hence off
    wide_head_stages_max_tokens: int = 0
    # a shared prefix counts for the launch rules only where two or more sequences share it (own_kernel_pages.
    # launch_shared_tokens): one sequence's "shared" prefix is its private context (False: counted as shared, probes
    # up to 1.11.0). H100 (benchmarks/raw/device-2026-12-06h/regimes-decode.json, one sequence x 8 KV heads at
    # 128K + 128): counted as shared it took the long-context launch (129 splits of 1,024 tokens), 0.96x
    # FlashInfer's decode; the same pages as private ones the streaming launch (33 of 4,032), 1.01x; at 256K 0.98x
    # and 1.00x
    sibling_shared_only: bool = False
    # a launch too short of programs for page blocks over a known shared prefix of over half the context splits it
    # finer (block_fill_min_tokens+) so that blocks form with about this many working programs per SM, at head dims
    # of block_fill_min_head_dim+ (own_kernel_pages.block_fill_splits; 0: off, probes to 1.12.0). H100, 06j calls:
    # head dim 256 1.23-1.35x, 11 held out 1.03-1.70x; 128 0.66-1.03x (latency-bound; blocks' merge is not fused)
    block_fill_programs_per_sm: int = 0
    block_fill_min_tokens: int = 128
    block_fill_min_head_dim: int = 0
    # ... and where its splits, rounded up to whole tiles, leave the launch short of target_programs_per_sm programs
    # per SM (so that page_block_seqs forms no block after all), shorter splits, a tile at a time, until it is not,
    # where blocks hold at least this many sequences (0: off, the rounded-up split alone, probes up to 1.14.0). H200
    # (device-2026-12-06m, wide-head-short.json): 6 of 13 held-out head-dim-256 launches over shared pages lost their
    # blocks that way (Gemma-7B-like 4 x 8 KV heads at 5.9K + 256: 17 splits wanted, 16 of 384 after rounding, 512
    # programs where 528 form blocks; 0.65x FlashInfer's). H100 (device-2026-12-07, wide-head-rules.json), any block
    # size: of 15 launches it changed, the 4 in blocks of four won 1.04-1.37x (0.74x FlashInfer's -> 0.97x), the 11
    # in blocks of two 0.82-1.18x, 8 of them lost. H100 (device-2026-12-07, wide-head-fill.json), 4: 10 held-out
    # launches (Gemma-2-2B, Gemma-3-4B, Gemma-3-1B, Gemma-3-12B, Gemma-7B layers; bf16 and fp8) all faster, 1.09-1.57x
    # (median 1.29x), FlashInfer's decode over ours 0.71-1.08 -> 0.99-1.31, rows below 1.0 8 -> 2
    block_fill_shorter_min_seqs: int = 0
    # head dims of at least wide_head_min_dim over pages known to be private: a base-tile launch splits so that its
    # programs fill whole waves of this many resident programs per SM (own_kernel_launch.wave_splits; 0: off, probes
    # up to 1.14.0). Every head-dim-256 tile takes 226-255 registers per thread (two programs per SM), and split
    # targets of four per SM leave a last wave partly empty: on the H200 (wide-head-short.json) the held-out private
    # rows ran 0.82-0.86x FlashInfer's decode at 1.3-1.5 and 2.2 waves, 0.95-1.02x at 1.9-2.0. H100 (device-2026-12-07,
    # wide-head-rules.json), 2: every one of the 33 private-pages launches it changed ran faster, 1.015-1.17x (median
    # 1.05x; the 16 held-out ones median 1.07x), FlashInfer's decode over ours 0.88-1.05 -> 0.97-1.18, rows below
    # 1.0 28 -> 5
    wide_head_wave_ctas: int = 0
    # ... in at most this many waves (0: any number). One wave differed from any number on 5 of those rows: 0.99-1.03x
    wide_head_wave_max: int = 0
    # ... and over a known shared prefix where the launch forms no page block, before and after (False: private pages
    # only, probes up to 1.15.0). On the H100 of wide-head-rules.json such launches ran as their private twins did
    # before the rule (3 x 2 KV heads at 30K + 512 over shared pages 0.94x FlashInfer's decode, 82 splits of 384),
    # and the twins gained 1.03-1.07x from it. H100 (device-2026-12-07b, wide-head-wave-shared.json): the 10 held-out
    # launches it changed (Gemma-2-2B, Qwen3-Next-80B, Gemma-7B, Gemma-3-12B, Gemma-3-4B, Gemma-3-1B, Gemma-2-9B
    # layers; bf16 and fp8) all faster, 1.06-1.23x (median 1.13x), FlashInfer's decode over ours 0.77-1.08 ->
    # 0.87-1.18, rows below 1.0 8 -> 5; wide-head-rules' 14 it changed 1.04-1.39x
    wide_head_wave_shared: bool = False
    # ... and also where the launch's splits run the short tile (at most decode_short_tokens tokens each), choosing
    # among base- and short-tile launches (False: base-tile launches only, probes up to 1.19.0); kept only where the
    # launch without it runs the short tile (own_kernel_plan.wave_short_launch: where one split fewer over private
    # pages moves that launch onto the base tile, the two were not timed against each other). On an H100
    # (device-2026-12-07f, oracle.json and oracle-wide.json, two calls) 8 sequences x 4 KV heads of 2 query heads at
    # head dim 256 over 1K + 128 private tokens ran 0.96-0.97x FlashInfer's decode in 9 short splits of 128 tokens
    # (288 programs, two waves of 2 per SM, the second nearly empty) and 1.09-1.10x in 6 of 192 (one wave). H100
    # (device-2026-12-07f, wave-short.json), on: 14 held-out shapes (Gemma-2-2B, Gemma-2-9B, Gemma-7B, Gemma-2B,
    # Gemma-3-1B, Qwen3-Next-80B layers; 4 over fp8) and that row, 29 launches changed, 27 faster (median 1.15x over
    # shared pages, 14 launches; 1.09x over private, 15; 0.97x on one sequence x 16 KV heads at 3K + 128, both page
    # layouts)
    wide_head_wave_short: bool = False
    # ... and also where one split fewer over private pages (floored_splits_launch) moves the launch without it onto
    # the base tile (False, every probe so far: that launch stays). Untimed: the wave-floor stage times it
    wide_head_wave_short_floored: bool = False
    # rows of the per-sequence decode's dot that page blocks fill at 1-8 query heads per KV head (decode_block_g pads
    # a block's rows to a power of two, at least 16): 16 in every probe so far. A launch rule, not a setting:
    # own_kernel_plan.double_dot_launch sets it to 32 where it applies
    decode_dot_rows: int = 16
    # a launch over a known shared prefix whose blocks (2+ sequences of 1-8 query heads per KV head) fill the 16-row
    # dot takes blocks of twice the sequences in a 32-row dot where that launch leaves at least this many working
    # programs per SM (programs over block size; own_kernel_plan.double_dot_launch; 0: off, probes up to 1.15.0).
    # The analogue of wide_dot_four at 9-16 query heads. H100 (device-2026-12-07b, double-dot.json), 1.8: 13 of 15
    # held-out launches faster, 0.87-1.38x (median 1.11x); it lost at head dim 64 (0.87x), in blocks of 16 (0.90x)
    # and, among the grids' 13, on the 64-token two-warp tile (128 x 4 KV heads at 1K + 128, G 7: 0.89x FlashInfer's
    # decode -> 0.80x) and in blocks of eight over 1K + 128 (0.97-0.98x)
    double_dot_min_programs_per_sm: float = 0.0
    # ... only at head dims of at least this, into blocks of at most this many sequences, on tiles of at least this
    # many tokens (0: any): the key those losses suggest, read off the held-out rows above
    double_dot_min_head_dim: int = 0
    double_dot_max_seqs: int = 0
    double_dot_min_block_n: int = 0
    # a launch over a known shared prefix whose batch gives at least this many programs per SM but fewer than
    # target_programs_per_sm runs unsplit on the batch-filled tile in page blocks, where blocks of at least the split
    # launch's size form over the whole context (own_kernel_plan.filled_blocks_launch; 0: off, probes up to 1.16.0).
    # H100 (device-2026-12-07c): the oracle found 128 x 4 KV heads at 1K + 128, G 7, split in two of 576 on the
    # two-warp base tile in blocks of two, 63.6 us, and unsplit on the 128-token four-warp tile in blocks of two,
    # 41.2 us (FlashInfer's decode 56.1). At 3.5 (filled-blocks.json), where the split launch's blocks held at most
    # two: 9 launches (6 held-out layers, 3 grid shapes) 1.20-1.54x; where they held four and shrank to two: 0.95-0.99x
    # at head dim 128 bf16 (5 rows), 1.14-1.21x at head dim 256 or fp8 (4 rows), hence blocks never shrink
    filled_blocks_min_programs_per_sm: float = 0.0
    # a base-tile launch whose split count only rounds the target up (256 items at 132 SMs: 2.06 splits wanted, 3
    # made) takes one split fewer where that leaves at least this many programs per SM and floor_splits_min_splits
    # splits, in page blocks no smaller (own_kernel_plan.floored_splits_launch; 0: off, probes up to 1.17.0). The
    # oracle (device-2026-12-07c) found 128 x 2 KV heads at 1K + 128, G 16, 38.0 us in 3 splits of 384 and 29.7 us in
    # 2 of 576 on the same tile (FlashInfer's decode 35.3). H100 (device-2026-12-07d, floor-splits.json, two calls
    # agreeing within 1.5%), at 3.5 down to one split: 43 launches changed (25 held-out), 40 faster in both calls,
    # median 1.06x, 0.97-1.27x; 2 -> 1 split alone 10 launches, all faster, 1.003-1.11x. Slower: head dim 64 over
    # shared pages (15 x 8 KV heads at 1.5K + 128: 0.97x) and two 4K rows at 0.98-1.00x
    floor_splits_min_programs_per_sm: float = 0.0
    floor_splits_min_splits: int = 2
    # over private pages (shared_prefix_tokens 0) of a bf16 cache floor_splits_min_programs_per_sm is this instead,
    # where set (tune_at_kv_dtype clears it over fp8). H100 (device-2026-12-07e), at 2.0, bf16: few-programs.json 6
    # launches, probe-1-19.json 8 held-out and 7 grid, probe-1-19-fresh.json 4 held-out; all faster but one, 1.05-1.34x
    # (8 x 40 KV heads at 1K + 128: FlashInfer's decode over ours 0.95 -> 1.06-1.11); slower: 224 x 2 at 1.3K + 96,
    # 2 -> 1 split, 0.93x. Over fp8 3 -> 2 splits gained 1.13x and 1.35x but 2 -> 1 lost 0.85-0.97x (three held-out),
    # and over shared pages no launch was timed at the lower threshold: both keep floor_splits_min_programs_per_sm
    floor_splits_private_min_programs_per_sm: float = 0.0
    # a base-tile launch of fewer warps over a known shared prefix in page blocks that leaves fewer than this many
    # working programs per SM runs the long-context tile (128 tokens, four warps, page numbers an iteration ahead) in
    # the same split count (own_kernel_plan.few_programs_tile_launch; 0: off, probes up to 1.18.0). The tile's two
    # 64 KB stages fit one program per SM, so a launch of more than about one per SM runs a second wave on it. H100
    # (device-2026-12-07e, few-programs.json), the tile wherever the launch left < 2.5: at 1.03-1.21 working programs
    # per SM 9 launches (6 held-out), all faster, 1.05-1.28x; at 1.45-2.18, 16 launches 0.86-1.30x (7 slower, all
    # of 2-3 splits), hence 1.25; held out since (probe-1-19.json, probe-1-19-fresh.json) 11 of 12 faster, 1.00-1.60x
    few_programs_tile_max_programs_per_sm: float = 0.0
    # ... and below this many where the launch has at least few_programs_tile_min_splits splits (0: off; untimed as a
    # rule). In few-programs.json the tile at 1.45-2.18 working programs per SM gained on 7 of 8 launches of 6-33
    # splits (1.01-1.30x; 8 x 8 KV heads at 4K + 128, G 5: 1.08x) and lost on 7 of 8 of 2-3 splits
    few_programs_tile_split_max_programs_per_sm: float = 0.0
    few_programs_tile_min_splits: int = 0
    # the blocks-of-four wide-dot launch takes one split fewer where that still leaves wide_dot_four_min_programs_per_sm
    # working programs per SM and the private tail holds at most this many tokens (own_kernel_plan.wide_dot_four_launch;
    # 0: off, probes up to 1.18.0). Its split target is rounded up: 256 items in blocks of four at 2 working programs
    # per SM want 4.1 splits, get 5. H100 (device-2026-12-07e): few-programs.json, 10 launches (5 held-out) at
    # 128-256 private tokens, all faster, 1.02-1.43x; probe-1-19.json, 6 held-out: at 96 private tokens 1.13x and
    # 1.19x, at 192 0.99x, at 384 0.89-0.97x (three), hence 256
    wide_dot_four_fewer_max_private_tokens: int = 0
    # over an fp8 cache, a batch-filled launch over private pages runs the base tile (64 tokens, 3 stages, 2 warps) at
    # head dims up to narrow_max_head_dim: tune_at_kv_dtype sets private_filled_base_tile, which the launch reads.
    # H100 (device-2026-12-07e, few-programs.json, every fp8 filled launch on the base tile): over private pages 13
    # launches 0.96-1.23x, median 1.17x (64 x 40 KV heads at 4K + 128: FlashInfer's decode over ours 0.93 -> 1.09);
    # over shared pages 0.60-1.18x, median 0.83x, hence private pages alone
    fp8_private_filled_base_tile: bool = False
    private_filled_base_tile: bool = False


DEFAULT_TUNE = TuneParams(stream_programs_per_sm=2, tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=3,
                          split_launch_shared_split_max=5, wide_dot_block_n=128, wide_head_min_dim=256,
                          sibling_shared_only=True, fp8_pairs=True, fp8_pairs_max_programs_per_sm=2.25,
                          fp8_pairs_max_head_dim=128, block_fill_programs_per_sm=1, block_fill_min_tokens=256,
                          block_fill_min_head_dim=256, fp8_stream_programs_per_sm=4, wide_dot_programs_per_sm=2,
                          wide_dot_min_splits=16, wide_dot_max_private_tokens=512, wide_head_wave_ctas=2,
                          wide_dot_four_min_programs_per_sm=1.8, block_fill_shorter_min_seqs=4,
                          wide_head_wave_shared=True, filled_blocks_min_programs_per_sm=3.5,
                          floor_splits_min_programs_per_sm=3.5, floor_splits_min_splits=1,
                          floor_splits_private_min_programs_per_sm=2.0, few_programs_tile_max_programs_per_sm=1.25,
                          wide_dot_four_fewer_max_private_tokens=256, fp8_private_filled_base_tile=True,
                          wide_head_wave_short=True, decode_unsigned_pages=True, wide_head_stream_programs_per_sm=1)
