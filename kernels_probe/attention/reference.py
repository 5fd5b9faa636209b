"""Float32 references for decode attention (torch; any device).

Both compute softmax over the whole key set in one go (no LSE merging), so they check the cascade's
decomposition independently.
"""

from __future__ import annotations

import math

import torch


def gather_sequence(k_cache: torch.Tensor, block_table_row: torch.Tensor, length: int) -> torch.Tensor:
    """[length, Hkv, D] keys (or values) of one sequence, read through its block table row."""
    ps = k_cache.shape[1]
    n_pages = -(-length // ps)
    pages = block_table_row[:n_pages].long()
    return k_cache[pages].reshape(n_pages * ps, *k_cache.shape[2:])[:length]


def reference_paged(q, k_cache, v_cache, block_table, seq_lens, sm_scale=None) -> torch.Tensor:
    """Per-sequence float32 decode attention through a block table. q: [B, HQ, D] -> [B, HQ, D] fp32."""
    B, HQ, D = q.shape
    HKV = k_cache.shape[2]
    G = HQ // HKV
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(D)
    out = torch.empty((B, HQ, D), dtype=torch.float32, device=q.device)
    lens = [int(x) for x in seq_lens.tolist()]
    for b in range(B):
        k = gather_sequence(k_cache, block_table[b], lens[b]).float()  # [T, HKV, D]
        v = gather_sequence(v_cache, block_table[b], lens[b]).float()
        qb = q[b].float().view(HKV, G, D)
        s = torch.einsum("hgd,thd->hgt", qb, k) * scale
        p = torch.softmax(s, dim=-1)
        out[b] = torch.einsum("hgt,thd->hgd", p, v).reshape(HQ, D)
    return out


def reference_shared_prefix(q, prefix_k, prefix_v, suffix_k, suffix_v, seqs_per_group, sm_scale=None) -> torch.Tensor:
    """Float32 attention of each sequence over [its group's prefix ; its own suffix], computed directly.

    q: [B, HQ, D]; prefix_k/v: [n_groups, P, HKV, D]; suffix_k/v: [B, S, HKV, D] (S may be 0).
    Memory: one [HKV, n*G, P] fp32 score block per group.
    """
    B, HQ, D = q.shape
    n_groups, P, HKV, _ = prefix_k.shape
    G = HQ // HKV
    n = seqs_per_group
    S = suffix_k.shape[1]
    scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(D)
    out = torch.empty((B, HQ, D), dtype=torch.float32, device=q.device)
    for grp in range(n_groups):
        sl = slice(grp * n, (grp + 1) * n)
        qg = q[sl].float().view(n, HKV, G, D)
        kp = prefix_k[grp].float()  # [P, HKV, D]
        vp = prefix_v[grp].float()
        s_pre = torch.einsum("nhgd,phd->nhgp", qg, kp) * scale  # [n, HKV, G, P]
        if S > 0:
            ks = suffix_k[sl].float()  # [n, S, HKV, D]
            vs = suffix_v[sl].float()
            s_suf = torch.einsum("nhgd,nshd->nhgs", qg, ks) * scale
            m = torch.maximum(s_pre.amax(-1, keepdim=True), s_suf.amax(-1, keepdim=True))
            e_pre = torch.exp(s_pre - m)
            e_suf = torch.exp(s_suf - m)
            den = e_pre.sum(-1, keepdim=True) + e_suf.sum(-1, keepdim=True)
            o = torch.einsum("nhgp,phd->nhgd", e_pre, vp) + torch.einsum("nhgs,nshd->nhgd", e_suf, vs)
            o = o / den
            del s_suf, e_suf
        else:
            o = torch.einsum("nhgp,phd->nhgd", torch.softmax(s_pre, dim=-1), vp)
        del s_pre
        out[sl] = o.reshape(n, HQ, D)
    return out


def max_rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    """max over (sequence, query head) rows of ||out - ref||_2 / ||ref||_2; inf when out has NaN/inf."""
    o = out.float().reshape(-1, out.shape[-1])
    r = ref.float().reshape(-1, ref.shape[-1])
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    num = (o - r).norm(dim=-1)
    den = r.norm(dim=-1).clamp_min(1e-30)
    return float((num / den).max())


def rel_err(out, ref) -> float:
    """||out - ref||2 / ||ref||2 over the whole tensor, in float32."""
    o, r = out.float(), ref.float()
    return float(((o - r).norm() / r.norm().clamp_min(1e-30)).item())
