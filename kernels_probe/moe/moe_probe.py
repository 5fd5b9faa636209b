"""Routed-expert GEMMs of MoE layers, timed the way engines run them (``step_ops`` rows, op
``moe_grouped_gemm``).

Per MoE layer and step: M tokens, each routed to its top-k of E experts by (random) router logits; the
(token, slot) pairs are sorted by expert and padded to whole blocks of BLOCK_M rows (vLLM's
``moe_align_block_size`` layout: an untouched expert has no block); then one grouped GEMM per
projection over those blocks: gate_up (each block gathers its tokens' hidden rows, K = hidden,
N = 2 x expert width / TP) and down (the blocks' intermediate rows, K = width / TP, N = hidden). Each
block reads its expert's weight tiles, so the touched experts' weights stream once (more when an expert
has more than BLOCK_M rows; L2 serves the re-reads: consecutive programs are consecutive blocks).

Backends (``backend`` in each row):
* ``triton``: our grouped GEMM over sorted token blocks (the structure of vLLM's ``fused_moe_kernel``),
  bf16 weights, or fp8 (e4m3, per-tensor scales, inputs pre-quantised as the dense fp8 GEMM rows are);
  the block config is picked per point from a few candidates by timing (vLLM ships tuned configs per
  shape; ``config`` and ``candidates_s`` say what was tried);
* ``grouped_mm``: ``torch._grouped_mm`` (CUTLASS grouped GEMM on sm90) over the same expert-sorted,
  block-padded rows, bf16 (the gather of gate_up's rows is in the timed graph);
* ``loop``: one ``torch.mm`` per touched expert: a fallback engines do not use, for comparison only.

Routings: ``balanced`` (Gaussian logits: uniform in expectation, what the planner assumes) and
``skewed`` (Zipf-like expert popularity). Rows carry the touched experts and the largest expert's
rows. Correctness before timing: every backend's output against a float32 per-expert reference on the
same routing (relative Frobenius error, tolerance 2e-2; fp8 against the quantised values); a failure is
a skipped row. Timing: CUDA graph replays between events, L2 flushed before each, median
(kernels_probe/timing.py). The routing and block alignment are computed once outside the graph (engines
run moe_align as its own small kernel; the planner prices the GEMMs).

Run: ``python -m kernels_probe.moe.moe_run --out moe.json [--quick] [--budget-s 150]`` (benchmarks/
moe_probe_run.sh on the GPU). The module imports on the CPU; its kernels run there under Triton's
interpreter (tests).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from kernels_probe.moe.moe_shapes import SKEW_ALPHA, MoeShape, align_counts, moe_bytes_flops

MOE_TOLERANCE = 2e-2


# ------------------------------------------------------------------------------------------- routing


def route(m: int, shape: MoeShape, routing: str, gen: torch.Generator, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(topk_ids [m, k] int64, topk_weights [m, k] float32) from random router logits."""
    logits = torch.randn((m, shape.experts), generator=gen, dtype=torch.float32, device="cpu")
    if routing == "skewed":
        logits = logits + SKEW_ALPHA * torch.log(1.0 / torch.arange(1, shape.experts + 1, dtype=torch.float32))
    elif routing != "balanced":
        raise ValueError(f"routing {routing!r}: balanced or skewed")
    w, ids = torch.topk(torch.softmax(logits, -1), shape.top_k, dim=-1)
    return ids.to(device), (w / w.sum(-1, keepdim=True)).to(device)


@dataclass
class Aligned:
    """(token, slot) pairs sorted by expert, padded to blocks of block_m; slot s = token x k + j."""

    block_m: int
    sorted_slots: torch.Tensor     # int32 [n_blocks x block_m]; padding holds the sentinel m x k
    block_expert: torch.Tensor     # int32 [n_blocks]
    offsets: torch.Tensor          # int32 [E]: cumulative padded rows per expert (torch._grouped_mm's offs)
    counts: list[int]              # routed rows per expert
    n_slots: int                   # m x k

    @property
    def n_blocks(self) -> int:
        return int(self.block_expert.numel())

    @property
    def touched(self) -> int:
        return sum(1 for c in self.counts if c)


def align(topk_ids: torch.Tensor, experts: int, block_m: int) -> Aligned:
    flat = topk_ids.reshape(-1).cpu()
    n = int(flat.numel())
    counts = torch.bincount(flat, minlength=experts).tolist()
    padded, blocks = align_counts(counts, block_m)
    order = torch.argsort(flat, stable=True)
    slots = torch.full((sum(padded),), n, dtype=torch.int32)
    pos = src = 0
    for c, p in zip(counts, padded):
        slots[pos:pos + c] = order[src:src + c].to(torch.int32)
        pos, src = pos + p, src + c
    dev = topk_ids.device
    offs = torch.tensor([sum(padded[:e + 1]) for e in range(experts)], dtype=torch.int32)
    return Aligned(block_m, slots.to(dev), torch.tensor(blocks, dtype=torch.int32).to(dev), offs.to(dev), counts, n)


# ------------------------------------------------------------------------------------------- kernel


@triton.jit(do_not_specialize=["n_slots", "a_div"])
def _moe_gemm_kernel(a_ptr, w_ptr, c_ptr, slots_ptr, block_expert_ptr, n_slots, a_div, N, K,
                     stride_am, stride_we, stride_wn, stride_cm, scale,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr,
                     UPCAST: tl.constexpr):
    """C[slot, n] = sum_k A[slot // a_div, k] W[expert(block), n, k] for the slots of one block."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    slots = tl.load(slots_ptr + pid_m * BLOCK_M + tl.arange(0, BLOCK_M))
    valid = slots < n_slots
    rows = tl.where(valid, slots // a_div, 0).to(tl.int64)
    e = tl.load(block_expert_ptr + pid_m).to(tl.int64)
    if e < 0:   # past the routed rows of an alignment with fixed capacity (the whole MoE step's)
        return
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + offs_k[None, :]
    w_ptrs = w_ptr + e * stride_we + offs_n[None, :].to(tl.int64) * stride_wn + offs_k[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs, mask=valid[:, None], other=0.0)
            w = tl.load(w_ptrs, mask=n_ok[None, :], other=0.0)
        else:
            k_ok = (k0 + offs_k) < K
            a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
            w = tl.load(w_ptrs, mask=n_ok[None, :] & k_ok[:, None], other=0.0)
        if UPCAST:   # Triton's interpreter multiplies bf16 bit patterns as integers (CPU tests only)
            a = a.to(tl.float32)
            w = w.to(tl.float32)
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    acc = acc * scale
    c_ptrs = c_ptr + slots[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=valid[:, None] & n_ok[None, :])


@dataclass(frozen=True)
class BlockConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3

    def as_dict(self) -> dict:
        return {"block_m": self.block_m, "block_n": self.block_n, "block_k": self.block_k,
                "num_warps": self.num_warps, "num_stages": self.num_stages}


def candidate_configs(rows_per_expert: float, fp8: bool) -> list[BlockConfig]:
    """A few block configs per regime (rows per touched expert), as vLLM's tuned tables span them."""
    bk = 128 if fp8 else 64
    if rows_per_expert <= 16:
        return [BlockConfig(16, 32, 2 * bk, 4, 4), BlockConfig(16, 64, 2 * bk, 4, 4), BlockConfig(16, 128, bk, 4, 4)]
    if rows_per_expert <= 64:
        return [BlockConfig(32, 64, 2 * bk, 4, 4), BlockConfig(64, 64, bk, 4, 4), BlockConfig(32, 128, bk, 4, 4)]
    return [BlockConfig(64, 128, bk, 4, 4), BlockConfig(128, 128, bk, 8, 3), BlockConfig(64, 256, bk, 8, 3)]


class TritonGroupedGemm:
    """One projection of the routed experts: out[slot] = a[slot // a_div] @ w[expert(slot)].T."""

    def __init__(self, a, w, out, al: Aligned, a_div: int, cfg: BlockConfig, scale: float = 1.0):
        assert al.block_m == cfg.block_m
        self.a, self.w, self.out, self.al, self.a_div, self.cfg, self.scale = a, w, out, al, a_div, cfg, scale
        n, k = w.shape[1], w.shape[2]
        self.grid = (al.n_blocks, triton.cdiv(n, cfg.block_n))
        self.even_k = k % cfg.block_k == 0

    def __call__(self):
        c, a, w = self.cfg, self.a, self.w
        interp = os.environ.get("TRITON_INTERPRET") == "1"
        kw = {} if interp else {"num_warps": c.num_warps, "num_stages": c.num_stages}
        _moe_gemm_kernel[self.grid](a, w, self.out, self.al.sorted_slots, self.al.block_expert, self.al.n_slots,
                                    self.a_div, w.shape[1], w.shape[2], a.stride(0), w.stride(0), w.stride(1),
                                    self.out.stride(0), self.scale, BLOCK_M=c.block_m, BLOCK_N=c.block_n,
                                    BLOCK_K=c.block_k, EVEN_K=self.even_k,
                                    UPCAST=interp and w.dtype == torch.bfloat16, **kw)
        return self.out


class GroupedMm:
    """torch._grouped_mm over the expert-sorted, block-padded rows (a has one extra zero row: padding
    slots gather it). Output in sorted order; ``slot_order()`` scatters it back (for checking only)."""

    def __init__(self, a_ext, w, al: Aligned, a_div: int):
        self.a_ext, self.wt, self.al = a_ext, w.transpose(-2, -1), al
        self.idx = (al.sorted_slots.to(torch.int64) // a_div).clamp_max(a_ext.shape[0] - 1)

    def __call__(self):
        return torch._grouped_mm(self.a_ext.index_select(0, self.idx), self.wt, offs=self.al.offsets,
                                 out_dtype=torch.bfloat16)

    def slot_order(self, out_sorted):
        valid = self.al.sorted_slots.to(torch.int64) < self.al.n_slots
        res = torch.zeros((self.al.n_slots, out_sorted.shape[1]), dtype=out_sorted.dtype, device=out_sorted.device)
        res[self.al.sorted_slots.to(torch.int64)[valid]] = out_sorted[valid]
        return res


class LoopMm:
    """One torch.mm per touched expert (not what engines run)."""

    def __init__(self, a, w, out, topk_ids, a_div: int):
        self.a, self.w, self.out = a, w, out
        flat = topk_ids.reshape(-1)
        self.parts = []
        for e in torch.unique(flat).tolist():
            slots = torch.nonzero(flat == e).reshape(-1)
            self.parts.append((e, slots, slots // a_div))

    def __call__(self):
        for e, slots, rows in self.parts:
            self.out.index_copy_(0, slots, self.a.index_select(0, rows) @ self.w[e].t())
        return self.out


def reference(a, w, topk_ids, a_div: int) -> torch.Tensor:
    """float32 [m k, N] per-expert product on the given (possibly fp8) values."""
    flat = topk_ids.reshape(-1)
    out = torch.zeros((flat.numel(), w.shape[1]), dtype=torch.float32, device=a.device)
    for e in torch.unique(flat).tolist():
        slots = torch.nonzero(flat == e).reshape(-1)
        out[slots] = a.index_select(0, slots // a_div).float() @ w[e].float().t()
    return out


def rel_err(out, ref) -> float:
    o, r = out.float(), ref.float()
    return float(((o - r).norm() / r.norm().clamp_min(1e-30)).item())


# ------------------------------------------------------------------------------------------- measuring


@dataclass
class Problem:
    """The inputs of one projection at one routing: a [rows, K] (one extra zero row), w [E, N, K]."""

    shape: MoeShape
    proj: str
    m: int
    topk_ids: torch.Tensor
    a_ext: torch.Tensor
    w: torch.Tensor

    @property
    def a_div(self) -> int:
        return self.shape.top_k if self.proj == "gate_up" else 1

    @property
    def a(self):
        return self.a_ext[:-1]


def make_problem(shape: MoeShape, proj: str, m: int, topk_ids, w, gen, device) -> Problem:
    k_dim = w.shape[2]
    rows = m if proj == "gate_up" else m * shape.top_k
    a = torch.randn((rows + 1, k_dim), generator=gen, dtype=torch.float32, device="cpu").to(device, torch.bfloat16)
    a[-1] = 0
    return Problem(shape, proj, m, topk_ids, a.to(w.dtype) if w.dtype != torch.bfloat16 else a, w)


def expert_weights(shape: MoeShape, proj: str, dtype: str, seed: int, device) -> torch.Tensor:
    """[E, N, K] random weights (std 1/sqrt(K)), drawn on the device in bf16 (no float32 copy)."""
    n, k = shape.gemms()[proj]
    gen = torch.Generator(device=device).manual_seed(seed)
    w = torch.randn((shape.experts, n, k), dtype=torch.bfloat16, device=device, generator=gen)
    w.mul_(1.0 / math.sqrt(k))
    return w.to(torch.float8_e4m3fn) if dtype == "fp8" else w


def build(backend: str, p: Problem, cfg: BlockConfig | None):
    """(callable, function giving its output in slot order, Aligned or None)."""
    out_n = p.w.shape[1]
    if backend == "triton":
        if cfg is None:
            raise ValueError("the Triton grouped GEMM needs a block config")
        al = align(p.topk_ids, p.shape.experts, cfg.block_m)
        out = torch.empty((al.n_slots, out_n), dtype=torch.bfloat16, device=p.w.device)
        return TritonGroupedGemm(p.a, p.w, out, al, p.a_div, cfg), (lambda o: o), al
    if backend == "grouped_mm":
        al = align(p.topk_ids, p.shape.experts, 16)
        g = GroupedMm(p.a_ext, p.w, al, p.a_div)
        return g, g.slot_order, al
    if backend == "loop":
        out = torch.empty((p.m * p.shape.top_k, out_n), dtype=torch.bfloat16, device=p.w.device)
        return LoopMm(p.a, p.w, out, p.topk_ids, p.a_div), (lambda o: o), None
    raise ValueError(backend)


def check(backend: str, p: Problem, cfg: BlockConfig | None, ref) -> tuple[object, Aligned | None, float]:
    fn, to_slots, al = build(backend, p, cfg)
    out = fn()
    if isinstance(out, torch.Tensor) and backend != "grouped_mm":
        out.fill_(float("nan"))   # poisoned: every slot must be written
        out = fn()
    err = rel_err(to_slots(out), ref)
    return fn, al, err


def _row(p: Problem, backend: str, dtype: str, routing: str, al_counts: list[int], res: dict, err: float,
         cfg: BlockConfig | None, candidates: list | None) -> dict:
    s = p.shape
    n, k = s.gemms()[p.proj]
    touched = sum(1 for c in al_counts if c)
    bf = moe_bytes_flops(s, p.proj, p.m, touched, 1 if dtype == "fp8" else 2)
    row = {"op": "moe_grouped_gemm",
           "config": {"model": s.model, "tp": s.tp, "proj": p.proj, "m": p.m, "n": n, "k": k, "experts": s.experts,
                      "top_k": s.top_k, "dtype": dtype, "routing": routing, "backend": backend},
           "touched_experts": touched, "max_rows_per_expert": max(al_counts), **bf, **res,
           "achieved_bytes_per_s": bf["bytes"] / res["median_s"], "achieved_flop_per_s": bf["flops"] / res["median_s"],
           "max_rel_err": err}
    if cfg is not None:
        row["block_config"] = cfg.as_dict()
    if candidates:
        row["candidates_s"] = candidates
    return row


def measure_moe(flusher, device, shapes: list[MoeShape], *, m_grid, routings=("balanced", "skewed"),
                dtypes=("bf16", "fp8"), backends=("triton", "grouped_mm", "loop"), budget_s: float = 0.012,
                deadline_s: float | None = None, seed: int = 0, log=print, time_fn=None,
                checkpoint=None) -> tuple[list, list]:
    """Rows and skipped rows for every shape x projection x dtype x routing x M x backend (grouped_mm and
    loop in bf16 only; loop with balanced routing only). Stops starting new points past deadline_s
    (time.perf_counter()), recording what it left out; calls checkpoint(rows, skipped) after each shape and
    projection (the command line writes the file then, so a run cut short keeps what it measured)."""
    if time_fn is None:
        from kernels_probe.timing import time_fn

    rows, skipped = [], []

    def late() -> bool:
        return deadline_s is not None and time.perf_counter() > deadline_s

    for shape in shapes:
        for proj in ("gate_up", "down"):
            for dtype in dtypes:
                if late():      # nothing more is started: say so once per shape, projection and dtype
                    skipped.append({"op": "moe_grouped_gemm", "config": {"model": shape.model, "tp": shape.tp,
                                    "proj": proj, "dtype": dtype}, "reason": "time budget"})
                    continue
                try:
                    w = expert_weights(shape, proj, dtype, seed, device)
                except Exception as exc:  # noqa: BLE001 -- an allocation the GPU refuses is a skipped row
                    skipped.append({"op": "moe_grouped_gemm", "config": {"model": shape.model, "tp": shape.tp,
                                    "proj": proj, "dtype": dtype}, "reason": f"{type(exc).__name__}: {exc}"[:300]})
                    continue
                for routing in routings:
                    for m in m_grid:
                        if late():
                            skipped.append({"op": "moe_grouped_gemm", "config": {"model": shape.model, "tp": shape.tp,
                                            "proj": proj, "m": m, "dtype": dtype, "routing": routing},
                                            "reason": "time budget"})
                            continue
                        rgen = torch.Generator().manual_seed(seed * 7919 + m * 31 + (routing == "skewed"))
                        ids, _ = route(m, shape, routing, rgen, device)
                        p = make_problem(shape, proj, m, ids, w, rgen, device)
                        ref = reference(p.a, w, ids, p.a_div)
                        for backend in backends:
                            if backend != "triton" and dtype != "bf16":
                                continue
                            if backend == "loop" and routing != "balanced":
                                continue
                            cfgd = {"model": shape.model, "tp": shape.tp, "proj": proj, "m": m, "dtype": dtype,
                                    "routing": routing, "backend": backend}
                            if late():
                                skipped.append({"op": "moe_grouped_gemm", "config": cfgd, "reason": "time budget"})
                                continue
                            try:
                                best = _measure_point(backend, p, ref, dtype, flusher, budget_s, time_fn)
                            except Exception as exc:  # noqa: BLE001 -- an allocation the GPU refuses is a skipped row
                                skipped.append({"op": "moe_grouped_gemm", "config": cfgd,
                                                "reason": f"{type(exc).__name__}: {exc}"[:300]})
                                if device.type == "cuda":
                                    torch.cuda.synchronize()
                                continue
                            if isinstance(best, str):
                                skipped.append({"op": "moe_grouped_gemm", "config": cfgd, "reason": best})
                                continue
                            res, err, cfg, cands, counts = best
                            rows.append(_row(p, backend, dtype, routing, counts, res, err, cfg, cands))
                        del p, ref
                del w
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            log(f"  {shape.model} tp{shape.tp} {proj}: {len(rows)} rows, {len(skipped)} skipped so far")
            if checkpoint is not None:
                checkpoint(rows, skipped)
    return rows, skipped


def _measure_point(backend, p: Problem, ref, dtype, flusher, budget_s, time_fn):
    """(timing, error, config, candidates, per-expert counts) of the best correct variant, or a reason."""
    counts = torch.bincount(p.topk_ids.reshape(-1).cpu(), minlength=p.shape.experts).tolist()
    if backend != "triton":
        fn, _, err = check(backend, p, None, ref)
        if not err <= MOE_TOLERANCE:
            return f"correctness: rel err {err:.3g}"
        return time_fn(fn, flusher, budget_s=budget_s), err, None, None, counts
    touched = sum(1 for c in counts if c)
    best, cands, reasons = None, [], []
    for cfg in candidate_configs(p.m * p.shape.top_k / max(touched, 1), dtype == "fp8"):
        try:
            fn, _, err = check(backend, p, cfg, ref)
            if not err <= MOE_TOLERANCE:
                reasons.append(f"{cfg.as_dict()}: rel err {err:.3g}")
                continue
            res = time_fn(fn, flusher, budget_s=budget_s)
        except Exception as exc:  # noqa: BLE001 -- e.g. a block config over the shared memory: try the next
            reasons.append(f"{cfg.as_dict()}: {type(exc).__name__}: {exc}"[:200])
            if p.w.device.type == "cuda":
                torch.cuda.synchronize()
            continue
        cands.append({**cfg.as_dict(), "median_s": res["median_s"]})
        if best is None or res["median_s"] < best[0]["median_s"]:
            best = (res, err, cfg)
    if best is None:
        return "no candidate config ran correctly: " + "; ".join(reasons)[:280]
    return (*best, cands, counts)
