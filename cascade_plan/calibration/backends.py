"""The attention backends a calibration fits, and where each one's kernels are in the probe file."""

from __future__ import annotations

# Where each backend's kernels come from in the probe file: (backend, variant) per planner kernel kind.
# FlashInfer's cascade is timed as prefix level and whole cascade; its suffix level and merge are
# fitted together from (whole - prefix).
BACKENDS: dict[str, dict[str, tuple[str, str | None]]] = {
    "triton": {"decode": ("triton", None), "prefix": ("triton", None), "suffix": ("triton", None),
               "merge": ("triton", None)},
    "torch": {"decode": ("torch", None), "prefix": ("torch", None), "suffix": ("torch", None),
              "merge": ("torch", None)},
    "flashinfer": {"decode": ("flashinfer", "tensor_cores"), "prefix": ("flashinfer", "auto"),
                   "total": ("flashinfer", "auto")},
    "flashinfer-fa2": {"decode": ("flashinfer", "tensor_cores"), "prefix": ("flashinfer-fa2", "fa2"),
                       "total": ("flashinfer-fa2", "fa2")},
}

# How each backend's prefix pass tiles query rows, per KV dtype (cost/ops/tiles.py PREFIX_ROWS). FlashInfer's
# automatic choice on Hopper (the probe's "flashinfer" cascade) is its FA3 prefill for 16-bit KV, which gives
# every query head its own tiles; with fp8 KV it falls back to FA2 (on the H200 its fp8 rows and fits match
# flashinfer-fa2's within 1%). The rest pack a prompt's rows per KV head.
PREFIX_ROWS_BY_BACKEND: dict[tuple[str, str], str] = {("flashinfer", "bf16"): "q_head",
                                                      ("flashinfer", "fp16"): "q_head"}

# How each backend's per-sequence decode computes query rows, per KV dtype (cost/ops/tiles.py DECODE_ROWS).
# The probe's Triton kernel puts a KV head's query heads in one dot of at least 16 rows. With fp8 KV that work
# bounds it (widening and dots: 0.13 ns per KV-head token on the H200 at 4-8 query heads per KV head), and
# useful FLOP priced Qwen3-30B-A3B's decode (8 per KV head, 512 sequences) 17-27% too slow. Its bf16 decode is
# bandwidth-bound: the padded count changed no held-out step by more than 2% and is not used there.
DECODE_ROWS_BY_BACKEND: dict[tuple[str, str], str] = {("triton", "fp8"): "kv_head"}

# Backends whose per-sequence decode walks a context in whole KV tiles (cost/ops/tiles.py): both FlashInfer
# backends decode with its tensor-core (FA2 paged) kernel. The probe's Triton decode masks a tile's tail, and its
# rows show no such step.
WHOLE_TILE_DECODE = frozenset({"flashinfer", "flashinfer-fa2"})
