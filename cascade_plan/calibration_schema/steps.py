"""Step rows: the op-level measurements of `probe --step` (`step_ops`: GEMMs, glue, all-reduce, layer graphs, MoE)
and whole decode steps (`steps`: validation only, never fitted)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from cascade_plan.calibration_schema.quantities import (
    MAX_COPIES,
    MAX_SAMPLES,
    MAX_SEQUENCES,
    Count,
    KvDtype,
    PositiveSeconds,
    Seconds,
)


class StepOpConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The fields of a step-op row's config that the step fit and the MoE tables read (others are kept,
    ignored); which ones an op has depends on the op (calibration/step_fit.py, moe_rows.py)."""
    m: Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQUENCES)] | None = None
    n: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)] | None = None
    k: Annotated[int, msgspec.Meta(ge=1, le=1 << 40)] | None = None
    tp: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None
    gpus: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    bytes: Annotated[int, msgspec.Meta(ge=0, le=1 << 60)] | None = None          # an all-reduce message
    dtype: str | None = None
    model: str | None = None
    variant: str | None = None
    gemm: str | None = None                          # gemm: qkv, o, gate_up, down, lm_head
    glue: str | None = None                          # layer_graph: the glue variant and the layers in the graph
    layers: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    proj: str | None = None                          # moe_grouped_gemm: gate_up or down, the expert set, routing
    experts: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    top_k: Annotated[int, msgspec.Meta(ge=1, le=1 << 20)] | None = None
    routing: str | None = None
    backend: str | None = None


class StepOpRow(msgspec.Struct, frozen=True, kw_only=True):
    """One op-level measurement of `probe --step` (the rows `calibrate` fits the step parts on)."""
    op: str
    config: StepOpConfig
    median_s: Seconds | None = None
    correct: bool = True
    per_layer_s: Seconds | None = None               # layer_graph: the graph's time per layer
    model_config: dict[str, Any] | None = None       # moe_layer_graph: the config.json the step was built from


class StepConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The batch a whole-step row was timed at (the fields the step validation reads; the rest kept, ignored)."""

    prefix_tokens: Count
    group_size: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAMPLES)]
    n_groups: Annotated[int, msgspec.Meta(ge=1, le=MAX_COPIES)]
    generated: Annotated[int, msgspec.Meta(ge=0, le=MAX_SEQUENCES)]
    kv_dtype: KvDtype | None = None
    weight_dtype: str | None = None
    suffix_tokens: Count

# The whole-step kinds beside the dense steps (kernels_probe/moe/moe_step.py), in words.
STEP_KINDS = {"moe": "MoE (GQA attention + routed experts)", "mla_moe": "MLA + MoE"}


class StepRow(msgspec.Struct, frozen=True, kw_only=True):
    """One whole decode step of a model the probe timed (`steps`: validation only, never fitted)."""

    workload: str
    model: str
    tp: Annotated[int, msgspec.Meta(ge=1, le=1024)]
    position: str
    config: StepConfig
    glue: Literal["fused", "torch"] | None = None    # the engine glue the step ran (None: the file's step_glue)
    kv_dtype: KvDtype | None = None
    weight_dtype: str | None = None
    backend: str
    mode: Literal["per_sequence", "cascade"]
    median_s: PositiveSeconds
    model_config: dict[str, Any] | None = None     # a config.json for models without a preset (read by inputs/)
    # MoE / MLA + MoE steps (kernels_probe/moe/moe_step.py); None: dense
    step_kind: Literal["moe", "mla_moe"] | None = None
    layers: Annotated[int, msgspec.Meta(ge=1, le=1024)] | None = None   # the layers built, where fewer than the model's
    allreduce: bool | None = None                   # False: one GPU's tensor-parallel shard, no all-reduce timed
