"""What a whole MoE / MLA decode step is built of, per GPU (one tensor-parallel rank): the attention (GQA, or
MLA in its absorbed form), the router, the routed experts (all E on every GPU, each expert's width split by
TP, as vLLM runs MoE without expert parallelism), the shared experts and the dense layers, and the step
points the probe times. Pure Python (no torch), so the planner's side and the CPU tests read the same
definitions.

A config may keep fewer layers than the model (``layers=``): a step that would not fit one GPU's memory
is timed with fewer MoE layers, and the row carries the truncated config.json, so the planner predicts
the same layer count (``config`` below).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from kernels_probe.steps.step_shapes import LayerShape, WorkloadStep, model_config


@dataclass(frozen=True)
class MoeStepShape:
    model: str
    tp: int
    layers: int
    dense_layers: int          # the first layers with a dense MLP (DeepSeek's first 3)
    hidden: int
    q_heads: int               # per GPU
    attention: str             # "gqa" or "mla"
    kv_heads: int              # GQA, per GPU (MLA: 1, the latent)
    head_dim: int              # GQA head dim
    intermediate: int          # dense MLP width per GPU (0: none)
    experts: int
    top_k: int
    expert_width: int          # per GPU
    shared_width: int          # shared experts' width per GPU (0: none)
    vocab: int                 # per GPU
    rope_theta: float
    qkv_bias: bool = False
    norm_topk: bool = True     # renormalise the top-k weights
    q_lora: int = 0            # MLA: q down-projection rank (0: one q projection)
    kv_lora: int = 0           # MLA: latent width
    rope_dim: int = 0          # MLA: RoPE dims of q and the latent key
    nope_dim: int = 0          # MLA: no-RoPE query-key dims per head
    v_dim: int = 0             # MLA: value dims per head

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers

    def attention_shape(self) -> LayerShape:
        """The GQA attention of this shape as the dense step model's LayerShape (its caches and kernels)."""
        return LayerShape(model=self.model, tp=self.tp, layers=self.layers, hidden=self.hidden, q_heads=self.q_heads,
                          kv_heads=self.kv_heads, head_dim=self.head_dim, intermediate=self.intermediate,
                          vocab=self.vocab, qkv_bias=self.qkv_bias, rope_theta=self.rope_theta)

    def as_dict(self) -> dict:
        return asdict(self)

    def weight_bytes(self, weight_bytes_per_elem: float) -> float:
        """All weights of the step on one GPU (GEMM weights at the given element size; router, absorbed MLA
        matrices, embedding and norms in bf16)."""
        h, e = self.hidden, weight_bytes_per_elem
        if self.attention == "mla":
            hq = self.q_heads
            q = (h * self.q_lora + self.q_lora * hq * (self.nope_dim + self.rope_dim) if self.q_lora
                 else h * hq * (self.nope_dim + self.rope_dim))
            attn = (q + h * (self.kv_lora + self.rope_dim) + hq * self.v_dim * h) * e
            attn += 2 * hq * self.kv_lora * (self.nope_dim + self.v_dim)      # W_UK, W_UV (bf16)
        else:
            attn = ((self.q_heads + 2 * self.kv_heads) * self.head_dim * h + self.q_heads * self.head_dim * h) * e
        moe = (self.experts * 3 * h * self.expert_width + 3 * h * self.shared_width) * e + 2 * h * self.experts
        dense = 3 * h * self.intermediate * e
        return (self.layers * attn + self.moe_layers * moe + self.dense_layers * dense
                + self.vocab * h * (2 + e))


def moe_step_shape(model: str, tp: int = 1, *, layers: int | None = None, cfg: dict | None = None) -> MoeStepShape:
    """Per-GPU shapes of a MoE model (preset id or config under calibrations/configs/) at TP tp; ``layers``
    keeps the first `layers` layers (the dense ones first, as in the model)."""
    c = dict(cfg if cfg is not None else model_config(model))
    experts = c.get("n_routed_experts") or c.get("num_local_experts") or c.get("num_experts") or 0
    if not experts:
        raise ValueError(f"{model}: no routed experts")
    heads = c["num_attention_heads"]
    width = c.get("moe_intermediate_size") or c["intermediate_size"]
    shared = c.get("shared_expert_intermediate_size") or (c.get("n_shared_experts") or 0) * width
    inter = c.get("intermediate_size") or 0
    if heads % tp or width % tp or shared % tp or inter % tp or c["vocab_size"] % tp:
        raise ValueError(f"{model}: heads, expert widths, MLP width and vocabulary must divide by TP {tp}")
    n_layers = layers or c["num_hidden_layers"]
    dense = min(c.get("first_k_dense_replace") or 0, n_layers)
    mla = bool(c.get("kv_lora_rank"))
    kv = c.get("num_key_value_heads", heads)
    head_dim = c.get("head_dim") or c["hidden_size"] // heads
    return MoeStepShape(
        model=model, tp=tp, layers=n_layers, dense_layers=dense, hidden=c["hidden_size"], q_heads=heads // tp,
        attention="mla" if mla else "gqa", kv_heads=1 if mla else max(1, kv // tp), head_dim=head_dim,
        intermediate=inter // tp if dense else 0, experts=experts, top_k=c["num_experts_per_tok"],
        expert_width=width // tp, shared_width=shared // tp, vocab=c["vocab_size"] // tp,
        rope_theta=float(c.get("rope_theta", 1e6)), qkv_bias=c.get("model_type") in ("qwen2_moe",),
        norm_topk=bool(c.get("norm_topk_prob", True)), q_lora=c.get("q_lora_rank") or 0,
        kv_lora=c.get("kv_lora_rank") or 0, rope_dim=c.get("qk_rope_head_dim") or 0,
        nope_dim=c.get("qk_nope_head_dim") or 0, v_dim=c.get("v_head_dim") or 0)


def truncated_config(model: str, layers: int | None) -> dict:
    """The model's config.json with `layers` layers (what the planner prices a truncated step from)."""
    c = dict(model_config(model))
    if layers:
        c["num_hidden_layers"] = layers
    return c


# The MoE / MLA steps the probe times (never fitted): (name, model, TP, layers kept (None: all), prefix,
# group size, groups, private, output tokens, KV dtype, weight dtype).
#  * Mixtral-8x7B at TP 1 (its experts are in the grouped-GEMM rows), bf16 weights (93 GB), bf16 and fp8 KV;
#  * Qwen3-30B-A3B (held out: calibrations/configs/, 128 experts top 8, no grouped-GEMM rows of its shape);
#  * DeepSeek-V3's TP-8 shard (16 query heads, 256 experts of width 256, fp8 weights) as the shipped
#    deepseek-v3-grpo-tp8 runs it (8 prompts of 6,000 tokens x 32 samples), 3 dense + 29 MoE layers
#    (32 of 61: 61 layers of fp8 experts are 82 GB, and the final step's latent cache another 40 GB);
#    a single GPU has no all-reduce: the planner's step is compared without its all-reduce terms.
MOE_STEP_WORKLOADS = (
    ("deepseek-v3-grpo-tp8", "deepseek-v3", 8, 32, 6000, 32, 8, 0, 2048, "bf16", "fp8"),
    ("deepseek-v3-grpo-tp8-fp8kv", "deepseek-v3", 8, 32, 6000, 32, 8, 0, 2048, "fp8", "fp8"),
    ("mla-ds-16x1-16k", "deepseek-v3", 8, 32, 16384, 16, 1, 0, 1024, "bf16", "fp8"),
    ("moe-mixtral-64x2", "mixtral-8x7b", 1, None, 4096, 64, 2, 0, 1024, "bf16", "bf16"),
    ("moe-mixtral-64x2-fp8kv", "mixtral-8x7b", 1, None, 4096, 64, 2, 0, 1024, "fp8", "bf16"),
    ("moe-mixtral-8-32k", "mixtral-8x7b", 1, None, 32768, 8, 1, 0, 512, "bf16", "bf16"),
    ("moe-qwen3-16x32", "qwen3-30b-a3b", 1, None, 2048, 16, 32, 0, 512, "bf16", "bf16"),
    ("moe-qwen3-16x32-fp8kv", "qwen3-30b-a3b", 1, None, 2048, 16, 32, 0, 512, "fp8", "bf16"),
)


@dataclass(frozen=True)
class MoeStepPoint:
    step: WorkloadStep
    tp: int
    layers: int | None


def moe_step_points(quick: bool = False, names: tuple[str, ...] | None = None) -> list[MoeStepPoint]:
    pts = []
    for name, model, tp, layers, p, n, ng, priv, out, kvd, wd in MOE_STEP_WORKLOADS:
        if names is not None and name not in names:
            continue
        positions = (("first", 1), ("final", out)) if quick else (("first", 1), ("middle", out // 2), ("final", out))
        for pos, k in positions:
            pts.append(MoeStepPoint(WorkloadStep(name, model, pos, p, n, ng, priv, k, out, kv_dtype=kvd,
                                                 weight_dtype=wd), tp, layers))
    return pts
