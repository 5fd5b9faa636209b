"""Would vLLM (V1 engine) actually run cascade attention for this batch?

An emulation, in plain Python, of the chain of checks by which vLLM's V1 engine decides, at every
forward step, whether to split attention into a shared-prefix pass plus a per-request suffix pass
("cascade attention") or to run ordinary per-request (flash-decoding) attention. It lets the
planner say, per workload, whether the engine would take the path the cost model recommends: where
the two disagree, the user has to know.

What the engine does, for one KV-cache group (sources: `vllm/v1/attention/backends/flash_attn.py::
use_cascade_attention`, `vllm/v1/worker/gpu_model_runner.py::_compute_cascade_attn_prefix_len(s)`,
`vllm/v1/core/single_type_kv_cache_manager.py::get_num_common_prefix_blocks`,
`vllm/config/model.py::ModelConfig.disable_cascade_attn`; file and commit of each in
`vllm_source.py`; a whole step, with several groups and the CUDA graph, in `vllm_step.py`):

1. Engine switches. The runner only asks when `disable_cascade_attn` is False (the shipped default
   became True in 2026, see `CASCADE_DISABLED_BY_DEFAULT`), micro-batching (DBO) is off and async
   scheduling is not combined with speculative decoding. Every backend but FlashAttention answers
   "no" unconditionally (`FLASHINFER_NEVER_USES_CASCADE`; `attention_backend.py`).
2. Shared blocks. The scheduler counts the leading KV blocks whose reference count equals the
   number of requests holding KV blocks (`len(req_to_blocks)`: running requests, scheduled this
   step or not), i.e. the prefix shared by *all* of them, in whole blocks.
   With prefix caching off no block is shared; sliding-window and chunked-local layers report 0.
3. Prefix length. Blocks x block size, capped by the smallest `num_computed_tokens` in the batch
   (the prefix pass applies no causal mask), rounded down to a whole block again.
4. Gate: prefix >= 256 tokens; no ALiBi, sliding window or chunked-local attention; >= 8 requests;
   decode context parallelism (DCP) world size 1.
5. Heuristic. If ordinary attention would not use flash-decoding (no GQA grouping, or any request
   has more than one query token), cascade is used. Otherwise a rough tile/wave model with 128-token
   query and KV tiles compares the two, in units of "waves x KV tiles":
       prefix_tiles = ceil(prefix / 128)
       cascade_time = ceil(Hq * ceil(num_reqs / 128) / num_sms) * prefix_tiles
       flash_decoding_time = ceil(num_reqs * Hkv * ceil((Hq // Hkv) / 128) * prefix_tiles / num_sms)
   and cascade is used when cascade_time < flash_decoding_time.

A consequence worth stating (derived here, not a claim of the source): because cascade_time is an
integer multiple of prefix_tiles, the comparison does not depend on the prefix length at all once
the 256-token gate is passed. It reduces to
    num_reqs * Hkv * ceil(G / 128) > num_sms * ceil(Hq * ceil(num_reqs / 128) / num_sms),
so for Llama-3-8B at TP 1 (Hq 32, Hkv 8) on a 132-SM H100/H200, decode batches of 8 to 16 requests
keep flash-decoding and 17 or more switch to cascade, whatever the prefix length.

Pure Python/numpy: no I/O, no printing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cascade_plan.engine.vllm_source import (  # noqa: F401  (re-exported: callers import them from here)
    CASCADE_DISABLED_BY_DEFAULT,
    DEFAULT_BLOCK_SIZE_TOKENS,
    FLASHINFER_NEVER_USES_CASCADE,
    KV_TILE_TOKENS,
    MIN_COMMON_PREFIX_TOKENS,
    MIN_NUM_REQUESTS,
    Q_TILE_TOKENS,
    VLLM_DEFAULT_DISABLE_CASCADE_ATTN,
    VLLM_SOURCES_READ,
    VLLM_VERSION_MODELLED,
)

#: vLLM's AttentionBackendEnum names (attention_backend.VLLM_BACKENDS), or "MLA" / "ROCM" for those families.
AttentionBackendName = str

#: Which check settled the decision (machine-readable twin of `VllmGateDecision.reason`).
GateStage = Literal[
    "flashinfer_backend",
    "backend_never_cascades",
    "disabled_by_config",
    "async_spec_decode",
    "micro_batching",
    "no_prefix_caching",
    "sliding_window",
    "local_attention",
    "prefix_too_short",
    "alibi",
    "too_few_requests",
    "decode_context_parallel",
    "no_flash_decoding",
    "tile_wave_cascade_faster",
    "tile_wave_flash_decoding_faster",
]


def _cdiv(numerator: int, denominator: int) -> int:
    """Ceiling division on non-negative integers, as vLLM's `cdiv`."""
    return -(-numerator // denominator)


def round_down_to_blocks(tokens: int, block_size: int) -> int:
    """Largest multiple of `block_size` not above `tokens` (only whole KV blocks can be shared)."""
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    return tokens // block_size * block_size


# --------------------------------------------------------------------------------------------------
# Inputs and outputs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VllmGateInputs:
    """One forward step as vLLM's gate sees it. Head counts are per GPU, after tensor parallelism.

    Attributes:
        common_prefix_tokens: length, in tokens, of the longest prefix shared by ALL running
            requests (one request without it makes the engine's shared prefix 0).
        num_requests: requests in the batch (vLLM: `len(query_lens)`).
        num_query_heads: query heads on this GPU (vLLM: total // TP).
        num_kv_heads: KV heads on this GPU (vLLM: max(1, total // TP), replicated when fewer
            than TP).
        num_sms: streaming multiprocessors on the GPU (H100 SXM and H200: 132; A100: 108).
        query_lens: new tokens per request this step; None means decode, one token each.
        block_size: KV-cache block size in tokens (vLLM's CUDA default 16; FlashAttention needs a
            multiple of 16).
        min_num_computed_tokens: smallest count of already-computed (cached) tokens among the
            requests; vLLM caps the prefix by it. None assumes it does not bind (steady decode,
            where every request has its whole prompt computed).
        use_alibi: the model uses ALiBi position biases.
        sliding_window: sliding-window size in tokens, or None for full attention.
        use_local_attention: chunked local attention (e.g. Llama 4's `attention_chunk_size`).
        dcp_world_size: decode context parallel world size.
        prefix_caching_enabled: automatic prefix caching (the only way V1 shares KV blocks).
        disable_cascade_attn: vLLM's `--disable-cascade-attn`; defaults to True as recent releases
            ship (set False to model `--no-disable-cascade-attn`).
        use_ubatching: micro-batching / dual-batch overlap, which skips cascade attention.
        async_spec_decode: async scheduling together with speculative decoding, with which vLLM
            forces cascade off.
        attention_backend: "FLASH_ATTN" runs the heuristic; every other backend ("FLASHINFER",
            "TRITON_ATTN", "FLEX_ATTENTION", the MLA and ROCm families) never cascades.
    """

    common_prefix_tokens: int
    num_requests: int
    num_query_heads: int
    num_kv_heads: int
    num_sms: int
    query_lens: tuple[int, ...] | None = None
    block_size: int = DEFAULT_BLOCK_SIZE_TOKENS
    min_num_computed_tokens: int | None = None
    use_alibi: bool = False
    sliding_window: int | None = None
    use_local_attention: bool = False
    dcp_world_size: int = 1
    prefix_caching_enabled: bool = True
    disable_cascade_attn: bool = VLLM_DEFAULT_DISABLE_CASCADE_ATTN
    use_ubatching: bool = False
    async_spec_decode: bool = False
    attention_backend: AttentionBackendName = "FLASH_ATTN"

    def __post_init__(self) -> None:
        # Fail loudly on shapes the engine could never see, rather than return a verdict on them.
        if self.common_prefix_tokens < 0:
            raise ValueError(f"common_prefix_tokens must be >= 0, got {self.common_prefix_tokens}")
        if self.num_requests < 1:
            raise ValueError(f"num_requests must be >= 1, got {self.num_requests}")
        if self.num_query_heads < 1 or self.num_kv_heads < 1:
            raise ValueError(
                f"head counts must be >= 1, got {self.num_query_heads} query and "
                f"{self.num_kv_heads} KV heads"
            )
        if self.num_kv_heads > self.num_query_heads:
            raise ValueError(
                f"num_kv_heads ({self.num_kv_heads}) cannot exceed num_query_heads "
                f"({self.num_query_heads})"
            )
        if self.num_sms < 1:
            raise ValueError(f"num_sms must be >= 1, got {self.num_sms}")
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")
        if self.dcp_world_size < 1:
            raise ValueError(f"dcp_world_size must be >= 1, got {self.dcp_world_size}")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"sliding_window must be None or >= 1, got {self.sliding_window}")
        if self.min_num_computed_tokens is not None and self.min_num_computed_tokens < 0:
            raise ValueError(
                f"min_num_computed_tokens must be None or >= 0, got {self.min_num_computed_tokens}"
            )
        if not isinstance(self.attention_backend, str) or not self.attention_backend:
            raise ValueError(f"attention_backend must be a backend name, got {self.attention_backend!r}")
        if self.query_lens is not None:
            if len(self.query_lens) != self.num_requests:
                raise ValueError(
                    f"query_lens has {len(self.query_lens)} entries but num_requests is "
                    f"{self.num_requests}"
                )
            if any(q < 1 for q in self.query_lens):
                raise ValueError("every entry of query_lens must be >= 1 token")


@dataclass(frozen=True)
class TileWaveComparison:
    """vLLM's rough cost model for cascade vs flash-decoding. Times are in "waves x KV tiles"
    (dimensionless; only their order matters), as in the source."""

    num_prefix_tiles: int
    cascade_ctas: int
    cascade_waves: int
    cascade_time: int
    flash_decoding_ctas: int
    flash_decoding_time: int

    @property
    def cascade_faster(self) -> bool:
        """The source's rule: strictly smaller time wins; a tie keeps flash-decoding."""
        return self.cascade_time < self.flash_decoding_time


@dataclass(frozen=True)
class VllmGateDecision:
    """The engine's verdict for one step.

    Attributes:
        used: vLLM would run cascade attention for this step, given every input (switches too).
        reason: one plain-English sentence naming the check that decided `used`.
        stage: machine-readable name of that check.
        heuristic_would_use: the FlashAttention gate's verdict alone, i.e. what an opted-in
            FlashAttention deployment would do (equals `used` when no engine switch intervened).
        heuristic_reason: one sentence naming the gate check that decided `heuristic_would_use`.
        common_prefix_tokens_used: the prefix the gate evaluated, in tokens, after the cap by
            `min_num_computed_tokens` and rounding down to whole blocks (0 when no block is
            shared); the engine hands it to the kernels only when `used` is True.
        tile_wave: the tile/wave comparison, when the heuristic got that far, else None.
    """

    used: bool
    reason: str
    stage: GateStage
    heuristic_would_use: bool
    heuristic_reason: str
    common_prefix_tokens_used: int
    tile_wave: TileWaveComparison | None = None

    @property
    def cascade_time(self) -> int | None:
        return None if self.tile_wave is None else self.tile_wave.cascade_time

    @property
    def flash_decoding_time(self) -> int | None:
        return None if self.tile_wave is None else self.tile_wave.flash_decoding_time


# --------------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------------


def compare_tiles_and_waves(
    common_prefix_tokens: int,
    num_requests: int,
    num_query_heads: int,
    num_kv_heads: int,
    num_sms: int,
) -> TileWaveComparison:
    """vLLM's rough cascade-vs-flash-decoding cost model for a decode step (one query per request).

    Cascade runs one prefix pass with every request's query rows stacked into one "sequence":
    Hq x ceil(num_reqs / 128) CTAs, each sweeping all prefix tiles, so its time is waves x tiles.
    Flash-decoding splits the prefix across CTAs, one per (request, KV head, query-group tile,
    KV tile), so its time is the number of waves those CTAs need.
    """
    num_queries_per_kv = num_query_heads // num_kv_heads
    num_prefix_tiles = _cdiv(common_prefix_tokens, KV_TILE_TOKENS)
    # The source counts query tokens as num_reqs: this branch is only reached in pure decode.
    cascade_ctas = num_query_heads * _cdiv(num_requests, Q_TILE_TOKENS)
    cascade_waves = _cdiv(cascade_ctas, num_sms)
    cascade_time = cascade_waves * num_prefix_tiles
    flash_decoding_ctas = (
        num_requests * num_kv_heads * _cdiv(num_queries_per_kv, Q_TILE_TOKENS) * num_prefix_tiles
    )
    flash_decoding_time = _cdiv(flash_decoding_ctas, num_sms)
    return TileWaveComparison(
        num_prefix_tiles=num_prefix_tiles,
        cascade_ctas=cascade_ctas,
        cascade_waves=cascade_waves,
        cascade_time=cascade_time,
        flash_decoding_ctas=flash_decoding_ctas,
        flash_decoding_time=flash_decoding_time,
    )


def engine_common_prefix_tokens(inputs: VllmGateInputs) -> int:
    """The common prefix length, in tokens, that vLLM hands to its gate (steps 2 and 3 above)."""
    # No prefix caching: every request owns its blocks, so no block has ref_cnt == num_running.
    # Sliding-window and chunked-local KV managers report 0 shared blocks by design.
    if (
        not inputs.prefix_caching_enabled
        or inputs.sliding_window is not None
        or inputs.use_local_attention
    ):
        return 0
    # Only full blocks are cached and shared, so the shared region is a whole number of blocks.
    shared_tokens = round_down_to_blocks(inputs.common_prefix_tokens, inputs.block_size)
    # The prefix pass attends without a causal mask, so the prefix may not reach past any
    # request's already-computed tokens; the cap can cut a block in half, hence the second rounding.
    if inputs.min_num_computed_tokens is not None:
        shared_tokens = min(shared_tokens, inputs.min_num_computed_tokens)
    return round_down_to_blocks(shared_tokens, inputs.block_size)


def _flash_attention_gate(
    inputs: VllmGateInputs, prefix_tokens: int
) -> tuple[bool, GateStage, str, TileWaveComparison | None]:
    """The FlashAttention backend's decision (steps 4 and 5), in the source's order of checks."""
    # Sliding window and local attention already zeroed the prefix; name them, not the length.
    if inputs.sliding_window is not None:
        return (False, "sliding_window",
            (f"Not used: sliding-window attention ({inputs.sliding_window:,}-token window) has no cascade "
            "path in vLLM (its KV manager reports no shared blocks)."),
            None)
    if inputs.use_local_attention:
        return (False, "local_attention",
            ("Not used: chunked local attention is not supported by vLLM's cascade path (its KV "
            "manager reports no shared blocks)."),
            None)
    if not inputs.prefix_caching_enabled:
        return (False, "no_prefix_caching",
            ("Not used: with prefix caching off no KV block is shared, so vLLM sees a common "
            "prefix of 0 tokens."),
            None)
    if prefix_tokens < MIN_COMMON_PREFIX_TOKENS:
        return (False, "prefix_too_short",
            (f"Not used: the common prefix counts {prefix_tokens} tokens in whole "
            f"{inputs.block_size}-token blocks (from {inputs.common_prefix_tokens} shared tokens), "
            f"below vLLM's minimum of {MIN_COMMON_PREFIX_TOKENS}."),
            None)
    if inputs.use_alibi:
        return (False, "alibi",
            "Not used: the model uses ALiBi, which vLLM's cascade path does not support.",
            None)
    if inputs.num_requests < MIN_NUM_REQUESTS:
        return (False, "too_few_requests",
            (f"Not used: {inputs.num_requests} requests in the batch, below vLLM's minimum of "
            f"{MIN_NUM_REQUESTS}."),
            None)
    if inputs.dcp_world_size > 1:
        return (False, "decode_context_parallel",
            (f"Not used: decode context parallelism (DCP world size {inputs.dcp_world_size}) "
            "disables cascade attention in vLLM."),
            None)

    # Ordinary attention uses flash-decoding only for GQA decode; without it, a separate pass over
    # the prefix saves bandwidth and vLLM takes it without further modelling.
    num_queries_per_kv = inputs.num_query_heads // inputs.num_kv_heads
    # Decode (query_lens None) is one token per request: no array of one element per request.
    all_single_token = inputs.query_lens is None or all(q == 1 for q in inputs.query_lens)
    if num_queries_per_kv <= 1 or not all_single_token:
        why = (
            "the model has no grouped-query heads (Hq/Hkv = 1)"
            if num_queries_per_kv <= 1
            else "some requests bring more than one query token"
        )
        return (True, "no_flash_decoding",
            (f"Used: a {prefix_tokens}-token prefix shared by {inputs.num_requests} requests, and "
            f"ordinary attention would not use flash-decoding because {why}."),
            None)

    tile_wave = compare_tiles_and_waves(
        prefix_tokens,
        inputs.num_requests,
        inputs.num_query_heads,
        inputs.num_kv_heads,
        inputs.num_sms,
    )
    if tile_wave.cascade_faster:
        return (
            True,
            "tile_wave_cascade_faster",
            (f"Used: vLLM's tile/wave model gives cascade {tile_wave.cascade_time} against "
            f"flash-decoding {tile_wave.flash_decoding_time} (waves x {KV_TILE_TOKENS}-token KV "
            f"tiles) for {inputs.num_requests} requests on {inputs.num_sms} SMs."),
            tile_wave,
        )
    return (
        False,
        "tile_wave_flash_decoding_faster",
        (f"Not used: vLLM's tile/wave model gives flash-decoding {tile_wave.flash_decoding_time} "
        f"against cascade {tile_wave.cascade_time} (waves x {KV_TILE_TOKENS}-token KV tiles; a "
        f"tie keeps flash-decoding) for {inputs.num_requests} requests on {inputs.num_sms} SMs."),
        tile_wave,
    )


def _switch(inputs: VllmGateInputs, opted_in_verdict: str) -> tuple[GateStage, str] | None:
    """The engine-level switch that turns cascade off before the heuristic matters, if any. The
    backend comes first because no flag can change its answer."""
    backend = inputs.attention_backend
    if backend == "FLASHINFER":
        return ("flashinfer_backend", ("Not used: vLLM's FlashInfer backend never uses cascade attention; on the "
                f"FlashAttention backend, opted in, the heuristic {opted_in_verdict}."))
    if backend != "FLASH_ATTN":
        return ("backend_never_cascades", (f"Not used: vLLM's {backend} attention backend has no cascade path (only "
                f"FlashAttention's has one); on FlashAttention, opted in, the heuristic {opted_in_verdict}."))
    if inputs.disable_cascade_attn:
        return ("disabled_by_config", ("Not used: cascade attention is disabled (disable_cascade_attn=True, the "
                "default in recent vLLM releases); opted in with --no-disable-cascade-attn, the heuristic "
                f"{opted_in_verdict}."))
    if inputs.use_ubatching:
        return ("micro_batching", ("Not used: vLLM skips cascade attention when micro-batching (dual-batch "
                f"overlap) is on; without it, the heuristic {opted_in_verdict}."))
    if inputs.async_spec_decode:
        return ("async_spec_decode", ("Not used: vLLM forces cascade attention off with async scheduling plus "
                f"speculative decoding; without async scheduling, the heuristic {opted_in_verdict}."))
    return None


def vllm_uses_cascade(inputs: VllmGateInputs) -> VllmGateDecision:
    """Would vLLM's V1 engine run cascade attention for this step (one KV-cache group)? See the
    module docstring; `vllm_step.vllm_step_decision` applies it per group of a whole step."""
    prefix_tokens = engine_common_prefix_tokens(inputs)
    heuristic_used, heuristic_stage, heuristic_reason, tile_wave = _flash_attention_gate(
        inputs, prefix_tokens
    )
    # Keep the heuristic's verdict even when a switch overrides it: "off by default, but the
    # heuristic would take it" is what a user deciding whether to opt in needs to read.
    switch = _switch(inputs, "would use it" if heuristic_used else "would still not use it")
    stage, reason = switch if switch else (heuristic_stage, heuristic_reason)
    return VllmGateDecision(
        used=heuristic_used and switch is None,
        reason=reason,
        stage=stage,
        heuristic_would_use=heuristic_used,
        heuristic_reason=heuristic_reason,
        common_prefix_tokens_used=prefix_tokens,
        tile_wave=tile_wave,
    )
