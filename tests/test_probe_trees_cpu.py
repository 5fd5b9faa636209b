"""Three-level prefix trees in the probe (CPU; Triton through its interpreter): a root prefix shared by every
sequence, group prefixes, private suffixes. The page layout, the Triton cascade with two prefix levels and decode
over shared and duplicated pages against the float32 reference and a flat two-level computation, the trees grid,
the rows' schema and --only-missing's keys."""

from __future__ import annotations

import msgspec
import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from cascade_plan.calibration_schema.attention import AttentionConfigDoc  # noqa: E402
from cascade_plan.calibration_schema.probe_rows import SkippedRow, TimedMeasurement  # noqa: E402
from cascade_plan.own_kernel_tune import TuneParams  # noqa: E402
from kernels_probe.attention import accounting  # noqa: E402
from kernels_probe.attention.data import build_data, cache_bytes, reference_output  # noqa: E402
from kernels_probe.attention.grid import KERNELS, AttentionConfig, named_grid, owed_configs, trees_grid  # noqa: E402
from kernels_probe.attention.reference import max_rel_err, reference_shared_prefix  # noqa: E402
from kernels_probe.attention.triton_backend import cascade_levels, launch_info  # noqa: E402
from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan  # noqa: E402

TINY = TuneParams(decode_block_n=16, prefix_block_n=16, min_tokens_per_split=16,
                  decode_min_tokens_per_split=16, prefix_max_block_m=16,
                  decode_short_block_n=16)
TOL = 1e-2
PS, R, P, S = 16, 32, 32, 16


def _tree(**kw) -> AttentionConfig:
    base = dict(root_tokens=R, prefix_tokens=P, group_size=2, n_groups=2, suffix_tokens=S, q_per_kv=2,
                num_kv_heads=2, head_dim=16, page_size=PS)
    base.update(kw)
    return AttentionConfig(**base)


def _cascade(d, levels=None):
    c = d.cfg
    out = torch.full_like(d.q, float("nan"))
    plan = CascadePlan(d.q, d.k_cache, d.v_cache, cascade_levels(d) if levels is None else levels, d.suffix_table,
                       d.suffix_lens, c.suffix_tokens, out, sm_count=4, tune=TINY)
    plan()
    return out, plan


def _decode(d, table):
    out = torch.full_like(d.q, float("nan"))
    DecodePlan(d.q, d.k_cache, d.v_cache, table, d.seq_lens, d.cfg.context_tokens, out, sm_count=4, tune=TINY)()
    return out


def _flat_reference(d):
    """The same tokens as a two-level problem: each group's prefix is [root ; its prefix], computed densely."""
    c = d.cfg
    rp = c.root_tokens // c.page_size
    root_k = d.k_cache[:rp].reshape(1, c.root_tokens, c.num_kv_heads, c.head_dim)
    root_v = d.v_cache[:rp].reshape(1, c.root_tokens, c.num_kv_heads, c.head_dim)
    pk = torch.cat([root_k.expand(c.n_groups, -1, -1, -1), d.prefix_dense(d.k_cache)], dim=1)
    pv = torch.cat([root_v.expand(c.n_groups, -1, -1, -1), d.prefix_dense(d.v_cache)], dim=1)
    return reference_shared_prefix(d.q, pk, pv, d.suffix_dense(d.k_cache), d.suffix_dense(d.v_cache), c.group_size)


@pytest.mark.parametrize("kw", [{}, {"head_dim": 32, "suffix_tokens": 32}])
def test_tree_cascade_and_decode_match_the_reference_and_a_flat_two_level_computation(kw):
    d = build_data(_tree(**kw), "cpu", seed=3)
    ref = reference_output(d)
    flat = _flat_reference(d)
    assert max_rel_err(ref, flat) < 1e-5                       # the paged reference reads the tree's tokens
    out, plan = _cascade(d)
    assert len(plan.prefix_plans) == 2 and launch_info(plan)["levels"] == [[R, 4, 1], [P, 2, 2]]
    assert max_rel_err(out, ref) < TOL and max_rel_err(out, flat) < TOL
    # the Triton cascade over the flat two-level problem (one level of root + prefix pages per group) agrees
    c = d.cfg
    flat_table = d.shared_table[::c.group_size, :(c.root_tokens + c.prefix_tokens) // PS].contiguous()
    out2, plan2 = _cascade(d, [(flat_table, c.root_tokens + c.prefix_tokens, c.group_size, c.n_groups)])
    assert "levels" not in launch_info(plan2) and max_rel_err(out, out2) < TOL
    for table in (d.shared_table, d.dup_table):
        assert max_rel_err(_decode(d, table), ref) < TOL


def test_tree_layout_tables_point_at_the_right_pages():
    cfg = _tree()
    d = build_data(cfg, "cpu", seed=1)
    rp, pp, sp = R // PS, P // PS, S // PS
    assert d.k_cache.shape[0] == rp + 2 * pp + 4 * (rp + pp + sp) and d.has_dup
    assert d.root_table.tolist() == [list(range(rp))]
    assert d.prefix_table.tolist() == [[rp + g * pp + i for i in range(pp)] for g in range(2)]
    assert torch.equal(d.shared_table[:, :rp], d.root_table.expand(4, rp))
    assert torch.equal(d.shared_table[2, rp:rp + pp], d.prefix_table[1]) and torch.equal(d.shared_table[:, -sp:],
                                                                                       d.suffix_table)
    assert torch.equal(d.k_cache[d.dup_table[3].long()], d.k_cache[d.shared_table[3].long()])   # a copy of the same
    assert not set(d.dup_table.flatten().tolist()) & set(d.shared_table[:, :rp + pp].flatten().tolist())
    assert d.seq_lens.tolist() == [R + P + S] * 4
    kvt = 2 * cfg.num_kv_heads * cfg.head_dim * 2
    assert cache_bytes(cfg, True) == kvt * (R + 2 * P + 4 * (R + P + S))
    assert cache_bytes(cfg, False) == kvt * (R + 2 * P + 4 * S)

    base, _ = _cascade(d)
    ref = reference_output(d)
    for cache in (d.k_cache, d.v_cache):                        # a root page: every sequence's output moves
        cache[0] = torch.randn(cache[0].shape, dtype=cache.dtype)
    out, _ = _cascade(d)
    moved = (out.float() - base.float()).abs().amax(dim=(1, 2)) > 1e-3
    assert moved.tolist() == [True] * 4 and max_rel_err(out, reference_output(d)) < TOL
    base = out
    for cache in (d.k_cache, d.v_cache):                        # group 1's prefix page: only its two sequences
        cache[int(d.prefix_table[1, 0])] = torch.randn(cache[0].shape, dtype=cache.dtype)
    out, _ = _cascade(d)
    moved = (out.float() - base.float()).abs().amax(dim=(1, 2)) > 1e-3
    assert moved.tolist() == [False, False, True, True] and max_rel_err(out, reference_output(d)) < TOL
    assert max_rel_err(ref, reference_output(d)) > TOL


def test_two_level_inputs_are_unchanged_by_trees():
    cfg = AttentionConfig(prefix_tokens=P, group_size=2, n_groups=2, suffix_tokens=S, q_per_kv=2, num_kv_heads=2,
                          head_dim=16, page_size=PS)
    d = build_data(cfg, "cpu", seed=1)
    assert d.root_table.shape == (1, 0) and d.prefix_table[0, 0] == 0 and d.shared_table.shape == (4, (P + S) // PS)
    _, plan = _cascade(d)
    assert len(plan.prefix_plans) == 1 and "levels" not in launch_info(plan)


def test_torch_backend_skips_the_tree_cascade():
    from kernels_probe.attention import torch_backend as tb
    from kernels_probe.attention.timed import SkippedKernel, TimedKernel

    rows = tb.timed_kernels(build_data(_tree(), "cpu"))
    skipped = {k.kernel: k.reason for k in rows if isinstance(k, SkippedKernel)}
    assert [k.kernel for k in rows if isinstance(k, TimedKernel)] == ["decode_dup"]
    assert set(skipped) == {"decode_shared", "cascade_prefix", "cascade_suffix", "cascade_merge", "cascade_total"}
    assert all("tree" in r for r in skipped.values())


def test_trees_grid_is_valid_distinct_and_selectable():
    cfgs = trees_grid()
    assert len(set(cfgs)) == len(cfgs) == 33 and all(c.root_tokens in (1024, 4096) for c in cfgs)
    assert {(c.q_per_kv, c.num_kv_heads) for c in cfgs} == {(4, 8), (6, 2)}
    assert {c.kv_dtype for c in cfgs} == {"bf16", "fp8"} and {c.suffix_tokens for c in cfgs} == {128, 1024}
    assert {(c.group_size, c.n_groups) for c in cfgs} == {(4, 16), (16, 4), (16, 16), (64, 4)}
    for c in cfgs:
        assert AttentionConfig(**c.as_dict()) == c and c.label().startswith(f"R={c.root_tokens} ")
        assert accounting.kernel_cost(c, "cascade_total")["bytes"] < accounting.kernel_cost(c, "decode_dup")["bytes"]
        assert cache_bytes(c, True) <= 16 << 30
    trees, desc = named_grid("trees")
    every, desc_all = named_grid("all")
    assert trees == cfgs and desc["mode"] == "trees" and desc["axes"]["root_tokens"] == [1024, 4096]
    assert set(trees) <= set(every) and desc_all["axes"]["root_tokens"] == [0, 1024, 4096]
    flat = AttentionConfig(prefix_tokens=1024, group_size=4)
    assert "root_tokens" not in flat.as_dict() and flat.label() == "P=1024 n=4x1 S=128 G=4 Hkv=8 bf16"
    with pytest.raises(ValueError, match="multiples of page_size"):
        AttentionConfig(prefix_tokens=1024, group_size=4, root_tokens=8)
    with pytest.raises(ValueError, match="root_tokens"):
        AttentionConfig(prefix_tokens=1024, group_size=4, root_tokens=-16)


def test_tree_costs_count_the_root_once():
    c = _tree()
    flat = AttentionConfig(prefix_tokens=P, group_size=2, n_groups=2, suffix_tokens=S, q_per_kv=2, num_kv_heads=2,
                           head_dim=16, page_size=PS)
    kvt = accounting.kv_bytes_per_token(c)
    diff = {k: accounting.kernel_cost(c, k)["bytes"] - accounting.kernel_cost(flat, k)["bytes"]
            for k in ("decode_dup", "cascade_total", "cascade_prefix", "cascade_merge")}
    state = 4 * 4 * (16 + 1) * 4                               # one float32 state per (sequence, query head) row
    assert diff == {"decode_dup": 4 * R * kvt, "cascade_total": R * kvt, "cascade_prefix": R * kvt + state,
                    "cascade_merge": state}


def test_a_tree_row_round_trips_through_the_schema_and_the_writer():
    cfg = _tree().as_dict()
    assert cfg["root_tokens"] == R
    assert msgspec.convert(cfg, AttentionConfigDoc).root_tokens == R
    flat = AttentionConfig(prefix_tokens=P, group_size=2).as_dict()
    assert msgspec.convert(flat, AttentionConfigDoc).root_tokens == 0
    # a two-level config encodes (and so hashes, calibration/holdout.py) as it did before trees
    assert msgspec.to_builtins(msgspec.convert(flat, AttentionConfigDoc)) == flat
    assert msgspec.to_builtins(msgspec.convert(cfg, AttentionConfigDoc)) == cfg
    row = {"backend": "triton", "kernel": "cascade_total", "variant": None, "config": cfg, "bytes": 10, "flops": 20,
           "median_s": 2e-6, "p10_s": 1e-6, "p90_s": 3e-6, "n_reps": 10, "max_rel_err": 1e-3,
           "launch": {"levels": [[R, 4, 1], [P, 2, 2]]}}
    assert msgspec.to_builtins(msgspec.convert(row, TimedMeasurement))["config"] == cfg
    flat_row = msgspec.to_builtins(msgspec.convert({**row, "config": flat}, TimedMeasurement))
    assert flat_row["config"] == flat and "root_tokens" not in flat_row["config"]    # written as before trees
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({**cfg, "root_tokens": -16}, AttentionConfigDoc)
    skipped = {"config": cfg, "backend": "torch", "kernel": "cascade_total", "reason": "no tree"}
    assert msgspec.to_builtins(msgspec.convert(skipped, SkippedRow)) == skipped


def test_owed_configs_key_by_root_tokens():
    flat = AttentionConfig(prefix_tokens=1024, group_size=4, n_groups=16)
    tree = AttentionConfig(prefix_tokens=1024, group_size=4, n_groups=16, root_tokens=1024)
    rows = [{"backend": "triton", "config": flat.as_dict()}, {"backend": "flashinfer", "config": tree.as_dict()}]
    assert owed_configs([flat, tree], ["triton", "flashinfer"], rows) == {"triton": [tree], "flashinfer": [flat]}


class _FakePrefill:
    """A float32 stand-in for FlashInfer's paged prefill (non-causal): each request's qo rows attend to the pages
    its kv indptr/indices/last_page_len name, so the indices the backend plans are what is checked."""

    def __init__(self, *_a, **_kw):
        self.plan_args = None

    def plan(self, qo, kv_indptr, kv_indices, last_page_len, num_qo_heads, num_kv_heads, head_dim, page_size, **_kw):
        self.plan_args = (qo.tolist(), kv_indptr.tolist(), kv_indices.tolist(), last_page_len.tolist(), page_size)

    def run(self, q, kv, return_lse=False, out=None):
        qo, ip, ix, lpl, ps = self.plan_args
        k_cache, v_cache = kv
        hkv = k_cache.shape[2]
        o = torch.zeros(q.shape, dtype=torch.float32)
        lse = torch.zeros(q.shape[:2], dtype=torch.float32)
        for i in range(len(ip) - 1):
            pages = torch.tensor(ix[ip[i]:ip[i + 1]])
            n = (len(pages) - 1) * ps + lpl[i]
            k = k_cache[pages].reshape(-1, hkv, q.shape[-1])[:n].float()
            v = v_cache[pages].reshape(-1, hkv, q.shape[-1])[:n].float()
            rows = slice(qo[i], qo[i + 1])
            qr = q[rows].float().view(-1, hkv, q.shape[1] // hkv, q.shape[-1])
            s = torch.einsum("rhgd,thd->rhgt", qr, k) / q.shape[-1] ** 0.5
            o[rows] = torch.einsum("rhgt,thd->rhgd", torch.softmax(s, -1), v).reshape(o[rows].shape)
            lse[rows] = torch.logsumexp(s, -1).reshape(lse[rows].shape)
        if out is not None:
            out.copy_(o)
            return out
        return (o, lse) if return_lse else o


def _merge_state_in_place(v, s, v_other, s_other):
    m = torch.maximum(s, s_other)
    w, w_other = torch.exp(s - m), torch.exp(s_other - m)
    v.copy_((v * w[..., None] + v_other * w_other[..., None]) / (w + w_other)[..., None])
    s.copy_(m + torch.log(w + w_other))


class _FakeMultiLevel:
    def __init__(self, num_levels, *_a, **_kw):
        self._batch_prefill_wrappers = [_FakePrefill() for _ in range(num_levels)]

    def plan(self, qo, ip, ix, lpl, *args, **kw):
        for w, *level in zip(self._batch_prefill_wrappers, qo, ip, ix, lpl):
            w.plan(*level, *args, **kw)

    def run(self, q, kv):
        out, lse = self._batch_prefill_wrappers[-1].run(q, kv, return_lse=True)
        for w in self._batch_prefill_wrappers[:-1]:
            _merge_state_in_place(out, lse, *w.run(q, kv, return_lse=True))
        return out


class _FakeDecode(_FakePrefill):
    def plan(self, indptr, indices, last_page_len, *args, **kw):
        super().plan(torch.arange(len(indptr)), indptr, indices, last_page_len, *args, **kw)


def test_flashinfer_tree_levels_plan_the_right_pages(monkeypatch):
    import sys
    import types

    from kernels_probe.attention import flashinfer_backend as fb
    from kernels_probe.attention.reference import reference_paged

    fake = types.ModuleType("flashinfer")
    fake.BatchPrefillWithPagedKVCacheWrapper = _FakePrefill            # type: ignore[attr-defined]
    fake.MultiLevelCascadeAttentionWrapper = _FakeMultiLevel           # type: ignore[attr-defined]
    fake.BatchDecodeWithPagedKVCacheWrapper = _FakeDecode              # type: ignore[attr-defined]
    fake.merge_state_in_place = _merge_state_in_place                  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", fake)
    monkeypatch.setattr(fb, "WORKSPACE_BYTES", 16)
    d = build_data(_tree(), "cpu", seed=5)
    ref = reference_output(d)
    shared_pages = (R + P) // PS                # the prefix row: root and group prefix merged, no suffix
    ref_shared = reference_paged(d.q, d.k_cache, d.v_cache, d.shared_table[:, :shared_pages].contiguous(),
                                 torch.full((4,), R + P, dtype=torch.int32))
    for fa2 in (False, True):
        fc = fb.FlashInferCascade(d, fa2=fa2)
        assert [w.plan_args[0] for w in fc.levels] == [[0, 4], [0, 2, 4], [0, 1, 2, 3, 4]]
        assert max_rel_err(fc(), ref) < TOL
        assert max_rel_err(fc.prefix()[0], ref_shared) < TOL
    for shared in (True, False):
        assert max_rel_err(fb.FlashInferDecode(d, shared=shared, tensor_cores=False)(), ref) < TOL


def test_the_runner_checks_and_times_a_tree(monkeypatch):
    from kernels_probe import runner
    from kernels_probe.attention import torch_backend

    def flash(q4, k4, v4, scale):       # torch's flash kernel needs CUDA: a float32 stand-in, same (out, lse)
        s = torch.einsum("bhld,bhtd->bhlt", q4.float(), k4.float()) * scale
        return torch.einsum("bhlt,bhtd->bhld", torch.softmax(s, -1), v4.float()).to(q4.dtype), torch.logsumexp(s, -1)

    monkeypatch.setattr(torch_backend, "flash", flash)
    monkeypatch.setattr(runner, "_time", lambda ctx, fn, sustained=False: (fn(), {"median_s": 1.0})[1])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: 0)
    ctx = runner._Ctx(torch, "cpu", 4, None, TINY)
    runner._measure_config(ctx, _tree(), ["torch", "triton"], seed=2)
    rows = {(r["backend"], r["kernel"]): r for r in ctx.measurements}
    assert set(rows) == {("triton", k) for k in KERNELS} | {("torch", "decode_dup")}
    assert all(r["config"]["root_tokens"] == R for r in ctx.measurements)
    assert all(rows[("triton", k)]["max_rel_err"] < TOL for k in ("decode_shared", "decode_dup", "cascade_total"))
    assert rows[("triton", "cascade_total")]["max_rel_err_vs_decode"] < TOL
    assert rows[("triton", "cascade_prefix")]["launch"]["kernels"] == 4
    assert {s["kernel"] for s in ctx.skipped if s["backend"] == "torch"} == set(KERNELS) - {"decode_dup"}
    for r in ctx.measurements:
        msgspec.convert({**r, "n_reps": 1, "p10_s": 1.0, "p90_s": 1.0}, TimedMeasurement)
