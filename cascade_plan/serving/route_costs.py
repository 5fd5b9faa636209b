"""What a routing outcome costs: the sibling groups each replica's batch ends up with, priced by
`estimate` (speedup of cascade over the run) and `capacity` (sequences that fit per replica)."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from cascade_plan.cost.capacity import capacity
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.estimate import estimate
from cascade_plan.errors import InputError
from cascade_plan.inputs.workload import Scenario, simple_tree
from cascade_plan.logs.duck_reader import read_logs, require_steps
from cascade_plan.logs.sources import expand
from cascade_plan.logs.summary_tree import summary_tree
from cascade_plan.serving.memory_waves import FITS, NO_ROOM, WavePlan, budget_tokens, uniform_waves
from cascade_plan.serving.routing import POLICIES, RoutingResult, Stream, make_stream, route


@dataclass(frozen=True)
class Mix:
    prefix_tokens: int
    samples: int
    output_tokens: int
    private_tokens: int = 0
    output_cv: float = 0.0          # spread of completion lengths (lognormal), shapes least-loaded
    sibling_spread: float = 0.0     # siblings arrive over this fraction of a decode (0: together)


@dataclass(frozen=True)
class PolicyOutcome:
    routing: RoutingResult
    groups: int                     # sibling groups in one replica's batch
    siblings: int                   # sequences per group
    speedup: float                  # cascade over per-sequence, whole run (estimate)
    per_sequence_s: float
    cascade_s: float
    max_sequences: int              # KV capacity per replica at this sharing (prefix stored once per group)
    memory: WavePlan | None = None  # how the batch meets that capacity: at once, in waves, or preempting siblings


def mix_from_log(patterns: list[str], output_cv: float = 0.0, sibling_spread: float = 0.0) -> Mix:
    """The request mix of the workload that best summarises the logs: the shared chain's tokens, the
    siblings per innermost group, the median output and private tokens."""
    files = expand(patterns)
    # an all-malformed log is refused, as analyze does
    tree, _ = summary_tree(require_steps(read_logs(files), files))
    shared = 0
    node = tree
    while node.get("children"):
        shared += node.get("tokens", 0)
        node = node["children"][0]          # the shared subtree comes first (unshared sequences last)
    return Mix(prefix_tokens=shared + node.get("tokens", 0), samples=node["samples"],
               output_tokens=node["output_tokens"],
               private_tokens=node.get("private_tokens", 0), output_cv=output_cv, sibling_spread=sibling_spread)


def batch_scenario(base: Scenario, mix: Mix, groups: int, siblings: int) -> Scenario:
    return msgspec.structs.replace(base, tree=simple_tree(mix.prefix_tokens, groups, siblings, mix.output_tokens,
                                                      mix.private_tokens))


def outcome(base: Scenario, params: CostParams, mix: Mix, batch: int, res: RoutingResult) -> PolicyOutcome:
    """The replica's batch priced as it runs: at once when it fits in KV memory, else in the waves of
    what fits (memory_waves); times are for the whole batch, the speedup is theirs."""
    groups = max(1, round(batch * res.groups_per_seq))
    siblings = max(1, round(batch / groups))
    scn = batch_scenario(base, mix, groups, siblings)
    est = estimate(scn, params)
    cap = capacity(scn, flat=est.flat)
    mem = est.memory
    assert mem is not None                                       # estimate() always sizes the memory
    seqs = groups * siblings
    ps, cas = est.run_per_sequence_s, est.run_cascade_s
    if mem.fits or not mem.weights_fit:
        plan = WavePlan(FITS if mem.fits else NO_ROOM, seqs, mem.max_sequences, 1, seqs)
    else:
        mode, shapes = uniform_waves(groups, siblings, mix.prefix_tokens, mix.private_tokens + mix.output_tokens,
                                     budget_tokens(scn), scn.prefix_caching)
        if mode != NO_ROOM:
            ps = cas = 0.0
            for repeats, g, s in shapes:
                e = estimate(batch_scenario(base, mix, g, s), params)
                ps, cas = ps + repeats * e.run_per_sequence_s, cas + repeats * e.run_cascade_s
        plan = WavePlan(mode, seqs, mem.max_sequences, sum(r for r, _, _ in shapes),
                        max(g * s for _, g, s in shapes))
    return PolicyOutcome(routing=res, groups=groups, siblings=siblings, speedup=ps / cas, per_sequence_s=ps,
                         cascade_s=cas, max_sequences=cap.max_sequences_shared, memory=plan)


def batch_for_rate(base: Scenario, params: CostParams, mix: Mix, rate_per_s: float, replicas: int) -> int:
    """Running sequences per replica at `rate_per_s` requests/s (Little's law, batch = rate x decode
    time / replicas, decode time from the per-sequence step time at that batch, spread siblings)."""
    def excess(b: int) -> float:
        est = estimate(batch_scenario(base, mix, b, 1), params)
        return rate_per_s * est.run_per_sequence_s / replicas - b

    lo, hi = 1, 1 << 16
    if excess(hi) > 0:
        raise InputError(f"--rate: {rate_per_s:g} requests/s is more than {replicas} replicas can decode with "
                         "per-sequence attention (the batch grows without bound)")
    if excess(lo) <= 0:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return hi


def simulate(base: Scenario, params: CostParams, mix: Mix, replicas: int, batch: int, requests: int,
             policies: tuple[str, ...] = POLICIES, forks_together: bool = False,
             seed: int = 0) -> tuple[Stream, list[PolicyOutcome]]:
    """Time is in units of one decode (every request runs ~1.0), so the arrival rate that keeps
    `batch` sequences running per replica is replicas x batch."""
    stream = make_stream(requests, mix.samples, rate_per_s=replicas * batch, duration_s=1.0, duration_cv=mix.output_cv,
                         sibling_spread_s=mix.sibling_spread, seed=seed)
    return stream, [outcome(base, params, mix, batch, route(stream, replicas, p, forks_together, seed))
                    for p in policies]


def sweep_replicas(base: Scenario, params: CostParams, mix: Mix, replica_counts: list[int], batch: int,
                   requests: int, forks_together: bool = False, seed: int = 0) -> dict[str, list[float]]:
    """Speedup of cascade per policy at each replica count (same batch per replica)."""
    out: dict[str, list[float]] = {p: [] for p in POLICIES}
    for r in replica_counts:
        _, outs = simulate(base, params, mix, r, batch, requests, POLICIES, forks_together, seed)
        for o in outs:
            out[o.routing.policy].append(o.speedup)
    return out
