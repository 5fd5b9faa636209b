"""The engine glue of a decode step, in two variants: "fused" (FlashInfer's kernels, as vLLM and
SGLang run them) and "torch" (plain torch ops, unfused). Both work on the same tensors:

* add-RMSNorm: ``residual += x; x = rmsnorm(residual) * w`` (in place on x and residual);
* RoPE (NeoX style, cos/sin cache in float32) on q and k in place, at each token's position;
* append the new token's K and V into the paged cache (one token per sequence);
* SiLU-and-mul of the gate/up projection.

The torch variant also runs on the CPU (tests check the two against each other on the GPU and the
torch variant against a hand computation on the CPU).
"""

from __future__ import annotations

import torch

EPS = 1e-5


def rope_cache(max_pos: int, head_dim: int, theta: float, device) -> torch.Tensor:
    """[max_pos, head_dim] float32: cos in the first half, sin in the second (FlashInfer's and vLLM's layout)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    ang = torch.arange(max_pos, dtype=torch.float32, device=device)[:, None] * inv[None, :]
    return torch.cat([ang.cos(), ang.sin()], dim=-1).contiguous()


class AppendTarget:
    """Where each sequence's new token goes: page and slot of token position pos (0-based) of each
    sequence, through its block table. Tables of int32; every sequence appends one token."""

    def __init__(self, block_table: torch.Tensor, seq_lens: torch.Tensor, page_size: int):
        dev = block_table.device
        b = block_table.shape[0]
        self.page_size = page_size
        self.positions = (seq_lens.to(torch.int32) - 1).contiguous()
        pages = block_table.long().gather(1, (self.positions.long() // page_size)[:, None])[:, 0]
        self.slots = (pages * page_size + self.positions.long() % page_size).contiguous()  # flat token slot
        self.batch_indices = torch.arange(b, dtype=torch.int32, device=dev)
        # FlashInfer's CSR form of the whole sequence's pages
        n_pages = (seq_lens.long() + page_size - 1) // page_size
        self.kv_indptr = torch.zeros(b + 1, dtype=torch.int32, device=dev)
        self.kv_indptr[1:] = torch.cumsum(n_pages, 0).to(torch.int32)
        cols = torch.arange(block_table.shape[1], device=dev)[None, :]
        self.kv_indices = block_table[cols < n_pages[:, None]].to(torch.int32).contiguous()
        self.kv_last_page_len = (seq_lens.long() - (n_pages - 1) * page_size).to(torch.int32).contiguous()


class TorchGlue:
    variant = "torch"

    def __init__(self, cos_sin: torch.Tensor):
        self.cos_sin = cos_sin

    def rmsnorm(self, x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)

    def add_rmsnorm(self, x, residual, w):
        residual.add_(x)
        x.copy_(self.rmsnorm(residual, w))

    def rope(self, q, k, positions, head_dim):
        """q: [M, Hq*D] view, k: [M, Hkv*D] view (rows may be strided): rotated in place."""
        cs = self.cos_sin[positions.long()]                 # [M, D]
        half = head_dim // 2
        cos, sin = cs[:, None, :half], cs[:, None, half:]
        for t in (q, k):
            v = t.view(t.shape[0], -1, head_dim)
            x1, x2 = v[..., :half].float(), v[..., half:].float()
            out = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)
            v.copy_(out.to(t.dtype))

    def append(self, k, v, k_cache, v_cache, target: AppendTarget):
        """k, v: [M, Hkv, D]; caches [pages, page_size, Hkv, D]."""
        kc = k_cache.view(-1, *k_cache.shape[2:])
        vc = v_cache.view(-1, *v_cache.shape[2:])
        if kc.dtype == torch.float8_e4m3fn:   # no fp8 index_copy on CUDA: quantise, then scatter the bytes
            kc, vc = kc.view(torch.uint8), vc.view(torch.uint8)
            k, v = k.to(torch.float8_e4m3fn).view(torch.uint8), v.to(torch.float8_e4m3fn).view(torch.uint8)
        kc.index_copy_(0, target.slots, k.to(kc.dtype))
        vc.index_copy_(0, target.slots, v.to(vc.dtype))

    def silu_mul(self, gu):
        i = gu.shape[-1] // 2
        return torch.nn.functional.silu(gu[:, :i]) * gu[:, i:]


class FusedGlue(TorchGlue):
    variant = "fused"

    def __init__(self, cos_sin: torch.Tensor):
        super().__init__(cos_sin)
        import flashinfer

        self.fi = flashinfer

    def rmsnorm(self, x, w):
        return self.fi.rmsnorm(x, w, EPS)

    def add_rmsnorm(self, x, residual, w):
        self.fi.fused_add_rmsnorm(x, residual, w, EPS)

    def rope(self, q, k, positions, head_dim):
        self.fi.apply_rope_with_cos_sin_cache_inplace(positions, q, k, head_dim, self.cos_sin, is_neox=True)

    def append(self, k, v, k_cache, v_cache, target: AppendTarget):
        self.fi.append_paged_kv_cache(k, v, target.batch_indices, target.positions, (k_cache, v_cache),
                                      target.kv_indices, target.kv_indptr, target.kv_last_page_len, "NHD")

    def silu_mul(self, gu):
        return self.fi.silu_and_mul(gu)


def make_glue(variant: str, cos_sin: torch.Tensor) -> TorchGlue:
    return FusedGlue(cos_sin) if variant == "fused" else TorchGlue(cos_sin)


def warm_build_glue(device="cuda") -> list[str]:
    """JIT-build FlashInfer's glue kernels on a tiny problem; returns error strings (empty = ok)."""
    errors = []
    try:
        g = FusedGlue(rope_cache(64, 128, 1e4, device))
        x = torch.randn(2, 256, dtype=torch.bfloat16, device=device)
        r, w = torch.randn_like(x), torch.ones(256, dtype=torch.bfloat16, device=device)
        g.rmsnorm(x, w)
        g.add_rmsnorm(x, r, w)
        qkv = torch.randn(2, 6 * 128, dtype=torch.bfloat16, device=device)
        g.rope(qkv[:, :4 * 128], qkv[:, 4 * 128:5 * 128], torch.tensor([3, 5], dtype=torch.int32, device=device), 128)
        kc = torch.zeros(4, 16, 1, 128, dtype=torch.bfloat16, device=device)
        vc = torch.zeros_like(kc)
        t = AppendTarget(torch.tensor([[0, 1], [2, 3]], dtype=torch.int32, device=device),
                         torch.tensor([5, 17], dtype=torch.int32, device=device), 16)
        g.append(qkv[:, :128].view(2, 1, 128), qkv[:, 128:256].view(2, 1, 128), kc, vc, t)
        g.silu_mul(torch.randn(2, 512, dtype=torch.bfloat16, device=device))
        torch.cuda.synchronize()
    except Exception as exc:
        errors.append(f"glue: {type(exc).__name__}: {exc}"[:300])
    return errors
