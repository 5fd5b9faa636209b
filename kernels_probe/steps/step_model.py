"""A whole model-shaped decode step on one GPU (or one tensor-parallel rank): random bf16 (or fp8 e4m3)
weights of a dense GQA preset or held-out config, the probe's paged KV cache (one cache per layer, prefix
pages shared through the block table), the engine's glue, and a choice of attention kernels per mode:

* per-sequence: FlashInfer's batch decode (tensor cores) or the probe's Triton paged decode, both over
  the shared prefix pages (prefix caching, as engines run it);
* cascade: FlashInfer's MultiLevelCascadeAttentionWrapper as shipped, the same two levels on FA2
  prefill wrappers + merge_state_in_place, or the probe's Triton cascade.

A step: embedding gather; per layer add-RMSNorm, qkv GEMM (+bias), RoPE, K/V append, attention, o GEMM
(+ all-reduce under TP), add-RMSNorm, gate_up GEMM, SiLU-and-mul, down GEMM (+ all-reduce); final norm,
lm_head, argmax. All layers run in one CUDA graph on the GPU. The torch glue and the Triton kernels
also run on the CPU (Triton's interpreter), which is how the tests check the step's plumbing.
"""

from __future__ import annotations

import math

import torch

from kernels_probe.steps.glue import AppendTarget, TorchGlue, make_glue, rope_cache
from kernels_probe.steps.layer_graph import linear
from kernels_probe.steps.page_layout import page_layout
from kernels_probe.steps.step_shapes import LayerShape, WorkloadStep

PAGE_SIZE = 16


class StepWeights:
    """Random bf16 weights, one tensor per matrix per layer (so every layer streams its own bytes)."""

    def __init__(self, shape: LayerShape, device, *, seed: int = 0, dtype=torch.bfloat16, weight_dtype: str = "bf16"):
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        s = shape
        self.weight_dtype = weight_dtype
        wdt = torch.float8_e4m3fn if weight_dtype == "fp8" else dtype   # fp8: the four layer GEMMs and lm_head

        def mat(n, k):
            return (torch.randn((n, k), dtype=dtype, device=device, generator=g) * (1.0 / math.sqrt(k))).to(wdt)

        gm = s.gemms()
        self.layers = []
        for _ in range(s.layers):
            lw = {name: mat(*gm[name]) for name in ("qkv", "o", "gate_up", "down")}
            lw["qkv_bias"] = (torch.randn(gm["qkv"][0], dtype=dtype, device=device, generator=g) * 0.1
                              if s.qkv_bias else None)
            lw["norm1"] = torch.ones(s.hidden, dtype=dtype, device=device)
            lw["norm2"] = torch.ones(s.hidden, dtype=dtype, device=device)
            self.layers.append(lw)
        self.embed = torch.randn((s.vocab, s.hidden), dtype=dtype, device=device, generator=g)
        self.lm_head = mat(s.vocab, s.hidden)
        self.final_norm = torch.ones(s.hidden, dtype=dtype, device=device)


class StepKV:
    """Paged K/V caches [layers, pages, page_size, Hkv, D] and the block tables of one step point.

    Pages: each group's prefix (contiguous), then each sequence's private pages (ceil(S / page_size)).
    The new token of step k sits at position P + S - 1 of its sequence (the last suffix slot)."""

    def __init__(self, shape: LayerShape, pt: WorkloadStep, device, *, seed: int = 0, page_size: int = PAGE_SIZE,
                 dtype=None):
        ps = page_size
        layout = page_layout(pt, ps, device)
        self.shape, self.pt, self.page_size = shape, pt, ps
        B, P, S, num_pages = pt.batch, pt.prefix_tokens, pt.suffix_tokens, layout.num_pages
        cache_shape = (shape.layers, num_pages, ps, shape.kv_heads, shape.head_dim)
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        if dtype is None:
            dtype = torch.float8_e4m3fn if getattr(pt, "kv_dtype", "bf16") == "fp8" else torch.bfloat16
        self.k = torch.empty(cache_shape, dtype=dtype, device=device)
        self.v = torch.empty(cache_shape, dtype=dtype, device=device)
        for cache in (self.k, self.v):
            for layer in range(shape.layers):
                if dtype == torch.float8_e4m3fn:   # random bf16 converted, as the attention rows do
                    cache[layer].copy_(torch.randn(cache_shape[1:], dtype=torch.bfloat16, device=device, generator=g))
                else:
                    cache[layer].normal_(generator=g)
        self.prefix_table, self.suffix_table = layout.prefix_table, layout.suffix_table
        self.shared_table = layout.shared_table
        self.seq_lens = torch.full((B,), P + S, dtype=torch.int32, device=device)
        self.suffix_lens = torch.full((B,), S, dtype=torch.int32, device=device)
        self.append = AppendTarget(self.shared_table, self.seq_lens, ps)

    def bytes(self) -> int:
        return 2 * self.k.numel() * self.k.element_size()


# ----------------------------------------------------------------------------------- attention kernels


def _csr(table: torch.Tensor, length: int, page_size: int):
    rows = table.shape[0]
    n_pages = -(-length // page_size)
    indices = table[:, :n_pages].reshape(-1).to(torch.int32).contiguous()
    indptr = (torch.arange(rows + 1, device=table.device, dtype=torch.int32) * n_pages).contiguous()
    last = torch.full((rows,), length - (n_pages - 1) * page_size, dtype=torch.int32, device=table.device)
    return indptr, indices, last


class Attention:
    """attention(layer, q [B, Hq, D]) -> out [B, Hq, D] over layer's cache, for one (backend, mode)."""

    def __init__(self, kv: StepKV, backend: str, mode: str, q: torch.Tensor, *, sm_count: int = 132):
        self.kv, self.backend, self.mode, self.q = kv, backend, mode, q
        s, pt, ps = kv.shape, kv.pt, kv.page_size
        self.out = torch.empty_like(q)
        P, S = pt.prefix_tokens, pt.suffix_tokens
        if backend == "triton":
            from cascade_plan.own_kernel_pages import launch_shared_tokens
            from cascade_plan.own_kernel_tune import DEFAULT_TUNE
            from kernels_probe.attention.triton_plans import CascadePlan, DecodePlan

            if mode == "per_sequence":
                shared = launch_shared_tokens(P, pt.group_size, DEFAULT_TUNE)
                self.plans = [DecodePlan(q, kv.k[i], kv.v[i], kv.shared_table, kv.seq_lens, P + S, self.out,
                                         sm_count=sm_count, shared_prefix_tokens=shared) for i in range(s.layers)]
            else:
                lv = [(kv.prefix_table, P, pt.group_size, pt.n_groups)]
                self.plans = [CascadePlan(q, kv.k[i], kv.v[i], lv, kv.suffix_table, kv.suffix_lens, S, self.out,
                                          sm_count=sm_count) for i in range(s.layers)]
            self.variant = None
            return
        import flashinfer

        from kernels_probe.attention.flashinfer_backend import WORKSPACE_BYTES

        self.fi = flashinfer
        dev = q.device
        self.ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        hq, hkv, d = s.q_heads, s.kv_heads, s.head_dim
        if mode == "per_sequence":
            ip, ix, lp = _csr(kv.shared_table, P + S, ps)
            self.w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                self.ws, "NHD", use_cuda_graph=True, use_tensor_cores=True, paged_kv_indptr_buffer=ip,
                paged_kv_indices_buffer=ix, paged_kv_last_page_len_buffer=lp)
            self.w.plan(ip, ix, lp, hq, hkv, d, ps, q_data_type=q.dtype, kv_data_type=kv.k.dtype)
            self.variant = "tensor_cores"
            return
        ip0, ix0, lp0 = _csr(kv.prefix_table, P, ps)
        qo0 = (torch.arange(pt.n_groups + 1, device=dev, dtype=torch.int32) * pt.group_size).contiguous()
        ip1, ix1, lp1 = _csr(kv.suffix_table, S, ps)
        qo1 = torch.arange(pt.batch + 1, device=dev, dtype=torch.int32)
        levels = [(qo0, ip0, ix0, lp0), (qo1, ip1, ix1, lp1)]
        if backend == "flashinfer-fa2":
            self.levels = [flashinfer.BatchPrefillWithPagedKVCacheWrapper(
                self.ws, "NHD", use_cuda_graph=True, qo_indptr_buf=qo, paged_kv_indptr_buf=ip,
                paged_kv_indices_buf=ix, paged_kv_last_page_len_buf=lp, backend="fa2") for (qo, ip, ix, lp) in levels]
            for w, (qo, ip, ix, lp) in zip(self.levels, levels):
                w.plan(qo, ip, ix, lp, hq, hkv, d, ps, causal=False, q_data_type=q.dtype, kv_data_type=kv.k.dtype)
            self.variant = "fa2"
        else:
            self.wrapper = flashinfer.MultiLevelCascadeAttentionWrapper(
                2, self.ws, "NHD", use_cuda_graph=True, qo_indptr_buf_arr=[lv[0] for lv in levels],
                paged_kv_indptr_buf_arr=[lv[1] for lv in levels], paged_kv_indices_buf_arr=[lv[2] for lv in levels],
                paged_kv_last_page_len_buf_arr=[lv[3] for lv in levels])
            self.wrapper.plan(*[[lv[i] for lv in levels] for i in range(4)], hq, hkv, d, ps, q_data_type=q.dtype,
                              kv_data_type=kv.k.dtype)
            self.variant = "auto"

    def __call__(self, layer: int) -> torch.Tensor:
        if self.backend == "triton":
            self.plans[layer]()
            return self.out
        kv = (self.kv.k[layer], self.kv.v[layer])
        if self.mode == "per_sequence":
            return self.w.run(self.q, kv, out=self.out)
        if self.backend == "flashinfer-fa2":
            out, lse = self.levels[1].run(self.q, kv, return_lse=True)
            o0, l0 = self.levels[0].run(self.q, kv, return_lse=True)
            self.fi.merge_state_in_place(out, lse, o0, l0)
            return out
        return self.wrapper.run(self.q, kv)


# ----------------------------------------------------------------------------------------- the step


class DecodeStep:
    """One decode step of the whole model; call it (eagerly or inside a CUDA graph capture)."""

    def __init__(self, shape: LayerShape, weights: StepWeights, kv: StepKV, backend: str, mode: str, *,
                 glue: str = "fused", allreduce=None, sm_count: int = 132, seed: int = 0):
        self.s, self.w, self.kv = shape, weights, kv
        dev = kv.k.device
        B = kv.pt.batch
        g = torch.Generator(device=dev)
        g.manual_seed(seed + 7)
        self.tokens = torch.randint(0, shape.vocab, (B,), device=dev, generator=g)
        self.q = torch.empty((B, shape.q_heads, shape.head_dim), dtype=torch.bfloat16, device=dev)
        self.attn = Attention(kv, backend, mode, self.q, sm_count=sm_count)
        self.glue = make_glue(glue, rope_cache(int(kv.seq_lens.max()) + 1, shape.head_dim, shape.rope_theta, dev))
        if kv.k.dtype == torch.float8_e4m3fn and glue == "fused":
            # FlashInfer's append takes the cache's dtype: quantise-and-scatter as torch ops (vLLM fuses
            # the same two steps into reshape_and_cache_flash)
            self.glue.append = TorchGlue.append.__get__(self.glue)
        self.allreduce = allreduce
        self.layer0_attn = torch.empty_like(self.q)  # copy of layer 0's attention output (mode comparison)
        self.hidden_out = None
        self.next_tokens = None

    def __call__(self):
        s, w, kv, glue = self.s, self.w, self.kv, self.glue
        F = torch.nn.functional
        B, hq, hkv, d = kv.pt.batch, s.q_heads, s.kv_heads, s.head_dim
        residual = F.embedding(self.tokens, w.embed)
        x = glue.rmsnorm(residual, w.layers[0]["norm1"])
        for i, lw in enumerate(w.layers):
            if i > 0:
                glue.add_rmsnorm(x, residual, lw["norm1"])
            qkv = linear(x, lw["qkv"], bias=lw["qkv_bias"])
            q, k, v = qkv[:, :hq * d], qkv[:, hq * d:(hq + hkv) * d], qkv[:, (hq + hkv) * d:]
            glue.rope(q, k, kv.append.positions, d)
            glue.append(k.view(B, hkv, d), v.view(B, hkv, d), kv.k[i], kv.v[i], kv.append)
            self.q.copy_(q.view(B, hq, d))
            a = self.attn(i)
            if i == 0:
                self.layer0_attn.copy_(a)
            x = linear(a.view(B, hq * d), lw["o"])
            if self.allreduce is not None:
                self.allreduce(x)
            glue.add_rmsnorm(x, residual, lw["norm2"])
            x = linear(glue.silu_mul(linear(x, lw["gate_up"])), lw["down"])
            if self.allreduce is not None:
                self.allreduce(x)
        glue.add_rmsnorm(x, residual, w.final_norm)
        self.hidden_out = x
        logits = linear(x, w.lm_head)
        self.next_tokens = torch.argmax(logits, dim=-1)
        return self.next_tokens


def reference_attention(kv: StepKV, layer: int, q: torch.Tensor, rows: list[int]) -> torch.Tensor:
    """Float32 attention of the given sequences over their whole context (prefix + suffix) in layer's cache."""
    from kernels_probe.attention.reference import reference_paged

    idx = torch.tensor(rows, device=q.device)
    return reference_paged(q[idx], kv.k[layer], kv.v[layer], kv.shared_table[idx], kv.seq_lens[idx])


def check_rows(pt: WorkloadStep, limit: int = 8) -> list[int]:
    """A few sequences to check against the reference: first and last of the first and last groups."""
    n, B = pt.group_size, pt.batch
    rows = sorted({0, n - 1, B - n, B - 1, B // 2})
    return [r for r in rows if 0 <= r < B][:limit]
