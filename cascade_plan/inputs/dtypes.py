"""Element sizes of the KV cache and weight formats."""

from __future__ import annotations

from typing import Literal

KvDtype = Literal["bf16", "fp16", "fp8", "int8", "int4"]
WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "int4"]

ELEMENT_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}

# Integer KV caches carry a per-(token, head) scale (int8) or scale and zero point (int4) in fp16;
# fp8 engines use a per-tensor scale, which is negligible. Bytes per cached row of one head.
KV_ROW_SCALE_BYTES: dict[str, float] = {"bf16": 0.0, "fp16": 0.0, "fp8": 0.0, "int8": 2.0, "int4": 4.0}


def kv_row_bytes(dtype: str, elements: int) -> float:
    """Bytes of one cached row (one token, one head, K or V) of `elements` values."""
    return elements * ELEMENT_BYTES[dtype] + KV_ROW_SCALE_BYTES[dtype]
