"""One vLLM forward step, as the engine decides it: cascade or not per KV-cache group, and what the
choice costs in CUDA graphs. The public entry point for per-step counts (a scheduler log, a
hand-built batch) is `vllm_step_decision(VllmStepCounts(...))`.

From vLLM's source (file and commit of each in `vllm_source.py`):

- `_compute_cascade_attn_prefix_lens` (gpu_model_runner.py) decides per KV-cache group and per
  attention group: the group's common blocks x its block size, capped by the smallest
  `num_computed_tokens` of the batch and rounded down to whole blocks, then the backend's
  `use_cascade_attention` with that group's own sliding-window / chunked-local flags. The step uses
  cascade when any group's prefix is non-zero, so a hybrid model (sliding-window and full-attention
  layers) can cascade its full-attention layers while its sliding-window group reports 0 blocks.
- `get_num_common_prefix_blocks` (single_type_kv_cache_manager.py) counts the leading blocks of one
  running request whose reference count equals `len(req_to_blocks)`: every request holding KV
  blocks, whether or not it is scheduled this step. `count_common_prefix_blocks` emulates it.
- Mixed prefill/decode batches and speculative decoding bring more than one query token per request:
  the FlashAttention gate then skips its tile/wave model and takes cascade (when the thresholds
  pass); the prefix is still capped by the smallest computed-token count, which a fresh prefill
  without a cache hit sets to 0.
- `CudagraphDispatcher.dispatch(..., use_cascade_attn=True)` bypasses the FULL graph keys: a uniform
  decode step (every request the same number of query tokens, the step vLLM's default
  FULL_AND_PIECEWISE mode runs as one full graph) falls back to PIECEWISE, launching attention
  eagerly in every layer. That is priced at `EAGER_ATTENTION_PER_LAYER_S` per attention layer.
  Mixed steps run PIECEWISE anyway; steps above the largest captured size run without graphs.

Pure Python: no I/O, no printing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from cascade_plan.engine.vllm_gate import (
    VllmGateDecision,
    VllmGateInputs,
    vllm_uses_cascade,
)
from cascade_plan.engine.vllm_source import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    EAGER_ATTENTION_PER_LAYER_S,
)

GroupKind = Literal["full", "sliding_window", "chunked_local", "mamba", "encoder_only"]
CudaGraphMode = Literal["FULL", "PIECEWISE", "NONE"]
#: vLLM's default largest captured CUDA-graph size, in tokens per step (min(2 x max_num_seqs, 512)).
MAX_CUDAGRAPH_CAPTURE_TOKENS: int = 512


def count_common_prefix_blocks(block_tables: Sequence[Sequence[int]]) -> int:
    """vLLM's FullAttentionManager.get_num_common_prefix_blocks over hand-built block tables: one
    table of physical block ids per request holding KV blocks (scheduled this step or not). The
    leading blocks of the first table that every table holds (reference count = number of tables)."""
    if not block_tables:
        return 0
    ref_cnt = Counter(b for table in block_tables for b in set(table))
    common = 0
    for block in block_tables[0]:
        if ref_cnt[block] != len(block_tables):
            break
        common += 1
    return common


@dataclass(frozen=True)
class KvCacheGroup:
    """One KV-cache group of the model: layers that share a block table and a spec.

    Attributes:
        num_common_prefix_blocks: the scheduler's count for this group (vLLM logs it as
            `num_common_prefix_blocks[group]`); sliding-window and chunked-local groups report 0.
        num_layers: attention layers in the group (for the CUDA-graph price).
        kind: the group's spec. Only "full" groups can cascade.
        block_size: the group's KV block size in tokens.
        num_kv_heads: KV heads per GPU of this group's layers; None takes the step's.
        sliding_window: the window of a "sliding_window" group, in tokens.
    """

    num_common_prefix_blocks: int
    num_layers: int = 1
    kind: GroupKind = "full"
    block_size: int = DEFAULT_BLOCK_SIZE_TOKENS
    num_kv_heads: int | None = None
    sliding_window: int | None = None

    def __post_init__(self) -> None:
        if self.num_common_prefix_blocks < 0 or self.num_layers < 0 or self.block_size < 1:
            raise ValueError("a KV-cache group needs num_common_prefix_blocks >= 0, num_layers >= 0, block_size >= 1")
        if (self.kind == "sliding_window") != (self.sliding_window is not None) or (self.sliding_window or 1) < 1:
            raise ValueError("a sliding_window group needs its window (>= 1 token); other kinds have none")


@dataclass(frozen=True)
class VllmStepCounts:
    """What vLLM knows about one step when it decides (head counts per GPU, after TP).

    `query_lens` None means pure decode (one token per request); a tuple gives each scheduled
    request's new tokens (prefill chunks, 1 + k for speculative decoding with k draft tokens).
    `min_num_computed_tokens` None assumes the cap does not bind (steady decode).
    `disable_cascade_attn` defaults to False here: a step log records a deployment, and the
    question asked of it is what the heuristic did (set True for vLLM as recently shipped).
    """

    num_requests: int
    groups: tuple[KvCacheGroup, ...]
    num_query_heads: int
    num_kv_heads: int
    num_sms: int
    query_lens: tuple[int, ...] | None = None
    min_num_computed_tokens: int | None = None
    use_alibi: bool = False
    dcp_world_size: int = 1
    attention_backend: str = "FLASH_ATTN"
    disable_cascade_attn: bool = False
    use_ubatching: bool = False
    async_spec_decode: bool = False
    full_cuda_graphs: bool = True          # cudagraph_mode with FULL decode graphs (vLLM's default)
    max_cudagraph_tokens: int = MAX_CUDAGRAPH_CAPTURE_TOKENS
    eager_attention_per_layer_s: float = EAGER_ATTENTION_PER_LAYER_S

    def __post_init__(self) -> None:
        if not self.groups:
            raise ValueError("a step needs at least one KV-cache group")

    @property
    def num_query_tokens(self) -> int:
        return self.num_requests if self.query_lens is None else sum(self.query_lens)

    @property
    def uniform(self) -> bool:
        """Every request brings the same number of query tokens (decode, or uniform spec decode)."""
        return self.query_lens is None or len(set(self.query_lens)) <= 1

    def group_inputs(self, g: KvCacheGroup) -> VllmGateInputs:
        other = g.kind in ("mamba", "encoder_only")
        return VllmGateInputs(
            common_prefix_tokens=0 if other else g.num_common_prefix_blocks * g.block_size,
            num_requests=self.num_requests, num_query_heads=self.num_query_heads,
            num_kv_heads=min(g.num_kv_heads or self.num_kv_heads, self.num_query_heads), num_sms=self.num_sms,
            query_lens=self.query_lens, block_size=g.block_size, min_num_computed_tokens=self.min_num_computed_tokens,
            use_alibi=self.use_alibi,
            sliding_window=g.sliding_window,
            use_local_attention=g.kind == "chunked_local", dcp_world_size=self.dcp_world_size,
            disable_cascade_attn=self.disable_cascade_attn, use_ubatching=self.use_ubatching,
            async_spec_decode=self.async_spec_decode,
            attention_backend=f"{g.kind} (linear/encoder)" if other else self.attention_backend)


@dataclass(frozen=True)
class GroupDecision:
    group: KvCacheGroup
    decision: VllmGateDecision

    @property
    def cascade_prefix_tokens(self) -> int:
        """vLLM's cascade_attn_prefix_len for this group: the prefix it hands the kernels, 0 when not used."""
        return self.decision.common_prefix_tokens_used if self.decision.used else 0


@dataclass(frozen=True)
class VllmStepDecision:
    used: bool
    groups: tuple[GroupDecision, ...]
    cudagraph_mode: CudaGraphMode                  # what the step runs with
    cudagraph_mode_without_cascade: CudaGraphMode  # what it would run with had it not cascaded
    eager_attention_layers: int                    # layers whose attention now runs eagerly
    added_s: float                                 # the price of the lost full graph, seconds per step
    reason: str = field(default="")

    @property
    def cascaded_layers(self) -> int:
        return sum(g.group.num_layers for g in self.groups if g.cascade_prefix_tokens > 0)


def _graph_mode(step: VllmStepCounts, cascade: bool) -> CudaGraphMode:
    if step.num_query_tokens > step.max_cudagraph_tokens:
        return "NONE"
    return "FULL" if step.full_cuda_graphs and step.uniform and not cascade else "PIECEWISE"


def vllm_step_decision(step: VllmStepCounts) -> VllmStepDecision:
    """vLLM's decision for one step: per KV-cache group, whether cascade runs and over how many
    tokens; the step's CUDA-graph mode; and the time the lost full graph adds (0 when not cascaded)."""
    groups = tuple(GroupDecision(g, vllm_uses_cascade(step.group_inputs(g))) for g in step.groups)
    used = any(g.cascade_prefix_tokens > 0 for g in groups)
    mode, without = _graph_mode(step, used), _graph_mode(step, False)
    layers = sum(g.num_layers for g in step.groups if g.kind not in ("mamba",))
    lost = used and without == "FULL"
    added = layers * step.eager_attention_per_layer_s if lost else 0.0
    if used:
        names = [f"{g.group.kind} group ({g.group.num_layers} layers, {g.cascade_prefix_tokens:,}-token prefix)"
                 for g in groups if g.cascade_prefix_tokens > 0]
        reason = "Cascade over the " + " and ".join(names) + (
            f"; the step loses its full CUDA graph: {layers} attention layers launched eagerly, "
            f"+{added * 1e6:,.0f} us per step." if lost else f"; the step runs {mode} either way.")
    else:
        reason = "; ".join(dict.fromkeys(g.decision.reason for g in groups))
    return VllmStepDecision(used=used, groups=groups, cudagraph_mode=mode, cudagraph_mode_without_cascade=without,
                            eager_attention_layers=layers if lost else 0, added_s=added, reason=reason)
