"""Default step parts for GPUs without a calibration ("uncalibrated"): not the bare roofline.

Where each number comes from: the H200 probe of 2026-11-30 (its rows live on, re-measured or kept, in
calibrations/h200-probe-2026-12-01.json), fitted by calibration/step_fit.py, coarsened and rounded.

* GEMMs: measured time / datasheet roofline, over tokens per step M and weight-matrix bytes. Ratios
  travel between GPUs better than seconds (the same cuBLAS kernels reach similar fractions of peak on
  Hopper-class parts); on other architectures they are a guess until `cascade-plan probe --step` runs.
  Each ratio holds the ~4 us a dependent kernel waits inside a graph, so small matrices (17 MB: 2.9x,
  fp8 8 MB: 4.5x) are far from their roofline; large ones reach 1.15-1.25x; near the ridge point
  (M ~ 192-256) GEMMs reach neither roof.
* Glue: FlashInfer's fused kernels as vLLM/SGLang run them: ~18 us per layer + 0.04 us per token per
  layer (add-RMSNorm x2, RoPE, KV append, SiLU-and-mul), ~41 us + 0.11 us per token per step
  (embedding, final norm, argmax). In seconds, as measured on the H200 for Llama-3-8B at TP 1; the
  per-token parts scale to other shapes by their glue bytes per token (cost/glue_widths.py).
* All-reduce: 2 GPUs measured (NCCL over NVLink 4): the probe's curve of 14 message sizes, 8 KiB-64 MiB,
  interpolated (flat at ~10 us up to 256 KiB, 28.6 us at 2 MiB, 34.7 us at 4 MiB: a line, 10 us + bytes /
  242 GB/s, gave 19 us there); 4 and 8 GPUs: that curve carried over (bus bandwidth per GPU kept, ring
  traffic 2(n-1)/n, latency x log2 n), a model.
"""

from __future__ import annotations

import math

import msgspec

from cascade_plan.cost.step_parts import (
    AllReduceFit,
    GemmEfficiency,
    GlueParams,
    StepParts,
    carried_curve,
)

_M = (1, 64, 128, 192, 256, 512, 2048)
_W_BF16 = (16.8e6, 50.3e6, 117.4e6, 1050.7e6)   # weight-matrix bytes (fp8: half)
_BF16 = ((2.87, 1.69, 1.38, 1.15), (2.64, 1.66, 1.41, 1.27), (2.78, 1.65, 1.41, 1.22), (2.97, 2.34, 1.59, 1.37),
         (2.70, 1.85, 1.56, 1.36), (1.91, 1.41, 1.37, 1.36), (1.37, 1.28, 1.23, 1.26))
_FP8 = ((4.45, 2.33, 1.68, 1.21), (4.52, 2.18, 1.60, 1.21), (4.20, 2.17, 1.71, 1.23), (4.20, 2.63, 1.97, 1.66),
        (4.09, 2.26, 1.80, 1.51), (2.76, 1.78, 1.50, 1.39), (1.87, 1.49, 1.38, 1.33))
_LAUNCH_S = 0.84e-6   # in-graph launch of one more kernel (the probe's graph_kernel_launch_s)


def _table(dtype: str, ratio, weight_bytes) -> GemmEfficiency:
    return GemmEfficiency(dtype=dtype, log2_m=tuple(math.log2(m) for m in _M),
                          log2_weight_bytes=tuple(math.log2(w) for w in weight_bytes), ratio=ratio,
                          overhead_s=_LAUNCH_S)


_BASIS = "H200 probe 2026-11-30, 2-GPU measured curve"
# The probe's NCCL all-reduce rows (bf16, inside a CUDA graph): message bytes, median seconds.
_AR_BYTES = tuple(float(2**k) for k in range(13, 27))
_AR_S = tuple(x * 1e-6 for x in (9.88, 9.51, 10.0, 10.3, 9.96, 10.6, 12.3, 16.9, 28.6, 34.7, 46.0, 75.7, 140.0, 253.0))
_AR2 = AllReduceFit(gpus=2, latency_s=10e-6, bytes_per_s=242e9, origin="measured", basis=_BASIS,
                    table_bytes=_AR_BYTES, table_s=_AR_S)


def _carried(n: int, latency_s: float, bytes_per_s: float) -> AllReduceFit:
    tb, ts = carried_curve(_AR2, n)
    return msgspec.structs.replace(_AR2, gpus=n, latency_s=latency_s, bytes_per_s=bytes_per_s,
                                   origin="extrapolated", table_bytes=tb, table_s=ts,
                                   basis=_BASIS + "; carried over: bus bandwidth per GPU kept, ring 2(n-1)/n, "
                                                  "latency x log2 n")

DEFAULT_STEP_PARTS = StepParts(
    gemm={"bf16": _table("bf16", _BF16, _W_BF16), "fp8": _table("fp8", _FP8, tuple(w / 2 for w in _W_BF16))},
    glue=GlueParams(variant="fused", per_layer_s=18e-6, per_token_layer_s=0.038e-6, per_step_s=41e-6,
                    per_token_step_s=0.105e-6),
    allreduce={2: _AR2, 4: _carried(4, 20e-6, 161e9), 8: _carried(8, 30e-6, 138e9)},
    source="default",
    notes=("uncalibrated step parts: H200-measured GEMM ratios, glue and all-reduce (cost/step_defaults.py)",),
)
