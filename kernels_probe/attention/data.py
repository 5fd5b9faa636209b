"""Fresh random inputs for one probe configuration, laid out as a paged KV cache.

Pages (``[num_pages, page_size, Hkv, D]``, NHD) in this order:

1. the root prefix of a three-level tree, one copy shared by every sequence: ``R / page_size`` pages
   (none when root_tokens is 0);
2. the shared prefix of each group: ``n_groups * P / page_size`` pages (group-major, contiguous);
3. one region per sequence: a private copy of the root and its group's prefix (the *duplicated*
   baseline; only when it fits the memory cap) followed by its private suffix pages.

Block tables: ``shared_table`` (root pages + prefix pages of the group + own suffix pages: prefix
caching, as engines store it), ``dup_table`` (own root and prefix copy + own suffix), ``root_table``
(one row: the root pages), ``prefix_table`` (one row per group), ``suffix_table`` (own suffix pages).
Sequence regions are contiguous, so torch's dense attention can read the same bytes through strided views.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kernels_probe.attention.grid import AttentionConfig

TORCH_KV_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.float8_e4m3fn}
DUP_CAP_BYTES = 48 << 30


@dataclass
class AttentionInputs:
    cfg: AttentionConfig
    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    prefix_table: torch.Tensor
    root_table: torch.Tensor
    shared_table: torch.Tensor
    dup_table: torch.Tensor | None
    suffix_table: torch.Tensor
    seq_lens: torch.Tensor
    suffix_lens: torch.Tensor
    has_dup: bool
    seq_first_page: int
    region_tokens: int

    # dense views (token-major) for torch's attention
    def prefix_dense(self, cache: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        first = c.root_tokens // c.page_size
        n = c.n_groups * c.prefix_tokens // c.page_size
        return cache[first:first + n].reshape(c.n_groups, c.prefix_tokens, c.num_kv_heads, c.head_dim)

    def seq_dense(self, cache: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        n = c.batch * self.region_tokens // c.page_size
        return cache[self.seq_first_page:self.seq_first_page + n].reshape(
            c.batch, self.region_tokens, c.num_kv_heads, c.head_dim)

    def suffix_dense(self, cache: torch.Tensor) -> torch.Tensor:
        off = self.cfg.root_tokens + self.cfg.prefix_tokens if self.has_dup else 0
        return self.seq_dense(cache)[:, off:]


def cache_bytes(cfg: AttentionConfig, with_dup: bool) -> int:
    kvt = 2 * cfg.num_kv_heads * cfg.head_dim * cfg.kv_elem_bytes
    region = cfg.suffix_tokens + (cfg.root_tokens + cfg.prefix_tokens if with_dup else 0)
    return kvt * (cfg.root_tokens + cfg.n_groups * cfg.prefix_tokens + cfg.batch * region)


def _random_kv(shape, dtype, device, gen) -> torch.Tensor:
    if dtype == torch.float8_e4m3fn:
        out = torch.empty(shape, dtype=dtype, device=device)
        flat = out.view(shape[0], -1)
        step = max(1, (256 << 20) // max(1, flat.shape[1]))
        for i in range(0, shape[0], step):
            flat[i:i + step] = torch.randn(flat[i:i + step].shape, dtype=torch.bfloat16, device=device,
                                           generator=gen).to(dtype)
        return out
    return torch.randn(shape, dtype=dtype, device=device, generator=gen)


def build_data(cfg: AttentionConfig, device, *, seed: int = 0, dup_cap_bytes: int = DUP_CAP_BYTES,
               q_dtype=torch.bfloat16) -> AttentionInputs:
    c = cfg
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    ps, P, S, B, ng, n = c.page_size, c.prefix_tokens, c.suffix_tokens, c.batch, c.n_groups, c.group_size
    rp, pp, sp = c.root_tokens // ps, P // ps, S // ps
    has_dup = cache_bytes(c, True) <= dup_cap_bytes
    region_pages = sp + (rp + pp if has_dup else 0)
    shared_pages = rp + ng * pp     # the root, then every group's prefix
    num_pages = shared_pages + B * region_pages
    kv_dtype = TORCH_KV_DTYPES[c.kv_dtype]
    shape = (num_pages, ps, c.num_kv_heads, c.head_dim)
    k_cache = torch.empty(shape, dtype=kv_dtype, device=device)
    v_cache = torch.empty(shape, dtype=kv_dtype, device=device)
    for cache in (k_cache, v_cache):
        if rp:  # drawn only for trees, so that a two-level configuration's inputs are what they were
            cache[:rp] = _random_kv((rp, *shape[1:]), kv_dtype, device, gen)
        cache[rp:shared_pages] = _random_kv((ng * pp, *shape[1:]), kv_dtype, device, gen)
        regions = cache[shared_pages:].view(B, region_pages, *shape[1:])
        if sp:
            regions[:, region_pages - sp:] = _random_kv((B, sp, *shape[1:]), kv_dtype, device, gen)
        if has_dup:  # each sequence's own physical copy of the root and its group's prefix
            if rp:
                regions[:, :rp].copy_(cache[:rp].unsqueeze(0).expand(B, rp, *shape[1:]))
            src = cache[rp:shared_pages].view(ng, 1, pp, *shape[1:])
            regions[:, rp:rp + pp].view(ng, n, pp, *shape[1:]).copy_(src.expand(ng, n, pp, *shape[1:]))
    q = torch.randn((B, c.num_q_heads, c.head_dim), dtype=q_dtype, device=device, generator=gen)

    ar = lambda k: torch.arange(k, device=device, dtype=torch.int32)  # noqa: E731
    root_table = ar(rp)[None, :].contiguous()
    prefix_table = (rp + ar(ng)[:, None] * pp + ar(pp)[None, :]).contiguous()
    seq_base = shared_pages + ar(B) * region_pages  # first page of each sequence's region
    suffix_table = (seq_base[:, None] + (region_pages - sp) + ar(max(sp, 1))[None, :]).contiguous()
    group_of = ar(B) // n
    shared_table = torch.cat([root_table.expand(B, rp), prefix_table[group_of], suffix_table[:, :sp]],
                             dim=1).contiguous()
    dup_table = None
    if has_dup:
        dup_table = (seq_base[:, None] + ar(rp + pp + sp)[None, :]).contiguous()
    seq_lens = torch.full((B,), c.context_tokens, dtype=torch.int32, device=device)
    suffix_lens = torch.full((B,), S, dtype=torch.int32, device=device)
    return AttentionInputs(cfg=c, q=q, k_cache=k_cache, v_cache=v_cache, prefix_table=prefix_table,
                     root_table=root_table, shared_table=shared_table, dup_table=dup_table, suffix_table=suffix_table,
                     seq_lens=seq_lens,
                     suffix_lens=suffix_lens, has_dup=has_dup, seq_first_page=shared_pages,
                     region_tokens=region_pages * ps)


def shape_data(cfg: AttentionConfig, device, *, dup_cap_bytes: int = DUP_CAP_BYTES,
               q_dtype=torch.bfloat16) -> AttentionInputs:
    """Inputs with what the kernels' launches and specialisations depend on (batch, heads, head dim, page size, dtypes,
    which tables exist) over a two-page cache and one-column block tables, their values unset: enough to compile a
    configuration's launches ahead of timing it (kernels_probe.attention.precompile), nothing to run."""
    c = cfg
    shape = (2, c.page_size, c.num_kv_heads, c.head_dim)
    kv_dtype = TORCH_KV_DTYPES[c.kv_dtype]
    table = lambda rows: torch.zeros((rows, 1), dtype=torch.int32, device=device)  # noqa: E731
    has_dup = cache_bytes(c, True) <= dup_cap_bytes
    lens = torch.zeros(c.batch, dtype=torch.int32, device=device)
    return AttentionInputs(cfg=c, q=torch.empty((c.batch, c.num_q_heads, c.head_dim), dtype=q_dtype, device=device),
                           k_cache=torch.empty(shape, dtype=kv_dtype, device=device),
                           v_cache=torch.empty(shape, dtype=kv_dtype, device=device), prefix_table=table(c.n_groups),
                           root_table=table(1), shared_table=table(c.batch),
                           dup_table=table(c.batch) if has_dup else None, suffix_table=table(c.batch), seq_lens=lens,
                           suffix_lens=lens, has_dup=has_dup, seq_first_page=0, region_tokens=0)


def reference_output(data: AttentionInputs) -> torch.Tensor:
    """Float32 attention of every sequence over its whole context. A tree's is read through shared_table, one
    sequence at a time: independent of the cascade's levels, and the trees grid's batches are at most 256."""
    from kernels_probe.attention.reference import reference_paged, reference_shared_prefix

    c = data.cfg
    if c.root_tokens:
        return reference_paged(data.q, data.k_cache, data.v_cache, data.shared_table, data.seq_lens)
    return reference_shared_prefix(data.q, data.prefix_dense(data.k_cache), data.prefix_dense(data.v_cache),
                                   data.suffix_dense(data.k_cache), data.suffix_dense(data.v_cache), c.group_size)
