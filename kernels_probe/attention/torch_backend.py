"""torch's flash attention as the always-available second backend.

``torch.ops.aten._scaled_dot_product_flash_attention`` returns the output and the natural-log LSE.
Decode uses the GQA packing: the G query heads of one KV head become G query rows of that head
(non-causal), so each KV head is read once per sequence. torch's kernel has no block table, so it
reads dense strided views of the same paged cache (sequence regions are contiguous); a prefix shared
through a block table is expressible only without a suffix (batch stride 0). A three-level tree (root_tokens > 0)
times only decode over duplicated pages (a sequence's region holds its whole context); its shared decode and
cascade would need a third pass and a three-way merge that the other backends already measure.
"""

from __future__ import annotations

import math

import torch

from kernels_probe.attention.data import AttentionInputs
from kernels_probe.attention.grid import KERNELS
from kernels_probe.attention.timed import BackendKernels, SkippedKernel, TimedKernel, poisoned_run

BACKEND = "torch"
KV_DTYPES = ("bf16", "fp16")      # torch's flash attention takes no fp8 KV
TREE_REASON = "torch backend: no three-level tree (root prefix) pass; only decode over duplicated pages"


def flash(q4, k4, v4, scale):
    """q4 [B, H, L, D], k4/v4 [B, H, T, D] -> (out [B, H, L, D], lse [B, H, L] natural log)."""
    res = torch.ops.aten._scaled_dot_product_flash_attention(q4, k4, v4, 0.0, False, False, scale=scale)
    return res[0], res[1]


class TorchCascade:
    def __init__(self, data: AttentionInputs, out: torch.Tensor):
        c = data.cfg
        self.c, self.data, self.out = c, data, out
        B, HKV, G, D, ng, n = c.batch, c.num_kv_heads, c.q_per_kv, c.head_dim, c.n_groups, c.group_size
        self.scale = 1.0 / math.sqrt(D)
        self.q4 = data.q.view(B, HKV, G, D)
        self.kp4 = data.prefix_dense(data.k_cache).transpose(1, 2)  # [ng, HKV, P, D]
        self.vp4 = data.prefix_dense(data.v_cache).transpose(1, 2)
        self.ks4 = data.suffix_dense(data.k_cache).transpose(1, 2)  # [B, HKV, S, D]
        self.vs4 = data.suffix_dense(data.v_cache).transpose(1, 2)
        self.q_pre = torch.empty((ng, HKV, n * G, D), dtype=data.q.dtype, device=data.q.device)
        self.states = None

    # pieces
    def prefix(self):
        c = self.c
        ng, n, HKV, G, D = c.n_groups, c.group_size, c.num_kv_heads, c.q_per_kv, c.head_dim
        self.q_pre.view(ng, HKV, n, G, D).copy_(self.q4.view(ng, n, HKV, G, D).permute(0, 2, 1, 3, 4))
        return flash(self.q_pre, self.kp4, self.vp4, self.scale)

    def suffix(self):
        if self.c.suffix_tokens == 0:
            return None, None
        return flash(self.q4, self.ks4, self.vs4, self.scale)

    def merge(self, o_p, l_p, o_s, l_s):
        c = self.c
        ng, n, HKV, G, D = c.n_groups, c.group_size, c.num_kv_heads, c.q_per_kv, c.head_dim
        o1 = o_p.reshape(ng, HKV, n, G, D).permute(0, 2, 1, 3, 4).float()
        dst = self.out.view(ng, n, HKV, G, D)
        if o_s is None:
            dst.copy_(o1)
            return self.out
        l1 = l_p.reshape(ng, HKV, n, G).permute(0, 2, 1, 3)
        o2 = o_s.reshape(ng, n, HKV, G, D).float()
        l2 = l_s.reshape(ng, n, HKV, G)
        m = torch.maximum(l1, l2)
        w1 = torch.exp(l1 - m)
        w2 = torch.exp(l2 - m)
        dst.copy_((o1 * w1[..., None] + o2 * w2[..., None]) / (w1 + w2)[..., None])
        return self.out

    def total(self):
        o_p, l_p = self.prefix()
        o_s, l_s = self.suffix()
        return self.merge(o_p, l_p, o_s, l_s)

    def merge_inputs(self):
        """Eager outputs of both passes, so that the merge can be timed alone."""
        o_p, l_p = self.prefix()
        o_s, l_s = self.suffix()
        return (o_p.clone(), l_p.clone(), None if o_s is None else o_s.clone(), None if l_s is None else l_s.clone())


class TorchDecode:
    """Per-sequence decode through torch's flash kernel (dense views of the same cache)."""

    def __init__(self, data: AttentionInputs, *, shared: bool):
        c = data.cfg
        B, HKV, G, D = c.batch, c.num_kv_heads, c.q_per_kv, c.head_dim
        self.scale = 1.0 / math.sqrt(D)
        self.q4 = data.q.view(B, HKV, G, D)
        if shared:
            if c.root_tokens:
                raise NotImplementedError(TREE_REASON)
            if c.suffix_tokens != 0 or c.n_groups != 1:
                raise NotImplementedError("torch's flash attention has no block table: a shared prefix is expressible "
                                          "(batch stride 0) only with no suffix and one group")
            kp = data.prefix_dense(data.k_cache)  # [1, P, HKV, D]
            vp = data.prefix_dense(data.v_cache)
            self.k4 = kp.expand(B, *kp.shape[1:]).transpose(1, 2)
            self.v4 = vp.expand(B, *vp.shape[1:]).transpose(1, 2)
        else:
            if not data.has_dup:
                raise MemoryError("duplicated prefix exceeds the probe's memory cap")
            self.k4 = data.seq_dense(data.k_cache).transpose(1, 2)
            self.v4 = data.seq_dense(data.v_cache).transpose(1, 2)

    def __call__(self):
        o, _ = flash(self.q4, self.k4, self.v4, self.scale)
        return o  # [B, HKV, G, D] == [B, HQ, D] up to layout; no copy is timed


def timed_kernels(data: AttentionInputs, **_launch) -> BackendKernels:
    """Per-sequence decode (shared pages where expressible, duplicated pages) and the cascade and its pieces."""
    cfg = data.cfg
    if cfg.kv_dtype not in KV_DTYPES:
        return [SkippedKernel(BACKEND, k, "torch's flash attention takes no fp8 KV") for k in KERNELS]
    out: BackendKernels = []
    for shared in (True, False):
        kname = "decode_shared" if shared else "decode_dup"
        try:
            td = TorchDecode(data, shared=shared)
            out.append(TimedKernel(BACKEND, kname, td, check=td))
        except (NotImplementedError, MemoryError) as exc:
            out.append(SkippedKernel(BACKEND, kname, str(exc)))
    if cfg.root_tokens:
        return out + [SkippedKernel(BACKEND, k, TREE_REASON) for k in KERNELS if k.startswith("cascade")]
    out_t = torch.empty_like(data.q)
    tc = TorchCascade(data, out_t)
    out.append(TimedKernel(BACKEND, "cascade_total", tc.total, check=poisoned_run(out_t, tc.total)))
    out.append(TimedKernel(BACKEND, "cascade_prefix", tc.prefix))
    if cfg.suffix_tokens:
        out.append(TimedKernel(BACKEND, "cascade_suffix", tc.suffix))
    out.append(TimedKernel(BACKEND, "cascade_merge", prepare=lambda: _merge_alone(tc)))
    return out


def _merge_alone(tc: TorchCascade):
    """The merge timed alone: both passes' outputs computed eagerly once, then only the merge replayed."""
    inputs = tc.merge_inputs()
    return lambda: tc.merge(*inputs)
