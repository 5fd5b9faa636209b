"""What the engine emulation was read from: the vLLM files and commits behind every rule in
`vllm_gate.py`, `vllm_step.py` and `attention_backend.py`, the constants they copy, and the notes
the outputs quote. Strings and numbers only: no logic.

Each rule names the file and the commit it was read at (github.com/vllm-project/vllm):

- the gate, `use_cascade_attention`: vllm/v1/attention/backends/flash_attn.py @ 5704f34f361c;
  the base `AttentionMetadataBuilder.use_cascade_attention` returns False for every other backend:
  vllm/v1/attention/backend.py @ 0014ca6b9929 (whose `AttentionCGSupport` docstring also says
  cascade attention "is never cudagraph supported");
- the prefix per KV-cache group, capped by the smallest `num_computed_tokens` and rounded to whole
  blocks, the step cascading when any group's prefix is non-zero:
  vllm/v1/worker/gpu_model_runner.py @ 000fc94b754f (`_compute_cascade_attn_prefix_lens`,
  `_compute_cascade_attn_prefix_len`);
- the common blocks, counted against every request that holds KV blocks (`len(req_to_blocks)`),
  0 for sliding-window and chunked-local groups:
  vllm/v1/core/single_type_kv_cache_manager.py @ 129ab7c60cbb;
- a cascade step skips the full CUDA graph (PIECEWISE: attention runs eagerly, per layer):
  vllm/v1/cudagraph_dispatcher.py @ 009eec3b2b00 (`dispatch(..., use_cascade_attn)`);
- the default attention backend per GPU (FlashInfer first on compute capability 10.x, Blackwell
  B200/B300/GB200/GB300; FlashAttention first elsewhere): vllm/platforms/cuda.py @ 002db4951e0c
  (`_get_backend_priorities`);
- the default `disable_cascade_attn=True`: vllm/config/model.py @ 18ec66292536 and PR #36318;
  FlashInfer's unconditional "no": vllm/v1/attention/backends/flashinfer.py @ 5314c90d9f16, PR #26130.
"""

from __future__ import annotations

VLLM_VERSION_MODELLED: str = (
    "vLLM main branch (V1 engine), as stored in a 2026 source index (no release tag could be "
    "tied to these commits): vllm/v1/attention/backends/flash_attn.py at commit "
    "5704f34f361c6c59a9c092c4e1e96730cc6dc14d (use_cascade_attention with the dcp_world_size "
    "argument); vllm/v1/worker/gpu_model_runner.py at commit "
    "000fc94b754f66aeb60ef5acf1ea2e94cdc65164 (_compute_cascade_attn_prefix_lens, per KV-cache "
    "group); vllm/v1/core/single_type_kv_cache_manager.py at commit "
    "129ab7c60cbb8eb11e875373e67f7e521b74aa30 (get_num_common_prefix_blocks, over every request "
    "holding KV blocks); vllm/v1/cudagraph_dispatcher.py at commit "
    "009eec3b2b00e1b8afb4bcafb58e9403b2aa1ada (a cascade step skips the full CUDA graph); "
    "vllm/platforms/cuda.py at commit 002db4951e0c4b326a559eb44b05698afd3e534a (default "
    "attention backend per GPU); vllm/v1/attention/backend.py at commit "
    "0014ca6b9929614f1b72c4bb11e5238de49cba89 (other backends never cascade); "
    "vllm/config/model.py (disable_cascade_attn). The 256-token, 8-request and 128x128-tile "
    "constants are identical in the older revision 0084b783bcda6d7ee15c337b1062cbee9985c954 of "
    "flash_attn.py, which lacks only the DCP check."
)

_GH = "https://github.com/vllm-project/vllm/blob/"
VLLM_SOURCES_READ: tuple[str, ...] = (
    _GH + "5704f34f361c6c59a9c092c4e1e96730cc6dc14d/vllm/v1/attention/backends/flash_attn.py",
    _GH + "000fc94b754f66aeb60ef5acf1ea2e94cdc65164/vllm/v1/worker/gpu_model_runner.py",
    _GH + "129ab7c60cbb8eb11e875373e67f7e521b74aa30/vllm/v1/core/single_type_kv_cache_manager.py",
    _GH + "009eec3b2b00e1b8afb4bcafb58e9403b2aa1ada/vllm/v1/cudagraph_dispatcher.py",
    _GH + "002db4951e0c4b326a559eb44b05698afd3e534a/vllm/platforms/cuda.py",
    _GH + "0014ca6b9929614f1b72c4bb11e5238de49cba89/vllm/v1/attention/backend.py",
    _GH + "18ec6629253632af0a384f2ffbb8c6b28af322e7/vllm/config/model.py",
    _GH + "5314c90d9f16e7c14523f496b0b8f883693951d4/vllm/v1/attention/backends/flashinfer.py",
    "https://github.com/vllm-project/vllm/pull/36318",
    "https://github.com/vllm-project/vllm/pull/26130",
    "https://github.com/vllm-project/vllm/pull/16072",
)

#: The value of `ModelConfig.disable_cascade_attn` in recent vLLM releases.
VLLM_DEFAULT_DISABLE_CASCADE_ATTN: bool = True

CASCADE_DISABLED_BY_DEFAULT: str = (
    "Recent vLLM releases ship with cascade attention switched off: PR #36318 ('Disable cascade "
    "attention by default', commit 9c34e9d24fcd, merged to main on 2026-03-11) changed "
    "ModelConfig.disable_cascade_attn from False to True, so users must opt in with "
    "--no-disable-cascade-attn; the first release carrying it is, by its date, v0.18.0 "
    "(published 2026-03-20), which we infer but did not check against the tag. From the flag's "
    "introduction (PR #15243, March 2025) until then the default was False, i.e. the heuristic "
    "decided. Even when opted in, vLLM also forces it off with async scheduling plus speculative "
    "decoding, with VLLM_BATCH_INVARIANT, on the CPU platform, and with micro-batching (DBO)."
)

FLASHINFER_NEVER_USES_CASCADE: str = (
    "vLLM's FlashInfer backend never uses cascade attention: its metadata builder's "
    "use_cascade_attention returns False unconditionally (PR #26130, 'Disable cascade attention "
    "with FlashInfer', October 2025, after hangs with prefix-cache hits), whatever the flag says. "
    "Only the FlashAttention backend runs the heuristic modelled here."
)

# --------------------------------------------------------------------------------------------------
# Constants copied from the source
# --------------------------------------------------------------------------------------------------

#: Shortest common prefix, in tokens, for which vLLM considers cascade attention ("arbitrary", per
#: the source's own comment).
MIN_COMMON_PREFIX_TOKENS: int = 256
#: Fewest requests in the batch for which vLLM considers cascade attention (also "arbitrary").
MIN_NUM_REQUESTS: int = 8
#: Default flash-attn tile sizes the heuristic assumes, in tokens (query rows and KV columns).
Q_TILE_TOKENS: int = 128
KV_TILE_TOKENS: int = 128
#: vLLM's default KV-cache block size on CUDA, in tokens.
DEFAULT_BLOCK_SIZE_TOKENS: int = 16

# --------------------------------------------------------------------------------------------------
# The price of losing the full CUDA graph (documented, not measured by this project)
# --------------------------------------------------------------------------------------------------

#: Added time per attention layer per step when a uniform decode step runs PIECEWISE (attention
#: launched eagerly between graph pieces) instead of in one FULL graph. Not measured here: the
#: middle of the 6-20 us per layer that the reports below imply. pegaflow issue #124 puts PIECEWISE at
#: 0.5-1.6 ms more per forward pass than FULL on 80-layer models (6-20 us per layer: a graph launch
#: per piece, Python dispatch of each attention op, the kernels' launch gaps); vLLM PR #16072 (full
#: CUDA graphs in V1) measured a 7% lower median TPOT on Qwen2.5-1.5B from the same change.
EAGER_ATTENTION_PER_LAYER_S: float = 13e-6

CUDA_GRAPH_NOTE: str = (
    "A step vLLM cascades skips its full CUDA graph (vllm/v1/cudagraph_dispatcher.py: use_cascade_attn "
    "bypasses the FULL keys) and runs PIECEWISE: the attention of every layer is launched eagerly "
    "between graph pieces. Priced at 13 us per layer per step (documented, not measured here: "
    "6-20 us per layer from pegaflow issue #124, 0.5-1.6 ms per forward on 80-layer models; vLLM PR "
    "#16072 measured 7% lower TPOT with full graphs on Qwen2.5-1.5B). Mixed prefill/decode steps run "
    "PIECEWISE anyway and pay nothing extra."
)
