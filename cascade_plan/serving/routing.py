"""Which replica each request lands on, and how many of its siblings decode beside it.

A stream of requests in sibling groups (one prompt, `samples` completions each) arrives as a
Poisson process of groups; siblings arrive together or spread over a window. Four policies:
random, round-robin, least-loaded (fewest running requests; the one policy whose every choice
depends on the previous ones, so it is one tight sequential pass) and prefix-aware (consistent
hashing of the prompt onto a ring of virtual nodes). `forks_together` routes a group as one
request (n > 1), as the seed recommends. Co-residency (siblings of a request running on the same
replica while it runs) is counted for every request at once with sorted interval arithmetic.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

POLICIES = ("random", "round-robin", "least-loaded", "prefix-aware")
VIRTUAL_NODES = 160   # points per replica on the ring (ketama uses 160)


@dataclass(frozen=True)
class Stream:
    group: np.ndarray       # (N,) group (prompt) id of each request, arrival order
    start_s: np.ndarray     # (N,) arrival
    duration_s: np.ndarray  # (N,) time it runs (decode)

    @property
    def n(self) -> int:
        return int(self.group.size)


def make_stream(requests: int, samples: int, rate_per_s: float, duration_s: float, duration_cv: float = 0.0,
                sibling_spread_s: float = 0.0, seed: int = 0) -> Stream:
    """`requests` requests in groups of `samples`; groups arrive at rate_per_s / samples (Poisson)."""
    rng = np.random.default_rng(seed)
    n_groups = -(-requests // samples)
    g_start = np.cumsum(rng.exponential(samples / rate_per_s, n_groups))
    group = np.arange(requests) // samples          # never n_groups x samples: samples may exceed requests
    start = g_start[group] + (rng.uniform(0, sibling_spread_s, requests) if sibling_spread_s > 0 else 0.0)
    if duration_cv > 0:
        sigma = np.sqrt(np.log1p(duration_cv**2))
        dur = duration_s * rng.lognormal(-sigma**2 / 2, sigma, requests)
    else:
        dur = np.full(requests, float(duration_s))
    order = np.argsort(start, kind="stable")
    return Stream(group=group[order], start_s=start[order], duration_s=dur[order])


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """A well-mixed 64-bit hash of integers (vectorised)."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def consistent_hash(keys: np.ndarray, replicas: int, virtual_nodes: int = VIRTUAL_NODES) -> np.ndarray:
    """Replica owning each key on a hash ring with `virtual_nodes` points per replica."""
    owner = np.repeat(np.arange(replicas), virtual_nodes)
    points = _splitmix64(np.arange(replicas * virtual_nodes, dtype=np.uint64) + np.uint64(1 << 40))
    order = np.argsort(points)
    points, owner = points[order], owner[order]
    idx = np.searchsorted(points, _splitmix64(keys), side="left") % points.size
    return owner[idx]


def least_loaded(start_s: np.ndarray, duration_s: np.ndarray, replicas: int) -> np.ndarray:
    """Each arrival to the replica with the fewest running requests (ties: lowest index).

    A request's end does not depend on where it runs, so every arrival and departure is put in time
    order up front (departures at or before an arrival first, as they free their slot; a request that
    ends the instant it starts leaves right after its own arrival). One pass then keeps the replicas
    in a heap keyed (running, index); a count that changed leaves its old entry behind, skipped when
    it surfaces. O(N log N), whatever the replica count."""
    n = start_s.size
    idx = np.arange(n)
    end = start_s + duration_s
    instant = end <= start_s
    t = np.concatenate([end, start_s])
    if instant.any():
        kind = np.concatenate([instant.astype(np.int64), np.ones(n, np.int64)])
        sub = np.concatenate([2 * idx + instant, 2 * idx])
        order = np.lexsort((sub, kind, t))
    else:                                # a stable sort puts departures (first half) before arrivals at a tie
        order = np.argsort(t, kind="stable")
    events = np.where(order < n, -(order + 1), order - n).tolist()   # < 0: request -e-1 leaves; else arrives
    out = [0] * n
    active = [0] * replicas
    ready = list(range(replicas))        # keys running x replicas + replica (ints: cheaper than tuples), a heap
    push, pop, replace = heapq.heappush, heapq.heappop, heapq.heapreplace
    for e in events:
        if e < 0:
            r = out[~e]
            c = active[r] - 1
            active[r] = c
            push(ready, c * replicas + r)
            continue
        while True:
            key = ready[0]
            c, r = divmod(key, replicas)
            if active[r] == c:
                break
            pop(ready)
        active[r] = c + 1
        replace(ready, key + replicas)
        out[e] = r
    return np.asarray(out, np.int64)


def assign(stream: Stream, replicas: int, policy: str, forks_together: bool = False, seed: int = 0) -> np.ndarray:
    """Replica of every request. With forks_together a group is one request: its first sibling is
    routed and the rest follow it."""
    if policy not in POLICIES:
        raise ValueError(policy)
    if forks_together:
        first = np.unique(stream.group, return_index=True)[1]
        sub = Stream(stream.group[first], stream.start_s[first], stream.duration_s[first])
        lead = assign(sub, replicas, policy, False, seed)
        table = np.empty(int(stream.group.max()) + 1, np.int64)
        table[sub.group] = lead
        return table[stream.group]
    if policy == "random":
        return np.random.default_rng(seed + 1).integers(0, replicas, stream.n)
    if policy == "round-robin":
        return np.arange(stream.n) % replicas
    if policy == "least-loaded":
        return least_loaded(stream.start_s, stream.duration_s, replicas)
    return consistent_hash(stream.group, replicas)


def co_resident(stream: Stream, replica: np.ndarray, replicas: int) -> np.ndarray:
    """For every request, the requests of its group on its replica whose run overlaps its own
    (itself included): the sibling group it decodes in."""
    # Exact integer keys (segment, time rank): packing float times into one float key lost the order
    # of close times once segments x time span passed 2^53 (a request then missed itself: 0 siblings).
    seg = np.unique(stream.group.astype(np.int64) * replicas + replica, return_inverse=True)[1].astype(np.int64)
    end = stream.start_s + stream.duration_s
    times, rank = np.unique(np.concatenate([stream.start_s, end]), return_inverse=True)   # rank: index in times
    start_rank, end_rank = rank[:stream.n], rank[stream.n:]
    base = seg * np.int64(times.size + 1)              # <= N x (2N + 1): far inside int64
    ks = np.sort(base + start_rank)
    ke = np.sort(base + end_rank)
    # keys of earlier segments, in ks and in ke alike: the requests of those segments (no search needed)
    earlier = np.concatenate([[0], np.cumsum(np.bincount(seg))])[seg]
    started_before_end = np.searchsorted(ks, base + end_rank, side="left") - earlier
    ended_before_start = np.searchsorted(ke, base + start_rank, side="right") - earlier
    return started_before_end - ended_before_start


@dataclass(frozen=True)
class RoutingResult:
    policy: str
    replicas: int
    siblings_mean: float          # request-weighted mean size of the sibling group a request decodes in
    alone_share: float            # requests with no sibling beside them
    groups_per_seq: float         # mean of 1 / group size: sibling groups per sequence in a batch
    load_imbalance: float         # busiest replica's requests / mean
    prefix_copies: float          # prompt copies held fleet-wide per prompt (replicas each prompt lands on)


def route(stream: Stream, replicas: int, policy: str, forks_together: bool = False, seed: int = 0) -> RoutingResult:
    r = assign(stream, replicas, policy, forks_together, seed)
    c = co_resident(stream, r, replicas)
    load = np.bincount(r, minlength=replicas)
    pairs = _distinct(stream.group.astype(np.int64) * replicas + r)
    return RoutingResult(policy=policy, replicas=replicas, siblings_mean=float(c.mean()),
                         alone_share=float((c == 1).mean()), groups_per_seq=float((1.0 / c).mean()),
                         load_imbalance=float(load.max() / load.mean()),
                         prefix_copies=pairs / _distinct(stream.group))


def _distinct(x: np.ndarray) -> int:
    """Distinct values (np.unique(x).size, from one sort: numpy's hashing unique was 20x slower here)."""
    if x.size == 0:
        return 0
    y = np.sort(x)
    return int(np.count_nonzero(y[1:] != y[:-1])) + 1
