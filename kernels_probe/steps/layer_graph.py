"""One layer's GEMMs and glue back to back in one CUDA graph, the way a decode step runs them: the
composition rows (``step_ops`` op ``layer_graph``) that the planner's composition correction is fitted on.

Per layer: add-RMSNorm, qkv GEMM, RoPE, K/V append, o GEMM (of a random attention output: attention is
priced apart), add-RMSNorm, gate_up GEMM, SiLU-and-mul, down GEMM. ``LAYERS`` distinct layers' weights
(1.7 GB for Llama-3-8B in bf16, 30x the L2) run in one graph, so every GEMM streams its weight from HBM
as in a step, and the graph's first-kernel latency is shared by them as it is by a step's 32 layers.
The row's ``per_layer_s`` is the graph's median over ``LAYERS``. Same timing method as every row (graph
replays between events, L2 flushed before each). The torch glue also runs on the CPU (tests).
"""

from __future__ import annotations

import torch

from kernels_probe.steps.glue import AppendTarget, make_glue, rope_cache
from kernels_probe.steps.step_shapes import LayerShape

LAYERS = 4
LAYER_M_GRID = (1, 8, 16, 32, 64, 128, 256, 512, 1024)
LAYER_M_GRID_QUICK = (8, 64, 512)


def linear(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor | None = None, bias=None) -> torch.Tensor:
    """x [M, K] bf16 @ w[N, K].T: F.linear for bf16 weights; for fp8 (e4m3) weights the activation is
    quantised per tensor and torch._scaled_mm runs (as vLLM's fp8 linear does on Hopper)."""
    if w.dtype != torch.float8_e4m3fn:
        return torch.nn.functional.linear(x, w, bias)
    one = scale if scale is not None else torch.ones((), dtype=torch.float32, device=x.device)
    xq = x.to(torch.float8_e4m3fn)
    y = torch._scaled_mm(xq, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return y + bias if bias is not None else y


class LayerGraph:
    """LAYERS layers of one shape at m tokens: GEMMs (bf16 or fp8 weights) and glue, no attention."""

    def __init__(self, shape: LayerShape, m: int, weight_dtype: str, glue: str, device, *, layers: int = LAYERS,
                 seed: int = 0):
        s = self.s = shape
        self.m, self.layers_n = m, layers
        g = torch.Generator(device=device)
        g.manual_seed(seed)
        bf = torch.bfloat16
        wdt = torch.float8_e4m3fn if weight_dtype == "fp8" else bf

        def mat(n, k):
            return (torch.randn((n, k), dtype=bf, device=device, generator=g) / k ** 0.5).to(wdt)

        gm = s.gemms()
        self.w = [{name: mat(*gm[name]) for name in ("qkv", "o", "gate_up", "down")} for _ in range(layers)]
        self.norm = torch.ones(s.hidden, dtype=bf, device=device)
        d = s.head_dim
        self.x = torch.randn((m, s.hidden), dtype=bf, device=device, generator=g)
        self.res = torch.randn_like(self.x)
        self.attn = torch.randn((m, s.q_heads * d), dtype=bf, device=device, generator=g)
        pages = 4
        self.kc = torch.zeros((m * pages, 16, s.kv_heads, d), dtype=bf, device=device)
        self.vc = torch.zeros_like(self.kc)
        table = torch.arange(m * pages, dtype=torch.int32, device=device).view(m, pages)
        lens = torch.randint(1, pages * 16 + 1, (m,), dtype=torch.int32, device=device, generator=g)
        self.target = AppendTarget(table, lens, 16)
        self.glue = make_glue(glue, rope_cache(pages * 16 + 1, d, s.rope_theta, device))

    def __call__(self):
        s, g, d, m = self.s, self.glue, self.s.head_dim, self.m
        hq, hkv = s.q_heads, s.kv_heads
        x = self.x
        for lw in self.w:
            g.add_rmsnorm(x, self.res, self.norm)
            qkv = linear(x, lw["qkv"])
            q, k, v = qkv[:, :hq * d], qkv[:, hq * d:(hq + hkv) * d], qkv[:, (hq + hkv) * d:]
            g.rope(q, k, self.target.positions, d)
            g.append(k.reshape(m, hkv, d), v.reshape(m, hkv, d), self.kc, self.vc, self.target)
            o = linear(self.attn, lw["o"])
            g.add_rmsnorm(o, self.res, self.norm)
            x = linear(g.silu_mul(linear(o, lw["gate_up"])), lw["down"])
        return x


def measure_layer_graphs(flusher, device, shape: LayerShape, *, glue: str, dtypes: list[str], quick: bool,
                         budget_s: float, m_grid=None) -> tuple[list, list]:
    from kernels_probe.timing import time_fn

    rows, skipped = [], []
    for dtype in dtypes:
        for m in (m_grid or (LAYER_M_GRID_QUICK if quick else LAYER_M_GRID)):
            cfg = {"model": shape.model, "tp": shape.tp, "m": m, "dtype": dtype, "glue": glue, "layers": LAYERS}
            try:
                lg = LayerGraph(shape, m, dtype, glue, device)
                y = lg()
                if not torch.isfinite(y.float()).all():
                    raise RuntimeError("non-finite layer output")
                res = time_fn(lg, flusher, budget_s=budget_s)
            except Exception as exc:
                skipped.append({"op": "layer_graph", "config": cfg, "reason": f"{type(exc).__name__}: {exc}"[:300]})
                torch.cuda.synchronize()
                continue
            rows.append({"op": "layer_graph", "config": cfg, **res, "per_layer_s": res["median_s"] / LAYERS})
            del lg
    torch.cuda.empty_cache()
    return rows, skipped
