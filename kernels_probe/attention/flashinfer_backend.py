"""FlashInfer, where importable: what production engines run.

* ``BatchDecodeWithPagedKVCacheWrapper`` with ``use_tensor_cores`` False and True (variants
  ``cuda_cores`` / ``tensor_cores``), over shared or duplicated prefix pages;
* ``MultiLevelCascadeAttentionWrapper`` (2 levels, 3 for a three-level tree's root; backend as shipped:
  ``auto``) -> backend ``flashinfer``; the same levels built from
  ``BatchPrefillWithPagedKVCacheWrapper(backend="fa2")`` plus ``merge_state_in_place`` -> backend
  ``flashinfer-fa2``.
* KV in bf16 or fp8 (e4m3; queries stay bf16), each wrapper planned with the cache's dtype.

All wrappers are built with ``use_cuda_graph=True`` and planned before capture, so their ``run()`` is
replayed from a CUDA graph and its host cost (tens to hundreds of microseconds) is not timed.
Every call is best effort: the runner records a failure as a skipped row and moves on.
"""

from __future__ import annotations

import torch

from kernels_probe.attention.data import AttentionInputs
from kernels_probe.attention.timed import BackendKernels, SkippedKernel, TimedKernel, poisoned_run

WORKSPACE_BYTES = 256 << 20


def available() -> tuple[bool, str]:
    try:
        import flashinfer  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return False, f"flashinfer not importable: {type(exc).__name__}: {exc}"[:300]
    return True, ""


def version() -> str | None:
    try:
        import flashinfer

        return str(getattr(flashinfer, "__version__", "unknown"))
    except Exception:
        return None


class _Common:
    def __init__(self, data: AttentionInputs):
        import flashinfer

        self.fi = flashinfer
        c = data.cfg
        self.c, self.data = c, data
        dev = data.q.device
        self.ws = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=dev)
        self.kv = (data.k_cache, data.v_cache)
        self.kv_dtype = data.k_cache.dtype
        self.i32 = lambda t: t.to(torch.int32).contiguous()  # noqa: E731

    def paged(self, table: torch.Tensor, length: int):
        """indptr, indices, last_page_len for sequences of equal length whose pages are the table's rows."""
        c = self.c
        rows = table.shape[0]
        n_pages = -(-length // c.page_size)
        indices = self.i32(table[:, :n_pages].reshape(-1))
        indptr = self.i32(torch.arange(rows + 1, device=table.device) * n_pages)
        last = length - (n_pages - 1) * c.page_size
        lpl = torch.full((rows,), last, dtype=torch.int32, device=table.device)
        return indptr, indices, lpl


class FlashInferDecode(_Common):
    def __init__(self, data: AttentionInputs, *, shared: bool, tensor_cores: bool):
        super().__init__(data)
        c = self.c
        table = data.shared_table if shared else data.dup_table
        if table is None:
            raise MemoryError("duplicated prefix exceeds the probe's memory cap")
        indptr, indices, lpl = self.paged(table, c.context_tokens)
        self.w = self.fi.BatchDecodeWithPagedKVCacheWrapper(
            self.ws, "NHD", use_cuda_graph=True, use_tensor_cores=tensor_cores, paged_kv_indptr_buffer=indptr,
            paged_kv_indices_buffer=indices, paged_kv_last_page_len_buffer=lpl)
        self.w.plan(indptr, indices, lpl, c.num_q_heads, c.num_kv_heads, c.head_dim, c.page_size,
                    q_data_type=data.q.dtype, kv_data_type=self.kv_dtype)
        self.out = torch.empty_like(data.q)

    def __call__(self):
        return self.w.run(self.data.q, self.kv, out=self.out)


class FlashInferCascade(_Common):
    """Two levels: the group prefix (qo rows = the group's sequences), then each sequence's suffix; a tree has
    the root in front (one request whose qo rows are all the sequences). ``prefix`` times the shared levels:
    the group prefix, or for a tree the root and the group prefix and the merge of their two states."""

    def __init__(self, data: AttentionInputs, *, fa2: bool):
        super().__init__(data)
        c = self.c
        if c.suffix_tokens == 0:
            raise NotImplementedError("FlashInfer's cascade levels need at least one token per level")
        dev = data.q.device
        ip0, ix0, lp0 = self.paged(data.prefix_table, c.prefix_tokens)
        qo0 = self.i32(torch.arange(c.n_groups + 1, device=dev) * c.group_size)
        ip1, ix1, lp1 = self.paged(data.suffix_table, c.suffix_tokens)
        qo1 = self.i32(torch.arange(c.batch + 1, device=dev))
        levels = [(qo0, ip0, ix0, lp0), (qo1, ip1, ix1, lp1)]
        if c.root_tokens:
            ipr, ixr, lpr = self.paged(data.root_table, c.root_tokens)
            qor = self.i32(torch.tensor([0, c.batch], device=dev))
            levels.insert(0, (qor, ipr, ixr, lpr))
        if fa2:
            self.levels = [
                self.fi.BatchPrefillWithPagedKVCacheWrapper(
                    self.ws, "NHD", use_cuda_graph=True, qo_indptr_buf=qo, paged_kv_indptr_buf=ip,
                    paged_kv_indices_buf=ix, paged_kv_last_page_len_buf=lp, backend="fa2")
                for (qo, ip, ix, lp) in levels
            ]
            for w, (qo, ip, ix, lp) in zip(self.levels, levels):
                w.plan(qo, ip, ix, lp, c.num_q_heads, c.num_kv_heads, c.head_dim, c.page_size, causal=False,
                       q_data_type=data.q.dtype, kv_data_type=self.kv_dtype)
            self.wrapper = None
        else:
            self.wrapper = self.fi.MultiLevelCascadeAttentionWrapper(
                len(levels), self.ws, "NHD", use_cuda_graph=True, qo_indptr_buf_arr=[lv[0] for lv in levels],
                paged_kv_indptr_buf_arr=[lv[1] for lv in levels], paged_kv_indices_buf_arr=[lv[2] for lv in levels],
                paged_kv_last_page_len_buf_arr=[lv[3] for lv in levels])
            self.wrapper.plan([lv[0] for lv in levels], [lv[1] for lv in levels], [lv[2] for lv in levels],
                              [lv[3] for lv in levels], c.num_q_heads, c.num_kv_heads, c.head_dim, c.page_size,
                              q_data_type=data.q.dtype, kv_data_type=self.kv_dtype)
            self.levels = self.wrapper._batch_prefill_wrappers

    def prefix(self):
        """The shared levels (all but the last, the suffix), merged in place when there are two."""
        out, lse = self.levels[-2].run(self.data.q, self.kv, return_lse=True)
        for w in self.levels[:-2]:
            o, lo = w.run(self.data.q, self.kv, return_lse=True)
            self.fi.merge_state_in_place(out, lse, o, lo)
        return out, lse

    def __call__(self):
        if self.wrapper is not None:
            return self.wrapper.run(self.data.q, self.kv)
        out, lse = self.levels[-1].run(self.data.q, self.kv, return_lse=True)
        for w in self.levels[:-1]:
            o, lo = w.run(self.data.q, self.kv, return_lse=True)
            self.fi.merge_state_in_place(out, lse, o, lo)
        return out


def timed_kernels(data: AttentionInputs, **_launch) -> BackendKernels:
    """Decode (CUDA-core and tensor-core variants) over shared and duplicated pages, KV in bf16 or fp8 (e4m3:
    bf16 queries over an fp8 cache, as vLLM's --kv-cache-dtype fp8 runs it); the cascade as shipped (backend
    ``flashinfer``) and built from FA2 prefill levels (``flashinfer-fa2``). A wrapper that fails to build
    is a skipped row."""
    out: BackendKernels = []
    for shared in (True, False):
        kname = "decode_shared" if shared else "decode_dup"
        for tcores in (False, True):
            variant = "tensor_cores" if tcores else "cuda_cores"
            try:
                fd = FlashInferDecode(data, shared=shared, tensor_cores=tcores)
                out.append(TimedKernel("flashinfer", kname, fd, variant=variant, check=poisoned_run(fd.out, fd)))
            except Exception as exc:
                out.append(SkippedKernel("flashinfer", kname, f"{type(exc).__name__}: {exc}", variant))
    for fa2 in (False, True):
        bname, variant = ("flashinfer-fa2", "fa2") if fa2 else ("flashinfer", "auto")
        try:
            fc = FlashInferCascade(data, fa2=fa2)
            out.append(TimedKernel(bname, "cascade_total", fc, variant=variant, check=fc))
            out.append(TimedKernel(bname, "cascade_prefix", fc.prefix, variant=variant))
        except Exception as exc:
            out += [SkippedKernel(bname, k, f"{type(exc).__name__}: {exc}")
                    for k in ("cascade_total", "cascade_prefix")]
    return out


def warm_build(device="cuda", head_dims=(128,), combos=None) -> dict:
    """JIT-build the FlashInfer modules the probe uses, on a tiny problem, per head dim and KV dtype (each
    combination is its own modules; they build in parallel threads, ninja's jobs shared between them): both KV
    dtypes at every head dim in `head_dims`, or only the (head dim, KV dtype) pairs in `combos` (a run that times a
    few owed rows: on a fresh H200 the regimes grid's every pair took over 5 minutes, for two fp8 rows). Returns
    {'ok', 'seconds', 'errors', 'optional_errors'}."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from kernels_probe.attention.data import build_data
    from kernels_probe.attention.grid import AttentionConfig

    t0 = time.perf_counter()
    errors: list[str] = []
    optional_errors: list[str] = []

    # bf16 KV at head dim 128 must build (else FlashInfer's rows are skipped); every other module is built
    # too, but a failure there only skips its rows (recorded per row by the runner).
    def build(head_dim: int, kv_dtype: str) -> list[str]:
        errs: list[str] = []
        tag = f"{kv_dtype}" + ("" if head_dim == 128 else f" d{head_dim}")
        try:
            with torch.cuda.stream(torch.cuda.Stream()):
                d = build_data(AttentionConfig(prefix_tokens=64, group_size=2, suffix_tokens=32, kv_dtype=kv_dtype,
                                               head_dim=head_dim), device)
                for tc in (False, True):
                    try:
                        FlashInferDecode(d, shared=True, tensor_cores=tc)()
                    except Exception as exc:
                        errs.append(f"{tag} decode tc={tc}: {type(exc).__name__}: {exc}"[:300])
                for fa2 in (False, True):
                    try:
                        FlashInferCascade(d, fa2=fa2)()
                    except Exception as exc:
                        errs.append(f"{tag} cascade fa2={fa2}: {type(exc).__name__}: {exc}"[:300])
                torch.cuda.synchronize()
        except Exception as exc:
            errs.append(f"{tag}: {type(exc).__name__}: {exc}"[:300])
        return errs

    if combos is not None:
        jobs = sorted(set(combos) | {(128, "bf16")}, key=lambda j: (j != (128, "bf16"), j))
    else:
        jobs = [(hd, kv) for hd in sorted(set(head_dims) | {128}, key=lambda h: h != 128) for kv in ("bf16", "fp8")]
    with ThreadPoolExecutor(max_workers=min(4, len(jobs))) as pool:
        results = list(pool.map(lambda j: build(*j), jobs))
    for (hd, kv), errs in zip(jobs, results):
        (errors if (hd, kv) == (128, "bf16") else optional_errors).extend(errs)
    return {"ok": not errors, "seconds": time.perf_counter() - t0, "errors": errors, "optional_errors": optional_errors}
