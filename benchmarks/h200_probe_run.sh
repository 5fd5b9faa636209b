#!/usr/bin/env bash
# One device call of the probe on the H200 kind (docs/probe-notes.md, "Device runs"): unpack the FlashInfer
# wheels carried in .whl, then run the stages named in $1 (comma-separated) within $2 seconds in all:
#   coverage  attention coverage grid (fp8 on every backend, group sizes, batch ends, 64K prefix) -> cov.json
#   step      GEMMs, glue, layer graphs, whole steps (shipped + held-out models)               -> step.json
#   workload  probe --workload rl-rollouts-64 --kv-dtype fp8 (plan derived on the CPU)           -> workload.json
#   quick     --quick attention grid (a smoke check)                                            -> quick.json
#   mla-tp    MLA at 16/32/64/128 query heads per GPU, bf16 and fp8 latent (--mla-grid tp)     -> mla-tp.json
#   mla-plan  probe --workload deepseek-v3-grpo-tp8's MLA shapes (plan derived on the CPU)      -> mla-plan.json
#   mla-plan-fp8  the same with --kv-dtype fp8                                                 -> mla-plan-fp8.json
#   moe-steps whole MoE / MLA + MoE steps (Mixtral, Qwen3-30B-A3B, DeepSeek-V3's TP-8 shard)     -> moe_steps.json
#   regimes   --grid regimes attention rows (head dims 64/256, groups 6/12, 128K-256K, 8K suffixes) -> regimes.json
#   regimes-owed  FlashInfer's regimes rows the shipped calibration lacks (--merge-into it --only-missing) -> regimes-owed.json
#             (a call cut in the middle of FlashInfer's JIT can leave its build lock: on 2026-12-06 the next call on the
#             same warm machine printed nothing for 150 s)
#   diag      Triton's rows of a diagnosis plan ($DIAG_PLAN, default Gemma-2-2B's d256 cascade shapes), never merged -> diag.json
#   triton-owed  Triton's regimes rows the shipped calibration lacks (--merge-into it --only-missing; only the cascade
#             rows join it: benchmarks/merge_h200_2026_12_06.py)                                      -> triton-owed.json
#   trees     --grid trees attention rows (three-level prefix trees: root, group prefix, suffix) -> trees.json
#   step-regimes  --step-set regimes: small models' GEMMs, glue, layer graphs; held-out regime steps -> step-regimes.json
#   default   the probe as a user runs it (no options: full grid, every backend), timed    -> default.json
#   losers    benchmarks/decode_vs_flashinfer.py losers (block caps, prefix splits, tiles where ours lost) -> losers.json
#   filled    decode_vs_flashinfer.py filled --no-flashinfer: the batch-filled launch's whole tiles, probe 1.3's
#             tune and the current one (then, on the CPU, benchmarks/filled_launch_check.py filled.json) -> filled.json
#   tiles     decode_vs_flashinfer.py tiles: tile / pipeline / warp / split variants on the rows ours lost -> tiles.json
#   long      decode_vs_flashinfer.py long: long-context split targets on every shape whose launch they change -> long.json
#   waves     decode_vs_flashinfer.py waves: wave-filling splits and other launches on the rows probe 1.5.5 lost -> waves.json
#   prefetch  decode_vs_flashinfer.py prefetch: page numbers an iteration ahead (K/V double-buffered), tile variants,
#             the cascade before and after, on the lost rows then the default grid -> prefetch.json
#   fused     decode_vs_flashinfer.py fused: split decodes merged by their own last programs against a merge kernel
#             after them (probe 1.6.0), on the lost rows then the default grid; FUSED_RESERVE seconds left -> fused.json
#   stream    decode_vs_flashinfer.py stream: the streaming launch over private tokens against probe 1.7.2's (decode and
#             cascade), the lost rows then the default grid; STREAM_RESERVE seconds left -> stream.json
#   rules     decode_vs_flashinfer.py rules --only-changed: probe 1.9.0's launch rules (base tiles prefetching at <= 3
#             programs per SM; tiny launches capped at 12 splits) against probe 1.8.0's, each alone too; RULES_RESERVE
#             seconds left -> rules.json
#   prefix-split  decode_vs_flashinfer.py prefix-split --only-changed: up to five splits at the shared prefix's end,
#             base tiles for batch-filled and long-context launches -> prefix-split.json
#   head-split  decode_vs_flashinfer.py head-split --only-changed: two splits at a short shared prefix
#             (shared_head_min_tokens, off) against the default's unsplit launch; HEAD_SPLIT_RESERVE seconds left
#             -> head-split.json
#   wide-dot  decode_vs_flashinfer.py wide-dot --only-changed: blocks of two in a 32-row dot for 9-16 query heads per
#             KV head on 128-token tiles (wide_dot_block_n, the default) and on every tile, against probe 1.9.0's
#             none; WIDE_DOT_RESERVE seconds left -> wide-dot.json
#   head-dim-256  decode_vs_flashinfer.py head-dim-256 --only-changed: tiles that fit more than one program per SM
#             at head dim 256 (64-token filled/long tiles, a single-buffered base tile, 32-token base tiles) on the
#             regimes grid's head-dim-256 shapes; HEAD_DIM_256_RESERVE seconds left -> head-dim-256.json
#   wide-head  decode_vs_flashinfer.py wide-head --only-changed: probe 1.10.0's launch at head dim 256, the default's
#             (wide_head_min_dim) and 32-token base tiles on the regimes grid's head-dim-256 shapes and 15 held-out
#             ones; WIDE_HEAD_RESERVE seconds left (40+: a 64K shape runs long) -> wide-head.json
#   wide-head-waves  decode_vs_flashinfer.py wide-head-waves --only-changed: split targets of 2 programs per SM at
#             head dim 256 on wide-head's shapes whose launch they change -> wide-head-waves.json
#   regimes-losers  decode_vs_flashinfer.py regimes-losers --only-changed: launch changes aimed at the rows probe
#             1.11.0 lost (split targets, streaming, warps, wide-dot blocks) on those rows -> regimes-losers.json
#   fp8-pairs  decode_vs_flashinfer.py fp8-pairs --only-changed: an fp8 cache read as int16 pairs of head dims
#             (fp8_pairs) everywhere and capped (decode_fp8_pairs: <= 2.25 programs per SM, head dim 128) against the
#             default's conversion, decode and cascade, on every fp8 shape of the coverage and regimes grids, those the
#             cap changes first; FP8_PAIRS_RESERVE seconds left -> fp8-pairs.json
#   fp8-capped  decode_vs_flashinfer.py fp8-capped --only-changed: the capped fp8-pairs rule alone against the default
#             on the 20 shapes whose launch it changes, the 7 fp8-pairs.json (device-2026-12-06i) did not time first;
#             FP8_CAPPED_RESERVE seconds left -> fp8-capped.json
#   block-fill  decode_vs_flashinfer.py block-fill --only-changed: launches too short of programs for page blocks split
#             their shared prefix finer so that blocks form (block_fill_programs_per_sm), on the 22 coverage, regimes
#             and wide-head shapes whose launch that changes; BLOCK_FILL_RESERVE seconds left -> block-fill.json
#   next-rules  decode_vs_flashinfer.py next-rules --only-changed: capped fp8 pairs, block fill at head dim 256, fp8's
#             streaming at 4 per SM, each alone and together, on 18 held-out shapes first, then the grids' shapes
#             whose launch they change; NEXT_RULES_RESERVE seconds left -> next-rules.json
#   wide-head-private  decode_vs_flashinfer.py wide-head-private --only-changed: a split target of 2 per SM at head
#             dim 256 over private pages only, on 7 held-out shapes first, then wide-head's; WIDE_HEAD_PRIVATE_RESERVE
#             seconds left -> wide-head-private.json
#   wide-dot-targets  decode_vs_flashinfer.py wide-dot-targets --only-changed: split targets of 2 and 3 per SM (long
#             twice that) where blocks of two fill the wide dot over shared pages (wide_dot_programs_per_sm), on 13
#             held-out shapes of 12 and 16 query heads per KV head first, then the grids'; WIDE_DOT_TARGETS_RESERVE
#             seconds left -> wide-dot-targets.json
#   wide-dot-long  decode_vs_flashinfer.py wide-dot-long --only-changed: wide-dot targets of 2 per SM only where the
#             default's long-context launch makes 16+ splits (wide_dot_min_splits), on 13 held-out shapes first, then
#             the grids' and wide-dot-targets'; WIDE_DOT_LONG_RESERVE seconds left -> wide-dot-long.json
#   wide-dot-tails  decode_vs_flashinfer.py wide-dot-tails --only-changed: the keyed wide-dot targets, and those only
#             where a sequence's private tail is at most 512 tokens, on 12 held-out shapes, then wide-dot-long's;
#             WIDE_DOT_TAILS_RESERVE seconds left -> wide-dot-tails.json
#   wide-dot-4  decode_vs_flashinfer.py wide-dot-4 --only-changed: blocks of four sequences of 9-16 query heads in
#             a 64-row dot (wide_dot_seqs) on wide-dot-tails' shapes; WIDE_DOT_4_RESERVE seconds left -> wide-dot-4.json
#   wide-head-tiles  decode_vs_flashinfer.py wide-head-tiles --only-changed: head dim 256 on double-buffered tiles
#             (wide_head_stages: 32 tokens in 3 stages, 16 in 4) on the regimes grid's head-dim-256 shapes and 8 held
#             out; WIDE_HEAD_TILES_RESERVE seconds left -> wide-head-tiles.json
#   wide-head-short  decode_vs_flashinfer.py wide-head-short --only-changed: those tiles only on private bf16 base
#             tiles of splits of at most 512 tokens (wide_head_stages_max_tokens), and of any length, on 13 held-out
#             shapes then wide-head-tiles'; WIDE_HEAD_SHORT_RESERVE seconds left -> wide-head-short.json
#   wide-head-rules  decode_vs_flashinfer.py wide-head-rules --only-changed: head dim 256's block fill rounded down
#             (block_fill_shorter_splits) and private base-tile launches filling waves of 2 per SM (wide_head_wave_ctas),
#             21 held-out shapes then wide-head-short's; WIDE_HEAD_RULES_RESERVE seconds left -> wide-head-rules.json
#   wide-dot-four  decode_vs_flashinfer.py wide-dot-four --only-changed: blocks of four on 64-token long tiles where
#             they split and leave 1.8+ working programs per SM (wide_dot_four_min_programs_per_sm), 17 held-out shapes
#             then wide-dot-4's; WIDE_DOT_FOUR_RESERVE seconds left -> wide-dot-four.json
#   wide-head-fill  decode_vs_flashinfer.py wide-head-fill --only-changed: block fill rounded down where blocks hold
#             4+ sequences (block_fill_shorter_min_seqs), 10 held-out shapes then wide-head-rules'; WIDE_HEAD_FILL_RESERVE
#             seconds left -> wide-head-fill.json
#   wide-head-wave-shared  decode_vs_flashinfer.py wide-head-wave-shared --only-changed: head dim 256's whole-wave
#             split over shared pages where no block forms (wide_head_wave_shared), 10 held-out shapes then
#             wide-head-rules'; WIDE_HEAD_WAVE_SHARED_RESERVE seconds left -> wide-head-wave-shared.json
#   double-dot  decode_vs_flashinfer.py double-dot --only-changed: blocks of twice the sequences in a 32-row dot at
#             1-8 query heads per KV head where that leaves 1.8+ working programs per SM (double_dot_min_programs_per_sm),
#             15 held-out shapes then the coverage, default and regimes grids'; DOUBLE_DOT_RESERVE seconds left -> double-dot.json
#   double-dot-keyed  decode_vs_flashinfer.py double-dot-keyed --only-changed: the doubled dot at head dims 128+, in
#             blocks of at most eight, on 128-token tiles, 10 held-out shapes then double-dot's;
#             DOUBLE_DOT_KEYED_RESERVE seconds left -> double-dot-keyed.json
#   filled-blocks  decode_vs_flashinfer.py filled-blocks --only-changed: the unsplit batch-filled launch in page
#             blocks where a split base-tile launch over a shared prefix has 3.5+ (or 3.0+) programs per SM unsplit
#             (filled_blocks_min_programs_per_sm), 14 held-out shapes then the grids'; FILLED_BLOCKS_RESERVE seconds
#             left -> filled-blocks.json
#   floor-splits  decode_vs_flashinfer.py floor-splits --only-changed: one split fewer where the split count only
#   few-programs  decode_vs_flashinfer.py few-programs --only-changed: the long-context tile where page blocks leave
#             few working programs per SM, the wide dot's blocks of four in one split fewer, one split fewer down to 2
#             programs per SM; 18 held-out shapes then the grids'; FEW_PROGRAMS_RESERVE seconds left -> few-programs.json
#   probe-1-19  decode_vs_flashinfer.py probe-1-19 --only-changed: probe 1.19.0 against 1.18.0 on 24 held-out shapes
#             chosen after its rules were set, then the grids'; PROBE_1_19_RESERVE seconds left -> probe-1-19.json
#   probe-1-19-fresh  the same on 19 more held-out shapes, chosen after the wide dot's split was keyed to short
#             private tails; PROBE_1_19_FRESH_RESERVE seconds left -> probe-1-19-fresh.json
#   tile-splits  decode_vs_flashinfer.py tile-splits --only-changed: the 128-token tile below 2.5 working programs
#             per SM at 4+ or 6+ splits against probe 1.19.0, 12 held-out shapes then the grids'; TILE_SPLITS_RESERVE
#             seconds left -> tile-splits.json
#   wave-short  decode_vs_flashinfer.py wave-short --only-changed: head dim 256's wave rule also over short-tile
#             launches against probe 1.19.0, 14 held-out shapes then the grids'; WAVE_SHORT_RESERVE seconds left
#             -> wave-short.json
#   wave-floor  decode_vs_flashinfer.py wave-floor --only-changed: that rule also where one split fewer over private
#             pages would move the launch onto the base tile, against probe 1.20.0, 12 held-out shapes then the
#             grids'; WAVE_FLOOR_RESERVE seconds left -> wave-floor.json
#   l2-hints  decode_vs_flashinfer.py l2-hints: the decode's K/V loads hinted to L2 (decode_l2_hints 1, 2) against
#             probe 1.20.0, on the rows it loses, 11 held-out shapes, then the default grid's; L2_HINTS_RESERVE seconds
#             left -> l2-hints.json
#   wide-regs  decode_vs_flashinfer.py wide-regs: head dim 256's decode with its registers capped at 168 (three
#             programs per SM), over halves of the head dims, on 32-token tiles of 3 stages, against probe 1.20.0;
#             the rows it loses, held-out shapes, then the grids' head-dim-256 shapes; WIDE_REGS_RESERVE seconds left
#             -> wide-regs.json
#   lanes     decode_vs_flashinfer.py lanes: the per-sequence decode in lanes (decode_lanes: each warp its own slice
#             of every tile, merged once per range) against probe 1.20.0, on the rows it loses, held-out shapes, the
#             default grid's, then head dim 256's; LANES_RESERVE seconds left -> lanes.json
#   unsigned-pages  decode_vs_flashinfer.py unsigned-pages: the decode's page arithmetic unsigned
#             (decode_unsigned_pages) against probe 1.20.0, on lanes' shapes; UNSIGNED_PAGES_RESERVE seconds left
#             -> unsigned-pages.json
#   stagger   decode_vs_flashinfer.py stagger --only-changed: the next tile's K and V loaded into registers
#             (decode_stagger) on tiles of 64 and of 32 elements a thread, the four rows probe 1.22.0 loses first,
#             then lanes' shapes; STAGGER_RESERVE seconds left -> stagger.json
#   wide-head-stream  decode_vs_flashinfer.py wide-head-stream --only-changed: head dim 256's streaming launch at
#             one program per SM on prefetching tiles (wide_head_stream_programs_per_sm; 32 and 64 tokens, 3 stages)
#             against the default, 15 held-out shapes then the grids'; WIDE_HEAD_STREAM_RESERVE seconds left
#             -> wide-head-stream.json
#   probe-1-22  decode_vs_flashinfer.py probe-1-22 --only-changed: probe 1.22.0 against 1.21.0 on wide-head-stream's
#             shapes whose launch moved; PROBE_1_22_RESERVE seconds left -> probe-1-22.json
#             rounds the target up and one fewer leaves 3.5+ programs per SM (floor_splits_min_programs_per_sm), down
#             to 2 splits or to 1, 15 held-out shapes then the grids'; FLOOR_SPLITS_RESERVE seconds left -> floor-splits.json
#   regimes-next  decode_vs_flashinfer.py regimes-next: regimes-decode's 84 shapes, the default against the rules not
#             yet on (wide_dot_programs_per_sm keyed and not, wide_head_private_programs_per_sm: 2; base probe 1.13.0),
#             FlashInfer in the same call unless DVF_ARGS says otherwise; REGIMES_NEXT_RESERVE seconds left -> regimes-next.json
#   swap-ab   decode_vs_flashinfer.py swap-ab --only-changed: the decode's dots transposed (decode_swap_ab, warpgroup
#             MMAs) on four warps, against the default, on regimes-losers' rows then the default grid; SWAP_AB_RESERVE
#             seconds left -> swap-ab.json
#   fi-bg     FlashInfer's JIT build at head dims 64, 128 and 256, both KV dtypes, in the background (later stages
#             of the call find the modules built; stages timing ours alone meanwhile share the CPU with it) -> fi-bg.log
#             (FI_BG_COMBOS="128:bf16,256:fp8" builds only those head dims and KV dtypes)
#   counters  benchmarks/decode_counters.py under Nsight Compute: our decode's and FlashInfer's hardware counters on
#             the rows ours still loses (one process per row and backend; FlashInfer's after the -bg builds;
#             COUNTER_ROWS="256x8-shared ..." names rows, COUNTER_BACKENDS="ours lanes fi" backends), then the summary;
#             COUNTER_SOURCE=1: each decode once more with PC sampling (SourceCounters), its source page exported as
#             SASS and printed by opcode and instruction (decode_counters.py sass; first run in device-2026-12-07j)
#             -> counters.tar.gz (counters/<row>-<backend>.csv, <row>-<backend>-sass.csv, summary.txt, stderr.log)
#   DVF_ARGS  extra arguments for these decode_vs_flashinfer.py stages (--no-flashinfer: ours only, no JIT wait)
#             (and <STAGE>_ARGS, e.g. WIDE_DOT_TARGETS_ARGS=--no-flashinfer, for that stage alone)
#   regimes-decode  decode_vs_flashinfer.py regimes-decode: the regimes grid's per-sequence decodes, ours against
#             FlashInfer's (no cascades); REGIMES_DECODE_RESERVE seconds left -> regimes-decode.json
#   coverage-decode  decode_vs_flashinfer.py coverage-decode: the coverage grid's per-sequence decodes, ours against
#             FlashInfer's (no cascades); COVERAGE_DECODE_RESERVE seconds left -> coverage-decode.json
#   grid-decode  decode_vs_flashinfer.py grid-decode: the default grid's shapes, our per-sequence decode beside
#             FlashInfer's (no cascades); GRID_DECODE_RESERVE seconds left -> grid-decode.json
#   oracle    benchmarks/decode_launch_oracle.py: every split count and tile forced on the rows ours still loses, the
#             best retimed beside FlashInfer's (is it the launch rule or the kernel body?) -> oracle.json
#   fi-tiles  decode_vs_flashinfer.py fi-tiles: FlashInfer's decode at 512 + 0-272 tokens (whole tiles or tokens?) -> fi-tiles.json
#   conditions decode_vs_flashinfer.py conditions (one row timed after heavy work, after idle, back to back) -> conditions.json
#   splits    benchmarks/decode_vs_flashinfer.py splits (split-K targets on the same shapes) -> splits.json
#   tune-grid decode_vs_flashinfer.py grid --only-changed: the default tune against probe 1.3's -> tune-grid.json
#   pages     decode_vs_flashinfer.py pages: page-aware blocks on and off (writes pages_ok when all rows are right) -> pages.json
#   retime    Triton's rows of the full and coverage grids (only after a clean pages stage in the same call;
#             RETIME_BUDGET caps its seconds, else all that is left)                              -> triton-fc.json
#   retime2   Triton's rows of the regimes and trees grids                                     -> triton-rt.json
#   wait-bg   waits for the -bg stages' builds to finish (or until 5 s are left): a build cut mid-way can leave
#             FlashInfer's lock for the next call on the same machine
#   glue-bg   builds FlashInfer's glue kernels in the background (the JIT cache serves a later stage or call)
#   rebase    $BASE with default.json's rows merged in (they replace its rows of the same points) -> base.json,
#             which a later remeasure stage in the same call completes
#   remeasure probe --grid all --backend triton --backend flashinfer --merge-into $BASE --only-missing  -> remeasure.json
#   compile-times the default grid's Triton and torch pass under benchmarks/probe_compile_times.py (seconds compiling
#             per kernel; first in a call on a fresh machine = a user's cold cache) -> compile.json, triton-default.json
#   gluon-route  decode_vs_flashinfer.py gluon-route --only-changed: the Gluon decode where decode_gluon takes the
#             launch (unsplit, no page blocks, bf16, head dims 64 and 128), one program per item, then persistent
#             (decode_gluon_persist 2), then with head dim 256 too (decode_gluon_wide), against the default, on
#             stagger's shapes (the four rows probe 1.22.0 loses first); GLUON_ROUTE_RESERVE seconds left
#             -> gluon-route.json
#   gluon     benchmarks/decode_gluon_check.py: the Gluon decode (K and V waited for apart; its options, the
#             persistent kernel, split launches merged in their last split) checked against float32 on shapes meant
#             to break it, then timed against ours and FlashInfer's on the rows probe 1.22.0 loses and held-out
#             ones; GLUON_RESERVE seconds left, GLUON_ARGS passed on (--options persist,swap: those tiles only)
#             -> gluon.json
#   triton-steps  benchmarks/triton_steps_run.py: Triton's whole steps (stepped, held-out, regimes) -> triton-steps.json
# Run from the staged copy (cd .stage; the wheels at ../.whl) or from the checkout with WHL=.whl. Files land in $OUT.
set -o pipefail
stages=${1:-coverage,step}; total=${2:-585}
t0=$(date +%s)
# every stage needs the wheels (msgspec and pyyaml as well as FlashInfer), --no-flashinfer ones too
whl=${WHL:-../.whl}
if ! compgen -G "$whl/*.whl" > /dev/null; then
    echo "no wheels in $whl: run from the checkout with WHL=.whl and carry .whl (docs/probe.md)" >&2; exit 2
fi
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$whl"/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST=9.0a TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=14
export PROBE_STEP_PARTIAL=$OUT/step_partial.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
left() { echo $(( total - ($(date +%s) - t0) )); }
for st in ${stages//,/ }; do
  case $st in
    coverage) timeout $(left) python3 -m kernels_probe --out $OUT/cov.json --grid coverage --time-budget $(( $(left) - 190 )) ;;
    step) timeout $(left) python3 -m kernels_probe --out $OUT/step.json --step --no-attention ;;
    workload) timeout $(left) python3 -m kernels_probe --out $OUT/workload.json --plan benchmarks/plan-rl-rollouts-64-fp8.json ;;
    mla) timeout $(left) python3 -m kernels_probe --out $OUT/mla.json --mla --no-attention --backend flashinfer ;;
    quick) timeout $(left) python3 -m kernels_probe --out $OUT/quick.json --quick ;;
    mla-tp) timeout $(left) python3 -m kernels_probe --out $OUT/mla-tp.json --mla --mla-grid tp --no-attention \
              --backend flashinfer --time-budget $(( $(left) - 25 )) && python3 benchmarks/mla_table.py $OUT/mla-tp.json ;;
    mla-plan) timeout $(left) python3 -m kernels_probe --out $OUT/mla-plan.json --no-attention --backend flashinfer \
              --plan benchmarks/plan-deepseek-v3-grpo-tp8.json && python3 benchmarks/mla_table.py $OUT/mla-plan.json ;;
    mla-plan-fp8) timeout $(left) python3 -m kernels_probe --out $OUT/mla-plan-fp8.json --no-attention --backend flashinfer \
              --plan benchmarks/plan-deepseek-v3-grpo-tp8-fp8.json && python3 benchmarks/mla_table.py $OUT/mla-plan-fp8.json ;;
    moe-steps) timeout $(left) python3 -m kernels_probe.moe.moe_steps --out $OUT/moe_steps.json \
              --budget-s $(( $(left) - 45 )) ${MOE_STEPS_ARGS:-} ;;
    regimes) timeout $(left) python3 -m kernels_probe --out $OUT/regimes.json --grid regimes --backend triton \
              --backend flashinfer --time-budget ${REGIMES_BUDGET:-300} ;;
    regimes-owed) timeout $(left) python3 -m kernels_probe --out $OUT/regimes-owed.json --grid regimes \
              --backend flashinfer --merge-into calibrations/h200-probe-2026-12-01.json --only-missing \
              > $OUT/regimes-owed.log 2>&1; rc=$?; grep -v "flashinfer.jit" $OUT/regimes-owed.log | tail -6; (exit $rc) ;;
    diag) timeout $(left) python3 -m kernels_probe --out $OUT/diag.json --backend triton \
              --plan ${DIAG_PLAN:-benchmarks/plan-gemma-2-2b-d256-diag.json} > $OUT/diag.log 2>&1; rc=$?; tail -3 $OUT/diag.log; (exit $rc) ;;
    triton-owed) timeout $(left) python3 -m kernels_probe --out $OUT/triton-owed.json --grid regimes --backend triton \
              --merge-into calibrations/h200-probe-2026-12-01.json --only-missing > $OUT/triton-owed.log 2>&1; rc=$?
              tail -3 $OUT/triton-owed.log; (exit $rc) ;;
    trees) timeout $(left) python3 -m kernels_probe --out $OUT/trees.json --grid trees --backend triton \
              --backend flashinfer --time-budget ${TREES_BUDGET:-200} ;;
    step-regimes) timeout $(left) python3 -m kernels_probe --out $OUT/step-regimes.json --step --no-attention \
              --step-set regimes ;;
    default) timeout $(left) python3 -m kernels_probe --out $OUT/default.json > $OUT/default.log 2>&1; rc=$?
              tail -4 $OUT/default.log; (exit $rc) ;;
    tune-grid) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py grid --only-changed --out $OUT/tune-grid.json \
              --budget-s $(( $(left) - 40 )) > $OUT/tune-grid.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/tune-grid.log | grep -v "^\s" | cut -c1-200 | tail -30; (exit $rc) ;;
    losers) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py losers --out $OUT/losers.json \
              --budget-s $(( $(left) - 30 )) > $OUT/losers.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/losers.log | grep -v "^\s" | grep -v "flashinfer.jit" | cut -c1-400 | tail -40; (exit $rc) ;;
    filled) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py filled --no-flashinfer --out $OUT/filled.json \
              --budget-s $(( $(left) - 20 )) > $OUT/filled.log 2>&1; rc=$?; grep -E "^(WRONG|FAIL)" $OUT/filled.log
              tail -4 $OUT/filled.log; (exit $rc) ;;
    long) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py long --out $OUT/long.json \
              --budget-s $(( $(left) - 30 )) > $OUT/long.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/long.log | grep -v "^\s" | grep -v "flashinfer.jit" | cut -c1-300 | tail -30; (exit $rc) ;;
    waves) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py waves --out $OUT/waves.json \
              --budget-s $(( $(left) - 30 )) > $OUT/waves.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/waves.log | grep -v "^\s" | grep -v "flashinfer.jit" | cut -c1-300 | tail -30; (exit $rc) ;;
    prefetch) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py prefetch --out $OUT/prefetch.json \
              --budget-s $(( $(left) - ${PREFETCH_RESERVE:-30} )) > $OUT/prefetch.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/prefetch.log | grep -v "^\s" | grep -v "flashinfer.jit" | cut -c1-300 | tail -34; (exit $rc) ;;
    fused) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py fused --out $OUT/fused.json \
              --budget-s $(( $(left) - ${FUSED_RESERVE:-30} )) > $OUT/fused.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/fused.log | grep -v "^\s" | grep -v "flashinfer.jit" | cut -c1-300 | tail -34; (exit $rc) ;;
    oracle) timeout $(left) python3 benchmarks/decode_launch_oracle.py ${ORACLE_ARGS:-} --out $OUT/oracle.json \
              --budget-s $(( $(left) - ${ORACLE_RESERVE:-60} )) > $OUT/oracle.log 2>&1; rc=$?
              grep -v "flashinfer.jit" $OUT/oracle.log | grep -vE "^(P=|R=|  \[)" | cut -c1-200 | tail -20; (exit $rc) ;;
    stream|rules|prefix-split|head-split|regimes-decode|coverage-decode|wide-dot|head-dim-256|wide-head|wide-head-waves|regimes-losers|fp8-pairs|swap-ab|fp8-capped|block-fill|next-rules|wide-head-private|wide-dot-targets|regimes-next|wide-dot-long|wide-dot-tails|wide-dot-4|wide-head-tiles|wide-head-short|wide-head-rules|wide-dot-four|wide-head-fill|wide-head-wave-shared|double-dot|double-dot-keyed|filled-blocks|floor-splits|few-programs|probe-1-19|probe-1-19-fresh|tile-splits|wave-short|wave-floor|l2-hints|wide-regs|lanes|unsigned-pages|stagger|wide-head-stream|probe-1-22|gluon-route|grid-decode) reserve=${st^^}_RESERVE; reserve=${reserve//-/_}; own=${st^^}_ARGS; own=${own//-/_}; only=""; case $st in stream|regimes-decode|coverage-decode|grid-decode|regimes-next) ;; *) only=--only-changed ;; esac
              timeout $(left) python3 benchmarks/decode_vs_flashinfer.py $st $only ${DVF_ARGS:-} ${!own:-} --out $OUT/$st.json \
              --budget-s $(( $(left) - ${!reserve:-30} )) > $OUT/$st.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/$st.log | grep -v "^\s" | grep -v "flashinfer.jit" | cut -c1-300 | tail -34; (exit $rc) ;;
    fi-tiles) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py fi-tiles --out $OUT/fi-tiles.json \
              --budget-s $(( $(left) - 20 )) > $OUT/fi-tiles.log 2>&1; rc=$?; grep -vE "flashinfer.jit" $OUT/fi-tiles.log | cut -c1-200 | tail -16; (exit $rc) ;;
    tiles) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py tiles --out $OUT/tiles.json \
              --budget-s $(( $(left) - 30 )) > $OUT/tiles.log 2>&1; rc=$?
              grep -vE "^(P=|R=)" $OUT/tiles.log | grep -v "^\s" | grep -v "flashinfer.jit" | cut -c1-300 | tail -40; (exit $rc) ;;
    conditions) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py conditions --out $OUT/conditions.json \
              --budget-s $(( $(left) - 30 )) > $OUT/conditions.log 2>&1; rc=$?
              grep -v "flashinfer.jit" $OUT/conditions.log | cut -c1-600 | tail -16; (exit $rc) ;;
    pages) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py pages --out $OUT/pages.json \
              --budget-s ${PAGES_BUDGET:-150} > $OUT/pages.log 2>&1; rc=$?
              grep -qE "^(FAIL|WRONG)" $OUT/pages.log || { [ $rc = 0 ] && touch $OUT/pages_ok; }
              grep -vE "^(P=|R=)" $OUT/pages.log | grep -v "^\s" | cut -c1-220 | tail -45; (exit $rc) ;;
    retime) case ",$stages," in *,pages,*) [ -e $OUT/pages_ok ] || { echo "pages stage not clean: no retime"; continue; } ;; esac
              timeout $(left) python3 -m kernels_probe --out $OUT/triton-fc.json --grid full+coverage --backend triton \
              --time-budget ${RETIME_BUDGET:-$(( $(left) - 30 ))} > $OUT/retime.log 2>&1; rc=$?; tail -5 $OUT/retime.log; (exit $rc) ;;
    retime2) timeout $(left) python3 -m kernels_probe --out $OUT/triton-rt.json --grid regimes --backend triton \
              --time-budget ${RETIME2_BUDGET:-200} > $OUT/retime2.log 2>&1; rc=$?; tail -3 $OUT/retime2.log
              timeout $(left) python3 -m kernels_probe --out $OUT/triton-trees.json --grid trees --backend triton \
              --time-budget ${TREES_BUDGET:-120} >> $OUT/retime2.log 2>&1; rc=$?; tail -3 $OUT/retime2.log; (exit $rc) ;;
    compile-times) timeout $(left) python3 benchmarks/probe_compile_times.py --out $OUT/compile.json -- \
              --out $OUT/triton-default.json --backend triton --backend torch > $OUT/compile.log 2>&1; rc=$?
              grep -vE "^\s" $OUT/compile.log | tail -14; (exit $rc) ;;
    triton-steps) timeout $(left) python3 benchmarks/triton_steps_run.py --out $OUT/triton-steps.json \
              > $OUT/triton-steps.log 2>&1; rc=$?; tail -8 $OUT/triton-steps.log; (exit $rc) ;;
    gluon)  timeout $(left) python3 benchmarks/decode_gluon_check.py --out $OUT/gluon.json \
              --budget-s $(( $(left) - ${GLUON_RESERVE:-60} )) ${GLUON_ARGS:-} > $OUT/gluon.log 2>&1; rc=$?
              tail -32 $OUT/gluon.log; (exit $rc) ;;
    fi-bg)  FI_BG_COMBOS=${FI_BG_COMBOS:-} python3 -c "import os
from kernels_probe.attention.flashinfer_backend import warm_build
e = os.environ['FI_BG_COMBOS']
combos = [(int(d), t) for d, t in (c.split(':') for c in e.split(','))] if e else None
print('flashinfer build:', warm_build('cuda', head_dims=(64, 128, 256), combos=combos))" > $OUT/fi-bg.log 2>&1 & ;;
    counters) ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1); mkdir -p $OUT/counters
              $ncu --version | tail -1; metrics=$(python3 benchmarks/decode_counters.py metrics)
              for b in ${COUNTER_BACKENDS:-ours fi}; do
                [ $b = fi ] && while [ -n "$(jobs -rp)" ] && [ $(left) -gt 60 ]; do sleep 2; done
                for row in $(python3 benchmarks/decode_counters.py list ${COUNTER_ROWS:-}); do
                  [ $(left) -gt 30 ] || break 2
                  timeout $(( $(left) - 20 )) $ncu --clock-control none --profile-from-start off --csv --page details \
                    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
                    --metrics "$metrics" python3 benchmarks/decode_counters.py run $row $b \
                    > $OUT/counters/$row-$b.csv 2>> $OUT/counters/stderr.log || echo "counters $row $b failed"
                  [ -n "${COUNTER_SOURCE:-}" ] && [ $(left) -gt 40 ] || continue
                  rep=$OUT/counters/$row-$b
                  timeout $(( $(left) - 20 )) $ncu --clock-control none --profile-from-start off --section SourceCounters \
                    --section WarpStateStats --import-source no -f -o $rep python3 benchmarks/decode_counters.py run $row $b \
                    >> $OUT/counters/stderr.log 2>&1 \
                    && $ncu -i $rep.ncu-rep --page source --csv --print-source sass > $rep-sass.csv 2>> $OUT/counters/stderr.log \
                    && rm -f $rep.ncu-rep && python3 benchmarks/decode_counters.py sass $rep-sass.csv --top 10 \
                    || echo "source counters $row $b failed (the report, if any, is kept: $rep.ncu-rep)"
                done
              done
              python3 benchmarks/decode_counters.py summary $OUT/counters | tee $OUT/counters/summary.txt
              # one file back, not 4 per row: a call returns 8 (device-2026-12-07j lost summary.txt and stderr.log)
              tar -czf $OUT/counters.tar.gz -C $OUT counters && rm -rf $OUT/counters ;;
    wait-bg) while [ -n "$(jobs -rp)" ] && [ $(left) -gt 5 ]; do sleep 2; done; cat $OUT/*-bg.log 2>/dev/null | tail -3 ;;
    glue-bg) python3 -c "from kernels_probe.steps.glue import warm_build_glue; print('glue build:', warm_build_glue())" \
              > $OUT/glue-bg.log 2>&1 & ;;
    rebase) python3 -c "import json, sys; from kernels_probe.merge import merge_documents
from kernels_probe.calibration_file import write_atomic
write_atomic(sys.argv[3], merge_documents(json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))))" \
              $OUT/default.json ${BASE:?BASE names the calibration to complete} $OUT/base.json && BASE=$OUT/base.json ;;
    remeasure) timeout $(left) python3 -m kernels_probe --out $OUT/remeasure.json --grid all --backend triton \
              --backend flashinfer --merge-into ${BASE:?BASE names the calibration to complete} --only-missing \
              --time-budget $(( $(left) - ${REMEASURE_RESERVE:-45} )) > $OUT/remeasure.log 2>&1; rc=$?
              grep -vE "^\s" $OUT/remeasure.log | tail -4; (exit $rc) ;;
    splits) timeout $(left) python3 benchmarks/decode_vs_flashinfer.py splits --out $OUT/splits.json \
              --budget-s $(( $(left) - 40 )) > $OUT/splits.log 2>&1; rc=$?
              grep -E "^(P=|ratio|variant|default|long|bn128|FAIL|WRONG)" $OUT/splits.log | cut -c1-200 | tail -40
              (exit $rc) ;;
  esac
  echo "stage $st rc=$? at $(( $(date +%s) - t0 )) s"
done
ls -la $OUT
