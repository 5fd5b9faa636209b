"""The Triton kernels' launch arithmetic (cascade_plan.own_kernel_launch) without torch or triton: golden numbers
from hand arithmetic, and the module imported in a process where torch and triton cannot be imported."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_blocks import page_blocks
from cascade_plan.own_kernel_launch import (
    LOG2E,
    TILE_KINDS,
    ceil_div,
    choose_splits,
    decode_fused_merge,
    decode_launch_splits,
    decode_splits,
    decode_tile,
    fused_merge_slots,
    prefix_block_m,
    scale_log2,
    splits_filling_waves,
    tile_of,
)
from cascade_plan.own_kernel_pages import decode_launch, first_split_blocks, page_block_seqs
from cascade_plan.own_kernel_prefix import choose_splits_waves
from cascade_plan.own_kernel_tune import DEFAULT_TUNE
from cascade_plan.own_kernel_tunes import (
    PROBE_1_3_TUNE,
    PROBE_1_5_1_TUNE,
    PROBE_1_5_2_TUNE,
    PROBE_1_5_3_TUNE,
    PROBE_1_5_4_TUNE,
    PROBE_1_6_0_TUNE,
    PROBE_1_7_1_TUNE,
    PROBE_1_7_2_TUNE,
    PROBE_1_8_0_TUNE,
)

ROOT = Path(__file__).resolve().parents[1]


def test_choose_splits_fills_the_gpu_and_respects_minimum():
    # 4 x 132 = 528 programs wanted over 8 items: 66 splits; ceil(32768 / 66) = 497 tokens, rounded up to a
    # multiple of 64 = 512 per split; 32768 / 512 = 64 splits
    assert choose_splits(8, 32768, 132, 64, min_tokens=256, target_per_sm=4) == (64, 512)
    # 2048 items already fill 528 programs: one split of all 4096 tokens
    assert choose_splits(2048, 4096, 132, 64, min_tokens=256, target_per_sm=4) == (1, 4096)
    # 300 tokens hold one split of the 256-token minimum: one split, 300 rounded up to 320
    assert choose_splits(1, 300, 132, 64, min_tokens=256, target_per_sm=4) == (1, 320)
    assert choose_splits(5, 0, 132, 64, min_tokens=256, target_per_sm=4) == (1, 64)


def test_choose_splits_waves_avoids_a_partial_last_wave():
    # 2 x 132 = 264 programs over 64 items: 5 splits = 320 programs = 2.42 waves of 132; among 2..10 splits,
    # 4 (256 programs, 1.94 waves: 97% of its last wave) fills best: 1024 tokens each
    assert choose_splits(64, 4096, 132, 64, min_tokens=256, target_per_sm=2)[0] == 5
    assert choose_splits_waves(64, 4096, 132, 64, min_tokens=256, target_per_sm=2) == (4, 1024)
    assert choose_splits_waves(8, 256, 132, 64, min_tokens=256, target_per_sm=2) == (1, 256)


def test_splits_filling_waves_judges_the_launch_after_rounding_to_tiles():
    # 16 sequences x 1 KV head over 32,896 tokens, 128-token tiles, 3 resident programs per SM (396 a wave): the
    # target's 52 splits of 640 make 832 programs (2.10 waves: 70% of the last); 768-token splits make 43 (688
    # programs, 1.74 waves: 87%), 896 make 37 (1.49: 75%), 1,024 make 33 (1.33: 67%)
    assert splits_filling_waves(16, 32896, 132, 128, min_tokens=512, target_per_sm=8, ctas_per_sm=3) == (43, 768)
    # 16 x 8 over 8,192: 6 splits of 1,408 fill 768 of 792 slots in two waves
    assert splits_filling_waves(128, 8192, 132, 128, min_tokens=512, target_per_sm=8, ctas_per_sm=3) == (6, 1408)
    # off by default: the default tune's long launch is choose_splits'
    assert DEFAULT_TUNE.long_wave_ctas == 0
    assert decode_splits(16, 32896, 132, 128, DEFAULT_TUNE) == (52, 640)
    waves = dataclasses.replace(DEFAULT_TUNE, long_wave_ctas=3)
    assert decode_splits(16, 32896, 132, 128, waves) == (43, 768)


def test_decode_splits_raise_the_target_only_for_long_splits():
    # 16 sequences x 8 KV heads over 16,512 tokens: the base target gives ceil(528 / 128) = 5 splits of 3,328;
    # the long target of 8 per SM ceil(8 x 132 / 128) = 9 splits of ceil(16512 / 9) = 1835 -> 1856 tokens, each >= 512:
    # taken (probe 1.3's target too)
    assert decode_splits(128, 16512, 132, 64, DEFAULT_TUNE) == (9, 1856)
    assert decode_splits(128, 16512, 132, 64, PROBE_1_3_TUNE) == (9, 1856)
    # ... probe 1.5.4's 16 per SM: ceil(16 x 132 / 128) = 17 splits of ceil(16512 / 17) = 972 -> 1024 tokens
    assert decode_splits(128, 16512, 132, 64, PROBE_1_5_4_TUNE) == (17, 1024)
    # 8 x 8 over 4,224: the base gives 9 splits of 512; the long target may make only 4224 // 512 = 8: base kept
    assert decode_splits(64, 4224, 132, 64, DEFAULT_TUNE) == (9, 512)
    # 1,024 programs already give 4 per SM: one split, as before
    assert decode_splits(1024, 4224, 132, 64, DEFAULT_TUNE) == (1, 4224)


def test_the_long_context_launch_takes_its_own_tile():
    # where the long target adds splits, the decode runs 128-token tiles (splits counted in them); elsewhere the base
    # (9 splits of ceil(16512 / 9) = 1835 -> 1920 tokens in 128-token tiles)
    assert decode_launch_splits(128, 16512, 132, DEFAULT_TUNE) == (9, 1920, True)
    # 8 sequences at 128K: ceil(8 x 132 / 64) = 17 splits of 7718 -> 7808 (33 of 4096 at probe 1.5.4's 16 per SM)
    assert decode_launch_splits(64, 131200, 132, DEFAULT_TUNE) == (17, 7808, True)
    assert decode_launch_splits(64, 131200, 132, PROBE_1_5_4_TUNE) == (33, 4096, True)
    assert decode_launch_splits(64, 4224, 132, DEFAULT_TUNE) == (9, 512, False)
    assert decode_launch_splits(1024, 4224, 132, DEFAULT_TUNE) == (1, 4224, False)
    # probe 1.3's tune had no long tile
    assert decode_launch_splits(128, 16512, 132, PROBE_1_3_TUNE) == (9, 1856, False)


def test_each_decode_tile_takes_its_own_warps():
    t = DEFAULT_TUNE
    # base tile (8 items x 9 splits of 512 tokens): two warps up to head dim 128, four above it
    assert decode_tile(8, 9, 512, False, 132, t) == (64, 3, 2)
    assert decode_tile(8, 9, 512, False, 132, t, head_dim=64) == (64, 3, 2)
    assert decode_tile(8, 9, 512, False, 132, t, head_dim=256) == (64, 3, 4)
    # the long-context tile, the batch-filled tile (528 items unsplit) and the short split keep four
    assert decode_tile(8, 66, 512, True, 132, t) == (128, 2, 4)
    assert decode_tile(528, 1, 4096, False, 132, t) == (128, 2, 4)
    assert decode_tile(8, 9, 256, False, 132, t) == (64, 2, 4)
    # probe 1.5.3 ran four warps on every tile
    assert decode_tile(8, 9, 512, False, 132, PROBE_1_5_3_TUNE) == (64, 3, 4)
    assert all(tune.decode_warps == 4 for tune in (PROBE_1_3_TUNE, PROBE_1_5_1_TUNE, PROBE_1_5_2_TUNE))


def test_prefix_block_m_and_scale():
    assert [prefix_block_m(r, 128) for r in (1, 16, 17, 64, 65, 1000)] == [16, 16, 32, 64, 128, 128]
    assert prefix_block_m(1000, 64) == 64
    assert ceil_div(7, 2) == 4 and ceil_div(8, 2) == 4 and ceil_div(0, 3) == 0
    assert math.isclose(scale_log2(128, None), LOG2E / math.sqrt(128))
    assert scale_log2(64, 0.5) == 0.5 * LOG2E
    assert DEFAULT_TUNE.prefix_programs_per_sm == 2 and DEFAULT_TUNE.target_programs_per_sm == 4


BLOCKED = """
import json, sys
sys.modules['torch'] = None     # `import torch` now raises ImportError
sys.modules['triton'] = None
from cascade_plan import own_kernel_launch as tl_
from cascade_plan import own_kernel_prefix as pf_
print(json.dumps({
    "splits": tl_.choose_splits(8, 32768, 132, 64, min_tokens=256, target_per_sm=4),
    "waves": pf_.choose_splits_waves(64, 4096, 132, 64, min_tokens=256, target_per_sm=2),
    "block_m": tl_.prefix_block_m(65, 128),
    "loaded": sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton', 'numpy') and sys.modules[m]),
}))
"""


def test_page_blocks_only_where_they_pay():
    """Blocks of consecutive sequences (4 at 4 query heads per KV head) where the launch keeps 4 programs per SM
    of 132 SMs and the shared run is at least a tail; else the plain kernel (probe 1.5.2's rule, which the default
    keeps; its cap by the programs left running: test_blocks_leave_the_programs_per_sm_the_tune_asks_for)."""
    t = PROBE_1_5_2_TUNE

    def seqs(batch, programs, shared, T=1152):
        return page_block_seqs(batch, 4, programs, 132, t, shared_prefix_tokens=shared, max_seq_len=T)

    assert seqs(256, 2048, 1024) == 4          # 256 sequences x 8 KV heads, 1K prompt + 128: 2,048 programs
    assert seqs(256, 2048, None) == 4          # sharing not known: the kernel looks
    assert seqs(256, 2048, 0) == 1             # private pages
    assert seqs(256, 527, 1024) == 1           # 527 < 4 x 132 programs: a block's serial tails set the time
    assert seqs(256, 528, 1024) == 4
    assert seqs(256, 2048, 512, T=1536) == 1   # 512 shared against a 1,024-token tail
    assert seqs(256, 2048, 768, T=1536) == 4
    assert seqs(255, 2048, 1024) == 1          # an odd batch has no whole blocks
    t = DEFAULT_TUNE                           # blocks of 4 leave 132 of 528 programs, one per SM; of 527, fewer
    assert (seqs(256, 528, 1024), seqs(256, 2048, 1024)) == (4, 4)


def test_blocks_only_where_the_first_split_forms_one():
    """The kernel groups a split where the shared run, in whole tiles, holds the block's private tokens in it
    (two sequences: twice one tail). One split over a 1K prompt and 1K private tokens never groups, so no blocks;
    split in 448-token pieces the first lies inside the prompt and groups."""
    assert first_split_blocks(1024, 2048, 2048, 128) is False      # run 1,024 < 2 x 1,024
    assert first_split_blocks(1024, 1152, 1152, 128) is True       # run 1,024 >= 2 x 128
    assert first_split_blocks(1000, 1152, 1152, 128) is True       # run 896 (whole tiles) >= 2 x 256
    assert first_split_blocks(1000, 1600, 1600, 128) is False      # run 896 < 2 x 704
    assert first_split_blocks(1024, 2048, 448, 64) is True         # the first split lies inside the prompt
    assert first_split_blocks(40, 1152, 1152, 64) is False         # no whole tile of shared pages

    def seqs(shared, T, tps, bn):
        return page_block_seqs(256, 4, 2048, 132, DEFAULT_TUNE, shared_prefix_tokens=shared, max_seq_len=T,
                               tokens_per_split=tps, block_n=bn)

    assert seqs(1024, 2048, 2048, 128) == 1
    assert seqs(4096, 8192, 8192, 128) == 1
    assert seqs(1024, 1152, 1152, 128) == 4
    assert seqs(None, 2048, 2048, 128) == 4                        # sharing not known: the kernel looks
    assert seqs(0, 1152, 1152, 128) == 1


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 70000), st.integers(0, 9000), st.sampled_from([64, 128]), st.integers(1, 40))
def test_the_first_split_rule_agrees_with_the_kernels_split_by_split_choice(shared, tail, bn, splits):
    """Blocks form on some split (the kernel's per-split check, level 2) exactly when they form on the first."""
    total = shared + tail
    tps = max(bn, -(-(-(-max(total, 1) // splits)) // bn) * bn)
    forms = []
    for i in range(-(-max(total, 1) // tps)):
        start, end = i * tps, min(i * tps + tps, total)
        run = (max(min(shared, end) - start, 0) // bn) * bn if start < shared else 0
        forms.append(run > 0 and run >= 2 * (end - start - run))
    assert any(forms) == first_split_blocks(shared, total, tps, bn)


def test_launch_arithmetic_imports_and_runs_without_torch_or_triton():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True, cwd=ROOT, env=env,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out == {"splits": [64, 512], "waves": [4, 1024], "block_m": 128, "loaded": []}


def test_the_host_predicts_the_blocks_the_kernel_formed():
    """Every Triton decode row of a GPU run of probe 1.5.1 records what its launch allowed and which programs the
    kernel grouped, read back after it ran (benchmarks/raw/device-2026-12-05/triton151.json, an H100 with 132 SMs):
    page_blocks, on the host, gives the same for all 188 rows, decode over shared and over private pages, with the
    tune that run used (its decode split floor, 256 tokens, since lowered)."""
    from cascade_plan.own_kernel_blocks import page_blocks

    doc = json.loads((ROOT / "benchmarks/raw/device-2026-12-05/triton151.json").read_text())
    assert doc["probe_version"] == "1.5.1" and doc["device"]["sm_count"] == 132
    rows = [m for m in doc["measurements"]
            if m["backend"] == "triton" and m["kernel"] in ("decode_shared", "decode_dup")]
    assert len(rows) == 188 and sum("grouped_programs" in m["launch"] for m in rows) > 50
    for m in rows:
        c = m["config"]
        shared = c["prefix_tokens"] if m["kernel"] == "decode_shared" else 0
        got = page_blocks(c["group_size"] * c["n_groups"], c["num_kv_heads"], c["q_per_kv"], c["group_size"], shared,
                          c["prefix_tokens"] + c["suffix_tokens"], 132, PROBE_1_5_1_TUNE)
        assert set(got) == set(m["launch"]), (c, m["launch"], got)
        for k, v in got.items():     # the record's mean block is a float32 mean
            assert math.isclose(v, m["launch"][k], rel_tol=1e-6), (c, k, m["launch"], got)


def test_the_decode_splits_tiny_launches_down_to_128_tokens():
    """One sequence of 4,224 tokens on one KV head (a work item): 33 splits of 128 tokens where the 256-token floor gave
    14 of 320. Only tiny launches: 32 items at 1,152 tokens take 9 splits of 128, 64 items the 4 of 320 they had, and
    one item at 32K the 103 splits it had; the prefix pass keeps its own floor."""
    assert decode_splits(1, 4224, 132, 64, DEFAULT_TUNE) == (33, 128)
    assert decode_splits(1, 4224, 132, 64, PROBE_1_3_TUNE) == (14, 320)
    assert decode_splits(32, 1152, 132, 64, DEFAULT_TUNE) == (9, 128)
    for items, tokens in ((64, 1152), (1, 32896), (512, 384)):
        assert decode_splits(items, tokens, 132, 64, DEFAULT_TUNE) == decode_splits(items, tokens, 132, 64,
                                                                                    PROBE_1_5_1_TUNE)
    assert decode_splits(1, 32896, 132, 64, DEFAULT_TUNE)[0] == 103
    assert DEFAULT_TUNE.min_tokens_per_split == 256 and DEFAULT_TUNE.decode_min_tokens_per_split == 128


def test_blocks_leave_the_programs_per_sm_the_tune_asks_for():
    """64 sequences x 8 KV heads at 1K + 128 (two splits, 1,024 programs on 132 SMs): blocks of 16 leave 64 programs
    running; one per SM (the default) caps them at 4 sequences, two or three per SM at 2."""
    base = dict(shared_prefix_tokens=1024, max_seq_len=1152, tokens_per_split=576, block_n=64)
    assert page_block_seqs(64, 1, 1024, 132, PROBE_1_5_2_TUNE, **base) == 16
    assert page_block_seqs(64, 1, 1024, 132, DEFAULT_TUNE, **base) == 4     # one per SM: 1024 / 4 >= 132
    assert page_block_seqs(64, 1, 1024, 132, dataclasses.replace(DEFAULT_TUNE, page_block_min_programs_per_sm=2),
                           **base) == 2
    assert page_block_seqs(64, 1, 1024, 132, dataclasses.replace(DEFAULT_TUNE, page_block_min_programs_per_sm=3),
                           **base) == 2


def test_the_prefix_split_ends_the_first_split_at_the_prefix_and_only_where_no_block_forms():
    t = DEFAULT_TUNE
    # 256 x 8 KV heads fill the GPU unsplit; one split over 4K shared + 4K private forms no block: two splits of 4K,
    # blocks of 4 in the first
    assert decode_launch(256, 8, 4, 8192, 4096, 132, PROBE_1_5_2_TUNE) == (1, 8192, False)
    assert decode_launch(256, 8, 4, 8192, 4096, 132, t) == (2, 4096, False)
    assert page_blocks(256, 8, 4, 256, 4096, 8192, 132, t) == {
        "splits": 2, "tokens_per_split": 4096, "page_block_seqs": 4, "grouped_programs": 0.5, "mean_block_seqs": 4.0,
        "page_prefetch": True, "fused_merge": False}
    # 1K + 4K would take five splits (more than shared_split_max = 2), so it stays unsplit (two, with shared_head_split:
    # the next test); up to eight where the tune allows
    assert decode_launch(256, 8, 4, 5120, 1024, 132, t) == (1, 5120, False)
    assert decode_launch(256, 8, 4, 5120, 1024, 132, dataclasses.replace(t, shared_split_max=8)) == (5, 1024, False)
    # ... but a launch split already (64 x 8: 3 x 1,792 on the long-context tile) takes up to five since probe 1.9.0
    # (split_launch_shared_split_max), blocks of four in the first
    assert decode_launch(64, 8, 4, 5120, 1024, 132, PROBE_1_8_0_TUNE) == (3, 1792, True)
    assert decode_launch(64, 8, 4, 5120, 1024, 132, t) == (5, 1024, False)
    assert page_blocks(64, 8, 4, 64, 1024, 5120, 132, t)["page_block_seqs"] == 4
    assert decode_launch(64, 8, 4, 5120, 0, 132, t) == decode_launch(64, 8, 4, 5120, 0, 132, PROBE_1_8_0_TUNE)
    # nor over private pages, nor where no block fits the dot (16 query heads per KV head)
    assert decode_launch(256, 8, 4, 8192, 0, 132, t) == (1, 8192, False)
    assert decode_launch(256, 8, 16, 8192, 4096, 132, t) == (1, 8192, False)
    # a first split that already forms blocks keeps its launch: 1K + 128 unsplit (its run covers two tails), 16
    # sequences at 4K + 4K (16 splits, the first inside the prompt)
    assert decode_launch(256, 8, 4, 1152, 1024, 132, t) == (1, 1152, False)
    assert decode_launch(16, 8, 4, 8192, 4096, 132, t) == decode_launch(
        16, 8, 4, 8192, 4096, 132, dataclasses.replace(t, decode_shared_split=False))


def test_a_short_shared_prefix_splits_once_at_its_end_and_the_last_split_runs_to_the_end():
    """With shared_head_min_tokens (off in the default tune: benchmarks/raw/device-2026-12-06g/head-split*.json),
    256 x 8 KV heads at 1K + 4K over shared pages (H100, 132 SMs): the unsplit launch forms no block and equal splits
    at the prefix would be five, so shared_head_split gives two: the prefix's 1,024 tokens, in blocks of four, then
    the other 4,096, on the base tile that a 4K split takes, prefetching; page_blocks and the busiest program follow
    the long last split. Not over private pages, not where the launch was split already, not below the tune's floor,
    not without blocks in the dot, and not in the default tune."""
    from cascade_plan.own_kernel_blocks import block_saved_tokens, longest_program_tokens
    from cascade_plan.own_kernel_launch import decode_prefetch, longest_split_tokens
    from cascade_plan.own_kernel_pages import shared_head_split

    t = dataclasses.replace(DEFAULT_TUNE, shared_head_min_tokens=256)
    assert decode_launch(256, 8, 4, 5120, 1024, 132, t) == (2, 1024, False)
    assert decode_launch(256, 8, 4, 5120, 1024, 132, DEFAULT_TUNE) == (1, 5120, False)
    assert longest_split_tokens(5120, 2, 1024) == 4096 and longest_split_tokens(5120, 5, 1024) == 1024
    assert longest_split_tokens(5120, 1, 5120) == 5120
    assert decode_tile(2048, 2, 4096, False, 132, t) == (64, 3, 2) and decode_prefetch(2048, 2, 4096, False, 132, t)
    assert page_blocks(256, 8, 4, 256, 1024, 5120, 132, t) == {
        "splits": 2, "tokens_per_split": 1024, "page_block_seqs": 4, "grouped_programs": 0.5, "mean_block_seqs": 4.0,
        "page_prefetch": True, "fused_merge": False}
    assert longest_program_tokens(256, 8, 4, 256, 1024, 5120, 132, t) == 4096
    assert block_saved_tokens(256, 8, 4, 256, 1024, 5120, 132, t) == 1024 * 3 / 4
    assert block_saved_tokens(256, 8, 4, 256, 1024, 5120, 132, DEFAULT_TUNE) == 0.0
    # the prefix's whole tiles: 1,000 shared tokens give a first split of 960
    assert decode_launch(256, 8, 4, 5120, 1000, 132, t) == (2, 960, False)
    # not: private pages, unknown sharing, an already split launch (64 x 8 takes five equal splits), below the floor
    # (192 shared tokens: three tiles), a dot with no room for a second sequence (16 query heads per KV head)
    assert decode_launch(256, 8, 4, 5120, 0, 132, t) == (1, 5120, False)
    assert decode_launch(256, 8, 4, 5120, None, 132, t) == (1, 5120, False)
    assert decode_launch(64, 8, 4, 5120, 1024, 132, t) == (5, 1024, False)
    assert decode_launch(256, 8, 4, 4288, 192, 132, t) == (1, 4288, False)
    assert decode_launch(256, 8, 16, 5120, 1024, 132, t) == (1, 5120, False)
    assert shared_head_split(256, 8, 4, 5120, 1024, 1, 5120, 128, 132, DEFAULT_TUNE) is None
    assert shared_head_split(256, 8, 4, 5120, 1024, 1, 5120, 128, 132, t) == (2, 1024)


@settings(max_examples=200, deadline=None)
@given(batch=st.sampled_from([64, 128, 256, 512, 1024]), kv_heads=st.sampled_from([1, 2, 4, 8]),
       q_per_kv=st.sampled_from([1, 2, 4, 8]), shared=st.integers(0, 8192), private=st.integers(1, 8192),
       head_split=st.booleans())
def test_every_launch_covers_each_token_once(batch, kv_heads, q_per_kv, shared, private, head_split):
    """Whatever the rules choose (shared_head_split's two splits included), the splits (the last running to the
    sequence's end) cover [0, seq_len) once, every split but the last holds tokens_per_split tokens, and none is
    empty."""
    seq_len = shared + private
    tune = dataclasses.replace(DEFAULT_TUNE, shared_head_min_tokens=256 if head_split else 0)
    splits, tps, _ = decode_launch(batch, kv_heads, q_per_kv, seq_len, shared, 132, tune)
    assert (splits - 1) * tps < seq_len
    bounds = [(i * tps, seq_len if i == splits - 1 else (i + 1) * tps) for i in range(splits)]
    assert bounds[0][0] == 0 and bounds[-1][1] == seq_len
    assert all(a < b for a, b in bounds) and all(b == c for (_, b), (c, _) in zip(bounds, bounds[1:]))


def test_page_numbers_are_prefetched_where_a_programs_loop_runs_long():
    """H100 (132 SMs), 8 KV heads x 4 query heads: the batch-filled launch (256 sequences at 1K + 4K, unsplit; with
    shared_head_min_tokens two splits, the last of 4,096 tokens on the base tile), the
    long-context tile (probe 1.7.2: 16 sequences at 4K + 4K, 8 splits of 1,024 tokens; since 1.8.0 that launch
    streams, 2 splits of 4,096 on the base tile), and the base tile over 1,024 tokens or more (256 sequences at
    4K + 4K over shared pages: split at the prefix's end, 2 x 4,096) prefetch; the base tile
    over 576-token splits (64 sequences at 1K + 128: 2 splits), the short tile
    (splits of <= 256 tokens) and every launch of a tune without it do not. The prefix pass prefetches where one
    128-row tile holds all its query rows."""
    from cascade_plan.own_kernel_launch import decode_prefetch, decode_tile_kind, longest_split_tokens, prefix_prefetch
    from cascade_plan.own_kernel_tunes import PROBE_1_5_5_TUNE

    def kind_and_prefetch(batch, tokens, shared, tune=DEFAULT_TUNE):
        splits, tps, long_tile = decode_launch(batch, 8, 4, tokens, shared, 132, tune)
        longest = longest_split_tokens(tokens, splits, tps)     # as DecodePlan chooses its tile
        return (decode_tile_kind(batch * 8, splits, longest, long_tile, 132, tune), splits, tps,
                decode_prefetch(batch * 8, splits, longest, long_tile, 132, tune))

    assert kind_and_prefetch(256, 5120, 1024) == ("filled", 1, 5120, True)
    head = dataclasses.replace(DEFAULT_TUNE, shared_head_min_tokens=256)    # two splits, the last of 4,096 tokens
    assert kind_and_prefetch(256, 5120, 1024, head) == ("base", 2, 1024, True)
    assert kind_and_prefetch(16, 8192, 4096, PROBE_1_7_2_TUNE) == ("long", 8, 1024, True)
    assert kind_and_prefetch(16, 8192, 4096) == ("base", 2, 4096, True)
    assert kind_and_prefetch(256, 8192, 4096) == ("base", 2, 4096, True)
    assert kind_and_prefetch(64, 1152, 1024) == ("base", 2, 576, False)
    assert kind_and_prefetch(4, 1152, 1024)[0::3] == ("short", False)
    for case in ((256, 5120, 1024), (16, 8192, 4096), (256, 8192, 4096)):
        assert kind_and_prefetch(*case, tune=PROBE_1_5_5_TUNE)[3] is False
    assert prefix_prefetch(16 * 4, DEFAULT_TUNE) and prefix_prefetch(128, DEFAULT_TUNE)
    assert not prefix_prefetch(256, DEFAULT_TUNE) and not prefix_prefetch(64, PROBE_1_5_5_TUNE)


def test_a_split_launch_merges_its_own_splits_only_without_blocks_and_with_few_splits():
    t = DEFAULT_TUNE
    assert decode_fused_merge(2, 1, False, t) and decode_fused_merge(t.fused_merge_max_splits, 1, False, t)
    assert not decode_fused_merge(1, 1, False, t)                          # unsplit: it writes the output itself
    assert not decode_fused_merge(t.fused_merge_max_splits + 1, 1, False, t)   # one program would merge too many
    assert not decode_fused_merge(9, 2, False, t)                          # page blocks: a merge kernel after it
    assert not decode_fused_merge(9, 1, True, t)                           # the long-context launch keeps it too...
    assert decode_fused_merge(9, 1, True, PROBE_1_7_1_TUNE)                # ... which probes 1.7.0-1.7.1 fused
    assert not decode_fused_merge(9, 1, False, PROBE_1_6_0_TUNE)
    # what a probe row records: 4 sequences x 8 KV heads at 1K + 128, one query head per KV head, is a tiny launch of
    # 9 splits x 128 tokens without blocks (it fuses); under probe 1.7.2's tune 16 x 8 at 4K + 4K forms blocks of four
    # (it does not) and 16 x 8 at 16K + 128 over private pages is a long-context launch of 9 splits (nor does it);
    # since 1.8.0 both stream in 2 splits, which merge themselves
    old = PROBE_1_7_2_TUNE
    assert page_blocks(4, 8, 1, 4, 1024, 1152, 132, t) == {
        "splits": 9, "tokens_per_split": 128, "page_block_seqs": 1, "page_prefetch": False, "fused_merge": True}
    assert page_blocks(16, 8, 4, 16, 4096, 8192, 132, old)["fused_merge"] is False
    assert page_blocks(16, 8, 4, 16, 4096, 8192, 132, t) == {
        "splits": 2, "tokens_per_split": 4096, "page_block_seqs": 1, "page_prefetch": True, "fused_merge": True}
    assert decode_launch(16, 8, 4, 16512, 0, 132, old) == (9, 1920, True)
    assert page_blocks(16, 8, 4, 16, 0, 16512, 132, old)["fused_merge"] is False
    assert page_blocks(16, 8, 4, 16, 0, 16512, 132, t)["fused_merge"] is True
    assert page_blocks(16, 8, 4, 16, 0, 16512, 132, PROBE_1_7_1_TUNE)["fused_merge"] is True
    assert "fused_merge" not in page_blocks(4, 8, 1, 4, 1024, 1152, 132, PROBE_1_6_0_TUNE)


def test_the_fused_merge_tile_stays_within_sixteen_values_a_thread():
    assert fused_merge_slots(1, 128, 9, 2) == (1, 8)     # 8 slots x 128: 1,024 values over 64 threads
    assert fused_merge_slots(4, 128, 9, 2) == (4, 2)
    assert fused_merge_slots(8, 128, 9, 2) == (8, 1)
    assert fused_merge_slots(6, 64, 3, 4) == (8, 4)      # 6 rows padded to 8; 3 slots padded to 4
    assert fused_merge_slots(1, 64, 2, 4) == (1, 2)      # never more slots than the launch has, rounded up


def test_a_long_launch_over_private_tokens_streams_two_programs_per_sm_where_its_batch_fits_one_wave():
    """H100 (132 SMs). Over private pages, 4 sequences x 8 KV heads at 16K + 128 (32 work items): 264 // 32 = 8
    splits of ceil(16,512 / 8) = 2,064 -> 2,112 tokens (whole 64-token tiles), 256 programs on the base tile, which
    prefetches; 16 x 1 KV head at 32K + 128: 16 splits of 2,112 (the oracle's best launch there,
    benchmarks/raw/device-2026-12-06e/oracle.json). 4K shared of 8K streams (no block pays); 16K shared of 16K + 128
    keeps the long launch and its blocks, as do an unknown prefix, a batch of more programs than fit at once (64 x 8 =
    512 > 3 x 132) and the cascade's suffix pass."""
    from cascade_plan.own_kernel_launch import decode_prefetch, decode_tile, stream_splits

    t, old = DEFAULT_TUNE, PROBE_1_7_2_TUNE
    assert decode_launch(4, 8, 4, 16512, 0, 132, t) == (8, 2112, False)
    assert decode_tile(32, 8, 2112, False, 132, t) == (64, 3, 2) and decode_prefetch(32, 8, 2112, False, 132, t)
    assert decode_launch(16, 1, 8, 32896, 0, 132, t) == (16, 2112, False)
    assert decode_launch(16, 8, 4, 8192, 4096, 132, t) == (2, 4096, False)
    for args in ((16, 8, 4, 16512, 16384), (16, 8, 4, 16512, None), (64, 8, 4, 16512, 0)):
        assert decode_launch(*args, 132, t) == decode_launch(*args, 132, old) and decode_launch(*args, 132, old)[2]
    assert decode_launch(16, 8, 4, 4096, 0, 132, t, streaming=False) == decode_launch(16, 8, 4, 4096, 0, 132, old)
    assert decode_launch(16, 8, 4, 4096, 0, 132, t) == (2, 2048, False)
    assert stream_splits(1, 1000, 132, t) == (1, 1024)          # never below one split


def test_a_prefix_no_two_sequences_share_is_launched_as_private_context():
    """H100 (132 SMs), one sequence x 8 KV heads (8 work items) at 128K + 128 = 131,200 tokens. Counted as shared
    (probe 1.11.0's tune) the prefix keeps the long-context launch: 1,056 / 8 = 132 splits wanted, at most
    131,200 // 512 = 256, 128-token tiles -> ceil(131,200 / 132) = 994 -> 1,024 tokens, 129 splits. As the private
    context it is (one sequence shares it with nobody) it streams: 264 // 8 = 33 splits of ceil(131,200 / 33) = 3,976
    -> 4,032 tokens, the launch the same pages get as private ones. A group of two keeps counting it."""
    from cascade_plan.own_kernel_pages import launch_shared_tokens
    from cascade_plan.own_kernel_tunes import PROBE_1_11_0_TUNE, PROBE_1_12_0_TUNE

    t, old = PROBE_1_12_0_TUNE, PROBE_1_11_0_TUNE
    assert dataclasses.replace(t, sibling_shared_only=False) == old
    assert launch_shared_tokens(131072, 1, t) == 0 and launch_shared_tokens(131072, 2, t) == 131072
    assert launch_shared_tokens(None, 1, t) is None and launch_shared_tokens(131072, 1, old) == 131072
    assert page_blocks(1, 8, 4, 1, 131072, 131200, 132, old)["splits"] == 129
    got = page_blocks(1, 8, 4, 1, 131072, 131200, 132, t)
    assert (got["splits"], got["tokens_per_split"]) == (33, 4032) == decode_launch(1, 8, 4, 131200, 0, 132, t)[:2]
    assert page_blocks(2, 8, 4, 2, 131072, 131200, 132, t)["splits"] != 33


@given(work=st.integers(1, 3 * 132), tokens=st.integers(1024, 300_000), sms=st.sampled_from([78, 114, 132]))
@settings(max_examples=300, deadline=None)
def test_the_streaming_split_keeps_its_programs_within_the_target_and_its_splits_long(work, tokens, sms):
    from cascade_plan.own_kernel_launch import stream_splits

    t = DEFAULT_TUNE
    splits, tps = stream_splits(work, tokens, sms, t)
    assert tps % t.decode_block_n == 0 and splits * tps >= tokens > (splits - 1) * tps
    assert splits == 1 or (work * splits <= t.stream_programs_per_sm * sms and tps >= t.stream_min_tokens)


def test_a_tiny_launch_of_many_splits_takes_the_fused_merge_cap_where_it_still_fills_two_programs_per_sm():
    """H100 (132 SMs). 4 sequences x 8 KV heads at 4K + 128 (32 work items, tiny): the base target gives 17 splits of
    256 tokens on the short tile, merged by a merge kernel (probe 1.8.0); since 1.9.0 the cap of 12 splits rounds to
    11 of 384 (whole 64-token tiles), merged by their own last programs, on the base tile, which prefetches: 352
    programs, within 3 per SM. 2 x 8 (16 x 12 = 192 < 264) and one sequence x 1 KV head keep their splits, and so
    does a context past the tiny launch's 8K."""
    from cascade_plan.own_kernel_launch import decode_prefetch, merge_capped_splits

    t, old = DEFAULT_TUNE, PROBE_1_8_0_TUNE
    assert decode_launch(4, 8, 1, 4224, 4096, 132, old) == (17, 256, False)
    assert decode_launch(4, 8, 1, 4224, 4096, 132, t) == (11, 384, False)
    assert decode_tile(32, 11, 384, False, 132, t) == (64, 3, 2) and decode_prefetch(32, 11, 384, False, 132, t)
    assert not decode_prefetch(32, 11, 384, False, 132, old)
    assert decode_fused_merge(11, 1, False, t) and not decode_fused_merge(17, 1, False, t)
    assert page_blocks(4, 8, 1, 4, 4096, 4224, 132, t)["page_block_seqs"] == 1       # 352 < 4 x 132: no blocks
    assert page_blocks(4, 8, 1, 4, 4096, 4224, 132, old)["page_block_seqs"] == 4
    for args in ((2, 8, 4, 4224, 0), (1, 1, 8, 4224, 0), (4, 8, 4, 16512, 0)):
        assert decode_launch(*args, 132, t) == decode_launch(*args, 132, old)
    assert merge_capped_splits(32, 4224, 17, 256, 132, old) == (17, 256)


@given(work=st.integers(1, 64), tokens=st.integers(1, 9000), sms=st.sampled_from([78, 114, 132]))
@settings(max_examples=300, deadline=None)
def test_the_capped_tiny_launch_covers_its_tokens_in_at_most_the_cap(work, tokens, sms):
    from cascade_plan.own_kernel_launch import decode_splits, merge_capped_splits, tiny_launch

    t = DEFAULT_TUNE
    s0, t0 = decode_splits(work, tokens, sms, t.decode_block_n, t)
    s, tps = merge_capped_splits(work, tokens, s0, t0, sms, t)
    assert tps % t.decode_block_n == 0 and s * tps >= tokens > (s - 1) * tps
    if (s, tps) != (s0, t0):
        assert tiny_launch(work, tokens, t) and s <= t.fused_merge_max_splits < s0
        assert work * t.fused_merge_max_splits >= t.tiny_fused_programs_per_sm * sms


def test_a_base_tile_prefetches_wherever_its_launch_has_at_most_three_programs_per_sm():
    """H100. Since 1.9.0 (prefetch_max_programs_per_sm = 3): 16 sequences x 8 KV heads at 256 + 128 (one split of 384
    tokens, 128 programs) and one sequence x 1 KV head at 32K + 128 (103 splits of 320) prefetch; one sequence x 8
    KV heads at 16K + 128 (52 splits of 320: 416 programs, more than 396) does not, nor does the short tile."""
    from cascade_plan.own_kernel_launch import decode_prefetch

    t, old = DEFAULT_TUNE, PROBE_1_8_0_TUNE
    assert decode_launch(16, 8, 4, 384, 0, 132, t) == (1, 384, False)
    assert decode_launch(1, 1, 8, 32896, 0, 132, t) == (103, 320, False)
    assert decode_launch(1, 8, 4, 16512, 0, 132, t) == (52, 320, False)
    for work, s, tps, want in ((128, 1, 384, True), (1, 103, 320, True), (8, 52, 320, False), (8, 33, 128, False)):
        assert decode_prefetch(work, s, tps, False, 132, t) is want
        assert decode_prefetch(work, s, tps, False, 132, old) is False


def test_twelve_query_heads_form_blocks_of_two_in_a_wide_dot_on_128_token_tiles_only():
    """H100 shapes of the regimes grid over shared pages, 12 query heads per KV head (4 KV heads): 128 sequences at
    16K + 128 run the long-context tile (3 splits of 5,504 tokens in 128-token tiles) and form blocks of two in a
    32-row dot; at 1K + 128 the base tile (2 splits of 576 in 64-token tiles) keeps none, nor does any launch where
    the tune turns the rule off. Eight query heads per KV head fit two sequences in 16 rows already. (Probe 1.14.0's
    tune: probe 1.15.0 takes the long-context launch in blocks of four on 64-token tiles there.)"""
    from cascade_plan.own_kernel_launch import decode_block_g
    from cascade_plan.own_kernel_pages import page_group_seqs
    from cascade_plan.own_kernel_tunes import PROBE_1_9_0_TUNE, PROBE_1_14_0_TUNE

    t, off = PROBE_1_14_0_TUNE, PROBE_1_9_0_TUNE
    long_ctx = page_blocks(128, 4, 12, 128, 16384, 16512, 132, t)
    assert (long_ctx["splits"], long_ctx["tokens_per_split"], long_ctx["page_block_seqs"]) == (3, 5504, 2)
    assert long_ctx["grouped_programs"] == 1.0 and long_ctx["mean_block_seqs"] == 2.0
    assert page_blocks(128, 4, 12, 128, 16384, 16512, 132, DEFAULT_TUNE)["page_block_seqs"] == 4
    assert page_blocks(128, 4, 12, 128, 16384, 16512, 132, off)["page_block_seqs"] == 1
    assert page_blocks(128, 4, 12, 128, 1024, 1152, 132, t)["page_block_seqs"] == 1
    assert decode_block_g(12) == 16 and decode_block_g(12, 2) == 32 and decode_block_g(8, 2) == 16
    assert page_group_seqs(128, 12, t, 128) == 2 and page_group_seqs(128, 12, t, 64) == 1
    assert page_group_seqs(128, 12, t) == 1 and page_group_seqs(128, 16, t, 128) == 2
    assert page_group_seqs(128, 8, t, 128) == page_group_seqs(128, 8, off, 128) == 2
    # wide_dot_seqs 4: four sequences of 12 or 16 query heads in a 64-row dot where the batch divides by four
    four = dataclasses.replace(t, wide_dot_seqs=4)
    assert decode_block_g(12, 4) == 64 and decode_block_g(16, 4) == 64
    assert page_group_seqs(128, 12, four, 128) == page_group_seqs(128, 16, four, 128) == 4
    assert page_group_seqs(6, 12, four, 128) == 2 and page_group_seqs(128, 12, four, 64) == 1
    assert page_group_seqs(128, 8, four, 128) == 2      # 8 query heads: two sequences fill the 16-row dot already


def test_head_dim_256_runs_64_token_tiles_and_a_base_tile_that_never_prefetches():
    """H100 shapes of the regimes grid, 4 KV heads x 2 query heads: at head dim 256 the batch-filled and long-context
    tiles hold 64 tokens (128 at head dim 128; the long-context launch then splits for its own tile: 8 sequences at
    16K + 128, 26 splits of 640 -> 29 of 576) and the base tile, which prefetched page numbers at 3 programs per SM
    or fewer, never does. Probe 1.10.0's tune launches head dim 256 as 128 (but for the base tile's warps), and the
    rule is the identity below its head dim and applied twice."""
    from cascade_plan.own_kernel_launch import tune_at_head_dim
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_10_0_TUNE, PROBE_1_12_0_TUNE

    def launch(batch, seq_len, shared, head_dim, tune=PROBE_1_12_0_TUNE):
        la = decode_launch_plan(batch, 4, 2, seq_len, shared, 132, tune, head_dim=head_dim)
        return la.splits, la.tokens_per_split, la.block_n, la.stages, la.warps, la.prefetch

    assert launch(128, 16512, 16384, 128) == (3, 5504, 128, 2, 4, True)
    assert launch(128, 16512, 16384, 256) == (3, 5504, 64, 2, 4, True)
    assert launch(8, 16512, 16384, 128) == (26, 640, 128, 2, 4, True)
    assert launch(8, 16512, 16384, 256) == (29, 576, 64, 2, 4, True)
    assert launch(1024, 1152, 1024, 256)[2:4] == (64, 2)            # batch-filled, unsplit
    assert launch(8, 4224, 4096, 128) == (11, 384, 64, 3, 2, True)     # base tile, 352 programs
    assert launch(8, 4224, 4096, 256) == (11, 384, 64, 3, 4, False)
    old = PROBE_1_10_0_TUNE
    for args in ((128, 16512, 16384), (8, 16512, 16384), (8, 4224, 4096)):
        assert launch(*args, 256, old)[:3] == launch(*args, 128, old)[:3]
        assert launch(*args, 256, old)[5] == launch(*args, 128, old)[5]
    assert tune_at_head_dim(DEFAULT_TUNE, 128) is DEFAULT_TUNE and tune_at_head_dim(old, 256) is old
    wide = tune_at_head_dim(DEFAULT_TUNE, 256)
    assert tune_at_head_dim(wide, 256) == wide and wide != DEFAULT_TUNE
    assert [tile_of(k, DEFAULT_TUNE, 256)[0] for k in TILE_KINDS] == [64, 64, 64, 64]
    assert [tile_of(k, DEFAULT_TUNE, 128)[0] for k in TILE_KINDS] == [64, 128, 128, 64]


def test_head_dim_256_on_deeper_tiles_splits_for_them_and_prefetches_everywhere():
    """wide_head_stages 3 with 32-token tiles, 4 KV heads x 2 query heads on 132 SMs: 8 sequences over 4,224 private
    tokens are a tiny launch (32 work items) split down to 128-token splits, 17 of 256 for 4 x 132 programs, then cut
    to the fused merge's 12, in whole tiles: ceil(4,224 / 12) = 352 tokens, a multiple of 32 (of 64 it was 384, 11
    splits). Each base, batch-filled and long-context tile holds 32 tokens in 3 stages and prefetches, the short one
    is as before; head dim 128 ignores the fields, and the rule applied twice is the same tune."""
    from cascade_plan.own_kernel_launch import tune_at_head_dim, whole_tile_splits
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_14_0_TUNE as P14

    tune = dataclasses.replace(P14, wide_head_stages=3, wide_head_tile_n=32)

    def launch(batch, seq_len, shared, head_dim, t=tune):
        la = decode_launch_plan(batch, 4, 2, seq_len, shared, 132, t, head_dim=head_dim)
        return la.splits, la.tokens_per_split, la.block_n, la.stages, la.warps, la.prefetch

    assert whole_tile_splits(4224, 12, 32) == (12, 352) and whole_tile_splits(4224, 12, 64) == (11, 384)
    assert launch(8, 4224, 0, 256) == (12, 352, 32, 3, 4, True)
    assert launch(8, 4224, 0, 256, P14) == (11, 384, 64, 3, 4, False)
    assert launch(128, 16512, 0, 256) == (3, 5504, 32, 3, 4, True)                 # long splits, base tile
    assert launch(1024, 1536, 512, 256) == (1, 1536, 32, 3, 4, True)                # batch-filled
    assert launch(8, 16512, 16384, 256)[2:] == (32, 3, 4, True)                     # long-context
    for args in ((8, 4224, 0), (128, 16512, 0), (8, 16512, 16384)):
        assert launch(*args, 128) == launch(*args, 128, P14)
    assert [tile_of(k, tune, 256) for k in TILE_KINDS] == [(32, 3, 4)] * 3 + [tile_of("short", P14, 256)]
    wide = tune_at_head_dim(tune, 256)
    assert tune_at_head_dim(wide, 256) == wide


def test_capped_head_dim_256_tiles_only_on_private_bf16_base_tiles_of_short_splits():
    """wide_head_stages_max_tokens 512: 8 sequences x 4 KV heads over 4,224 private tokens launch 11 base-tile splits
    of 384 on 64-token tiles, so they take the 32-token 3-stage tile (12 of 352, prefetching); over a known shared
    prefix, over an fp8 cache (tune_at_kv_dtype), at head dim 128, over splits of 576 (128 sequences at 1K + 128) and
    on the long-context tile (128 at 16K + 128) the launch is the tune's own."""
    from cascade_plan.own_kernel_pages import tune_at_kv_dtype
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_14_0_TUNE as P14

    tune = dataclasses.replace(P14, wide_head_stages=3, wide_head_tile_n=32, wide_head_stages_max_tokens=512)

    def both(batch, seq_len, shared, head_dim=256, kv="bf16"):
        return tuple(decode_launch_plan(batch, 4, 2, seq_len, shared, 132, tune_at_kv_dtype(t, kv), head_dim=head_dim)
                     for t in (tune, P14))

    capped, own = both(8, 4224, 0)
    assert own[:2] == (11, 384) and (own.block_n, own.prefetch) == (64, False)
    assert capped[:2] == (12, 352) and (capped.block_n, capped.stages, capped.prefetch) == (32, 3, True)
    for args in ((8, 4224, 4096), (128, 1152, 0), (128, 16512, 0)):
        capped, own = both(*args)
        assert capped == own
    capped, own = both(128, 1152, 0)
    assert own[:2] == (2, 576)
    assert both(128, 16512, 0)[1].long_tile
    for capped, own in (both(8, 4224, 0, kv="fp8"), both(8, 4224, 0, head_dim=128)):
        assert capped == own
    assert tune_at_kv_dtype(tune_at_kv_dtype(tune, "fp8"), "fp8") == tune_at_kv_dtype(tune, "fp8")


def test_the_planners_page_blocks_follow_the_launch_of_the_models_head_dim():
    """256 sequences x 4 KV heads sharing 4,160 of 4,224 tokens fill the GPU unsplit: at head dim 128 the 128-token
    batch-filled tile's whole tiles cover 4,096 shared tokens, at head dim 256 its 64-token tile all 4,160, so blocks
    of four spare each sequence 3/4 of a different run; the planner's page blocks, its busiest program and the
    host's launch record all follow the head dim they are given."""
    from cascade_plan.cost.ops.page_blocks import PageBlocks, longest_program, saved_tokens

    rule = PageBlocks(132, DEFAULT_TUNE)
    assert float(saved_tokens(rule, 256, 4, 2, 256, 4160, 4224)) == 4096 * 3 / 4
    assert float(saved_tokens(rule, 256, 4, 2, 256, 4160, 4224, head_dim=256)) == 4160 * 3 / 4
    assert float(longest_program(rule, 256, 4, 2, 256, 4160, 4224, head_dim=256)) == 4160 + 4 * 64
    assert float(longest_program(rule, 256, 4, 2, 256, 4160, 4224)) == 4096 + 4 * 128
    got = saved_tokens(rule, 256, 4, 2, 256, 4160, 4224, head_dim=np.array([128, 256, 64]))
    assert got.tolist() == [3072.0, 3120.0, 3072.0]
    rec = page_blocks(256, 4, 2, 256, 4160, 4224, 132, DEFAULT_TUNE, head_dim=256)
    assert (rec["splits"], rec["page_block_seqs"], rec["page_prefetch"]) == (1, 4, True)


def test_fp8_pairs_only_where_few_programs_stream_long_loops():
    """decode_fp8_pairs, by hand on 132 SMs with a cap of 2.25 working programs per SM (297): 8 sequences x 8 KV
    heads x 4 splits = 256 programs read pairs, 64 x 8 x 3 = 1,536 do not, nor 64 x 8 x 3 in blocks of 4 (384);
    8 x 8 x 17 in blocks of 4 is 272 working programs (a block's others exit): pairs. Head dim 256 is past the cap of
    128; no cap reads pairs everywhere; off, or without fp16 dots, never."""
    import dataclasses

    from cascade_plan.own_kernel_pages import decode_fp8_pairs
    from cascade_plan.own_kernel_tunes import PROBE_1_12_0_TUNE

    on = dataclasses.replace(PROBE_1_12_0_TUNE, fp8_pairs=True)
    capped = dataclasses.replace(on, fp8_pairs_max_programs_per_sm=2.25, fp8_pairs_max_head_dim=128)
    # probe 1.13.0's rule
    t = DEFAULT_TUNE
    assert (t.fp8_pairs, t.fp8_pairs_max_programs_per_sm, t.fp8_pairs_max_head_dim) == (True, 2.25, 128)
    assert decode_fp8_pairs(64, 4, 1, 128, 132, capped)
    assert not decode_fp8_pairs(512, 3, 1, 128, 132, capped)
    assert not decode_fp8_pairs(512, 3, 4, 128, 132, capped)
    assert decode_fp8_pairs(64, 17, 4, 128, 132, capped)
    assert decode_fp8_pairs(99, 3, 1, 128, 132, capped) and not decode_fp8_pairs(100, 3, 1, 128, 132, capped)
    assert not decode_fp8_pairs(64, 4, 1, 256, 132, capped)
    assert decode_fp8_pairs(512, 3, 1, 256, 132, on)
    assert not decode_fp8_pairs(64, 4, 1, 128, 132, PROBE_1_12_0_TUNE)
    assert not decode_fp8_pairs(64, 4, 1, 128, 132, dataclasses.replace(on, fp8_dot_fp16=False))


def test_block_fill_splits_a_short_launchs_prefix_for_blocks_at_head_dim_256_only():
    """8 sequences x 4 KV heads at 4,096 shared + 128 tokens, 132 SMs: the base launch gives 11 splits, 352 programs,
    fewer than the 4 x 132 page blocks need. Filling 1 working program per SM in splits of 256+ tokens: the 4,096
    shared tokens in min(ceil(132 / 4 blocks of 8), 4,096 // 256) = 16 splits of 256, 17 with the tail; at least
    ceil(528 / 32) = 17 splits too. 17 x 32 = 544 programs leave blocks of 4 (544 < 8 x 132, >= 4 x 132)."""
    from cascade_plan.own_kernel_pages import block_fill_splits
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_12_0_TUNE

    fill = DEFAULT_TUNE     # probe 1.13.0's: 1 per SM, 256+ tokens, head dim 256
    assert decode_launch_plan(8, 4, 2, 4224, 4096, 132, PROBE_1_12_0_TUNE, head_dim=256)[:2] == (11, 384)
    assert block_fill_splits(8, 4, 2, 4224, 4096, 11, 132, fill, 256) == (17, 256)
    la = decode_launch_plan(8, 4, 2, 4224, 4096, 132, fill, head_dim=256)
    assert (la.splits, la.tokens_per_split, la.seqs) == (17, 256, 4)
    assert page_blocks(8, 4, 2, 8, 4096, 4224, 132, fill, head_dim=256)["grouped_programs"] == 16 / 17
    # not at head dim 128, not without a known shared prefix of more than half the context, not where it is off
    assert block_fill_splits(8, 4, 2, 4224, 4096, 11, 132, fill, 128) is None
    assert block_fill_splits(8, 4, 2, 4224, 2112, 11, 132, fill, 256) is None
    assert block_fill_splits(8, 4, 2, 4224, None, 11, 132, fill, 256) is None
    assert block_fill_splits(8, 4, 2, 4224, 4096, 11, 132, PROBE_1_12_0_TUNE, 256) is None
    # one query head per KV head too many for a block: none
    assert block_fill_splits(8, 4, 16, 4224, 4096, 11, 132, fill, 256) is None


def test_an_fp8_cache_streams_at_its_own_target():
    """fp8_stream_programs_per_sm: 8 sequences x 8 KV heads over 128K + 128 private tokens stream in
    min(2 x 132 // 64, 131,200 // 1,024) = 4 splits over bf16 and min(4 x 132 // 64, ...) = 8 over fp8; a batch
    of 400 (sequence, KV head) items, above 3 x 132 and within 4 x 132, streams over fp8 only (unsplit: 4 x 132 //
    400 = 1), and over bf16 takes the long-context launch (3 splits)."""
    from cascade_plan.own_kernel_pages import tune_at_kv_dtype
    from cascade_plan.own_kernel_tunes import PROBE_1_12_0_TUNE

    tune = DEFAULT_TUNE     # probe 1.13.0's: 4 per SM over fp8
    fp8 = tune_at_kv_dtype(tune, "fp8")
    assert (fp8.stream_programs_per_sm, fp8.stream_max_programs_per_sm) == (4, 4)
    assert tune_at_kv_dtype(fp8, "fp8") == fp8 and tune_at_kv_dtype(tune, "bf16") == tune
    assert tune_at_kv_dtype(PROBE_1_12_0_TUNE, "fp8") == PROBE_1_12_0_TUNE
    assert decode_launch(8, 8, 4, 131200, 0, 132, tune_at_kv_dtype(tune, "bf16"))[0] == 4
    assert decode_launch(8, 8, 4, 131200, 0, 132, fp8)[0] == 8
    assert decode_launch(50, 8, 4, 131200, 0, 132, fp8)[::2] == (1, False)
    assert decode_launch(50, 8, 4, 131200, 0, 132, tune)[::2] == (3, True)


def test_a_private_target_at_head_dim_256_leaves_shared_pages_alone():
    """wide_head_private_programs_per_sm 2: 8 sequences x 4 KV heads over 4,224 private tokens at head dim 256 split
    for 2 x 132 programs, ceil(264 / 32) = 9 splits (of ceil(4,224 / 9) = 470 -> 512 tokens; ceil(4,224 / 512) = 9),
    not the base target's 11; the same tokens over a known shared prefix keep their launch (block fill's 17), a
    prefix unknown to the caller (None) too, and head dim 128 ignores the field."""
    from cascade_plan.own_kernel_pages import tune_at_launch
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_14_0_TUNE as P14

    tune = dataclasses.replace(P14, wide_head_private_programs_per_sm=2)
    assert decode_launch_plan(8, 4, 2, 4224, 0, 132, P14, head_dim=256)[:2] == (11, 384)
    assert decode_launch_plan(8, 4, 2, 4224, 0, 132, tune, head_dim=256)[:2] == (9, 512)
    for shared in (4096, None):
        assert (decode_launch_plan(8, 4, 2, 4224, shared, 132, tune, head_dim=256)
                == decode_launch_plan(8, 4, 2, 4224, shared, 132, P14, head_dim=256))
    assert decode_launch_plan(8, 4, 2, 4224, 0, 132, tune, head_dim=128) == decode_launch_plan(
        8, 4, 2, 4224, 0, 132, P14, head_dim=128)
    assert tune_at_launch(tune, 256, 0).target_programs_per_sm == 2
    assert tune_at_launch(tune, 256, 4096).target_programs_per_sm == P14.target_programs_per_sm


def test_wide_dot_targets_apply_over_shared_pages_at_9_to_16_query_heads():
    """wide_dot_programs_per_sm 2: 8 sequences x 4 KV heads (12 query heads each, blocks of two in the 32-row dot)
    over a 16K shared prefix + 128 tokens: the base target's ceil(2 x 132 / 32) = 9 splits fall short of the
    long-context target's ceil(4 x 132 / 32) = 17 (of ceil(16,512 / 17) = 972 -> 1,024 tokens, on 128-token tiles),
    so the launch takes the long tile in 17 splits, not the default's 26 of 640 (long target 8). Private pages, 8
    query heads per KV head (one sequence's rows leave the 16-row dot half empty) and head dim 256's tiles keep
    theirs."""
    from cascade_plan.own_kernel_pages import tune_at_launch
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_13_0_TUNE as base  # the launch before the rule

    tune = dataclasses.replace(base, wide_dot_programs_per_sm=2)
    assert decode_launch_plan(8, 4, 12, 16512, 16384, 132, base)[:4] == (26, 640, True, 128)
    launch = decode_launch_plan(8, 4, 12, 16512, 16384, 132, tune)
    assert launch[:4] == (17, 1024, True, 128) and launch.seqs == 2
    assert tune_at_launch(tune, 128, 16384, 12).target_programs_per_sm == 2
    assert tune_at_launch(tune, 128, 16384, 16).long_programs_per_sm == 4
    for args in ((8, 4, 12, 16512, 0), (8, 4, 8, 16512, 16384)):
        assert decode_launch_plan(*args, 132, tune) == decode_launch_plan(*args, 132, base)
    assert decode_launch_plan(8, 4, 12, 16512, 16384, 132, tune, head_dim=256) == decode_launch_plan(
        8, 4, 12, 16512, 16384, 132, base, head_dim=256)
    assert tune_at_launch(tune, 128, None, 12) == tune   # a prefix the caller does not know


def test_wide_dot_targets_keyed_on_a_long_launch_of_16_splits_or_more():
    """wide_dot_min_splits 16: 8 x 4 KV heads at 16K + 128 (the default's long-context launch, 26 splits of 640) take
    the targets (17 of 1,024, as without the key); 256 sequences x 1 KV head at 2K + 128 (the default's long launch
    in 4 splits of 640) and 32 x 2 at 4K + 128 (base tile, 9 splits: no long launch) keep the default's."""
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_13_0_TUNE as base  # the launch before the rule

    keyed = dataclasses.replace(base, wide_dot_programs_per_sm=2, wide_dot_min_splits=16)
    everywhere = dataclasses.replace(base, wide_dot_programs_per_sm=2)
    assert decode_launch_plan(8, 4, 12, 16512, 16384, 132, keyed) == decode_launch_plan(8, 4, 12, 16512, 16384, 132,
                                                                                         everywhere)
    assert decode_launch_plan(8, 4, 12, 16512, 16384, 132, keyed)[:2] == (17, 1024)
    for args in ((256, 1, 12, 2176, 2048), (32, 2, 12, 4224, 4096)):
        assert decode_launch_plan(*args, 132, keyed) == decode_launch_plan(*args, 132, base)
        assert decode_launch_plan(*args, 132, everywhere) != decode_launch_plan(*args, 132, base)
    assert decode_launch_plan(256, 1, 12, 2176, 2048, 132, base)[:3] == (4, 640, True)


def test_wide_dot_targets_only_over_short_private_tails_and_on_by_default():
    """wide_dot_max_private_tokens 512 (probe 1.14.0 on): 16 sequences x 2 KV heads of 16 query heads at
    16K + 512 take the keyed targets (probe 1.13.0's ceil(8 x 132 / 32) = 33 long-context splits of 512 over 16,896
    tokens become ceil(4 x 132 / 32) = 17 of 1,024), at 16K + 1,024 (a 1,024-token tail; 33 splits of 528 round up
    to 28 of 640) keep probe 1.13.0's. The key and
    the cap both hold: 2 KV heads x 256 sequences at 2K + 128 (4 long splits) keep theirs too."""
    from cascade_plan.own_kernel_pages import tune_at_launch
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tunes import PROBE_1_13_0_TUNE as base
    from cascade_plan.own_kernel_tunes import PROBE_1_14_0_TUNE as P14

    assert P14 == dataclasses.replace(base, wide_dot_programs_per_sm=2, wide_dot_min_splits=16,
                                               wide_dot_max_private_tokens=512)
    assert decode_launch_plan(16, 2, 16, 16896, 16384, 132, base)[:3] == (33, 512, True)
    assert decode_launch_plan(16, 2, 16, 16896, 16384, 132, P14)[:3] == (17, 1024, True)
    assert decode_launch_plan(16, 2, 16, 17408, 16384, 132, base)[:3] == (28, 640, True)
    assert decode_launch_plan(16, 2, 16, 17408, 16384, 132, P14) == decode_launch_plan(
        16, 2, 16, 17408, 16384, 132, base)
    assert decode_launch_plan(256, 1, 12, 2176, 2048, 132, P14) == decode_launch_plan(
        256, 1, 12, 2176, 2048, 132, base)
    # a launch the caller gives no length for keeps the tune: the cap cannot be checked
    assert tune_at_launch(P14, 128, 16384, 16) == P14
