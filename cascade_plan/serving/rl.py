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
from dataclasses import dataclass

import numpy as np

from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.estimate import estimate
from cascade_plan.errors import InputError
from cascade_plan.inputs import limits
from cascade_plan.inputs.workload import Scenario, TreeNode

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


def _lognormal(rng, mean: float, cv: float, n: int) -> np.ndarray:
    if cv <= 0:
        return np.full(n, float(mean))
    sigma = np.sqrt(np.log1p(cv**2))
    return mean * rng.lognormal(-sigma**2 / 2, sigma, n)


def replica_trees(s: RlSchedule, rng) -> list[TreeNode | None]:
    """One RL step's rollout per replica (None for a replica without prompts)."""
    p_len = np.clip(np.round(_lognormal(rng, s.prompt_tokens, s.prompt_cv, s.prompts)), 0, limits.MAX_TOKENS).astype(int)
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
    tail_steps: int                 # decode steps after TAIL_FINISHED of completions finished
    tail_per_sequence_s: float
    tail_cascade_s: float


def rollout(scn: Scenario, params: CostParams, tree: TreeNode) -> ReplicaRollout:
    est = estimate(dataclasses.replace(scn, tree=tree), params)
    c, f, w = est.costs, est.flat, est.step_weights       # costs at the steps the run is summed over, and weights
    order = np.argsort(f.leaf_output, kind="stable")
    outs, seqs_done = f.leaf_output[order], np.concatenate([[0.0], np.cumsum(f.leaf_seqs[order])])
    done = seqs_done[np.searchsorted(outs, c.steps, side="left")]   # sequences finished before step k
    total = f.total_seqs
    tail = done >= TAIL_FINISHED * total
    # median completion length over sequences, without one array element per sequence
    middle = [seqs_done[1:].searchsorted(r, side="right") for r in ((total - 1) // 2, total // 2)]
    median = float(np.mean(outs[middle]))
    return ReplicaRollout(per_sequence_s=est.run_per_sequence_s, cascade_s=est.run_cascade_s,
                          longest_completion=int(f.max_output), median_completion=median,
                          tail_steps=int(w[tail].sum()), tail_per_sequence_s=float((c.ps_step_s * w)[tail].sum()),
                          tail_cascade_s=float((c.cas_step_s * w)[tail].sum()))


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
                "rl_step": {"other_s": s.other_s, "per_sequence_s": self.per_sequence_s + s.other_s,
                            "cascade_s": self.cascade_s + s.other_s, "speedup": self.rl_step_speedup}}


def check_schedule(s: RlSchedule, sampled_steps: int) -> None:
    """Refuse (one line) a schedule outside the planned ranges, or whose run would take more than a
    few seconds: every figure finite and in range, and the work (completions drawn, replica rollouts
    priced) bounded, so memory and time never grow with what a user can type."""
    import math

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
    rows = []
    for _ in range(sampled_steps):
        outs = [rollout(scn, params, t) for t in replica_trees(s, rng) if t is not None]
        slow_ps = max(outs, key=lambda o: o.per_sequence_s)
        slow_cas = max(outs, key=lambda o: o.cascade_s)
        rows.append((slow_ps.per_sequence_s, slow_cas.cascade_s, slow_ps.tail_per_sequence_s, slow_cas.tail_cascade_s,
                     max(o.longest_completion for o in outs), float(np.median([o.median_completion for o in outs])),
                     slow_ps.per_sequence_s / np.mean([o.per_sequence_s for o in outs])))
    m = np.mean(np.array(rows), axis=0)
    return RlResult(schedule=s, sampled_steps=sampled_steps, per_sequence_s=float(m[0]), cascade_s=float(m[1]),
                    tail_per_sequence_s=float(m[2]), tail_cascade_s=float(m[3]), longest_completion=float(m[4]),
                    median_completion=float(m[5]), replica_spread=float(m[6]))
