"""A whole MoE decode step on one GPU (one tensor-parallel rank), GQA or MLA attention, all layers in one
CUDA graph; random weights (bf16, or fp8 e4m3 for every GEMM weight but the router's and MLA's absorbed
matrices, as vLLM keeps them), the probe's paged caches, the engine's glue.

Per layer: add-RMSNorm; the attention block; add-RMSNorm; the MLP: a dense gate_up / SiLU-and-mul / down on
the model's dense layers (DeepSeek's first 3), else the MoE block:

* router: gate GEMM (bf16, hidden -> E), softmax top-k, the top-k weights renormalised (DeepSeek-V3's
  sigmoid and group-limited top-k route differently; the cost is the same small kernels);
* alignment inside the graph (vLLM's moe_align_block_size as torch ops: per-expert counts, padded to whole
  blocks of BLOCK_M rows, a stable sort of the (token, slot) pairs by expert) into fixed-capacity buffers;
  blocks past the routed rows carry expert -1 and exit at once;
* the routed experts: the MoE probe's Triton grouped GEMM (kernels_probe/moe/moe_probe.py) for gate_up, then
  SiLU-and-mul, then down (fp8: the activations quantised per tensor, scale 1, as the probe's fp8 rows);
  the block config is picked per batch size from the probe's three candidates by timing gate_up + down
  eagerly (vLLM ships tuned configs per shape);
* the weighted combine of each token's k rows (one batched GEMM: what vLLM's moe_sum reads), plus the
  shared experts (a dense gate_up / down) where the model has them.

GQA attention is the dense step's (kernels_probe/steps/step_model.py: FlashInfer per-sequence / cascade / FA2
levels, or the probe's Triton kernels). MLA in its absorbed form (vLLM's and SGLang's decode path): q down
(q_a) + RMSNorm + q up (q_b), kv down (kv_a: latent + RoPE key) + RMSNorm of the latent, RoPE on q_pe and
k_pe, the latent and k_pe appended to the layer's caches, q_nope absorbed into the latent (bmm with W_UK),
FlashInfer's MLA wrapper per sequence or as the two-pass cascade with merge_state (kernels_probe/attention/mla.py),
the output through W_UV (bmm) and o. On the CPU (tests) MLA attention runs as a float32 torch reference
("torch" backend) and the experts under Triton's interpreter.
"""

from __future__ import annotations

import math
import os
from types import SimpleNamespace

import torch

from kernels_probe.moe.moe_step_shapes import MoeStepShape
from kernels_probe.steps.glue import AppendTarget, TorchGlue, make_glue, rope_cache
from kernels_probe.steps.layer_graph import linear
from kernels_probe.steps.page_layout import page_layout
from kernels_probe.steps.step_model import PAGE_SIZE, Attention, StepKV
from kernels_probe.steps.step_shapes import WorkloadStep

FP8 = torch.float8_e4m3fn


class MoeStepWeights:
    """Random weights of every layer (each layer its own tensors, so every layer streams its own bytes)."""

    def __init__(self, s: MoeStepShape, device, *, seed: int = 0, weight_dtype: str = "bf16"):
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        bf = torch.bfloat16
        wdt = FP8 if weight_dtype == "fp8" else bf
        self.weight_dtype, self.s = weight_dtype, s
        self.expert_configs: dict[int, object] = {}    # batch -> the grouped GEMM's block config

        def raw(*shape):
            t = torch.randn(shape, dtype=bf, device=device, generator=g)
            return t.mul_(1.0 / math.sqrt(shape[-1]))

        def mat(*shape):
            t = raw(*shape)
            return t if wdt == bf else t.to(wdt)

        ones = lambda n: torch.ones(n, dtype=bf, device=device)  # noqa: E731
        h, H = s.hidden, s.q_heads
        self.layers = []
        for i in range(s.layers):
            lw: dict = {"norm1": ones(h), "norm2": ones(h)}
            if s.attention == "mla":
                qd = H * (s.nope_dim + s.rope_dim)
                if s.q_lora:
                    lw.update(q_a=mat(s.q_lora, h), q_a_norm=ones(s.q_lora), q_b=mat(qd, s.q_lora))
                else:
                    lw["q"] = mat(qd, h)
                lw.update(kv_a=mat(s.kv_lora + s.rope_dim, h), kv_a_norm=ones(s.kv_lora),
                          w_uk=raw(H, s.nope_dim, s.kv_lora), w_uv=raw(H, s.kv_lora, s.v_dim), o=mat(h, H * s.v_dim))
            else:
                d, hkv = s.head_dim, s.kv_heads
                lw["qkv"] = mat((H + 2 * hkv) * d, h)
                lw["qkv_bias"] = (torch.randn((H + 2 * hkv) * d, dtype=bf, device=device, generator=g) * 0.1
                                  if s.qkv_bias else None)
                lw["o"] = mat(h, H * d)
            if i < s.dense_layers:
                lw.update(gate_up=mat(2 * s.intermediate, h), down=mat(h, s.intermediate))
            else:
                lw.update(router=raw(s.experts, h), w13=mat(s.experts, 2 * s.expert_width, h),
                          w2=mat(s.experts, h, s.expert_width))
                if s.shared_width:
                    lw.update(shared_gate_up=mat(2 * s.shared_width, h), shared_down=mat(h, s.shared_width))
            self.layers.append(lw)
        self.embed = torch.randn((s.vocab, h), dtype=bf, device=device, generator=g)
        self.lm_head = mat(s.vocab, h)
        self.final_norm = ones(h)


# ------------------------------------------------------------------------------------------ MLA caches


class MlaKV:
    """Latent caches ckv [layers, pages, page_size, kv_lora] and kpe [.., rope] and the block tables (the
    layout of StepKV: each group's prefix pages, then each sequence's private pages)."""

    def __init__(self, s: MoeStepShape, pt: WorkloadStep, device, *, seed: int = 0, page_size: int = PAGE_SIZE):
        ps = page_size
        layout = page_layout(pt, ps, device)
        self.shape, self.pt, self.page_size = s, pt, ps
        B, P, S, pages = pt.batch, pt.prefix_tokens, pt.suffix_tokens, layout.num_pages
        dt = FP8 if pt.kv_dtype == "fp8" else torch.bfloat16
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        self.ckv = torch.empty((s.layers, pages, ps, s.kv_lora), dtype=dt, device=device)
        self.kpe = torch.empty((s.layers, pages, ps, s.rope_dim), dtype=dt, device=device)
        for cache in (self.ckv, self.kpe):
            for layer in range(s.layers):
                cache[layer].copy_(torch.randn(cache.shape[1:], dtype=torch.bfloat16, device=device, generator=g))
        self.prefix_table, self.suffix_table = layout.prefix_table, layout.suffix_table
        self.shared_table = layout.shared_table
        self.seq_lens = torch.full((B,), P + S, dtype=torch.int32, device=device)
        self.append = AppendTarget(self.shared_table, self.seq_lens, ps)
        self.sm_scale = 1.0 / math.sqrt(s.nope_dim + s.rope_dim)

    def bytes(self) -> int:
        return self.ckv.numel() * self.ckv.element_size() + self.kpe.numel() * self.kpe.element_size()

    def write(self, layer: int, ckv: torch.Tensor, kpe: torch.Tensor) -> None:
        """The new token's latent [B, kv_lora] and RoPE key [B, rope] into the layer's caches (vLLM's
        concat_and_cache_mla; fp8: quantised, then scattered as bytes)."""
        for cache, new in ((self.ckv[layer], ckv), (self.kpe[layer], kpe)):
            flat = cache.view(-1, cache.shape[-1])
            if flat.dtype == FP8:
                flat, new = flat.view(torch.uint8), new.to(FP8).view(torch.uint8)
            flat.index_copy_(0, self.append.slots, new.to(flat.dtype))


def reference_mla_layer(kv: MlaKV, layer: int, q_nope, q_pe, rows: list[int]) -> torch.Tensor:
    """float32 [len(rows), H, kv_lora]: one softmax over each sequence's whole context in layer's caches."""
    s, ps = kv.shape, kv.page_size
    T = kv.pt.prefix_tokens + kv.pt.suffix_tokens
    n_pages = -(-T // ps)
    outs = []
    for b in rows:
        pg = kv.shared_table[b, :n_pages].long()
        ckv = kv.ckv[layer][pg].reshape(-1, s.kv_lora)[:T].float()
        kpe = kv.kpe[layer][pg].reshape(-1, s.rope_dim)[:T].float()
        sc = (q_nope[b].float() @ ckv.T + q_pe[b].float() @ kpe.T) * kv.sm_scale
        outs.append(torch.softmax(sc, -1) @ ckv)
    return torch.stack(outs)


class MlaAttention:
    """attention(layer) -> [B, H, kv_lora] over layer's latent caches from the step's q_nope / q_pe buffers."""

    def __init__(self, kv: MlaKV, backend: str, mode: str, q_nope, q_pe):
        self.kv, self.backend, self.mode, self.q_nope, self.q_pe = kv, backend, mode, q_nope, q_pe
        self.variant = "mla"
        if backend == "torch":          # the CPU tests' stand-in: the float32 reference per sequence
            if mode != "per_sequence":
                raise ValueError("the torch MLA stand-in is per-sequence only")
            return
        if backend != "flashinfer":
            raise ValueError(f"MLA attention runs on FlashInfer (or torch on the CPU), not {backend!r}")
        from kernels_probe.attention.mla import FlashInferMla, MlaShape

        s, pt = kv.shape, kv.pt
        c = MlaShape(prefix_tokens=pt.prefix_tokens, group_size=pt.group_size, n_groups=pt.n_groups,
                      suffix_tokens=pt.suffix_tokens, num_heads=s.q_heads, kv_lora_rank=s.kv_lora,
                      qk_rope_head_dim=s.rope_dim, kv_dtype=pt.kv_dtype, page_size=kv.page_size)
        self.d = SimpleNamespace(c=c, ckv=kv.ckv[0], kpe=kv.kpe[0], q_nope=q_nope, q_pe=q_pe, sm_scale=kv.sm_scale,
                                 shared_table=kv.shared_table, prefix_table=kv.prefix_table,
                                 suffix_table=kv.suffix_table)
        self.fm = FlashInferMla(self.d, mode)     # planned once: every layer has the same tables

    def __call__(self, layer: int) -> torch.Tensor:
        if self.backend == "torch":
            B = self.kv.pt.batch
            return reference_mla_layer(self.kv, layer, self.q_nope, self.q_pe, list(range(B))).to(torch.bfloat16)
        self.d.ckv, self.d.kpe = self.kv.ckv[layer], self.kv.kpe[layer]
        return self.fm()


# -------------------------------------------------------------------------------------- routed experts


def align_in_graph(ids: torch.Tensor, experts: int, block_m: int, slots: torch.Tensor, block_expert: torch.Tensor,
                   block_starts: torch.Tensor, ones: torch.Tensor, arange: torch.Tensor) -> None:
    """moe_align_block_size as capturable torch ops: (token, slot) pairs sorted by expert into `slots`
    (padding: the sentinel m x k), each block's expert into `block_expert` (-1 past the routed rows)."""
    flat = ids.reshape(-1)
    n = flat.numel()
    counts = torch.zeros(experts, dtype=torch.int64, device=flat.device).scatter_add_(0, flat, ones)
    padded = (counts + block_m - 1) // block_m * block_m
    cum = torch.cumsum(padded, 0)
    excl = torch.cumsum(counts, 0) - counts
    sorted_ids, order = torch.sort(flat, stable=True)
    dest = (cum - padded)[sorted_ids] + (arange - excl[sorted_ids])
    slots.fill_(n)
    slots.scatter_(0, dest, order.to(torch.int32))
    be = torch.searchsorted(cum, block_starts, right=True).clamp_max(experts - 1)
    block_expert.copy_(torch.where(block_starts < cum[-1], be, -1).to(torch.int32))


class RoutedExperts:
    """The MoE block of one layer at m tokens: router, top-k, alignment, gate_up / SiLU-and-mul / down as the
    probe's grouped GEMM, weighted combine (buffers shared by every layer; the graph runs them in order)."""

    def __init__(self, s: MoeStepShape, m: int, device, cfg, fp8: bool):
        from kernels_probe.moe.moe_probe import Aligned

        self.s, self.m, self.cfg, self.fp8 = s, m, cfg, fp8
        n = m * s.top_k
        bm = cfg.block_m
        cap = -(-n // bm) + min(s.experts, n)
        self.slots = torch.empty(cap * bm, dtype=torch.int32, device=device)
        self.block_expert = torch.empty(cap, dtype=torch.int32, device=device)
        self.block_starts = torch.arange(cap, device=device, dtype=torch.int64) * bm
        self.ones = torch.ones(n, dtype=torch.int64, device=device)
        self.arange = torch.arange(n, device=device, dtype=torch.int64)
        self.al = Aligned(bm, self.slots, self.block_expert, torch.empty(0, device=device), [], n)
        self.out1 = torch.empty((n, 2 * s.expert_width), dtype=torch.bfloat16, device=device)
        self.out2 = torch.zeros((n, s.hidden), dtype=torch.bfloat16, device=device)   # read by "expert_gemms" skips
        self.topk_ids = None
        self.skip_gemms = False      # diagnosis: router, alignment and combine without the grouped GEMMs

    def route(self, x, router):
        logits = torch.nn.functional.linear(x, router)
        w, ids = torch.topk(torch.softmax(logits.float(), -1), self.s.top_k, dim=-1)
        if self.s.norm_topk:
            w = w / w.sum(-1, keepdim=True)
        return w, ids

    def __call__(self, x, lw, glue):
        from kernels_probe.moe.moe_probe import TritonGroupedGemm

        s = self.s
        w, ids = self.route(x, lw["router"])
        self.topk_ids = ids
        align_in_graph(ids, s.experts, self.cfg.block_m, self.slots, self.block_expert, self.block_starts,
                       self.ones, self.arange)
        if not self.skip_gemms:
            a = x.to(FP8) if self.fp8 else x
            TritonGroupedGemm(a, lw["w13"], self.out1, self.al, s.top_k, self.cfg)()
            act = glue.silu_mul(self.out1)
            if self.fp8:
                act = act.to(FP8)
            TritonGroupedGemm(act, lw["w2"], self.out2, self.al, 1, self.cfg)()
        y = torch.bmm(w.to(torch.bfloat16).unsqueeze(1), self.out2.view(self.m, s.top_k, s.hidden)).squeeze(1)
        if s.shared_width:
            y = y + linear(glue.silu_mul(linear(x, lw["shared_gate_up"])), lw["shared_down"])
        return y


def pick_expert_config(w: MoeStepWeights, m: int, device, *, reps: int = 5):
    """The grouped GEMM's block config at m tokens: the fastest of the MoE probe's candidates on layer one's
    experts (gate_up + down, eager, CUDA events); the first candidate on the CPU. Cached per batch size."""
    from kernels_probe.moe.moe_probe import candidate_configs

    if m in w.expert_configs:
        return w.expert_configs[m]
    s = w.s
    fp8 = w.weight_dtype == "fp8"
    exp_touched = s.experts * (1.0 - (1.0 - s.top_k / s.experts) ** m)
    cands = candidate_configs(m * s.top_k / max(exp_touched, 1.0), fp8)
    lw = w.layers[s.dense_layers] if s.moe_layers else None
    if torch.device(device).type != "cuda" or lw is None or os.environ.get("TRITON_INTERPRET") == "1":
        w.expert_configs[m] = cands[0]
        return cands[0]
    x = torch.randn((m, s.hidden), dtype=torch.bfloat16, device=device)
    glue = TorchGlue(torch.zeros(1, 2, device=device))
    best, best_t = None, float("inf")
    for cfg in cands:
        try:
            re = RoutedExperts(s, m, device, cfg, fp8)
            for _ in range(2):
                re(x, lw, glue)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                re(x, lw, glue)
            b.record()
            torch.cuda.synchronize()
            t = a.elapsed_time(b) / reps
        except Exception:  # noqa: BLE001 -- a config over the shared memory: the next one
            torch.cuda.synchronize()
            continue
        if t < best_t:
            best, best_t = cfg, t
    w.expert_configs[m] = best or cands[0]
    return w.expert_configs[m]


# ----------------------------------------------------------------------------------------- the step


class MoeDecodeStep:
    """One decode step of the whole MoE model; call it eagerly or inside a CUDA graph capture."""

    def __init__(self, s: MoeStepShape, w: MoeStepWeights, kv, backend: str, mode: str, *, glue: str = "fused",
                 sm_count: int = 132, seed: int = 0, skip: frozenset = frozenset()):
        """skip: parts left out (diagnosis rows): "attention" (the attention kernels; the rest of the
        attention block runs), "experts" (the whole MoE MLP: router, alignment, routed and shared experts),
        "expert_gemms" (the routed experts' two grouped GEMMs and their SiLU-and-mul only)."""
        self.s, self.w, self.kv, self.skip = s, w, kv, frozenset(skip)
        dev = kv.seq_lens.device
        B = kv.pt.batch
        g = torch.Generator(device=dev)
        g.manual_seed(seed + 7)
        self.tokens = torch.randint(0, s.vocab, (B,), device=dev, generator=g)
        bf = torch.bfloat16
        if s.attention == "mla":
            self.q_nope = torch.empty((B, s.q_heads, s.kv_lora), dtype=bf, device=dev)
            self.q_pe = torch.empty((B, s.q_heads, s.rope_dim), dtype=bf, device=dev)
            self.attn = MlaAttention(kv, backend, mode, self.q_nope, self.q_pe)
            rope_dim = s.rope_dim
            cache_fp8 = kv.ckv.dtype == FP8
        else:
            self.q = torch.empty((B, s.q_heads, s.head_dim), dtype=bf, device=dev)
            self.attn = Attention(kv, backend, mode, self.q, sm_count=sm_count)
            rope_dim = s.head_dim
            cache_fp8 = kv.k.dtype == FP8
        self.glue = make_glue(glue, rope_cache(int(kv.seq_lens.max()) + 1, rope_dim, s.rope_theta, dev))
        if cache_fp8 and glue == "fused":      # quantise-and-scatter as torch ops (as the dense step does)
            self.glue.append = TorchGlue.append.__get__(self.glue)
        self.experts = (RoutedExperts(s, B, dev, pick_expert_config(w, B, dev), w.weight_dtype == "fp8")
                        if s.moe_layers else None)
        if self.experts is not None:
            self.experts.skip_gemms = "expert_gemms" in self.skip
        self.hidden_out = None
        self.next_tokens = None

    def _gqa(self, i: int, x, lw):
        s, kv, glue = self.s, self.kv, self.glue
        B, hq, hkv, d = kv.pt.batch, s.q_heads, s.kv_heads, s.head_dim
        qkv = linear(x, lw["qkv"], bias=lw["qkv_bias"])
        q, k, v = qkv[:, :hq * d], qkv[:, hq * d:(hq + hkv) * d], qkv[:, (hq + hkv) * d:]
        glue.rope(q, k, kv.append.positions, d)
        glue.append(k.view(B, hkv, d), v.view(B, hkv, d), kv.k[i], kv.v[i], kv.append)
        self.q.copy_(q.view(B, hq, d))
        a = self.q if "attention" in self.skip else self.attn(i)
        return linear(a.view(B, hq * d), lw["o"])

    def _mla(self, i: int, x, lw):
        s, kv, glue = self.s, self.kv, self.glue
        B, H = kv.pt.batch, s.q_heads
        q = linear(glue.rmsnorm(linear(x, lw["q_a"]), lw["q_a_norm"]), lw["q_b"]) if s.q_lora else linear(x, lw["q"])
        q = q.view(B, H, s.nope_dim + s.rope_dim)
        kva = linear(x, lw["kv_a"])
        ckv = glue.rmsnorm(kva[:, :s.kv_lora].contiguous(), lw["kv_a_norm"])
        kpe = kva[:, s.kv_lora:].contiguous()
        self.q_pe.copy_(q[..., s.nope_dim:])
        glue.rope(self.q_pe.view(B, H * s.rope_dim), kpe, kv.append.positions, s.rope_dim)
        kv.write(i, ckv, kpe)
        self.q_nope.copy_(torch.bmm(q[..., :s.nope_dim].transpose(0, 1), lw["w_uk"]).transpose(0, 1))
        a = self.q_nope if "attention" in self.skip else self.attn(i)
        o = torch.bmm(a.transpose(0, 1), lw["w_uv"])                       # [H, B, v_dim]
        return linear(o.transpose(0, 1).reshape(B, H * s.v_dim), lw["o"])

    def __call__(self):
        s, w, glue = self.s, self.w, self.glue
        residual = torch.nn.functional.embedding(self.tokens, w.embed)
        x = glue.rmsnorm(residual, w.layers[0]["norm1"])
        for i, lw in enumerate(w.layers):
            if i > 0:
                glue.add_rmsnorm(x, residual, lw["norm1"])
            x = self._mla(i, x, lw) if s.attention == "mla" else self._gqa(i, x, lw)
            glue.add_rmsnorm(x, residual, lw["norm2"])
            if i < s.dense_layers:
                x = linear(glue.silu_mul(linear(x, lw["gate_up"])), lw["down"])
            elif "experts" not in self.skip:
                x = self.experts(x, lw, glue)
        glue.add_rmsnorm(x, residual, w.final_norm)
        self.hidden_out = x
        self.next_tokens = torch.argmax(linear(x, w.lm_head), dim=-1)
        return self.next_tokens


def make_kv(s: MoeStepShape, pt: WorkloadStep, device, seed: int = 0):
    return MlaKV(s, pt, device, seed=seed) if s.attention == "mla" else StepKV(s.attention_shape(), pt, device,
                                                                               seed=seed)
