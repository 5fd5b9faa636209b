"""The workload file: model, hardware, dtypes, TP, and the prefix-sharing tree (schema_version 1)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

from cascade_plan.errors import InputError
from cascade_plan.inputs import limits
from cascade_plan.inputs.dtypes import KvDtype, WeightDtype
from cascade_plan.inputs.hardware import HardwareProfile, load_hardware
from cascade_plan.inputs.model_spec import ModelSpec, load_model
from cascade_plan.inputs.workload_catalog import resolve_workload
from cascade_plan.inputs.yaml_source import SourceDoc, load_yaml, validation_error

# Every count is bounded (see limits.py): no product of them can overflow, and none is beyond a GPU.
Tokens = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_TOKENS)]
OutputTokens = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_OUTPUT_TOKENS)]
Copies = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_COPIES)]
Samples = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_SAMPLES)]
Threshold = Annotated[float, msgspec.Meta(gt=0, le=limits.MAX_THRESHOLD)]   # finite: NaN and infinity refused


class TreeNode(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A run of prompt tokens shared by everything below it. `copies` distinct instances of it exist
    under its parent. Internal nodes have `children`; leaves have `samples` sequences, each decoding
    `output_tokens` tokens after `private_tokens` prompt tokens of its own."""

    name: str | None = None
    tokens: Tokens = 0
    copies: Copies = 1
    children: list["TreeNode"] = msgspec.field(default_factory=list)
    samples: Samples | None = None
    output_tokens: OutputTokens | None = None
    private_tokens: Tokens = 0

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

    min_run_speedup: Threshold | None = None     # per-sequence / cascade run time
    max_step_s: Threshold | None = None          # slowest decode step, in the mode picked
    max_run_s: Threshold | None = None           # whole decode, in the mode picked
    max_tpot_ms: Threshold | None = None         # mean decode step (ms), in the mode picked, in waves that fit
    max_rollout_s: Threshold | None = None       # the whole batch in waves that fit, in the mode picked
    # KV capacity, this workload's shape
    min_sequences_fit: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_SEQUENCES)] | None = None
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
    block_size: Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_BLOCK_SIZE)] = 16   # KV page size in tokens
    checks: Checks | None = None
    moe_routing: Literal["balanced", "skewed"] = "balanced"    # how the router spreads tokens over experts


class Scenario(msgspec.Struct, frozen=True):
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
    moe_routing: str = "balanced"     # balanced, or skewed (a few experts take most tokens); MoE models only


def _check_tree_size(doc) -> None:
    """Depth and node count of the raw tree, before typed conversion builds anything (no recursion)."""
    stack: list[tuple[object, tuple]] = [(doc.data.get("tree"), ("tree",))]
    nodes = 0
    while stack:
        node, path = stack.pop()
        if not isinstance(node, dict):
            continue
        nodes += 1
        if nodes > limits.MAX_NODES:
            raise doc.error(("tree",), f"the tree has more than {limits.MAX_NODES:,} nodes; cascade-plan plans "
                                       "trees up to that size (merge sibling nodes of the same shape with `copies:`)")
        depth = sum(1 for part in path if part == "children")
        if depth >= limits.MAX_DEPTH:
            raise doc.error(("tree",), f"the tree is more than {limits.MAX_DEPTH} levels deep; cascade-plan plans "
                                       "trees up to that depth")
        children = node.get("children")
        if isinstance(children, list):
            stack.extend((child, path + ("children", i)) for i, child in enumerate(children))


def _check_tree_totals(tree: TreeNode, doc) -> None:
    """Sequences in the batch and the longest context, in exact integers, against their bounds."""
    stack: list[tuple[TreeNode, tuple, int, int]] = [(tree, ("tree",), 1, 0)]
    while stack:
        node, path, instances, shared = stack.pop()
        instances *= node.copies
        shared += node.tokens
        if node.children:
            stack.extend((c, path + ("children", i), instances, shared) for i, c in enumerate(node.children))
            continue
        assert node.samples is not None and node.output_tokens is not None   # a leaf: TreeNode.__post_init__
        if instances * node.samples > limits.MAX_SEQUENCES:
            raise doc.error(path + ("samples",),
                            f"{instances * node.samples:,} sequences in the batch under this leaf; "
                            f"cascade-plan plans batches up to {limits.MAX_SEQUENCES:,}")
        context = shared + node.private_tokens + node.output_tokens
        if context > limits.MAX_CONTEXT_TOKENS:
            raise doc.error(path + ("output_tokens",), f"a sequence here reaches {context:,} tokens of context; "
                                                       f"cascade-plan plans contexts up to "
                                                       f"{limits.MAX_CONTEXT_TOKENS:,}")
    total = total_sequences(tree)
    if total > limits.MAX_SEQUENCES:
        raise doc.error(("tree",), f"{total:,} sequences in the batch; cascade-plan plans batches up to "
                                   f"{limits.MAX_SEQUENCES:,}")


def total_sequences(tree: TreeNode) -> int:
    """Sequences in the batch, in exact integers (the sum over leaves of samples x instances)."""
    total, stack = 0, [(tree, 1)]
    while stack:
        node, instances = stack.pop()
        instances *= node.copies
        if node.children:
            stack.extend((c, instances) for c in node.children)
        else:
            assert node.samples is not None                # a leaf: TreeNode.__post_init__
            total += instances * node.samples
    return total


def parse_workload(path: Path) -> tuple[Workload, SourceDoc]:
    doc = load_yaml(path, "workload", max_mappings=limits.MAX_NODES + 2)   # + the document and `checks:`
    version = doc.data.get("schema_version")
    if version is not None and version != 1:
        raise doc.error(("schema_version",),
                        f"unsupported schema_version {version!r}: this cascade-plan reads version 1")
    _check_tree_size(doc)
    try:
        wl = msgspec.convert(doc.data, Workload)
    except msgspec.ValidationError as exc:
        raise validation_error(doc, exc) from None
    _check_tree_totals(wl.tree, doc)
    return wl, doc


def check_tp(model: ModelSpec, tp: int) -> None:
    if model.num_q_heads % tp:
        raise InputError(f"tensor-parallel degree {tp} does not divide the {model.num_q_heads} query heads of "
                         f"{model.id}",
                         field="tp")


def load_scenario(path: Path, hardware_override: str | None = None) -> Scenario:
    """A workload file, or a shipped workload by name, resolved against its model and hardware."""
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
                    block_size=wl.block_size, tree=wl.tree, source=str(path), checks=wl.checks,
                    moe_routing=wl.moe_routing)


def simple_tree(prefix_tokens: int, groups: int, samples: int, output_tokens: int, private_tokens: int = 0) -> TreeNode:
    """The seed's shape: `groups` prompts of `prefix_tokens`, `samples` sequences decoding under each.
    The command-line numbers go through the same bounds as a workload file's."""
    raw = {"tokens": prefix_tokens, "copies": groups, "samples": samples, "output_tokens": output_tokens,
           "private_tokens": private_tokens}
    flags = {"tokens": "--prefix", "copies": "--groups", "samples": "--samples", "output_tokens": "--output-tokens",
             "private_tokens": "--private-tokens"}
    try:
        tree = msgspec.convert(raw, TreeNode)
    except msgspec.ValidationError as exc:
        field = str(exc).rsplit("$.", 1)[-1].rstrip("`")
        raise InputError(str(exc).split(" - at ")[0].replace("`", ""), field=flags.get(field, field)) from None
    try:
        _check_tree_totals(tree, _FlagDoc())
    except InputError as exc:
        raise InputError(exc.message) from None
    return tree


class _FlagDoc:
    """Stands in for a source file when the tree comes from command-line flags."""

    def error(self, path: tuple, message: str) -> InputError:
        return InputError(message)
