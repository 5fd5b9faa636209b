"""A workload's batch as whole sibling groups, and the smaller batches (waves) made of some of them.

The unit a batch is split by is the shallowest level with more than one instance: below a chain of
single nodes (a system prompt every sequence shares stays in every wave), either one node's `copies`
(two prompts of 64 rollouts: two units of 64 sequences) or a node's several children, each with its
copies (a forest of different prompts: its instances in order). A wave of `n` units keeps every
ancestor of the units, so its sequences share what they shared in the whole batch and no sibling
group is split (splitting one would lose its common prefix; `memory_waves` prices that case)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable

import msgspec

from cascade_plan.inputs.workload import TreeNode

# Waves priced per search candidate; a forest split into more waves of distinct shapes is not searched
# at that concurrency (the search says so).
MAX_DISTINCT_WAVES = 64
MAX_WAVES_WALKED = 4096         # waves of a forest enumerated one by one to find their shapes


class BatchUnits(msgspec.Struct, frozen=True):
    """Where the batch splits: the path of single nodes from the root to the splitting node, and the
    units there (child index, copies) in order; `own` when the splitting node's own copies are the units."""

    path: tuple[int, ...]            # child indices from the root to the node whose copies or children split
    own: bool                        # the units are the copies of that node itself
    counts: tuple[int, ...]          # own: (copies,); else each child's copies, in order
    sequences: tuple[int, ...]       # sequences under one instance of each unit kind

    @property
    def total(self) -> int:
        return sum(self.counts)


def _sequences(node: TreeNode) -> int:
    """Sequences under one instance of `node`."""
    if not node.children:
        return int(node.samples or 0)
    return sum(c.copies * _sequences(c) for c in node.children)


def batch_units(tree: TreeNode) -> BatchUnits:
    path: list[int] = []
    node = tree
    while node.copies == 1 and len(node.children) == 1:
        node = node.children[0]
        path.append(0)
    if node.copies > 1 or not node.children:
        return BatchUnits(path=tuple(path), own=True, counts=(node.copies,), sequences=(_sequences(node),))
    return BatchUnits(path=tuple(path), own=False, counts=tuple(c.copies for c in node.children),
                      sequences=tuple(_sequences(c) for c in node.children))


def _rebuilt(tree: TreeNode, path: tuple[int, ...], at_node: Callable[[TreeNode], TreeNode]) -> TreeNode:
    if not path:
        return at_node(tree)
    child = _rebuilt(tree.children[path[0]], path[1:], at_node)
    return msgspec.structs.replace(tree, children=[child])


def composition(units: BatchUnits, start: int, n: int) -> tuple[tuple[int, int], ...]:
    """The units [start, start + n) as (unit kind, count) runs, in order (a bisection: linear in the runs)."""
    ends = list(itertools.accumulate(units.counts))        # units before the end of each kind
    out = []
    kind = bisect.bisect_right(ends, start)
    pos = start
    while pos < start + n and kind < len(ends):
        take = min(ends[kind], start + n) - pos
        out.append((kind, take))
        pos += take
        kind += 1
    return tuple(out)


def wave_tree(tree: TreeNode, units: BatchUnits, comp: tuple[tuple[int, int], ...]) -> TreeNode:
    """The batch holding only the units of `comp` (composition's runs), every ancestor kept."""
    if units.own:
        ((_, n),) = comp
        return _rebuilt(tree, units.path, lambda node: msgspec.structs.replace(node, copies=n))

    def keep(node: TreeNode) -> TreeNode:
        return msgspec.structs.replace(node, children=[msgspec.structs.replace(node.children[k], copies=n)
                                                       for k, n in comp])
    return _rebuilt(tree, units.path, keep)


def wave_sequences(units: BatchUnits, comp: tuple[tuple[int, int], ...]) -> int:
    return sum(units.sequences[k] * n for k, n in comp)


Composition = tuple[tuple[int, int], ...]      # (unit kind, count) runs


def waves_of(units: BatchUnits, per_wave: int) -> list[tuple[Composition, int]] | None:
    """The batch run `per_wave` units at a time: [(composition, how many waves have it)] in order of first
    appearance; None when that makes more than MAX_DISTINCT_WAVES distinct waves."""
    total = units.total
    if units.own:
        full, rest = divmod(total, per_wave)
        out: list[tuple[Composition, int]] = [(((0, per_wave),), full)] if full else []
        return out + ([(((0, rest),), 1)] if rest else [])
    if total // per_wave > MAX_WAVES_WALKED:
        return None
    seen: dict[Composition, int] = {}
    for start in range(0, total, per_wave):
        comp = composition(units, start, min(per_wave, total - start))
        seen[comp] = seen.get(comp, 0) + 1
        if len(seen) > MAX_DISTINCT_WAVES:
            return None
    return list(seen.items())
