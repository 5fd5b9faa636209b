"""Generation time per RL step (GRPO-style rollouts), with and without cascade attention.

Every RL step samples `prompts` prompts and `samples` completions of each; prompt and completion
lengths are drawn from lognormal distributions (mean, coefficient of variation; completions capped
at `max_completion`). Prompts are dealt round-robin over the replicas, all samples of a prompt on
one (one n > 1 request). A replica's rollout is a sharing tree (one node per prompt, one leaf per
distinct completion length) priced by `estimate` over every decode step: sequences drop out as
their completions end, so the last steps run a thin batch of the longest completions (the long
tail). The RL step waits for the slowest replica."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import msgspec
import numpy as np

from cascade_plan.cost.cost_model import gpu_shape
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.memory_fit import memory_fit
from cascade_plan.cost.run_load import tree_run_costs
from cascade_plan.errors import InputError
from cascade_plan.inputs import limits
from cascade_plan.inputs.workload import Scenario, TreeNode
from cascade_plan.serving.memory_waves import FITS, MODES_BY_SEVERITY, NO_ROOM, WavePlan, budget_tokens, pack_prompts

TAIL_FINISHED = 0.9     # the tail: decode steps after 90% of a replica's completions have finished


@dataclass(frozen=True)
class RlSchedule:
    prompts: int
    samples: int
    prompt_tokens: float
    completion_tokens: float
    max_completion: int
    replicas: int = 1
    prompt_cv: float = 0.0
    completion_cv: float = 0.0
    other_s: float = 0.0           # rest of an RL step (training, weight sync), for the share


def _lognormal(rng: np.random.Generator, mean: float, cv: float, n: int) -> np.ndarray:
    if cv <= 0:
        return np.full(n, float(mean))
    sigma = np.sqrt(np.log1p(cv**2))
    return mean * rng.lognormal(-sigma**2 / 2, sigma, n)


def replica_trees(s: RlSchedule, rng: np.random.Generator) -> list[TreeNode | None]:
    """One RL step's rollout per replica (None for a replica without prompts)."""
    p_len = np.clip(np.round(_lognormal(rng, s.prompt_tokens, s.prompt_cv, s.prompts)), 0,
                    limits.MAX_TOKENS).astype(int)
    c_len = np.clip(np.round(_lognormal(rng, s.completion_tokens, s.completion_cv, s.prompts * s.samples)),
                    1, s.max_completion).astype(int).reshape(s.prompts, s.samples)
    trees = []
    for r in range(s.replicas):
        mine = range(r, s.prompts, s.replicas)
        children = []
        for i in mine:
            lengths, counts = np.unique(c_len[i], return_counts=True)
            children.append(TreeNode(tokens=int(p_len[i]), children=[
                TreeNode(samples=int(n), output_tokens=int(length)) for length, n in zip(lengths, counts)]))
        trees.append(TreeNode(tokens=0, children=children) if children else None)
    return trees


@dataclass(frozen=True)
class ReplicaRollout:
    per_sequence_s: float
    cascade_s: float
    longest_completion: int
    median_completion: float
    tail_steps: int                 # decode steps after TAIL_FINISHED of completions finished (summed over waves)
    tail_per_sequence_s: float
    tail_cascade_s: float
    memory: WavePlan | None = None  # how the batch meets the replica's KV memory


def _wave_costs(scn: Scenario, params: CostParams, tree: TreeNode) -> tuple[float, float, int, float, float]:
    """(per-sequence s, cascade s, tail steps, tail per-sequence s, tail cascade s) of one batch run
    to completion: `estimate`'s run sum (tree_run_costs), without the rest of its answer."""
    f = flatten(tree)
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    run = tree_run_costs(f, g, scn.model, scn.weight_dtype, scn.tp, params, scn.prefix_caching)
    c, w = run.costs, run.weights
    order = np.argsort(f.leaf_output, kind="stable")
    outs, seqs_done = f.leaf_output[order], np.concatenate([[0.0], np.cumsum(f.leaf_seqs[order])])
    done = seqs_done[np.searchsorted(outs, c.steps, side="left")]   # sequences finished before step k
    tail = done >= TAIL_FINISHED * f.total_seqs
    return (run.run_total(c.ps_step_s), run.run_total(c.cas_step_s), int(w[tail].sum()),
            float((c.ps_step_s * w)[tail].sum()), float((c.cas_step_s * w)[tail].sum()))


def plan_rollout(scn: Scenario, tree: TreeNode) -> tuple[WavePlan, list[TreeNode]]:
    """How one replica's rollout meets its KV memory, and the batches it then runs, one after another."""
    flat = flatten(tree)
    mem = memory_fit(msgspec.structs.replace(scn, tree=tree), flat=flat, alternatives=False)
    seqs = int(flat.total_seqs)
    if mem.fits or not mem.weights_fit:
        mode = FITS if mem.fits else NO_ROOM
        return WavePlan(mode, seqs, mem.max_sequences, 1, seqs), [tree]
    mode, waves = pack_prompts(tree.children, budget_tokens(scn), scn.prefix_caching)
    if mode == NO_ROOM:
        return WavePlan(mode, seqs, mem.max_sequences, 1, seqs), [tree]
    trees = [TreeNode(tokens=tree.tokens, children=w) for w in waves]
    largest = max(int(flatten(t).total_seqs) for t in trees)
    return WavePlan(mode, seqs, mem.max_sequences, len(trees), largest), trees


def rollout(scn: Scenario, params: CostParams, tree: TreeNode, plan: tuple[WavePlan, list[TreeNode]] | None = None
            ) -> ReplicaRollout:
    """One replica's rollout, run in the waves its memory allows (see memory_waves)."""
    memory, waves = plan or plan_rollout(scn, tree)
    parts = np.array([_wave_costs(scn, params, w) for w in waves]).sum(axis=0)
    f = flatten(tree)
    order = np.argsort(f.leaf_output, kind="stable")
    outs, seqs_done = f.leaf_output[order], np.concatenate([[0.0], np.cumsum(f.leaf_seqs[order])])
    total = f.total_seqs
    # median completion length over sequences, without one array element per sequence
    middle = [seqs_done[1:].searchsorted(r, side="right") for r in ((total - 1) // 2, total // 2)]
    return ReplicaRollout(per_sequence_s=float(parts[0]), cascade_s=float(parts[1]),
                          longest_completion=int(f.max_output), median_completion=float(np.mean(outs[middle])),
                          tail_steps=int(parts[2]), tail_per_sequence_s=float(parts[3]),
                          tail_cascade_s=float(parts[4]), memory=memory)


def worst_plan(plans: list[WavePlan]) -> WavePlan:
    """The plan to report for a run: the most severe mode met, the fewest sequences that fit, the
    most waves, the largest batch asked of one replica."""
    worst = max(plans, key=lambda p: MODES_BY_SEVERITY.index(p.mode))
    return WavePlan(worst.mode, max(p.sequences for p in plans), min(p.max_sequences for p in plans),
                    max(p.waves for p in plans), max(p.largest_wave for p in plans))


@dataclass(frozen=True)
class RlResult:
    schedule: RlSchedule
    sampled_steps: int
    per_sequence_s: float           # generation wall time per RL step (slowest replica), mean over sampled steps
    cascade_s: float
    tail_per_sequence_s: float      # of which in the tail (slowest replica)
    tail_cascade_s: float
    longest_completion: float       # mean over sampled steps of the longest completion
    median_completion: float
    replica_spread: float           # slowest / mean replica generation time (per-sequence), mean over steps
    memory: WavePlan | None = None  # how the replicas' batches meet their KV memory (the worst met)

    @property
    def speedup(self) -> float:
        return self.per_sequence_s / self.cascade_s

    @property
    def saved_per_1000_steps_s(self) -> float:
        return 1000 * (self.per_sequence_s - self.cascade_s)

    @property
    def rl_step_speedup(self) -> float:
        o = self.schedule.other_s
        return (self.per_sequence_s + o) / (self.cascade_s + o)

    def to_json(self) -> dict:
        s = self.schedule
        return {"schedule": dataclasses.asdict(s), "sampled_rl_steps": self.sampled_steps,
                "generation_per_rl_step": {"per_sequence_s": self.per_sequence_s, "cascade_s": self.cascade_s,
                                           "speedup": self.speedup},
                "long_tail": {"longest_completion_tokens": self.longest_completion,
                              "median_completion_tokens": self.median_completion,
                              "tail_definition": f"decode steps after {TAIL_FINISHED:.0%} of completions finished",
                              "tail_per_sequence_s": self.tail_per_sequence_s, "tail_cascade_s": self.tail_cascade_s,
                              "tail_share_per_sequence": self.tail_per_sequence_s / self.per_sequence_s,
                              "tail_share_cascade": self.tail_cascade_s / self.cascade_s,
                              "slowest_over_mean_replica": self.replica_spread},
                "saved_per_1000_rl_steps_s": self.saved_per_1000_steps_s,
                "memory_per_replica": self.memory.to_json() if self.memory else None,
                "rl_step": {"other_s": s.other_s, "per_sequence_s": self.per_sequence_s + s.other_s,
                            "cascade_s": self.cascade_s + s.other_s, "speedup": self.rl_step_speedup}}


def check_schedule(s: RlSchedule, sampled_steps: int) -> None:
    """Refuse (one line) a schedule outside the planned ranges, or whose run would take more than a
    few seconds: every figure finite and in range, and the work (completions drawn, replica rollouts
    priced) bounded, so memory and time never grow with what a user can type."""
    def bad(option: str, message: str) -> InputError:
        return InputError(f"{option}: {message}")

    for option, value, low, high in (
            ("--prompts", s.prompts, 1, limits.MAX_RL_SEQUENCES), ("--samples", s.samples, 1, limits.MAX_RL_SEQUENCES),
            ("--prompt-tokens", s.prompt_tokens, 0, limits.MAX_TOKENS),
            ("--completion-tokens", s.completion_tokens, 1, limits.MAX_OUTPUT_TOKENS),
            ("--max-completion", s.max_completion, 1, limits.MAX_OUTPUT_TOKENS),
            ("--replicas", s.replicas, 1, limits.MAX_REPLICAS), ("--prompt-cv", s.prompt_cv, 0, limits.MAX_SPREAD),
            ("--completion-cv", s.completion_cv, 0, limits.MAX_SPREAD), ("--other-s", s.other_s, 0, limits.MAX_SECONDS),
            ("--sampled-steps", sampled_steps, 1, limits.MAX_SAMPLED_STEPS)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high):
            raise bad(option, f"{value} is outside {low:,}..{high:,}")
    drawn = sampled_steps * s.prompts * s.samples
    if drawn > limits.MAX_RL_SEQUENCES:
        raise bad("--sampled-steps x --prompts x --samples", f"{drawn:,} completions to draw, more than the "
                  f"{limits.MAX_RL_SEQUENCES:,} one run handles; lower --sampled-steps")
    rollouts = sampled_steps * min(s.replicas, s.prompts)
    if rollouts > limits.MAX_RL_ROLLOUTS:
        raise bad("--sampled-steps x --replicas", f"{rollouts:,} replica rollouts to price, more than the "
                  f"{limits.MAX_RL_ROLLOUTS:,} one run handles; lower --sampled-steps")


def rl_generation(scn: Scenario, params: CostParams, s: RlSchedule, sampled_steps: int = 8, seed: int = 0) -> RlResult:
    check_schedule(s, sampled_steps)
    rng = np.random.default_rng(seed)
    steps = [[t for t in replica_trees(s, rng) if t is not None] for _ in range(sampled_steps)]
    plans = [[plan_rollout(scn, t) for t in trees] for trees in steps]
    priced = sum(len(w) for ps in plans for _, w in ps)
    if priced > limits.MAX_RL_ROLLOUTS:
        raise InputError(f"--sampled-steps: {priced:,} batches to price ({sampled_steps} RL steps x replicas x "
                         f"waves of what fits in memory), more than the {limits.MAX_RL_ROLLOUTS:,} one run handles; "
                         "lower --sampled-steps")
    rows = []
    for trees, ps in zip(steps, plans):
        outs = [rollout(scn, params, t, p) for t, p in zip(trees, ps)]
        slow_ps = max(outs, key=lambda o: o.per_sequence_s)
        slow_cas = max(outs, key=lambda o: o.cascade_s)
        rows.append((slow_ps.per_sequence_s, slow_cas.cascade_s, slow_ps.tail_per_sequence_s, slow_cas.tail_cascade_s,
                     max(o.longest_completion for o in outs), float(np.median([o.median_completion for o in outs])),
                     slow_ps.per_sequence_s / np.mean([o.per_sequence_s for o in outs])))
    m = np.mean(np.array(rows), axis=0)
    return RlResult(schedule=s, sampled_steps=sampled_steps, per_sequence_s=float(m[0]), cascade_s=float(m[1]),
                    tail_per_sequence_s=float(m[2]), tail_cascade_s=float(m[3]), longest_completion=float(m[4]),
                    median_completion=float(m[5]), replica_spread=float(m[6]),
                    memory=worst_plan([p for ps in plans for p, _ in ps]))
