"""The page-aware per-sequence decode (paged_decode_kernel with SEQS > 1) on the CPU, through Triton's interpreter:
consecutive sequences whose block-table rows name the same physical pages read them once, and the result is the
float32 reference's whatever the pages, lengths or splits."""

from __future__ import annotations

import dataclasses

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from cascade_plan.own_kernel_pages import page_group_seqs  # noqa: E402
from cascade_plan.own_kernel_tune import TuneParams  # noqa: E402
from kernels_probe.attention.data import build_data, reference_output  # noqa: E402
from kernels_probe.attention.grid import AttentionConfig  # noqa: E402
from kernels_probe.attention.reference import max_rel_err, reference_paged  # noqa: E402
from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan  # noqa: E402

TINY = TuneParams(decode_block_n=16, prefix_block_n=16, min_tokens_per_split=16,
                  decode_min_tokens_per_split=16, prefix_max_block_m=16,
                  long_block_n=0, decode_short_block_n=16, page_block_min_programs_per_sm=0,
                  decode_shared_split=False)   # launch rules for 132 SMs, not the interpreter's 2
TOL = 1e-2


def _cfg(**kw):
    base = dict(prefix_tokens=64, group_size=4, n_groups=2, suffix_tokens=8, q_per_kv=4, num_kv_heads=2,
                head_dim=16, page_size=8, kv_dtype="bf16")
    base.update(kw)
    return AttentionConfig(**base)


def _run(d, table, T, *, splits, tune=TINY, shared=None):
    out = torch.full_like(d.q, float("nan"))
    plan = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, T, out, sm_count=2, tune=tune,
                      force_splits=splits, shared_prefix_tokens=shared)
    plan.grouped = torch.full((d.q.shape[0] * d.k_cache.shape[2] * plan.splits,), -1, dtype=torch.int8)
    plan()
    return out, plan


def test_the_block_size_fits_the_padded_dot_and_divides_the_batch():
    t = TuneParams()
    assert [page_group_seqs(64, g, t) for g in (1, 2, 4, 6, 8, 12, 16)] == [16, 8, 4, 2, 2, 1, 1]
    assert page_group_seqs(6, 4, t) == 2 and page_group_seqs(7, 4, t) == 1
    assert page_group_seqs(64, 4, dataclasses.replace(t, decode_page_group=1)) == 1


# the base tile over every split, with page numbers loaded an iteration ahead (TINY's splits are short tiles: none)
PREFETCH = dataclasses.replace(TINY, decode_short_tokens=0, prefetch_min_tokens=0)


# the kernel's other dot layouts: transposed dots (decode_swap_ab), and an fp8 cache read as int16 pairs of head dims
TRANSPOSED = dataclasses.replace(TINY, decode_swap_ab=True)
FP8_PAIRS = dataclasses.replace(TINY, fp8_pairs=True)


@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("q_per_kv", [4, 1, 6])
@pytest.mark.parametrize("tune,kv_dtype", [(TINY, "bf16"), (PREFETCH, "bf16"), (TRANSPOSED, "bf16"),
                                           (FP8_PAIRS, "fp8")],
                         ids=["loaded-in-loop", "prefetched", "transposed", "fp8-pairs"])
def test_shared_pages_are_read_once_per_block_and_match_the_reference(splits, q_per_kv, tune, kv_dtype):
    d = build_data(_cfg(q_per_kv=q_per_kv, kv_dtype=kv_dtype), "cpu", seed=3)
    ref = reference_output(d)
    T = 72
    out, plan = _run(d, d.shared_table, T, splits=splits, tune=tune)
    assert plan.prefetch == (tune is PREFETCH)
    assert plan.seqs == page_group_seqs(8, q_per_kv, TINY) > 1
    assert max_rel_err(out, ref) < TOL
    g = plan.grouped.view(8, 2, plan.splits)
    # a split whose tokens lie in the shared prefix reads it once per block: blocks of up to 4 sequences, the
    # prompt's (with one query head per KV head 8 fit the dot, but only 4 share pages); the last split of 3 (48-72)
    # holds 16 shared tokens against 4 x 8 private ones, so every program there attends its own sequence
    assert (g[..., 0] == min(plan.seqs, 4)).all()
    if splits == 3:
        assert (g[..., 2] == 0).all()
    # the row's record of it: the share of programs a block served and their mean block size
    rec = plan.launch_record()
    assert rec["page_block_seqs"] == plan.seqs and rec["splits"] == plan.splits
    assert rec["grouped_programs"] == pytest.approx(float((g > 0).float().mean()))
    assert rec["mean_block_seqs"] == min(plan.seqs, 4)
    assert (rec["grouped_programs"] == 1.0) == (splits == 1)
    # the same rows over private copies of the prefix: nothing shared, every program its own sequence
    out_d, plan_d = _run(d, d.dup_table, T, splits=splits, tune=tune)
    assert (plan_d.grouped == 0).all()
    assert max_rel_err(out_d, ref) < TOL


def test_a_launch_that_can_form_blocks_records_them_unasked():
    """No test hook set: a launch whose page_block_seqs allows blocks still writes each program's choice, which
    the probe row records; a launch of the plain kernel has nothing to write."""
    d = build_data(_cfg(), "cpu", seed=5)
    out = torch.full_like(d.q, float("nan"))
    plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 72, out, sm_count=2, tune=TINY,
                      force_splits=1, shared_prefix_tokens=None)
    assert plan.seqs > 1 and plan.grouped is not None
    plan()
    assert max_rel_err(out, reference_output(d)) < TOL
    assert plan.launch_record()["grouped_programs"] == 1.0
    plain = DecodePlan(d.q, d.k_cache, d.v_cache, d.dup_table, d.seq_lens, 72, out, sm_count=2, tune=TINY,
                       force_splits=1, shared_prefix_tokens=0)
    assert plain.seqs == 1 and plain.grouped is None and "grouped_programs" not in plain.launch_record()


@pytest.mark.parametrize("chunk", [128, 2])
def test_blocks_are_found_per_split_from_the_pages_alone(chunk, monkeypatch):
    """Two sequences of a block share only their first 24 tokens, on pages scattered through the cache; the
    others share nothing. Lengths differ (a row that ends early is masked on its own). chunk: block-table entries
    compared per step of the scan (2: the first difference lies in a later step than the first)."""
    import kernels_probe.attention.triton_plans as plans

    monkeypatch.setattr(plans, "CHECK_CHUNK_PAGES", chunk)
    torch.manual_seed(0)
    B, HKV, G, D, PS = 4, 2, 4, 16, 8
    k = torch.randn(40, PS, HKV, D, dtype=torch.float16)
    v = torch.randn(40, PS, HKV, D, dtype=torch.float16)
    q = torch.randn(B, HKV * G, D, dtype=torch.float16)
    pages = torch.randperm(40)
    bt = pages[:24].view(B, 6).clone()
    bt[1, :3] = bt[0, :3]
    bt = bt.int().contiguous()
    lens = torch.tensor([48, 41, 30, 48], dtype=torch.int32)
    ref = reference_paged(q, k, v, bt, lens)
    out = torch.full_like(q, float("nan"))
    plan = DecodePlan(q, k, v, bt, lens, 48, out, sm_count=2, tune=dataclasses.replace(TINY, decode_page_group=2),
                      force_splits=1)
    plan.grouped = torch.full((B * HKV,), -1, dtype=torch.int8)
    plan()
    assert plan.seqs == 2
    assert max_rel_err(out, ref) < 2e-3
    # block (0, 1): 16 tokens in whole tiles shared, against 32 + 25 private: not worth it; block (2, 3): none shared
    assert (plan.grouped == 0).all()
    bt[1, :5] = bt[0, :5]       # now 40 shared tokens (32 in whole tiles) against 16 + 9 private
    ref = reference_paged(q, k, v, bt, lens)
    plan()
    assert max_rel_err(out, ref) < 2e-3
    assert plan.grouped.view(B, HKV).tolist() == [[2, 2], [2, 2], [0, 0], [0, 0]]


def test_fp8_pages_and_the_cascade_suffix_pass_stay_per_sequence():
    d = build_data(_cfg(kv_dtype="fp8", q_per_kv=8, num_kv_heads=1), "cpu", seed=5)
    ref = reference_output(d)
    out, plan = _run(d, d.shared_table, 72, splits=2, tune=dataclasses.replace(TINY, fp8_dot_fp16=True))
    assert plan.seqs == 2 and (plan.grouped == 2).all()
    assert max_rel_err(out, ref) < TOL
    out_c = torch.full_like(d.q, float("nan"))
    casc = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, 64, 4, 2)], d.suffix_table, d.suffix_lens, 8,
                       out_c, sm_count=2, tune=TINY)
    assert casc.suffix_plan is not None and casc.suffix_plan.seqs == 1
    casc()
    assert max_rel_err(out_c, ref) < TOL


def test_an_fp8_launch_records_whether_it_read_pairs():
    """8 sequences x 1 KV head split in 2 on 2 SMs: 16 programs, 8 per SM, read fp8 converted under a cap of 4
    working programs per SM; over shared pages blocks of 2 halve the working ones to 4 per SM, and they read pairs
    (over private pages, known as such, no block). The row records which; a bf16 row records nothing."""
    d = build_data(_cfg(kv_dtype="fp8", q_per_kv=8, num_kv_heads=1), "cpu", seed=5)
    capped = dataclasses.replace(TINY, fp8_dot_fp16=True, fp8_pairs=True, fp8_pairs_max_programs_per_sm=4)
    ref = reference_output(d)
    for table, shared, pairs in ((d.shared_table, None, True), (d.dup_table, 0, False)):
        out, plan = _run(d, table, 72, splits=2, tune=capped, shared=shared)
        assert plan.pairs is pairs and plan.launch_record()["fp8_pairs"] is pairs
        assert max_rel_err(out, ref) < TOL
    bf16 = build_data(_cfg(), "cpu", seed=5)
    assert "fp8_pairs" not in _run(bf16, bf16.shared_table, 72, splits=2, tune=capped)[1].launch_record()


def test_private_pages_as_the_caller_knows_them_run_the_plain_kernel():
    d = build_data(_cfg(), "cpu", seed=2)
    ref = reference_output(d)
    out, plan = _run(d, d.shared_table, 72, splits=2, shared=0)
    assert plan.seqs == 1 and (plan.grouped == -1).all()   # SEQS == 1 records nothing
    assert max_rel_err(out, ref) < TOL


def test_a_split_at_the_shared_prefixs_end_forms_blocks_and_matches_the_reference():
    """Where the batch alone fills the GPU the launch is unsplit and its one split straddles the prefix's end, so no
    block forms (64 shared tokens hold fewer than two sequences' 40 private ones); decode_shared_split ends the first
    split at the prefix, whose blocks then read it once, and the host's page_blocks says so beforehand."""
    d = build_data(_cfg(suffix_tokens=40), "cpu", seed=5)
    ref = reference_output(d)
    tune = dataclasses.replace(TINY, decode_shared_split=True)
    assert _launch_over_64_shared(d, ref, 104, TINY) == (1, 112, 1)
    assert _launch_over_64_shared(d, ref, 104, tune) == (2, 64, 4)


def _launch_over_64_shared(d, ref, seq_len, tune):
    """Run DecodePlan over d's shared pages (64 shared tokens, sequences of seq_len), check it against the reference
    and its launch record against the host's page_blocks; (splits, tokens per split, page_block_seqs)."""
    from cascade_plan.own_kernel_blocks import page_blocks

    out = torch.full_like(d.q, float("nan"))
    plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, seq_len, out, sm_count=2, tune=tune,
                      shared_prefix_tokens=64)
    plan()
    assert max_rel_err(out, ref) < TOL
    rec = plan.launch_record()
    assert rec == page_blocks(8, 2, 4, 4, 64, seq_len, 2, tune)
    if plan.seqs > 1:      # blocks in the first split, none in the last
        assert rec["grouped_programs"] == 0.5 and rec["mean_block_seqs"] == 4.0
    return plan.splits, plan.tps, plan.seqs


def test_a_split_at_the_shared_prefix_then_one_to_the_end_forms_blocks_and_matches_the_reference():
    """Where equal splits at the prefix's end would be more than shared_split_max (64 shared tokens of 168: three),
    shared_head_split gives two: the prefix, whose blocks read it once, and the other 104 tokens, which the kernel's
    last split runs to each sequence's end (a partial last tile included). Without the rule, or with a floor above
    the prefix, the launch stays unsplit and forms no block; the host's page_blocks records what the kernel did."""
    d = build_data(_cfg(suffix_tokens=104), "cpu", seed=6)
    ref = reference_output(d)
    tune = dataclasses.replace(TINY, decode_shared_split=True, shared_head_min_tokens=32)
    assert _launch_over_64_shared(d, ref, 168, dataclasses.replace(tune, shared_head_min_tokens=0)) == (1, 176, 1)
    assert _launch_over_64_shared(d, ref, 168, dataclasses.replace(tune, shared_head_min_tokens=80)) == (1, 176, 1)
    assert _launch_over_64_shared(d, ref, 168, tune) == (2, 64, 4)


def test_two_sequences_of_twelve_query_heads_share_a_wide_dot_and_match_the_reference():
    """Twelve query heads per KV head fill the 16-row dot, so no block forms; wide_dot_block_n puts two sequences in
    a 32-row dot on a launch of 16-token tiles (not where it asks for 32), whose first program reads their shared
    pages once, and the result is the reference's."""
    d = build_data(_cfg(q_per_kv=12, num_kv_heads=1), "cpu", seed=7)
    ref = reference_output(d)
    for tune, seqs in ((TINY, 1), (dataclasses.replace(TINY, wide_dot_block_n=32), 1),
                       (dataclasses.replace(TINY, wide_dot_block_n=16), 2)):
        out, plan = _run(d, d.shared_table, 72, splits=2, tune=tune)
        assert plan.seqs == seqs
        assert max_rel_err(out, ref) < TOL
    # every program in blocks of two: split 0 lies inside the prefix, split 1's 16 shared tokens cover the block's
    # 2 x 8 private ones
    assert int((plan.grouped == 2).sum()) == 16


def test_four_sequences_of_twelve_query_heads_share_a_64_row_dot_and_match_the_reference():
    """wide_dot_seqs 4: blocks of four sequences of 12 query heads in a 64-row dot; over a prefix long enough for
    four private tails the block's first program reads the shared pages once for all 48 rows."""
    d = build_data(_cfg(prefix_tokens=128, q_per_kv=12, num_kv_heads=1, group_size=4, n_groups=2), "cpu", seed=11)
    ref = reference_output(d)
    tune = dataclasses.replace(TINY, wide_dot_block_n=16, wide_dot_seqs=4)
    out, plan = _run(d, d.shared_table, 136, splits=2, tune=tune)
    assert plan.seqs == 4
    assert max_rel_err(out, ref) < TOL
    assert int((plan.grouped == 4).sum()) > 0


def test_head_dim_256_launches_its_own_tile_and_matches_the_reference():
    """Head dim 256 under the current tune, on 2 SMs: 8 sequences x 2 KV heads fill them unsplit, so the launch runs
    the batch-filled tile over 328 tokens, 64 at a time at head dim 256 (128 at head dim 128); the result is the
    float32 reference's and the launch record is what the planner's page blocks give at that head dim."""
    from cascade_plan.own_kernel_blocks import page_blocks
    from cascade_plan.own_kernel_plan import decode_launch_plan
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE

    d = build_data(_cfg(head_dim=256, q_per_kv=2, prefix_tokens=320, suffix_tokens=8), "cpu", seed=7)
    ref = reference_output(d)
    out = torch.full_like(d.q, float("nan"))
    plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 328, out, sm_count=2,
                      tune=DEFAULT_TUNE, shared_prefix_tokens=320)
    plan()
    assert max_rel_err(out, ref) < TOL
    assert (plan.splits, plan.block_n, plan.prefetch) == (1, 64, True)
    assert decode_launch_plan(8, 2, 2, 328, 320, 2, DEFAULT_TUNE, head_dim=128).block_n == 128
    assert plan.launch_record() == page_blocks(8, 2, 2, 4, 320, 328, 2, DEFAULT_TUNE, head_dim=256)


def test_a_launch_short_of_programs_splits_its_prefix_for_blocks_and_matches_the_reference():
    """On 2 SMs at 32 programs per SM, 8 sequences x 2 KV heads split in 3 give 48 programs: too few for blocks, so
    each sequence reads the 64 shared tokens itself. block_fill_programs_per_sm cuts the prefix into four 16-token
    splits instead (5 with the private tail), whose blocks of four read it once; the result is the reference's and
    the host's page_blocks gives the launch the kernel made."""
    from cascade_plan.own_kernel_blocks import page_blocks

    d = build_data(_cfg(), "cpu", seed=8)
    ref = reference_output(d)
    short = dataclasses.replace(TINY, target_programs_per_sm=32)
    fill = dataclasses.replace(short, block_fill_programs_per_sm=4, block_fill_min_tokens=16)
    for tune, launch in ((short, (3, 32, 1)), (fill, (5, 16, 4))):
        out = torch.full_like(d.q, float("nan"))
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 72, out, sm_count=2, tune=tune,
                          shared_prefix_tokens=64)
        plan()
        assert max_rel_err(out, ref) < TOL
        assert (plan.splits, plan.tps, plan.seqs) == launch
        assert plan.launch_record() == page_blocks(8, 2, 4, 4, 64, 72, 2, tune)
    # every (sequence, KV head) program of the four splits inside the prefix records its block of four, the private
    # tail's none
    assert int((plan.grouped == 4).sum()) == 8 * 2 * 4 and int((plan.grouped == 0).sum()) == 8 * 2
    assert plan.launch_record()["grouped_programs"] == 0.8


def test_blocks_of_four_taken_by_the_launch_rule_match_the_reference():
    """wide_dot_four_min_programs_per_sm (1.8, probe 1.15.0) on 2 SMs: 4 sequences of 12 query heads x 1 KV head at
    2,048 shared + 8 tokens take the long-context launch in 4 splits of 640 on 128-token tiles in blocks of two under
    probe 1.14.0's tune; blocks of four on 64-token tiles leave 4 x 4 / 4 = 4 working programs (2 per SM, at least
    1.8), so probe 1.15.0 launches 4 splits of 576 in blocks of four; the kernel forms them and the result is the
    reference's either way."""
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from cascade_plan.own_kernel_tunes import PROBE_1_14_0_TUNE

    d = build_data(_cfg(prefix_tokens=2048, suffix_tokens=8, q_per_kv=12, num_kv_heads=1, group_size=4, n_groups=1),
                   "cpu", seed=12)
    ref = reference_output(d)
    for tune, launch in ((PROBE_1_14_0_TUNE, (4, 640, 128, 2)), (DEFAULT_TUNE, (4, 576, 64, 4))):
        out = torch.full_like(d.q, float("nan"))
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 2056, out, sm_count=2, tune=tune,
                          shared_prefix_tokens=2048)
        plan()
        assert (plan.splits, plan.tps, plan.block_n, plan.seqs) == launch
        assert max_rel_err(out, ref) < TOL
        assert int((plan.grouped == launch[3]).sum()) > 0


def test_blocks_in_a_doubled_dot_taken_by_the_launch_rule_match_the_reference():
    """double_dot_min_programs_per_sm on 2 SMs: 8 sequences of 7 query heads x 2 KV heads at 256 shared + 8 tokens
    launch unsplit in blocks of two (14 rows of 16); blocks of four in a 32-row dot leave 8 x 2 / 4 = 4 working
    programs (2 per SM, at least 1.8), so the rule takes them; the kernel forms them and the result is the
    reference's either way."""
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE

    d = build_data(_cfg(prefix_tokens=256, suffix_tokens=8, q_per_kv=7, num_kv_heads=2, group_size=8, n_groups=1),
                   "cpu", seed=13)
    ref = reference_output(d)
    doubled = dataclasses.replace(DEFAULT_TUNE, double_dot_min_programs_per_sm=1.8)
    for tune, seqs in ((DEFAULT_TUNE, 2), (doubled, 4)):
        out = torch.full_like(d.q, float("nan"))
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 264, out, sm_count=2, tune=tune,
                          shared_prefix_tokens=256)
        plan.grouped = torch.full((8 * 2 * plan.splits,), -1, dtype=torch.int8)
        plan()
        assert (plan.splits, plan.seqs) == (1, seqs)
        assert max_rel_err(out, ref) < TOL
        assert int((plan.grouped == seqs).sum()) == 8 * 2


def _checked_plans(d, table, max_len: int, shared: int, tunes) -> list:
    """DecodePlan under each tune on 4 SMs, each run checked against the float32 reference."""
    ref = reference_output(d)
    plans = []
    for tune in tunes:
        out = torch.full_like(d.q, float("nan"))
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, max_len, out, sm_count=4, tune=tune,
                          shared_prefix_tokens=shared)
        plan()
        assert max_rel_err(out, ref) < TOL
        plans.append(plan)
    return plans


def test_the_unsplit_batch_filled_launch_in_blocks_matches_the_reference():
    """filled_blocks_min_programs_per_sm at 4 SMs: 14 sequences x 1 KV head (3.5 items per SM) over 512 shared + 32
    private tokens split in two on the base tile by default, and run unsplit on the batch-filled tile, page numbers
    an iteration ahead, in blocks of two, by the rule; both the float32 reference's."""
    filled = dataclasses.replace(TuneParams(), filled_blocks_min_programs_per_sm=3.5)
    d = build_data(_cfg(prefix_tokens=512, group_size=14, n_groups=1, suffix_tokens=32, num_kv_heads=1,
                        page_size=16), "cpu")
    plans = _checked_plans(d, d.shared_table, 544, 512, (TuneParams(), filled))
    assert [(p.splits, p.seqs, p.block_n, p.prefetch) for p in plans] == [(2, 2, 64, False), (1, 2, 128, True)]


def test_one_split_fewer_matches_the_reference():
    """floor_splits_min_programs_per_sm at 4 SMs: 7 sequences x 1 KV head over 784 private tokens want 16 / 7 = 2.3
    splits and get 3 of 320; one fewer (2 of 448) still leaves 14 programs, 3.5 per SM, so the rule launches that.
    Both are the float32 reference's."""
    floor = dataclasses.replace(TuneParams(), floor_splits_min_programs_per_sm=3.5)
    d = build_data(_cfg(prefix_tokens=768, group_size=7, n_groups=1, suffix_tokens=16, num_kv_heads=1), "cpu")
    plans = _checked_plans(d, d.dup_table, 784, 0, (TuneParams(), floor))
    assert [(p.splits, p.tps, p.seqs) for p in plans] == [(3, 320, 1), (2, 448, 1)]


def test_blocks_on_the_128_token_tile_at_about_one_program_per_sm_match_the_reference():
    """few_programs_tile_max_programs_per_sm at 4 SMs: 8 sequences x 1 KV head, 4 query heads each, over 512 shared +
    32 private tokens split in two (320 tokens) on the base tile in blocks of four leave 4 working programs, 1 per
    SM; the rule runs the same split count on the 128-token tile (384 tokens, page numbers ahead) in blocks of four.
    Both are the float32 reference's."""
    tile = dataclasses.replace(TuneParams(), few_programs_tile_max_programs_per_sm=1.25)
    d = build_data(_cfg(prefix_tokens=512, group_size=8, n_groups=1, suffix_tokens=32, num_kv_heads=1,
                        page_size=16), "cpu")
    plans = _checked_plans(d, d.shared_table, 544, 512, (TuneParams(), tile))
    assert [(p.splits, p.tps, p.seqs, p.block_n, p.prefetch) for p in plans] == [(2, 320, 4, 64, False),
                                                                                 (2, 384, 4, 128, True)]


def test_fp8s_batch_filled_launch_over_private_pages_on_the_base_tile_matches_the_reference():
    """fp8_private_filled_base_tile at 4 SMs: 16 sequences x 1 KV head over 256 + 32 private fp8 tokens fill the GPU
    unsplit (16 items, 4 per SM): on the 128-token batch-filled tile by default, on the 64-token base tile by the
    rule (DecodePlan reads it through tune_at_kv_dtype). Both are the float32 reference's."""
    base = dataclasses.replace(TuneParams(), fp8_private_filled_base_tile=True)
    d = build_data(_cfg(prefix_tokens=256, group_size=16, n_groups=1, suffix_tokens=32, num_kv_heads=1,
                        kv_dtype="fp8", page_size=16), "cpu", seed=3)
    plans = _checked_plans(d, d.dup_table, 288, 0, (TuneParams(), base))
    assert [(p.splits, p.block_n, p.stages, p.warps) for p in plans] == [(1, 128, 2, 4), (1, 64, 3, 2)]


def test_head_dim_256s_short_tile_launch_in_one_wave_matches_the_reference():
    """wide_head_wave_short at 4 SMs: 2 sequences x 1 KV head of 2 query heads at head dim 256 over 608 + 32 private
    tokens. Probe 1.19.0: 5 short splits of 128 (10 programs, two waves of 8: 2 x (128 + 64) token-waves); 1.20.0: 4
    of 192 (one wave: 256). Both the short tile, both the float32 reference's."""
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE
    from cascade_plan.own_kernel_tunes import PROBE_1_19_0_TUNE

    d = build_data(_cfg(prefix_tokens=608, group_size=2, n_groups=1, suffix_tokens=32, q_per_kv=2, num_kv_heads=1,
                        head_dim=256, page_size=16), "cpu", seed=5)
    plans = _checked_plans(d, d.dup_table, 640, 0, (PROBE_1_19_0_TUNE, DEFAULT_TUNE))
    assert [(p.splits, p.tps, p.block_n, p.stages) for p in plans] == [(5, 128, 64, 2), (4, 192, 64, 2)]


@pytest.mark.parametrize("hints", [1, 2])
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("keep", [64, 56, 0])
def test_loads_hinted_to_l2_split_at_the_shared_prefix_and_match_the_reference(hints, splits, keep):
    """decode_l2_hints: each program's range is cut where the shared prefix the launch was told ends (rounded down to
    a whole tile from the range's start: 56 tokens cut at 48 in 16-token tiles, or at the start of a split past it),
    the two halves loaded under different L2 policies. The cut must lose no token and count none twice, in page
    blocks over shared pages and per sequence over private ones."""
    d = build_data(_cfg(), "cpu", seed=11)
    ref = reference_output(d)
    tune = dataclasses.replace(PREFETCH, decode_l2_hints=hints)
    out, plan = _run(d, d.shared_table, 72, splits=splits, tune=tune, shared=keep)
    assert plan.keep_tokens == keep and (plan.seqs > 1) == (keep > 0)   # told no shared prefix: no blocks
    assert max_rel_err(out, ref) < TOL
    out_d, plan_d = _run(d, d.dup_table, 72, splits=splits, tune=tune, shared=0)
    assert plan_d.seqs == 1
    assert max_rel_err(out_d, ref) < TOL


@pytest.mark.parametrize("tiles", [False, True], ids=["default-tiles", "32-token-3-stage"])
@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_head_dim_256_over_halves_of_the_head_dims_with_capped_registers_matches_the_reference(tiles, kv_dtype):
    """wide_head_halves and wide_head_maxnreg: at head dim 256 each dot runs over the first or the second half of the
    head dims and the launch asks for at most 168 registers per thread; both page layouts, split and unsplit, give the
    float32 reference's result; head dim 128 keeps whole dots and no cap."""
    from cascade_plan.own_kernel_tune import DEFAULT_TUNE

    tune = dataclasses.replace(DEFAULT_TUNE, wide_head_halves=True, wide_head_maxnreg=168)
    if tiles:
        tune = dataclasses.replace(tune, wide_head_stages=3, wide_head_tile_n=32)
    d = build_data(_cfg(head_dim=256, q_per_kv=2, prefix_tokens=320, suffix_tokens=8, kv_dtype=kv_dtype), "cpu",
                   seed=13)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 320), (d.dup_table, 0)):
        for splits in (None, 3):
            out = torch.full_like(d.q, float("nan"))
            plan = DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, 328, out, sm_count=2, tune=tune,
                              shared_prefix_tokens=shared, force_splits=splits)
            plan()
            assert plan.halves != plan.pairs and plan.maxnreg == 168
            assert max_rel_err(out, ref) < TOL
    narrow = build_data(_cfg(q_per_kv=2), "cpu", seed=13)
    plan = DecodePlan(narrow.q, narrow.k_cache, narrow.v_cache, narrow.dup_table, narrow.seq_lens, 72,
                      torch.empty_like(narrow.q), sm_count=2, tune=tune, shared_prefix_tokens=0)
    assert not plan.halves and plan.maxnreg is None
