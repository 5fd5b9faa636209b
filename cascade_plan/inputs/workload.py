"""The workload file: model, hardware, dtypes, TP, and the prefix-sharing tree (schema_version 1)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import msgspec

from cascade_plan.inputs.dtypes import KvDtype, WeightDtype
from cascade_plan.errors import InputError
from cascade_plan.inputs.hardware import HardwareProfile, load_hardware
from cascade_plan.inputs.model_spec import ModelSpec, load_model
from cascade_plan.inputs.yaml_source import load_yaml, validation_error


NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
PosInt = Annotated[int, msgspec.Meta(ge=1)]


class TreeNode(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A run of prompt tokens shared by everything below it. `copies` distinct instances of it exist
    under its parent. Internal nodes have `children`; leaves have `samples` sequences, each decoding
    `output_tokens` tokens after `private_tokens` prompt tokens of its own."""

    name: str | None = None
    tokens: NonNegInt = 0
    copies: PosInt = 1
    children: list["TreeNode"] = msgspec.field(default_factory=list)
    samples: PosInt | None = None
    output_tokens: PosInt | None = None
    private_tokens: NonNegInt = 0

    def __post_init__(self) -> None:
        if self.children and self.samples is not None:
            raise ValueError("a node has either children or samples (a leaf), not both")
        if not self.children:
            if self.samples is None:
                raise ValueError("a leaf node needs `samples` (sequences decoding under it) or `children`")
            if self.output_tokens is None:
                raise ValueError("a leaf node needs `output_tokens`")
        elif self.output_tokens is not None or self.private_tokens:
            raise ValueError("`output_tokens` and `private_tokens` belong on leaf nodes (those with samples)")


class Checks(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Capacity gates for `cascade-plan check` (each optional; command-line flags override)."""

    min_run_speedup: Annotated[float, msgspec.Meta(gt=0)] | None = None   # per-sequence / cascade run time
    max_step_s: Annotated[float, msgspec.Meta(gt=0)] | None = None        # slowest decode step, in the mode picked
    max_run_s: Annotated[float, msgspec.Meta(gt=0)] | None = None         # whole decode, in the mode picked
    min_sequences_fit: PosInt | None = None                               # KV capacity, this workload's shape
    cascade_chosen: bool | None = None                                    # the model picks cascade
    vllm_uses_cascade: bool | None = None                                 # vLLM's gate, opted in


class Workload(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    schema_version: Literal[1]
    model: str
    tree: TreeNode
    name: str | None = None
    description: str | None = None
    hardware: str = "h100-sxm"
    kv_dtype: KvDtype = "bf16"
    weight_dtype: WeightDtype = "bf16"
    tp: Annotated[int, msgspec.Meta(ge=1, le=64)] = 1
    prefix_caching: bool = True   # shared prefix stored once (shared physical KV blocks)
    block_size: PosInt = 16       # KV page size in tokens
    checks: Checks | None = None


@dataclass(frozen=True)
class Scenario:
    """A workload resolved against its model and hardware: what the cost model consumes."""

    name: str
    model: ModelSpec
    hardware: HardwareProfile
    kv_dtype: str
    weight_dtype: str
    tp: int
    prefix_caching: bool
    block_size: int
    tree: TreeNode
    source: str | None = None
    checks: Checks | None = None


def parse_workload(path: Path) -> tuple[Workload, object]:
    doc = load_yaml(path, "workload")
    version = doc.data.get("schema_version")
    if version is not None and version != 1:
        raise doc.error(("schema_version",), f"unsupported schema_version {version!r}: this cascade-plan reads version 1")
    try:
        return msgspec.convert(doc.data, Workload), doc
    except msgspec.ValidationError as exc:
        raise validation_error(doc, exc) from None


def check_tp(model: ModelSpec, tp: int) -> None:
    if model.num_q_heads % tp:
        raise InputError(f"tensor-parallel degree {tp} does not divide the {model.num_q_heads} query heads of {model.id}",
                         field="tp")


def load_scenario(path: Path, hardware_override: str | None = None) -> Scenario:
    """A workload file, or a shipped workload by name, resolved against its model and hardware."""
    from cascade_plan.inputs.workload_catalog import resolve_workload

    path = resolve_workload(path)
    wl, doc = parse_workload(path)
    base = Path(path).parent
    try:
        model = load_model(wl.model, base)
    except InputError as exc:
        if exc.file:
            raise
        raise doc.error(("model",), exc.message) from None
    try:
        hw = load_hardware(hardware_override or wl.hardware, None if hardware_override else base)
    except InputError as exc:
        if exc.file or hardware_override:
            raise
        raise doc.error(("hardware",), exc.message) from None
    try:
        check_tp(model, wl.tp)
    except InputError as exc:
        raise doc.error(("tp",), exc.message) from None
    return Scenario(name=wl.name or Path(path).stem, model=model, hardware=hw, kv_dtype=wl.kv_dtype,
                    weight_dtype=wl.weight_dtype, tp=wl.tp, prefix_caching=wl.prefix_caching,
                    block_size=wl.block_size, tree=wl.tree, source=str(path), checks=wl.checks)


def simple_tree(prefix_tokens: int, groups: int, samples: int, output_tokens: int, private_tokens: int = 0) -> TreeNode:
    """The seed's shape: `groups` prompts of `prefix_tokens`, `samples` sequences decoding under each."""
    return TreeNode(tokens=prefix_tokens, copies=groups, samples=samples, output_tokens=output_tokens,
                    private_tokens=private_tokens)
