"""MLA decode (DeepSeek-V3 shape: one latent KV head of 512 + 64 RoPE dims, 128 query heads, absorbed form)
through FlashInfer's ``BatchMLAPagedAttentionWrapper``, per sequence and as a shared-prefix cascade built
from two MLA passes (the group's sequences as query rows against the prefix pages; each sequence against
its suffix) merged with ``merge_state``. Checked against a float32 reference computed directly (one
softmax over prefix + suffix), then timed like every row. Rows go to the calibration file's ``mla`` list
(a kind of its own: the planner fits and interpolates them apart from the GQA rows).

Grids: "shipped" (the 11 configurations of the first run, 128 heads = TP 1, suffix 128) and "tp" (`--mla-grid
tp`): 16 query heads per GPU (DeepSeek-V3 at TP 8; the latent is replicated on every rank, so only the query
heads split) over the regime users run (batch 1-1024, prefix 1K-32K, suffix 1-2,048, and 8 prompts of 4K-8K
x 16-64 samples around deepseek-v3-grpo-tp8), 32 and 64 heads (TP 4 / 2), 128-head suffix ends, and fp8
(e4m3) latent caches at 16 heads (the FA MLA kernels take fp8 KV on SM90 with per-tensor scales, here 1.0).

Caches: ckv [pages, page_size, 512] and kpe [pages, page_size, 64], bf16; the prefix pages once per group,
block tables as for the GQA rows. q_nope [B, 128, 512], q_pe [B, 128, 64]; sm_scale = 1 / sqrt(128 + 64)
(the model's query-key width before absorption).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

CKV, KPE, HEADS = 512, 64, 128


@dataclass(frozen=True)
class MlaShape:
    prefix_tokens: int
    group_size: int
    n_groups: int = 1
    suffix_tokens: int = 128
    num_heads: int = HEADS
    kv_lora_rank: int = CKV
    qk_rope_head_dim: int = KPE
    kv_dtype: str = "bf16"
    page_size: int = 16

    @property
    def batch(self) -> int:
        return self.group_size * self.n_groups

    def as_dict(self) -> dict:
        return asdict(self)

    def token_bytes(self) -> int:
        return (self.kv_lora_rank + self.qk_rope_head_dim) * (1 if self.kv_dtype == "fp8" else 2)


GRIDS = ("shipped", "tp")


def mla_grid(quick: bool = False, grid: str = "shipped") -> list[MlaShape]:
    if grid not in GRIDS:
        raise ValueError(f"MLA grid must be one of {', '.join(GRIDS)}, got {grid!r}")
    if quick:
        return [MlaShape(4096, 16), MlaShape(4096, 64)]
    if grid == "tp":
        return tp_grid()
    return [MlaShape(p, n) for p in (1024, 4096, 16384) for n in (4, 16, 64)] + [MlaShape(4096, 128),
                                                                                  MlaShape(4096, 32, 4)]


def tp_grid() -> list[MlaShape]:
    """Cartesian blocks (the planner interpolates only where rows bracket a step on every axis), in the
    order they matter: the shipped TP-8 workload first, then the regime at 16 heads, then 32/64/128 heads,
    then fp8 latents (they build their own modules)."""
    ds = [(p, n, 8, s) for p in (4096, 8192) for n in (16, 32, 64) for s in (1, 1024, 2048)]
    one = [(p, n, 1, s) for p in (1024, 4096, 16384, 32768) for n in (1, 4, 16, 64, 256, 1024) for s in (1, 512, 2048)]
    out = [MlaShape(p, n, g, s, num_heads=16) for p, n, g, s in ds + one]
    out += [MlaShape(p, n, 1, s, num_heads=h) for h in (32, 64, 128) for p in (1024, 4096, 16384)
            for n in (1, 4, 16, 64, 256) for s in (1, 1024, 2048)]
    out += [MlaShape(p, n, g, s, num_heads=16, kv_dtype="fp8") for p, n, g, s in ds + one]
    return out


def mla_cost(c: MlaShape, kernel: str) -> dict:
    """bytes (per-sequence floor or the cascade's unique bytes) and FLOPs of one MLA layer."""
    tb, B, P, S = c.token_bytes(), c.batch, c.prefix_tokens, c.suffix_tokens
    qo = B * c.num_heads * (c.kv_lora_rank + c.qk_rope_head_dim + c.kv_lora_rank) * 2
    width = 2 * c.kv_lora_rank + c.qk_rope_head_dim      # QK over 576, PV over 512
    if kernel == "decode_shared":
        return {"bytes": B * (P + S) * tb + qo, "unique_bytes": (c.n_groups * P + B * S) * tb + qo,
                "flops": 2 * B * c.num_heads * width * (P + S)}
    if kernel == "cascade_prefix":
        return {"bytes": c.n_groups * P * tb + qo, "flops": 2 * B * c.num_heads * width * P}
    return {"bytes": (c.n_groups * P + B * S) * tb + qo, "flops": 2 * B * c.num_heads * width * (P + S)}


class MlaData:
    def __init__(self, c: MlaShape, device, seed: int = 0):
        import torch

        g = torch.Generator(device=device)
        g.manual_seed(seed)
        ps, B, n = c.page_size, c.batch, c.group_size
        pp, sp = c.prefix_tokens // ps, -(-c.suffix_tokens // ps)
        prefix_pages = c.n_groups * pp
        pages = prefix_pages + B * sp
        bf = torch.bfloat16
        kv = torch.float8_e4m3fn if c.kv_dtype == "fp8" else bf     # e4m3: random bf16 converted
        self.c = c
        self.ckv = torch.randn((pages, ps, c.kv_lora_rank), dtype=bf, device=device, generator=g).to(kv)
        self.kpe = torch.randn((pages, ps, c.qk_rope_head_dim), dtype=bf, device=device, generator=g).to(kv)
        self.q_nope = torch.randn((B, c.num_heads, c.kv_lora_rank), dtype=bf, device=device, generator=g)
        self.q_pe = torch.randn((B, c.num_heads, c.qk_rope_head_dim), dtype=bf, device=device, generator=g)
        ar = lambda k: torch.arange(k, device=device, dtype=torch.int32)  # noqa: E731
        self.prefix_table = (ar(c.n_groups)[:, None] * pp + ar(pp)[None, :]).contiguous()
        self.suffix_table = (prefix_pages + ar(B)[:, None] * sp + ar(sp)[None, :]).contiguous()
        self.shared_table = torch.cat([self.prefix_table[ar(B).long() // n], self.suffix_table], 1).contiguous()
        self.sm_scale = 1.0 / math.sqrt(128 + c.qk_rope_head_dim)


def reference_mla(d: MlaData, rows: list[int]):
    """float32 [len(rows), heads, 512]: one softmax over each sequence's whole context."""
    import torch

    c, ps = d.c, d.c.page_size
    T = c.prefix_tokens + c.suffix_tokens
    n_pages = -(-T // ps)
    outs = []
    for b in rows:
        pg = d.shared_table[b, :n_pages].long()
        ckv = d.ckv[pg].reshape(-1, c.kv_lora_rank)[:T].float()
        kpe = d.kpe[pg].reshape(-1, c.qk_rope_head_dim)[:T].float()
        s = (d.q_nope[b].float() @ ckv.T + d.q_pe[b].float() @ kpe.T) * d.sm_scale
        outs.append(torch.softmax(s, -1) @ ckv)
    return torch.stack(outs)


def _csr(table, length: int, page_size: int):
    import torch

    rows = table.shape[0]
    n_pages = -(-length // page_size)
    indices = table[:, :n_pages].reshape(-1).to(torch.int32).contiguous()
    indptr = (torch.arange(rows + 1, device=table.device, dtype=torch.int32) * n_pages).contiguous()
    lens = torch.full((rows,), length, dtype=torch.int32, device=table.device)
    return indptr, indices, lens


class FlashInferMla:
    """mode "per_sequence": one MLA pass over shared prefix pages; "cascade": prefix pass (a group's
    sequences are its query rows) + suffix pass + merge_state."""

    def __init__(self, d: MlaData, mode: str):
        import flashinfer
        import torch

        from kernels_probe.attention.flashinfer_backend import WORKSPACE_BYTES

        self.fi, self.d, self.mode = flashinfer, d, mode
        c, dev = d.c, d.ckv.device
        self.ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        B = c.batch

        def wrapper(qo, table, length):
            ip, ix, ln = _csr(table, length, c.page_size)
            cls = (getattr(flashinfer, "BatchMLAPagedAttentionWrapper", None)
                   or flashinfer.mla.BatchMLAPagedAttentionWrapper)
            w = cls(self.ws, use_cuda_graph=True, qo_indptr=qo,
                                                             kv_indptr=ip, kv_indices=ix, kv_len_arr=ln)
            w.plan(qo, ip, ix, ln, c.num_heads, c.kv_lora_rank, c.qk_rope_head_dim, c.page_size, False, d.sm_scale,
                   d.q_nope.dtype, d.ckv.dtype)
            return w

        per = torch.arange(B + 1, device=dev, dtype=torch.int32)
        if mode == "per_sequence":
            self.w = [wrapper(per, d.shared_table, c.prefix_tokens + c.suffix_tokens)]
        else:
            qo0 = (torch.arange(c.n_groups + 1, device=dev, dtype=torch.int32) * c.group_size).contiguous()
            self.w = [wrapper(qo0, d.prefix_table, c.prefix_tokens), wrapper(per, d.suffix_table, c.suffix_tokens)]

    def _run(self, w, lse: bool):
        d = self.d
        scales = {"ckv_scale": 1.0, "kpe_scale": 1.0} if d.c.kv_dtype == "fp8" else {}
        return w.run(query=(d.q_nope, d.q_pe), kv_cache=(d.ckv, d.kpe), return_lse=lse, **scales)

    def backend_name(self) -> str | None:
        """The concrete kernel family FlashInfer's automatic policy planned (fa3 / fa2 / ...)."""
        return getattr(self.w[0], "_planned_backend_name", None) or getattr(self.w[0], "_backend", None)

    def prefix(self):
        return self._run(self.w[0], True)

    def __call__(self):
        if self.mode == "per_sequence":
            return self._run(self.w[0], False)
        o0, l0 = self._run(self.w[0], True)
        o1, l1 = self._run(self.w[1], True)
        # merge_state launches one thread block row per head: 128 heads x 512 dims exceeds a block, so each
        # (sequence, head) is merged as a sequence of one head (same arithmetic, a launch that fits)
        B, H, D = o0.shape
        out, _ = self.fi.merge_state(o0.reshape(B * H, 1, D), l0.reshape(B * H, 1), o1.reshape(B * H, 1, D),
                                     l1.reshape(B * H, 1))
        return out.view(B, H, D)


def measure_mla(flusher, device, *, quick: bool = False, budget_s: float = 0.02, grid: bool | str = "shipped",
                configs: list[MlaShape] | None = None, deadline: float | None = None, plan=None) -> tuple[list, list]:
    """(rows, skipped) for the MLA grid (or the given configurations, or a plan's); every composite checked against the
    float32 reference first. Past `deadline` (time.perf_counter()) the rest are skipped with that reason."""
    import time

    import torch

    from kernels_probe.timing import time_fn

    rows, skipped = [], []
    grid = grid if isinstance(grid, str) else "shipped"          # True: the shipped grid
    configs = list(getattr(plan, "mla", ())) or configs            # a workload plan's MLA shapes
    for i, c in enumerate(configs if configs is not None else mla_grid(quick, grid)):
        if deadline is not None and time.perf_counter() > deadline:
            skipped.append({"config": c.as_dict(), "reason": "time budget of the run exhausted"})
            continue
        try:
            d = MlaData(c, device, seed=2000 + i)
            check = sorted({0, c.group_size - 1, c.batch - 1})
            ref = reference_mla(d, check)
        except Exception as exc:
            skipped.append({"config": c.as_dict(), "reason": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        for mode in ("per_sequence", "cascade"):
            kernel = "decode_shared" if mode == "per_sequence" else "cascade_total"
            try:
                fm = FlashInferMla(d, mode)
                out = fm().float()[torch.tensor(check, device=out_device(fm))]
                err = max(float((out[j] - ref[j]).norm(dim=-1).div(ref[j].norm(dim=-1)).max())
                          for j in range(len(check)))
                if not err <= 1e-2:
                    skipped.append({"config": c.as_dict(), "kernel": kernel, "reason": f"correctness: {err:.3g}"})
                    continue
                for k in mla_kernels(fm, kernel):
                    res = time_fn(k.timed_callable(), flusher, budget_s=budget_s)
                    rows.append({"backend": k.backend, "kernel": k.kernel, "variant": k.variant, "config": c.as_dict(),
                                 **mla_cost(c, k.kernel), **res, "max_rel_err": err if k.kernel == kernel else None,
                                 "fi_kernel": fm.backend_name()})
            except Exception as exc:
                skipped.append({"config": c.as_dict(), "kernel": kernel,
                                "reason": f"{type(exc).__name__}: {exc}"[:300]})
                torch.cuda.synchronize()
        del d
        torch.cuda.empty_cache()
    return rows, skipped


def mla_kernels(fm: FlashInferMla, kernel: str) -> list:
    """The timed rows of one MLA composite (kernels_probe/attention/timed.py, as every backend hands them over): the
    composite (`decode_shared` per sequence, `cascade_total` as the cascade) and, for the cascade, its prefix pass
    alone."""
    from kernels_probe.attention.timed import TimedKernel

    out = [TimedKernel("flashinfer", kernel, run=fm, variant="mla", check=fm)]
    if fm.mode == "cascade":
        out.append(TimedKernel("flashinfer", "cascade_prefix", run=fm.prefix, variant="mla"))
    return out


def out_device(fm: FlashInferMla):
    return fm.d.ckv.device
