"""What the step probe measures: GEMM shapes per model preset and GPU count, the token grid, and the
decode steps of the stepped workloads. Pure Python (no torch), so the planner and the CPU tests can
read the same definitions.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import asdict, dataclass

# Tokens per step M: a log grid (powers of 2 and 1.5x) spanning 1..2048; it holds the batch sizes of
# the stepped workloads (64 and 128).
M_GRID = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)
M_GRID_QUICK = (1, 16, 64, 128, 256, 512, 2048)
GLUE_M_GRID = (1, 8, 32, 64, 128, 256, 512, 1024, 2048)
GLUE_M_GRID_QUICK = (1, 64, 256, 1024)
# All-reduce message sizes: tokens x hidden x 2 B for 1..2048 tokens at hidden 4096-16384 (8 KiB - 64 MiB).
ALLREDUCE_BYTES_QUICK = tuple(1 << k for k in (13, 16, 19, 21, 23, 25))
# Dense enough to show NCCL's protocol and algorithm switches (LL -> LL128 -> Simple, tree -> ring): 8-32 KiB,
# then powers of 2 and 1.5x from 64 KiB to 64 MiB (25 sizes). A decode step sends M x hidden x 2 B.
ALLREDUCE_BYTES_DENSE = tuple(sorted({1 << k for k in (13, 14, 15)}
                                     | {m << k for k in range(16, 27) for m in (1, 3) if (m << k) <= 1 << 26}))
for _b in ALLREDUCE_BYTES_DENSE:   # 1.5x points: 3 << k counted as 1.5 x 2^(k+1); all bf16-sized
    assert _b % 2 == 0

# Tensor-parallel whole steps at every GPU count a host has: a Llama-3-70B-shaped GRPO step
# (4 prompts of 4,096 tokens x 16 samples, 512 output tokens) at TP = the GPU count, first/middle/final.
TP_STEP_WORKLOADS = (("grpo-70b", "llama-3-70b", 4096, 16, 4, 0, 512),)
MULTI_GPU_COUNTS = (2, 4, 8)

# The presets whose GEMM shapes are measured (fit set). Other presets are predicted from the fitted
# table: the stepped workloads on Mistral-7B and Qwen2.5-7B hold out their shapes entirely.
GEMM_FIT_MODELS = (("llama-3-8b", 1), ("llama-3-8b", 2))
GEMM_FIT_MODELS_QUICK = (("llama-3-8b", 1),)


@dataclass(frozen=True)
class LayerShape:
    """One model's decode-step shapes on one GPU after tensor parallelism (dense GQA)."""

    model: str
    tp: int
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    qkv_bias: bool
    rope_theta: float

    def gemms(self) -> dict[str, tuple[int, int]]:
        """name -> (N, K) of the weight, per GPU: column-parallel qkv, gate_up, lm_head; row-parallel o, down."""
        d = self.head_dim
        return {"qkv": ((self.q_heads + 2 * self.kv_heads) * d, self.hidden), "o": (self.hidden, self.q_heads * d),
                "gate_up": (2 * self.intermediate, self.hidden), "down": (self.hidden, self.intermediate),
                "lm_head": (self.vocab, self.hidden)}

    def as_dict(self) -> dict:
        return asdict(self)


# Held-out models: config.json files (Hugging Face format) of shapes the fit never saw, by id, shipped
# beside the calibrations (calibrations/configs/ in a checkout, cascade_plan/_data/ in a wheel).
def config_dir() -> pathlib.Path:
    from cascade_plan.resources import data_dir

    return data_dir("calibrations") / "configs"


def model_config(model_id: str) -> dict:
    """The Hugging Face config dict of a preset id, or of a held-out model under calibrations/configs/."""
    from cascade_plan.inputs.model_presets import PRESETS

    if model_id in PRESETS:
        return dict(PRESETS[model_id][1])
    path = config_dir() / f"{model_id}.json"
    if not path.is_file():
        raise ValueError(f"{model_id}: neither a model preset nor a config file {path}")
    return json.loads(path.read_text())


def layer_shape(model_id: str, tp: int = 1, cfg: dict | None = None) -> LayerShape:
    """Per-GPU shapes of a dense GQA model (preset, held-out config id, or the given config) at TP tp."""
    cfg = cfg if cfg is not None else model_config(model_id)
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    if cfg.get("kv_lora_rank") or cfg.get("num_local_experts") or cfg.get("n_routed_experts"):
        raise ValueError(f"{model_id}: the step probe builds dense GQA models only")
    if heads % tp or cfg["intermediate_size"] % tp or cfg["vocab_size"] % tp:
        raise ValueError(f"{model_id}: heads, intermediate size and vocabulary must divide by TP {tp}")
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    return LayerShape(model=model_id, tp=tp, layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"],
                      q_heads=heads // tp, kv_heads=max(1, kv // tp), head_dim=head_dim,
                      intermediate=cfg["intermediate_size"] // tp, vocab=cfg["vocab_size"] // tp,
                      qkv_bias=cfg.get("model_type") == "qwen2",
                      rope_theta=float(cfg.get("rope_theta", 500000.0 if "llama-3" in model_id else 1e6)))


@dataclass(frozen=True)
class WorkloadStep:
    """One decode step of a single-level workload: n_groups prompts of prefix_tokens, each shared by
    group_size sequences that have generated `generated` tokens (the new one included) after a private
    prompt of private_tokens."""

    workload: str
    model: str
    position: str          # "first", "middle", "final"
    prefix_tokens: int
    group_size: int
    n_groups: int
    private_tokens: int
    generated: int
    output_tokens: int
    kv_dtype: str = "bf16"       # "fp8": e4m3 KV cache (queries bf16)
    weight_dtype: str = "bf16"   # "fp8": e4m3 weights through torch._scaled_mm

    @property
    def batch(self) -> int:
        return self.group_size * self.n_groups

    @property
    def suffix_tokens(self) -> int:
        return self.private_tokens + self.generated

    def as_dict(self) -> dict:
        return {**asdict(self), "suffix_tokens": self.suffix_tokens, "batch": self.batch}

    def label(self) -> str:
        return (f"{self.workload} {self.position} (P={self.prefix_tokens} n={self.group_size}x{self.n_groups} "
                f"S={self.suffix_tokens} kv {self.kv_dtype} w {self.weight_dtype})")


# The stepped workloads: the shipped rl-rollouts-64 and parallel-sampling-n8 (tests check these match
# their YAML files) and a long-prefix one on Qwen2.5-7B (a shape whose GEMMs are never measured).
STEPPED_WORKLOADS = (
    # name, model, prefix, group size, groups, private, output tokens
    ("rl-rollouts-64", "llama-3-8b", 4096, 64, 2, 0, 1024),
    ("parallel-sampling-n8", "mistral-7b", 2048, 8, 16, 0, 512),
    ("long-prefix-qwen", "qwen2.5-7b", 16384, 16, 4, 0, 256),
)


def step_points(quick: bool = False) -> list[WorkloadStep]:
    pts = []
    for name, model, p, n, ng, priv, out in STEPPED_WORKLOADS:
        positions = (("first", 1), ("final", out)) if quick else (("first", 1), ("middle", out // 2), ("final", out))
        for pos, k in positions:
            pts.append(WorkloadStep(name, model, pos, p, n, ng, priv, k, out))
        if quick:
            break
    return pts


# Attention backends of a whole step: (backend, per-sequence kernel, cascade kernel).
STEP_BACKENDS = ("flashinfer", "flashinfer-fa2", "triton")


# Held-out whole steps (never fitted): models through config.json files the fit never saw, covering MHA,
# query groups of 5, fp8 KV, fp8 weights, 8 and 512 sequences and a 32K-token prefix.
#   name, model (config id), prefix, group size, groups, private, output tokens, kv dtype, weight dtype
HELD_OUT_WORKLOADS = (
    ("heldout-mha-8", "codellama-13b", 2048, 8, 1, 0, 512, "bf16", "bf16"),
    ("heldout-g5-512-fp8kv", "qwen2.5-14b", 4096, 64, 8, 0, 256, "fp8", "bf16"),
    ("heldout-32k-fp8", "mistral-nemo-12b", 32768, 16, 1, 0, 256, "fp8", "fp8"),
    ("heldout-32k-bf16", "mistral-nemo-12b", 32768, 16, 1, 0, 256, "bf16", "bf16"),
)


def held_out_points(quick: bool = False, workloads=HELD_OUT_WORKLOADS, middle: bool = True) -> list[WorkloadStep]:
    """The first, middle (unless quick or not `middle`) and final step of each held-out workload."""
    pts = []
    for name, model, p, n, ng, priv, out, kvd, wd in workloads[:1] if quick else workloads:
        positions = (("first", 1), ("middle", out // 2), ("final", out)) if middle and not quick else (
            ("first", 1), ("final", out))
        for pos, k in positions:
            pts.append(WorkloadStep(name, model, pos, p, n, ng, priv, k, out, kv_dtype=kvd, weight_dtype=wd))
    return pts


# The regimes step set (`--step-set regimes`): where small models run. GEMMs, glue and layer graphs of three small
# dense shapes (fit set, config.json files under calibrations/configs/) at hidden 1024, 2048 (head dim 64) and 3072,
# M to 1024; and held-out whole steps the fit never saw: GRPO's 1,024 sequences (64 prompts x 16 samples) on
# Qwen2.5-1.5B (groups of 6) and Qwen2.5-0.5B (head dim 64, groups of 7), Gemma-2-2B's head dim 256, a 128K shared
# prefix on Llama-3.1-8B, and 4K private suffixes.
REGIME_FIT_MODELS = (("qwen3-0.6b", 1), ("llama-3.2-1b", 1), ("llama-3.2-3b", 1))
REGIME_M_GRID = tuple(m for m in M_GRID if m <= 1024)
REGIME_GLUE_M_GRID = tuple(m for m in GLUE_M_GRID if m <= 1024)
REGIME_HELD_OUT_WORKLOADS = (
    ("heldout-grpo-1024", "qwen2.5-1.5b", 512, 16, 64, 0, 1024, "bf16", "bf16"),
    ("heldout-grpo-1024-fp8kv", "qwen2.5-1.5b", 512, 16, 64, 0, 1024, "fp8", "bf16"),
    ("heldout-d64-1024", "qwen2.5-0.5b", 1024, 16, 64, 0, 512, "bf16", "bf16"),
    ("heldout-d256-512", "gemma-2-2b", 2048, 16, 32, 0, 512, "bf16", "bf16"),
    ("heldout-128k-8", "llama-3.1-8b", 131072, 8, 1, 0, 256, "bf16", "bf16"),
    ("heldout-128k-8-fp8kv", "llama-3.1-8b", 131072, 8, 1, 0, 256, "fp8", "bf16"),
    ("heldout-4k-suffix", "qwen2.5-14b", 4096, 8, 4, 4096, 256, "bf16", "bf16"),
)


def regime_held_out_points(quick: bool = False) -> list[WorkloadStep]:
    """First and final step of each regime workload (the middle adds little over a 2-point span)."""
    return held_out_points(quick, REGIME_HELD_OUT_WORKLOADS, middle=False)


def tp_step_points(quick: bool = False) -> list[WorkloadStep]:
    pts = []
    for name, model, p, n, ng, priv, out in TP_STEP_WORKLOADS:
        positions = (("first", 1), ("final", out)) if quick else (("first", 1), ("middle", out // 2), ("final", out))
        pts += [WorkloadStep(name, model, pos, p, n, ng, priv, k, out) for pos, k in positions]
    return pts


def multi_gpu_plan(n_gpu: int, quick: bool = False) -> list[dict]:
    """What the multi-GPU probe runs on a host of n_gpu GPUs: per GPU count (2, 4, 8 that fit) the
    all-reduce sizes and the whole TP steps (the 70B GRPO step at every count; the 8B rl-rollouts steps at
    TP 2 as before). Pure: the CPU tests check it."""
    out = []
    for world in (c for c in MULTI_GPU_COUNTS if c <= n_gpu):
        pts = tp_step_points(quick)
        if world == 2:
            pts = [p for p in step_points(quick) if p.workload == "rl-rollouts-64"] + pts
        out.append({"world": world, "allreduce_bytes": ALLREDUCE_BYTES_QUICK if quick else ALLREDUCE_BYTES_DENSE,
                    "points": pts})
    return out
