"""A replica's batch against its KV memory, run the way an engine runs what does not fit.

The KV budget and bytes per token are `capacity`'s (memory less the weights and the reserve), and the
sequences that fit at once are `memory_fit`'s, the number `estimate` prints. A batch that fits runs
as one. One that does not runs in *waves* of whole sibling groups that fit together (the rest wait in
the queue, and each group keeps its shared prefix). When not even one sibling group fits with its
prefix, the engine *preempts* siblings: the group runs in waves of the siblings that fit beside the
prefix, and each later wave recomputes that prefix (its prefill is not priced here; its re-reads are,
as every wave reads the prefix again). Sizes are taken at the end of each sequence's run, as
`capacity` takes them."""

from __future__ import annotations

from dataclasses import dataclass

from cascade_plan.cost.capacity import kv_budget_bytes
from cascade_plan.cost.cost_model import kv_bytes_per_token
from cascade_plan.inputs.workload import Scenario, TreeNode

FITS, WAVES, PREEMPTS, NO_ROOM = "fits", "waves", "preempts", "does-not-fit"
MODES_BY_SEVERITY = (FITS, WAVES, PREEMPTS, NO_ROOM)


@dataclass(frozen=True)
class WavePlan:
    mode: str                 # FITS | WAVES (of whole sibling groups) | PREEMPTS (siblings split) | NO_ROOM
    sequences: int            # in the batch asked for
    max_sequences: int        # of this shape at once (memory_fit's, as `estimate` prints)
    waves: int                # batches run one after another
    largest_wave: int         # sequences in the largest wave

    def describe(self) -> str:
        if self.mode == FITS:
            return f"all {self.sequences:,} sequences fit at once (room for {self.max_sequences:,})"
        head = f"{self.max_sequences:,} of {self.sequences:,} sequences fit at once"
        if self.mode == WAVES:
            return (f"{head}: runs in {self.waves:,} waves of whole sibling groups (at most "
                    f"{self.largest_wave:,} sequences each), the rest queued")
        if self.mode == PREEMPTS:
            return (f"{head}, and not one sibling group with its prefix: the engine preempts siblings, "
                    f"{self.waves:,} waves of at most {self.largest_wave:,} sequences, each recomputing the prefix "
                    "(prefill not priced)")
        return f"{head}: not even one sequence with its prefix fits in the KV memory left; priced as if it did"

    def to_json(self) -> dict:
        return {"mode": self.mode, "sequences": self.sequences, "max_sequences_at_once": self.max_sequences,
                "waves": self.waves, "largest_wave_sequences": self.largest_wave, "text": self.describe()}


def budget_tokens(scn: Scenario) -> float:
    """Tokens of KV the replica holds at once (capacity's budget over its bytes per token)."""
    return kv_budget_bytes(scn) / kv_bytes_per_token(scn.model, scn.kv_dtype, scn.tp)


def _own(leaf: TreeNode) -> int:
    assert leaf.output_tokens is not None              # a leaf: TreeNode.__post_init__
    return leaf.private_tokens + leaf.output_tokens


def _samples(leaf: TreeNode) -> int:
    assert leaf.samples is not None                    # a leaf: TreeNode.__post_init__
    return leaf.samples


def pack_prompts(prompts: list[TreeNode], budget: float,
                 prefix_caching: bool = True) -> tuple[str, list[list[TreeNode]]]:
    """Waves of the prompt groups of one rollout (each a node of prompt tokens over leaves of
    completions), in order: whole groups while they fit; a group too large alone is split into waves
    of the siblings that fit beside its prompt. Returns (mode, waves: lists of prompt nodes)."""
    mode = FITS
    waves: list[list[TreeNode]] = []
    cur: list[TreeNode] = []
    used = 0.0
    for g in prompts:
        stored = g.tokens if prefix_caching else 0            # without prefix caching every sequence has its own copy
        per_seq = [(leaf, _own(leaf) + (0 if prefix_caching else g.tokens)) for leaf in g.children]
        need = stored + sum(_samples(leaf) * own for leaf, own in per_seq)
        if used + need <= budget:
            cur.append(g)
            used += need
            continue
        mode = WAVES if mode == FITS else mode
        if cur:
            waves.append(cur)
            cur, used = [], 0.0
        if need <= budget:
            cur, used = [g], need
            continue
        mode = PREEMPTS
        if stored + max(own for _, own in per_seq) > budget:
            return NO_ROOM, [[p] for p in prompts]
        part: list[TreeNode] = []
        room = budget - stored
        for leaf, own in per_seq:
            left = leaf.samples
            while left:
                k = min(left, int(room // own))
                if k == 0:
                    waves.append([TreeNode(tokens=g.tokens, children=part)])
                    part, room = [], budget - stored
                    continue
                part.append(TreeNode(samples=k, output_tokens=leaf.output_tokens, private_tokens=leaf.private_tokens))
                left -= k
                room -= k * own
        if part:
            waves.append([TreeNode(tokens=g.tokens, children=part)])
    if cur:
        waves.append(cur)
    return mode, waves


def uniform_waves(groups: int, siblings: int, prefix_tokens: int, own_tokens: int, budget: float,
                  prefix_caching: bool = True) -> tuple[str, list[tuple[int, int, int]]]:
    """The same for `groups` equal sibling groups: (mode, [(repeats, groups, siblings) of each wave shape])."""
    stored = prefix_tokens if prefix_caching else 0
    own = own_tokens + (0 if prefix_caching else prefix_tokens)
    need = stored + siblings * own
    if groups * need <= budget:
        return FITS, [(1, groups, siblings)]
    per_wave = int(budget // need)
    if per_wave >= 1:
        full, rest = divmod(groups, per_wave)
        return WAVES, [(full, per_wave, siblings)] + ([(1, rest, siblings)] if rest else [])
    fit = int((budget - stored) // own)
    if fit < 1:
        return NO_ROOM, [(1, groups, siblings)]
    full, rest = divmod(siblings, fit)
    return PREEMPTS, [(groups * full, 1, fit)] + ([(groups, 1, rest)] if rest else [])
