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
  timed without its all-reduces, which the multi-GPU probe measures);
* MoE models: the routed experts as engines run them (kernels_probe/moe/moe_probe.py: one grouped GEMM per
  projection over the batch's routing, balanced and skewed) at its TP, weight dtype and the GEMMs' M,
  and its whole steps through the MoE step model (kernels_probe/moe/moe_step.py) instead of the dense one.

MLA models get their MLA attention rows (kernels_probe/attention/mla_workload.py); an MLA + MoE model (DeepSeek) also
its routed experts (grouped GEMM rows at its TP and weight dtype, Triton, balanced and skewed routing) and its whole
first, middle and final steps as one GPU's shard (kernels_probe/moe/moe_step.py: all layers that fit one GPU's
memory, `moe_step_layers`; without the all-reduces).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernels_probe.attention.grid import AttentionConfig
from kernels_probe.moe.moe_shapes import MoeShape, moe_shape_from_spec
from kernels_probe.steps.step_shapes import M_GRID, LayerShape, WorkloadStep


@dataclass(frozen=True)
class WorkloadProbePlan:
    name: str
    shape: LayerShape | None          # None: no GQA layer to build (an MLA workload)
    kv_dtype: str
    weight_dtype: str
    attention: tuple[AttentionConfig, ...]
    gemm_m: tuple[int, ...]
    steps: tuple[WorkloadStep, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    mla: tuple = ()                   # MLA attention configurations (kernels_probe.attention.mla.MlaShape)
    moe: MoeShape | None = None       # the routed experts per GPU (MoE models), measured at gemm_m
    moe_step_layers: int = 0          # MoE: whole steps (`steps`) of the MoE step model with this many layers (0: none)

    def moe_steps(self) -> list:
        """Its whole steps as the MoE step model builds them (kernels_probe/moe/moe_step_shapes.py MoeStepPoint);
        none without routed experts or a layer count."""
        from kernels_probe.moe.moe_step_shapes import MoeStepPoint

        if self.moe is None or not self.moe_step_layers:
            return []
        return [MoeStepPoint(p, self.moe.tp, self.moe_step_layers) for p in self.steps]

    def describe(self) -> dict:
        d = {"workload": self.name, "shape": None if self.shape is None else self.shape.as_dict(),
             "kv_dtype": self.kv_dtype, "weight_dtype": self.weight_dtype,
             "attention_configs": [c.as_dict() for c in self.attention],
             "gemm_m": list(self.gemm_m), "steps": [p.as_dict() for p in self.steps], "notes": list(self.notes)}
        if self.mla:
            d["mla_configs"] = [c.as_dict() for c in self.mla]
        if self.moe is not None:
            d["moe"] = self.moe.as_dict()
        if self.moe_step_layers:
            d["moe_step_layers"] = self.moe_step_layers
        return d


def shape_from_spec(spec, tp: int) -> LayerShape:
    """Per-GPU dense GQA shapes of a planner ModelSpec at TP tp (ValueError for what the probe cannot build)."""
    if spec.attention != "gqa":
        raise ValueError(f"{spec.id}: the probe builds GQA/MHA attention only ({spec.attention} is not measured yet)")
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
    if scn.model.attention == "mla":      # MLA attention rows (kernels_probe/attention/mla_workload.py)
        return _mla_plan(scn, page_size)
    shape = shape_from_spec(scn.model, scn.tp)
    prefix, groups, samples, private, out = _single_level(scn.tree)
    P = _round_up(prefix, page_size)
    positions = (("first", 1), ("middle", max(1, out // 2)), ("final", out))
    g = shape.q_heads // shape.kv_heads
    kw = dict(q_per_kv=g, num_kv_heads=shape.kv_heads, head_dim=shape.head_dim, kv_dtype=scn.kv_dtype,
              page_size=page_size)
    cfgs: list[AttentionConfig] = []

    def add(**k):
        c = AttentionConfig(**{**kw, **k})
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
    steps = tuple(WorkloadStep(scn.name, shape.model, pos, P, samples, groups, private, k, out, kv_dtype=scn.kv_dtype,
                            weight_dtype=scn.weight_dtype) for pos, k in positions)
    notes = []
    moe, layers = None, 0
    if scn.model.num_experts and scn.model.num_moe_layers:
        moe = moe_shape_from_spec(scn.model, scn.tp)
        notes.append(f"MoE: routed experts ({moe.experts} experts, top {moe.top_k}, width {moe.intermediate} per GPU) "
                     "measured as grouped GEMMs")
        try:
            layers = moe_step_layers(scn.model, scn.tp, scn.weight_dtype, scn.kv_dtype, steps[-1])
        except ValueError as exc:          # a config the step model cannot find or split: experts and attention only
            steps = ()
            notes.append(f"no whole steps: {exc}")
        else:
            notes.append(_moe_steps_note(layers, scn.model.num_layers))
    if P != prefix:
        notes.append(f"prefix {prefix} rounded up to {P} tokens (whole pages of {page_size})")
    if scn.tp > 1:
        notes.append(f"TP {scn.tp}: one GPU's shard is timed; its all-reduces need the multi-GPU probe")
    return WorkloadProbePlan(name=scn.name, shape=shape, kv_dtype=scn.kv_dtype, weight_dtype=scn.weight_dtype,
                             attention=tuple(cfgs), gemm_m=tuple(ms), steps=steps, notes=tuple(notes), moe=moe,
                             moe_step_layers=layers)


def _moe_steps_note(layers: int, model_layers: int) -> str:
    kept = "all" if layers >= model_layers else f"{layers} of"
    return (f"whole steps: one GPU's shard with {kept} {model_layers} layers (the MoE step model, "
            "kernels_probe/moe/moe_step.py; what fits one GPU's memory at the final step), without the all-reduces; "
            "validation predicts the same layers")


def _mla_plan(scn, page_size: int) -> WorkloadProbePlan:
    """An MLA workload's plan: its MLA attention rows only (shape None: no GQA layer to build)."""
    from kernels_probe.attention.mla_workload import mla_configs, mla_notes

    prefix, groups, samples, private, out = _single_level(scn.tree)
    P = _round_up(prefix, page_size)
    cfgs = mla_configs(scn.model, scn.tp, scn.kv_dtype, page_size, P, groups, samples,
                       tuple(private + k for k in (1, max(1, out // 2), out)),
                       [_round_up(p, page_size) for p in (P // 2, P * 2) if p >= page_size])
    has_moe = bool(scn.model.num_experts and scn.model.num_moe_layers)
    notes = mla_notes(cfgs[0].num_heads, scn.tp, steps=has_moe)
    moe, ms, steps, layers = None, (), (), 0
    if has_moe:
        moe = moe_shape_from_spec(scn.model, scn.tp)
        B = samples * groups
        ms = tuple(sorted({1, B} | {m for m in M_GRID if B / 4 <= m <= 4 * B}))
        positions = (("first", 1), ("middle", max(1, out // 2)), ("final", out))
        steps = tuple(WorkloadStep(scn.name, scn.model.id, pos, P, samples, groups, private, k, out,
                                   kv_dtype=scn.kv_dtype, weight_dtype=scn.weight_dtype) for pos, k in positions)
        layers = moe_step_layers(scn.model, scn.tp, scn.weight_dtype, scn.kv_dtype, steps[-1])
        notes.append(f"MoE: routed experts ({moe.experts} experts, top {moe.top_k}, width {moe.intermediate} per GPU) "
                     "measured as grouped GEMMs")
        notes.append(_moe_steps_note(layers, scn.model.num_layers))
    if P != prefix:
        notes.append(f"prefix {prefix} rounded up to {P} tokens (whole pages of {page_size})")
    return WorkloadProbePlan(name=scn.name, shape=None, kv_dtype=scn.kv_dtype, weight_dtype=scn.weight_dtype,
                             attention=(), gemm_m=ms, steps=steps, notes=tuple(notes), mla=cfgs, moe=moe,
                             moe_step_layers=layers)


def moe_step_layers(model, tp: int, weight_dtype: str, kv_dtype: str, final: WorkloadStep,
                    budget_bytes: float = 100e9) -> int:
    """How many layers of a MoE model's shard (its dense layers first) fit `budget_bytes` of one GPU with the
    final step's KV cache (MLA: the latent; GQA: K and V of its KV heads per GPU): the whole model where it
    fits, else fewer MoE layers. ValueError where the step model has no config for the model."""
    from kernels_probe.moe.moe_step_shapes import moe_step_shape

    s = moe_step_shape(model.id, tp)
    eb = 1 if weight_dtype.startswith("fp8") else 2
    tokens = final.n_groups * final.prefix_tokens + final.batch * (-(-final.suffix_tokens // 16) * 16)
    width = s.kv_lora + s.rope_dim if s.attention == "mla" else 2 * s.kv_heads * s.head_dim
    kv_layer = tokens * width * (1 if kv_dtype == "fp8" else 2)
    per_layer = s.weight_bytes(eb) / s.layers + kv_layer          # MoE layers dominate: an upper bound
    return max(s.dense_layers + 1, min(s.layers, int(budget_bytes // per_layer)))


def plan_from_json(d: dict) -> WorkloadProbePlan:
    """The inverse of WorkloadProbePlan.describe() (python -m kernels_probe --plan FILE: a plan derived where
    the planner's inputs are installed, measured where the GPU is)."""
    sh = LayerShape(**d["shape"]) if d.get("shape") else None
    pts = []
    for p in d["steps"]:
        p = {k: v for k, v in p.items() if k not in ("suffix_tokens", "batch")}
        pts.append(WorkloadStep(**p))
    return WorkloadProbePlan(name=d["workload"], shape=sh, kv_dtype=d["kv_dtype"], weight_dtype=d["weight_dtype"],
                             attention=tuple(AttentionConfig(**c) for c in d["attention_configs"]),
                             gemm_m=tuple(d["gemm_m"]), steps=tuple(pts), notes=tuple(d.get("notes", ())),
                             mla=_mla_configs(d.get("mla_configs")),
                             moe=MoeShape(**d["moe"]) if d.get("moe") else None,
                             moe_step_layers=int(d.get("moe_step_layers") or 0))


def _mla_configs(rows) -> tuple:
    if not rows:
        return ()
    from kernels_probe.attention.mla import MlaShape

    return tuple(MlaShape(**c) for c in rows)
