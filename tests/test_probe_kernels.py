"""The probe's Triton kernels on the CPU, through Triton's interpreter, against a float32 reference."""

from __future__ import annotations

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from cascade_plan.own_kernel_tune import TuneParams  # noqa: E402
from kernels_probe.attention.data import build_data, reference_output  # noqa: E402
from kernels_probe.attention.grid import AttentionConfig  # noqa: E402
from kernels_probe.attention.reference import max_rel_err, reference_paged  # noqa: E402
from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan, MergePlan, PrefixPlan, StateBuffer  # noqa: E402

TINY = TuneParams(decode_block_n=16, prefix_block_n=16, min_tokens_per_split=16,
                  decode_min_tokens_per_split=16, prefix_max_block_m=16)
TOL = 1e-2


def _cfg(**kw):
    base = dict(prefix_tokens=32, group_size=3, n_groups=1, suffix_tokens=16, q_per_kv=4, num_kv_heads=2,
                head_dim=16, page_size=8, kv_dtype="bf16")
    base.update(kw)
    return AttentionConfig(**base)


def _nan_like(q):
    return torch.full_like(q, float("nan"))


@pytest.mark.parametrize("table", ["shared_table", "dup_table"])
@pytest.mark.parametrize("force_splits,head_major,fused", [(3, False, True), (3, False, False), (1, False, True),
                                                           (3, True, True)])
def test_paged_decode_matches_reference(table, force_splits, head_major, fused):
    import dataclasses

    d = build_data(_cfg(n_groups=2, group_size=2), "cpu", seed=1)
    ref = reference_output(d)
    out = _nan_like(d.q)
    # the fused merge runs where no page blocks form: blocks off for it
    tune = dataclasses.replace(TINY, decode_head_major=head_major, decode_fused_merge=fused,
                               decode_page_group=1 if fused else TINY.decode_page_group)
    plan = DecodePlan(d.q, d.k_cache, d.v_cache, getattr(d, table), d.seq_lens, 48, out, sm_count=2, tune=tune,
                      force_splits=force_splits)
    plan()
    # 3 splits: partial states, merged by the kernel's last program per sequence (fused) or by a merge kernel;
    # 1: one launch, bf16 out
    assert plan.splits == force_splits
    assert plan.fused_merge == (fused and force_splits > 1)
    assert (plan.merge is None) == (force_splits == 1 or fused)
    assert torch.isfinite(out.float()).all()
    assert max_rel_err(out, ref) < TOL
    if plan.fused_merge:  # every count back at zero: a second launch (a graph replay) merges again
        assert int(plan.counts.abs().sum()) == 0
        out.fill_(float("nan"))
        plan()
        assert max_rel_err(out, ref) < TOL


def test_decode_variable_lengths_and_scattered_pages():
    torch.manual_seed(0)
    B, HKV, G, D, PS = 3, 2, 2, 16, 4
    npages = 20
    k = torch.randn(npages, PS, HKV, D, dtype=torch.float16)
    v = torch.randn(npages, PS, HKV, D, dtype=torch.float16)
    q = torch.randn(B, HKV * G, D, dtype=torch.float16)
    bt = torch.randperm(npages)[: B * 6].view(B, 6).int().contiguous()
    lens = torch.tensor([24, 5, 17], dtype=torch.int32)
    ref = reference_paged(q, k, v, bt, lens)
    out = _nan_like(q)
    DecodePlan(q, k, v, bt, lens, 24, out, sm_count=2, tune=TINY)()
    assert max_rel_err(out, ref) < 2e-3


@pytest.mark.parametrize("prefetch", [True, False])
@pytest.mark.parametrize("force_splits", [1, 2])
def test_decode_page_prefetch_reads_only_the_table_it_needs(prefetch, force_splits):
    """Page numbers loaded an iteration ahead: lengths on and off 16-token tiles and 4-token pages, a table no wider
    than the longest sequence, and every entry past a sequence's own pages poisoned with a page that does not exist
    (a kernel that used one would read a page that does not exist). Both kernels agree with the reference."""
    import dataclasses

    torch.manual_seed(3)
    B, HKV, G, D, PS = 4, 2, 2, 16, 4
    lens = torch.tensor([48, 5, 32, 17], dtype=torch.int32)
    width = 48 // PS
    npages = int(sum((int(n) + PS - 1) // PS for n in lens))
    k = torch.randn(npages, PS, HKV, D, dtype=torch.float16)
    v = torch.randn(npages, PS, HKV, D, dtype=torch.float16)
    q = torch.randn(B, HKV * G, D, dtype=torch.float16)
    bt = torch.full((B, width), 1 << 30, dtype=torch.int32)
    order = torch.randperm(npages).int()
    used = 0
    for b, n in enumerate(lens.tolist()):
        pages = (n + PS - 1) // PS
        bt[b, :pages] = order[used:used + pages]
        used += pages
    ref_bt = torch.where(bt >= npages, 0, bt)
    ref = reference_paged(q, k, v, ref_bt, lens)
    out = _nan_like(q)
    # the base tile over every split (TINY's are short tiles, which never prefetch)
    tune = dataclasses.replace(TINY, page_prefetch=prefetch, decode_short_tokens=0, prefetch_min_tokens=0)
    plan = DecodePlan(q, k, v, bt, lens, 48, out, sm_count=2, tune=tune, force_splits=force_splits)
    assert plan.prefetch == prefetch
    plan()
    assert max_rel_err(out, ref) < 2e-3


def test_decode_fp8_cache_with_fp16_dots():
    import dataclasses

    d = build_data(_cfg(kv_dtype="fp8", group_size=2), "cpu", seed=8)
    ref = reference_output(d)
    out = _nan_like(d.q)
    DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 48, out, sm_count=2,
               tune=dataclasses.replace(TINY, fp8_dot_fp16=True), force_splits=2)()
    assert max_rel_err(out, ref) < TOL


@pytest.mark.parametrize("kw", [dict(), dict(n_groups=2, q_per_kv=1, suffix_tokens=0),
                                dict(kv_dtype="fp8", num_kv_heads=1, q_per_kv=8),
                                dict(group_size=1, prefix_tokens=64, page_size=16)])
def test_cascade_matches_reference_and_decode(kw):
    cfg = _cfg(**kw)
    d = build_data(cfg, "cpu", seed=2)
    ref = reference_output(d)
    out = _nan_like(d.q)
    casc = CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size, cfg.n_groups)],
                       d.suffix_table, d.suffix_lens, cfg.suffix_tokens, out, sm_count=2, tune=TINY)
    casc()
    assert torch.isfinite(out.float()).all()
    assert max_rel_err(out, ref) < TOL
    dec = _nan_like(d.q)
    DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, cfg.prefix_tokens + cfg.suffix_tokens, dec,
               sm_count=2, tune=TINY)()
    assert max_rel_err(out, dec.float()) < TOL


def test_two_level_cascade_merges_in_one_pass():
    """Level 1: a prefix shared by all 4 sequences; level 2: a prefix per pair; then suffixes; one merge."""
    torch.manual_seed(3)
    HKV, G, D, PS = 2, 2, 16, 8
    P1, P2, S, B = 16, 16, 8, 4
    npages = 40
    k = torch.randn(npages, PS, HKV, D, dtype=torch.float16)
    v = torch.randn(npages, PS, HKV, D, dtype=torch.float16)
    q = torch.randn(B, HKV * G, D, dtype=torch.float16)
    t1 = torch.tensor([[0, 1]], dtype=torch.int32)
    t2 = torch.tensor([[2, 3], [4, 5]], dtype=torch.int32)
    suf = torch.tensor([[6], [7], [8], [9]], dtype=torch.int32)
    full = torch.cat([t1.expand(B, 2), t2.repeat_interleave(2, 0), suf], 1).contiguous()
    lens = torch.full((B,), P1 + P2 + S, dtype=torch.int32)
    ref = reference_paged(q, k, v, full, lens)
    out = _nan_like(q)
    casc = CascadePlan(q, k, v, [(t1, P1, 4, 1), (t2, P2, 2, 2)], suf, torch.full((B,), S, dtype=torch.int32), S, out,
                       sm_count=2, tune=TINY)
    casc()
    assert len(casc.prefix_plans) == 2
    assert max_rel_err(out, ref) < 2e-3


@pytest.mark.parametrize("NS,slots_min", [(3, 1 << 30), (3, 1), (37, 1)])
def test_merge_of_states_and_lse_output(NS, slots_min):
    """The slot-at-a-time merge and the BLOCK_S-slots merge (37 slots: three blocks, the last partial)."""
    torch.manual_seed(4)
    rows, D = 5, 16
    st = StateBuffer(NS, rows, D, "cpu")
    st.o.copy_(torch.randn(NS, rows, D))
    st.lse.copy_(torch.randn(NS, rows))
    st.lse[1, 2] = float("-inf")  # an empty split contributes nothing
    out = torch.empty(rows, D, dtype=torch.float16)
    lse_out = torch.empty(rows)
    plan = MergePlan(st, out, lse_out=lse_out, tune=TuneParams(merge_slots_min=slots_min, merge_block_s=16))
    assert bool(plan.block_s) == (NS >= slots_min)
    plan()
    w = torch.softmax(st.lse, dim=0)
    ref = (w[..., None] * st.o).sum(0)
    assert torch.allclose(out.float(), ref, atol=2e-3, rtol=2e-3)
    assert torch.allclose(lse_out, torch.logsumexp(st.lse, 0), atol=1e-5)


def test_prefix_pass_state_and_splits():
    cfg = _cfg(group_size=4, suffix_tokens=0, prefix_tokens=64)
    d = build_data(cfg, "cpu", seed=5)
    ref = reference_output(d)
    st = StateBuffer(8, cfg.batch * cfg.num_q_heads, cfg.head_dim, "cpu")
    p = PrefixPlan(d.q, d.k_cache, d.v_cache, d.prefix_table, 64, 4, 1, st, sm_count=4, tune=TINY)
    assert p.splits > 1 and p.block_m == 16
    p()
    out = torch.empty_like(d.q)
    MergePlan(st, out.view(-1, cfg.head_dim), num_slots=p.splits)()
    assert max_rel_err(out, ref) < TOL




@pytest.mark.parametrize("head_dim,q_per_kv,kv_dtype", [(64, 6, "bf16"), (256, 12, "bf16"), (64, 12, "fp8"),
                                                        (256, 6, "fp8")])
def test_decode_and_cascade_at_head_dims_and_groups_the_grid_lacks(head_dim, q_per_kv, kv_dtype):
    """Head dims 64 and 256 and query groups of 6 and 12 (BLOCK_G 16, padded rows masked), bf16 and fp8 KV: the
    per-sequence decode (split and unsplit) and the cascade against the float32 reference."""
    cfg = _cfg(head_dim=head_dim, q_per_kv=q_per_kv, kv_dtype=kv_dtype, num_kv_heads=1, group_size=2)
    d = build_data(cfg, "cpu", seed=11)
    ref = reference_output(d)
    for splits in (1, 3):
        out = _nan_like(d.q)
        DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 48, out, sm_count=2, tune=TINY,
                   force_splits=splits)()
        assert max_rel_err(out, ref) < TOL
    out = _nan_like(d.q)
    CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size, cfg.n_groups)],
                d.suffix_table, d.suffix_lens, cfg.suffix_tokens, out, sm_count=2, tune=TINY)()
    assert max_rel_err(out, ref) < TOL


@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_head_dim_256_on_deeper_tiles_prefetches_and_matches_reference(kv_dtype):
    """wide_head_stages: at head dim 256 the base tile takes wide_head_tile_n tokens in that many stages and loads
    page numbers an iteration ahead; head dim 128 keeps the tune's own tile. One sequence x 1 KV head over 64 tokens
    on 2 SMs, 16-token tiles of 4 stages, split and unsplit, against the float32 reference."""
    import dataclasses

    tune = dataclasses.replace(TINY, decode_block_n=32, wide_head_min_dim=256, wide_head_stages=4, wide_head_tile_n=16,
                               decode_short_tokens=0)
    cfg = _cfg(head_dim=256, q_per_kv=2, kv_dtype=kv_dtype, num_kv_heads=1, group_size=2)
    d = build_data(cfg, "cpu", seed=13)
    ref = reference_output(d)
    for splits in (1, 2):
        out = _nan_like(d.q)
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.dup_table, d.seq_lens, 48, out, sm_count=2, tune=tune,
                          force_splits=splits)
        plan()
        assert (plan.block_n, plan.stages, plan.prefetch) == (16, 4, True)
        assert max_rel_err(out, ref) < TOL
    narrow = build_data(_cfg(num_kv_heads=1, group_size=2), "cpu", seed=13)
    plan = DecodePlan(narrow.q, narrow.k_cache, narrow.v_cache, narrow.dup_table, narrow.seq_lens, 48,
                      _nan_like(narrow.q), sm_count=2, tune=tune, force_splits=2)
    assert plan.block_n == 32


def test_the_long_context_launch_matches_reference():
    """The long-context launch (more splits than the base target, its own longer tile) computes the same attention:
    one sequence x 2 KV heads over 160 tokens, 2 SMs: the base target gives 4 splits of 48 tokens, the long one 8 of
    32 in 32-token tiles (the TuneParams below scale the H200's down to a CPU-sized problem)."""
    import dataclasses

    from cascade_plan.own_kernel_launch import decode_launch_splits

    tune = dataclasses.replace(TINY, target_programs_per_sm=4, long_programs_per_sm=8, long_min_tokens_per_split=32,
                               long_block_n=32, long_stages=2, decode_short_tokens=0)
    d = build_data(_cfg(prefix_tokens=144, group_size=1, suffix_tokens=16), "cpu", seed=3)
    assert decode_launch_splits(2, 160, 2, tune)[2]
    assert not decode_launch_splits(2, 160, 2, dataclasses.replace(tune, long_block_n=0))[2]
    ref = reference_output(d)
    out = _nan_like(d.q)
    plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 160, out, sm_count=2, tune=tune)
    plan()
    assert plan.block_n == 32 and plan.splits > 1 and plan.stages == 2
    assert max_rel_err(out, ref) < TOL


def test_a_tiny_launch_cut_to_the_fused_merge_cap_prefetches_and_matches_reference():
    """The tiny launch's cap (merge_capped_splits) and the few-program prefetch (decode_prefetch), scaled to a CPU-sized
    problem: one sequence x 2 KV heads over 160 tokens on 2 SMs. The base target gives 5 splits of 32 tokens, more
    than the cap of 4, and 2 work items x 4 still reach 2 programs per SM: 4 splits of 48, merged by their own last
    program; 8 programs are within 4 per SM, so the base tile loads page numbers an iteration ahead."""
    import dataclasses

    tune = dataclasses.replace(TINY, target_programs_per_sm=8, decode_short_tokens=0, fused_merge_max_splits=4,
                               tiny_fused_programs_per_sm=2, prefetch_max_programs_per_sm=4)
    d = build_data(_cfg(prefix_tokens=144, group_size=1, suffix_tokens=16), "cpu", seed=5)
    ref = reference_output(d)
    for t, splits, capped in ((tune, 4, True), (dataclasses.replace(tune, tiny_fused_programs_per_sm=0), 5, False)):
        out = _nan_like(d.q)
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.dup_table, d.seq_lens, 160, out, sm_count=2, tune=t)
        plan()
        assert (plan.splits, plan.tps) == ((4, 48) if capped else (5, 32))
        assert plan.splits == splits and plan.fused_merge == capped and plan.prefetch == capped
        assert max_rel_err(out, ref) < TOL


def test_fp8_pairs_widen_every_finite_e4m3_value_exactly():
    """An fp8 cache read as int16 pairs (fp8_pairs): the shifts put each e4m3 value into fp16 at 1/256 of itself,
    subnormals and signs included. Sequences of one token attend to it alone (p = 1), so the output is that token's V
    row, exactly (every e4m3 value is a bf16 value): 4 sequences x 64 head dims hold all 254 finite codes (NaN's two
    codes read as 0), split across even and odd head dims. The conversion path must give the same."""
    import dataclasses

    d = build_data(_cfg(prefix_tokens=8, suffix_tokens=8, group_size=4, head_dim=64, num_kv_heads=1, q_per_kv=2,
                        kv_dtype="fp8"), "cpu", seed=4)
    codes = torch.arange(256, dtype=torch.int32)
    codes[(codes & 0x7F) == 0x7F] = 0
    values = codes.to(torch.uint8).view(torch.float8_e4m3fn).view(4, 64)
    seq_lens = torch.ones_like(d.seq_lens)
    for b in range(4):  # each sequence's first token: its first page, slot 0
        d.v_cache[int(d.dup_table[b, 0]), 0, 0] = values[b]
    want = values.float()[:, None, :].expand(4, 2, 64)
    for pairs in (True, False):
        out = _nan_like(d.q)
        DecodePlan(d.q, d.k_cache, d.v_cache, d.dup_table, seq_lens, 1, out, sm_count=2,
                   tune=dataclasses.replace(TINY, fp8_pairs=pairs))()
        assert torch.equal(out.float(), want), f"fp8_pairs={pairs}"


@pytest.mark.parametrize("head_dim,q_per_kv", [(16, 4), (64, 12), (256, 2)])
def test_fp8_pairs_decode_and_cascade_match_reference(head_dim, q_per_kv):
    """fp8 read as int16 pairs (two dots of half the head dim each): the decode unsplit, split, over a known shared
    prefix, and the cascade (prefix pass too), against the float32 reference and within rounding of the converted
    path (page blocks: test_probe_page_aware_cpu)."""
    import dataclasses

    cfg = _cfg(head_dim=head_dim, q_per_kv=q_per_kv, kv_dtype="fp8", num_kv_heads=2, group_size=2, prefix_tokens=64,
               suffix_tokens=8)
    d = build_data(cfg, "cpu", seed=12)
    ref = reference_output(d)
    pairs = dataclasses.replace(TINY, fp8_pairs=True)
    for splits, shared in ((1, None), (3, None), (None, cfg.prefix_tokens)):
        outs = []
        for tune in (pairs, TINY):
            out = _nan_like(d.q)
            plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 72, out, sm_count=2, tune=tune,
                              force_splits=splits, shared_prefix_tokens=shared)
            plan()
            outs.append(out)
        assert max_rel_err(outs[0], ref) < TOL
        assert max_rel_err(outs[0], outs[1].float()) < TOL
    out = _nan_like(d.q)
    CascadePlan(d.q, d.k_cache, d.v_cache, [(d.prefix_table, cfg.prefix_tokens, cfg.group_size, cfg.n_groups)],
                d.suffix_table, d.suffix_lens, cfg.suffix_tokens, out, sm_count=2, tune=pairs)()
    assert max_rel_err(out, ref) < TOL


@pytest.mark.parametrize("head_dim,q_per_kv,kv_dtype", [(16, 4, "bf16"), (64, 12, "fp8"), (256, 2, "bf16")])
def test_transposed_decode_dots_match_reference(head_dim, q_per_kv, kv_dtype):
    """decode_swap_ab (S^T = K q^T, acc^T += V^T P^T; the state transposed in and out of each token range): unsplit,
    split and over a known shared prefix, bf16 and fp8 (which it reads converted, never as int16 pairs), against the
    float32 reference (page blocks: test_probe_page_aware_cpu)."""
    import dataclasses

    cfg = _cfg(head_dim=head_dim, q_per_kv=q_per_kv, kv_dtype=kv_dtype, num_kv_heads=2, group_size=2,
               prefix_tokens=64, suffix_tokens=8)
    d = build_data(cfg, "cpu", seed=13)
    ref = reference_output(d)
    tune = dataclasses.replace(TINY, decode_swap_ab=True)
    # with fp8_pairs on too, an fp8 cache is read as pairs (untransposed)
    both = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 72, _nan_like(d.q), sm_count=2,
                      tune=dataclasses.replace(tune, fp8_pairs=True))
    assert both.pairs == (kv_dtype == "fp8")
    for splits, shared in ((1, None), (3, None), (None, cfg.prefix_tokens)):
        out = _nan_like(d.q)
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.shared_table, d.seq_lens, 72, out, sm_count=2, tune=tune,
                          force_splits=splits, shared_prefix_tokens=shared)
        plan()
        assert max_rel_err(out, ref) < TOL
