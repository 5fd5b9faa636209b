"""What `cascade-plan probe --workload FILE` measures: the shapes one workload needs on this GPU, and
nothing else. Pure Python (no torch), so the CLI checks its arguments and the tests check the
derivation on the CPU.

From a resolved workload (cascade_plan.inputs.workload.Scenario) of one level (prompts shared by
samples, optionally private prompt tokens):

* attention: its layer shape per GPU (KV heads after TP, query-group size, head dim, KV dtype) at its
  prefix, its group size and number of groups, and its suffix at the first, middle and final decode
  step (rounded up to whole pages); plus half and double the group size at the middle step (its batch
  regime), and the prefix halved and doubled there (its neighbourhood, so interpolation has both sides);
* GEMMs: qkv, o, gate_up, down, lm_head of its model at its TP, in its weight dtype, at M = its batch and
  a few points either side (1 and the log grid between B/4 and 4B);
* whole steps: its first, middle and final decode step (one GPU's shard: on one GPU a TP > 1 step is
  timed without its all-reduces, which the multi-GPU probe measures).

Dense GQA models only: MoE expert GEMMs and MLA are reported as not measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernels_probe.grid import ProbeConfig
from kernels_probe.step_shapes import M_GRID, LayerShape, StepPoint

MEASURE_BUDGET_S = 120.0        # measuring one workload's shapes takes minutes at most (JIT builds excluded)


@dataclass(frozen=True)
class WorkloadProbePlan:
    name: str
    shape: LayerShape
    kv_dtype: str
    weight_dtype: str
    attention: tuple[ProbeConfig, ...]
    gemm_m: tuple[int, ...]
    steps: tuple[StepPoint, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def describe(self) -> dict:
        return {"workload": self.name, "shape": self.shape.as_dict(), "kv_dtype": self.kv_dtype,
                "weight_dtype": self.weight_dtype, "attention_configs": [c.as_dict() for c in self.attention],
                "gemm_m": list(self.gemm_m), "steps": [p.as_dict() for p in self.steps], "notes": list(self.notes)}


def shape_from_spec(spec, tp: int) -> LayerShape:
    """Per-GPU dense GQA shapes of a planner ModelSpec at TP tp (ValueError for what the probe cannot build)."""
    if spec.attention != "gqa":
        raise ValueError(f"{spec.id}: the probe builds GQA/MHA attention only ({spec.attention} is not measured yet)")
    if spec.num_experts or spec.num_moe_layers:
        raise ValueError(f"{spec.id}: MoE expert GEMMs are not measured by the probe yet (dense models only)")
    if not (spec.intermediate_size and spec.vocab_size):
        raise ValueError(f"{spec.id}: the model spec lacks the MLP width or vocabulary the GEMMs need")
    hq, hkv, d, h = spec.num_q_heads, spec.num_kv_heads, spec.head_dim, spec.hidden_size
    if hq % tp or spec.intermediate_size % tp or spec.vocab_size % tp:
        raise ValueError(f"{spec.id}: heads, MLP width and vocabulary must divide by TP {tp}")
    qkv_plain = (hq + 2 * hkv) * d * h
    bias = bool(spec.attn_in_params_per_layer) and spec.attn_in_params_per_layer > qkv_plain
    return LayerShape(model=spec.id, tp=tp, layers=spec.num_layers, hidden=h, q_heads=hq // tp,
                      kv_heads=max(1, hkv // tp), head_dim=d, intermediate=spec.intermediate_size // tp,
                      vocab=spec.vocab_size // tp, qkv_bias=bias, rope_theta=1e6)


def _round_up(x: int, page: int) -> int:
    return max(page, -(-x // page) * page)


def _single_level(tree):
    """(prefix tokens, groups, samples, private tokens, output tokens) of a one-level tree."""
    if tree.children:
        if len(tree.children) != 1 or tree.children[0].children or tree.copies != 1:
            raise ValueError("probe --workload measures one-level trees (prompts shared by samples); "
                             "this workload's tree has several levels")
        leaf = tree.children[0]
        return tree.tokens + leaf.tokens, leaf.copies, leaf.samples, leaf.private_tokens, leaf.output_tokens
    return tree.tokens, tree.copies, tree.samples, tree.private_tokens, tree.output_tokens


def plan_for_scenario(scn, page_size: int = 16) -> WorkloadProbePlan:
    shape = shape_from_spec(scn.model, scn.tp)
    prefix, groups, samples, private, out = _single_level(scn.tree)
    P = _round_up(prefix, page_size)
    positions = (("first", 1), ("middle", max(1, out // 2)), ("final", out))
    g = shape.q_heads // shape.kv_heads
    kw = dict(q_per_kv=g, num_kv_heads=shape.kv_heads, head_dim=shape.head_dim, kv_dtype=scn.kv_dtype,
              page_size=page_size)
    cfgs: list[ProbeConfig] = []

    def add(**k):
        c = ProbeConfig(**{**kw, **k})
        if c not in cfgs:
            cfgs.append(c)

    for _, k in positions:
        add(prefix_tokens=P, group_size=samples, n_groups=groups, suffix_tokens=_round_up(private + k, page_size))
    s_mid = _round_up(private + positions[1][1], page_size)
    for n in (samples // 2, samples * 2):
        if n >= 1:
            add(prefix_tokens=P, group_size=n, n_groups=groups, suffix_tokens=s_mid)
    for p in (P // 2, P * 2):
        if p >= page_size:
            add(prefix_tokens=_round_up(p, page_size), group_size=samples, n_groups=groups, suffix_tokens=s_mid)
    B = samples * groups
    ms = sorted({1, B} | {m for m in M_GRID if B / 4 <= m <= 4 * B})
    steps = tuple(StepPoint(scn.name, shape.model, pos, P, samples, groups, private, k, out, kv_dtype=scn.kv_dtype,
                            weight_dtype=scn.weight_dtype) for pos, k in positions)
    notes = []
    if P != prefix:
        notes.append(f"prefix {prefix} rounded up to {P} tokens (whole pages of {page_size})")
    if scn.tp > 1:
        notes.append(f"TP {scn.tp}: one GPU's shard is timed; its all-reduces need the multi-GPU probe")
    return WorkloadProbePlan(name=scn.name, shape=shape, kv_dtype=scn.kv_dtype, weight_dtype=scn.weight_dtype,
                             attention=tuple(cfgs), gemm_m=tuple(ms), steps=steps, notes=tuple(notes))


def plan_from_json(d: dict) -> WorkloadProbePlan:
    """The inverse of WorkloadProbePlan.describe() (python -m kernels_probe --plan FILE: a plan derived where
    the planner's inputs are installed, measured where the GPU is)."""
    sh = LayerShape(**d["shape"])
    pts = []
    for p in d["steps"]:
        p = {k: v for k, v in p.items() if k not in ("suffix_tokens", "batch")}
        pts.append(StepPoint(**p))
    return WorkloadProbePlan(name=d["workload"], shape=sh, kv_dtype=d["kv_dtype"], weight_dtype=d["weight_dtype"],
                             attention=tuple(ProbeConfig(**c) for c in d["attention_configs"]),
                             gemm_m=tuple(d["gemm_m"]), steps=tuple(pts), notes=tuple(d.get("notes", ())))
