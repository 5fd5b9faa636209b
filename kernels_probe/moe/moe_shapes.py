"""What the MoE probe measures: routed-expert shapes per GPU after tensor parallelism, the token grid,
the routings, and the block alignment the grouped GEMM runs over. Pure Python (no torch), so
`probe --workload`, the planner's tests and the CPU tests share the definitions.

Tensor parallelism splits every expert's intermediate width (vLLM's default for MoE without expert
parallelism): each GPU holds all E experts, `moe_intermediate_size / tp` wide. Per MoE layer a step
runs the experts its tokens route to as two grouped GEMMs: gate_up (N = 2 x width, K = hidden, one
input row per token, used by each of its top-k experts) and down (N = hidden, K = width, one input row
per routed (token, slot) pair).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

# Tokens per step M (decode: one per sequence), 1..1024.
MOE_M_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
MOE_M_GRID_QUICK = (1, 16, 128, 1024)
ROUTINGS = ("balanced", "skewed")
# Skewed routing: expert e's router logit is shifted by SKEW_ALPHA x log(1 / (e + 1)) (Zipf-like
# popularity), so a few experts take most tokens, as routers do on narrow data (e.g. one RL prompt set).
SKEW_ALPHA = 1.0

# The shipped MoE presets at the TPs a fleet runs them, most needed first (a run cut short keeps those):
# DeepSeek-V3 at TP 8 (the shipped deepseek-v3-grpo-tp8 workload), Mixtral-8x7B on 1 and 2 GPUs,
# DeepSeek-V3 at TP 4.
MOE_PROBE_MODELS = (("deepseek-v3", 8), ("mixtral-8x7b", 1), ("mixtral-8x7b", 2), ("deepseek-v3", 4))
MOE_PROBE_MODELS_QUICK = (("deepseek-v3", 8), ("mixtral-8x7b", 1))


@dataclass(frozen=True)
class MoeShape:
    """One MoE layer's routed experts on one GPU."""

    model: str
    tp: int
    hidden: int
    intermediate: int       # one expert's width on this GPU (moe_intermediate_size / tp)
    experts: int
    top_k: int

    def gemms(self) -> dict[str, tuple[int, int]]:
        """projection -> (N, K) of one expert's weight on this GPU."""
        return {"gate_up": (2 * self.intermediate, self.hidden), "down": (self.hidden, self.intermediate)}

    def as_dict(self) -> dict:
        return asdict(self)


def moe_shape_from_spec(spec, tp: int) -> MoeShape:
    """Per-GPU routed-expert shape of a planner ModelSpec (ValueError for a dense model or a width TP does
    not divide)."""
    if not (spec.num_experts and spec.num_moe_layers and spec.moe_intermediate_size):
        raise ValueError(f"{spec.id}: no routed experts")
    if spec.moe_intermediate_size % tp:
        raise ValueError(f"{spec.id}: expert width {spec.moe_intermediate_size} does not divide by TP {tp}")
    return MoeShape(model=spec.id, tp=tp, hidden=spec.hidden_size, intermediate=spec.moe_intermediate_size // tp,
                    experts=spec.num_experts, top_k=spec.experts_per_token)


def moe_shape(model: str, tp: int) -> MoeShape:
    """From a preset id (or a config under calibrations/configs/), read as its config.json."""
    from kernels_probe.steps.step_shapes import model_config

    cfg = model_config(model)
    experts = cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    width = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 0
    if not experts or not width:
        raise ValueError(f"{model}: no routed experts")
    if width % tp:
        raise ValueError(f"{model}: expert width {width} does not divide by TP {tp}")
    return MoeShape(model=model, tp=tp, hidden=cfg["hidden_size"], intermediate=width // tp, experts=experts,
                    top_k=cfg["num_experts_per_tok"])


def expected_touched(experts: int, top_k: int, m: float) -> float:
    """Distinct experts m tokens route to under uniform independent routing: E (1 - (1 - k/E)^m)."""
    return experts * (1.0 - (1.0 - top_k / experts) ** max(m, 0.0))


def align_counts(counts: list[int], block_m: int) -> tuple[list[int], list[int]]:
    """Per-expert routed rows -> (rows padded to whole blocks of block_m, the expert of each block): the
    layout vLLM's moe_align_block_size writes, untouched experts taking no block."""
    padded = [math.ceil(c / block_m) * block_m for c in counts]
    blocks = [e for e, p in enumerate(padded) for _ in range(p // block_m)]
    return padded, blocks


def moe_bytes_flops(shape: MoeShape, proj: str, m: int, touched: int, weight_bytes_per_elem: float) -> dict:
    """Bytes and FLOPs of one grouped GEMM: the touched experts' weights once, bf16 activations in and out
    (gate_up reads each token's row once, writes one row per routed slot; down reads and writes one row
    per routed slot)."""
    n, k = shape.gemms()[proj]
    routed = m * shape.top_k
    w = touched * n * k * weight_bytes_per_elem
    act_in = (m if proj == "gate_up" else routed) * k * 2
    return {"weight_bytes": int(w), "bytes": int(w + act_in + routed * n * 2), "flops": 2 * routed * n * k}
