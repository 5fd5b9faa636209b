"""Turn vLLM V1's scheduler output into the batch log, one record per decode step.

vLLM needs nothing from cascade-plan and cascade-plan needs no vLLM: the converter reads the fields of
`vllm.v1.core.sched.output.SchedulerOutput` by name (objects or dicts of the same shape). Fields read
(vllm-project/vllm `vllm/v1/core/sched/output.py` at commit 00e8f1fd0936d138370d01dbe1b4f8e12baf63b1;
`vllm/v1/core/sched/scheduler.py` at 00024d314514900f361ad072af6931e403b7f589 fills them):

- `scheduled_new_reqs[*]` (NewRequestData): `req_id`, `prompt_token_ids` (None for prompt-embedding
  requests), `prompt_embeds` (their length), `block_ids` (one list per KV-cache group),
  `num_computed_tokens`;
- `scheduled_cached_reqs` (CachedRequestData): `req_ids`, `new_block_ids` (appended, or the whole table for
  `resumed_req_ids`; older releases say `resumed_from_preemption`, one bool per request),
  `num_computed_tokens`;
- `num_scheduled_tokens`, `scheduled_spec_decode_tokens` (draft tokens per request: a decode step with
  k drafts schedules 1 + k tokens), `num_common_prefix_blocks` (per KV-cache group: the leading blocks
  every running request holds, which vLLM's cascade gate reads), `finished_req_ids`,
  `preempted_req_ids` (None in releases that sent it only to the V2 model runner).

Preemption: the V1 model runner gets a resumed request back in `scheduled_cached_reqs` (listed in
`resumed_req_ids`, its new table whole); the V2 runner gets it again in `scheduled_new_reqs`. The
converter keeps the prompt length of a preempted request until it finishes, so both paths log it again.

Sharing is read from the block tables of one KV-cache group (`kv_group`, a full-attention group): with
prefix caching, sequences that share a prefix point at the same physical KV blocks, and because a cached
block's hash chains its parent's, the number of this step's decoding sequences on a table's blocks never
grows along the table. A sequence's shared prefix is its leading full blocks another decoding sequence
also holds; a new cascade level starts where the count drops (system prompt -> document -> question);
the group id is the chain of the block ids ending each level. Block 0 is vLLM's null block (what
sliding-window groups hold for blocks out of the window): never counted as shared.

The per-step work is incremental (a count of readers per block, changed only by the blocks that became
full, arrived or left) and each sequence's levels are found by bisection on that count.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, BinaryIO, Callable

import msgspec

NULL_BLOCK_ID = 0            # vllm/v1/core/block_pool.py: the first block of the pool is the null block


def get_field(obj: Any, name: str, default: Any = None) -> Any:
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def prompt_length(new: Any) -> int:
    """Tokens of a new request's prompt: its token ids, or the rows of its prompt embeddings (a
    snapshot taken on the engine's hot path carries the count itself, `num_prompt_tokens`)."""
    n = get_field(new, "num_prompt_tokens")
    if n is not None:
        return int(n)
    ids = get_field(new, "prompt_token_ids")
    if ids is not None:
        return len(ids)
    embeds = get_field(new, "prompt_embeds")
    return len(embeds) if embeds is not None else 0


class SchedulerLogWriter:
    """Keeps each request's block tables (every KV-cache group), prompt length and computed tokens
    across steps (vLLM sends the prompt and the full tables only when a request is first scheduled or
    resumed) and writes one per-sequence record per step in which some sequence decodes.

    `block_size`: tokens per KV block, one int or one per KV-cache group (the logger reads it from the
    engine config). `every`: write one step in `every` (the state is updated on every step)."""

    def __init__(self, out: BinaryIO | None, replica: str | int = 0, block_size: int | Sequence[int] = 16,
                 kv_group: int = 0, clock: Callable[[], float] = time.time, every: int = 1) -> None:
        self.out = out
        self.replica = replica
        sizes = [block_size] if isinstance(block_size, int) else list(block_size)
        if not sizes or any(int(b) < 1 for b in sizes):
            raise ValueError(f"block_size must be >= 1 tokens, got {block_size!r}")
        self.block_sizes = [int(b) for b in sizes]
        self.kv_group = int(kv_group)
        self.bs = self.block_sizes[min(self.kv_group, len(self.block_sizes) - 1)]
        self.clock = clock
        self.every = max(1, int(every))
        self.tables: dict[str, list[list[int]] | None] = {}    # None: preempted, blocks freed
        self.prompt_len: dict[str, int] = {}
        self.computed: dict[str, int] = {}
        self.step = 0
        self.users: dict[int, int] = {}        # block -> decoding sequences (of the last step) holding it
        self._counted: dict[str, int] = {}     # request -> its leading full blocks counted in `users`
        # `_version` moves whenever a block's count changes where it is or becomes >= 2 (sharing changed);
        # a request's levels are reused while it stands still (steady decode only adds private blocks)
        self._version = 0
        self._shape: dict[str, tuple] = {}     # request -> (version, shared blocks, group, levels)
        self._memo: dict[int, int] = {}        # block starting a level -> index where the level ends
        self._memo_version = -1
        self._enc = msgspec.json.Encoder()

    def reset(self) -> None:
        """Forget every request (after steps were lost): those running now are skipped until they end."""
        for d in (self.tables, self.prompt_len, self.computed, self.users, self._counted, self._shape):
            d.clear()
        self._version += 1

    # -- state -------------------------------------------------------------------------------------

    def _uncount(self, rid: str) -> None:
        n = self._counted.pop(rid, 0)
        if n:
            users = self.users
            table = self.tables[rid]
            assert table is not None                       # counted blocks belong to a live table
            for b in table[self.kv_group][:n]:
                if b != NULL_BLOCK_ID:
                    c = users[b] - 1
                    if c:
                        users[b] = c
                        self._version += 1
                    else:
                        del users[b]

    def _set_table(self, rid: str, block_ids: Sequence[Sequence[int]] | None) -> None:
        self._uncount(rid)
        self._shape.pop(rid, None)
        self.tables[rid] = [list(g) for g in block_ids] if block_ids else [[]]

    def update(self, so: Any) -> None:
        for rid in get_field(so, "finished_req_ids") or ():
            if rid in self.tables:
                self._uncount(rid)
                del self.tables[rid]
            self.prompt_len.pop(rid, None)
            self.computed.pop(rid, None)
        for rid in get_field(so, "preempted_req_ids") or ():
            if self.tables.get(rid) is not None:
                self._uncount(rid)
                self.tables[rid] = None                # blocks freed; the prompt length is kept
        for new in get_field(so, "scheduled_new_reqs") or ():
            rid = get_field(new, "req_id")
            self._set_table(rid, get_field(new, "block_ids"))
            self.prompt_len[rid] = prompt_length(new)
            self.computed[rid] = int(get_field(new, "num_computed_tokens"))
        cached = get_field(so, "scheduled_cached_reqs")
        if cached is None:
            return
        rids = get_field(cached, "req_ids") or ()
        resumed = get_field(cached, "resumed_req_ids")
        if resumed is None:                            # releases before resumed_req_ids: one bool each
            flags = get_field(cached, "resumed_from_preemption") or ()
            resumed = {r for r, f in zip(rids, flags) if f}
        for rid, new_blocks, n in zip(rids, get_field(cached, "new_block_ids"),
                                      get_field(cached, "num_computed_tokens")):
            if rid not in self.prompt_len:
                continue            # first scheduled before the writer started: prompt length unknown
            table = self.tables.get(rid)
            if rid in resumed or table is None:
                self._set_table(rid, new_blocks)
            elif new_blocks is not None:
                for g, ids in enumerate(new_blocks):
                    if g < len(table):
                        table[g].extend(ids)
                    else:
                        table.append(list(ids))
            self.computed[rid] = int(n)

    # -- record ------------------------------------------------------------------------------------

    def decoding(self, so: Any) -> list[tuple[str, int]]:
        """(request, draft tokens) of the sequences that decode in this step: prompt computed, and
        exactly one token scheduled beyond the drafts (a resumed request recomputing schedules more)."""
        scheduled = get_field(so, "num_scheduled_tokens") or {}
        spec = get_field(so, "scheduled_spec_decode_tokens") or {}
        tables, computed, prompt = self.tables, self.computed, self.prompt_len
        out = []
        for r, n in scheduled.items():
            if tables.get(r) is None:
                continue
            k = len(spec[r]) if r in spec else 0
            if n == 1 + k and computed[r] >= prompt[r]:
                out.append((r, k))
        return out

    def _recount(self, decoding: list[tuple[str, int]]) -> None:
        """Bring `users` to this step's decoding set: drop those gone, add newly full blocks."""
        now = {r for r, _ in decoding}
        for rid in [r for r in self._counted if r not in now]:
            self._uncount(rid)
            self._shape.pop(rid, None)
        users, g, bs = self.users, self.kv_group, self.bs
        for r, _ in decoding:
            full = self.computed[r] // bs
            have = self._counted.get(r, 0)
            if full == have:
                continue
            table = self.tables[r]
            assert table is not None                       # decoding() keeps live tables only
            blocks = table[g] if g < len(table) else []
            full = min(full, len(blocks))
            if full < have:                                  # drafts rejected across a block end
                self._uncount(r)
                have = 0
            for b in blocks[have:full]:
                if b != NULL_BLOCK_ID:
                    c = users.get(b, 0)
                    users[b] = c + 1
                    if c:
                        self._version += 1
            self._counted[r] = full

    def _levels(self, blocks: list[int], n_full: int,
                key: Callable[[int], int]) -> tuple[int, str, list[int] | None]:
        """(shared blocks, group id or "", level ends or None) of one table. A level starting at block b
        is held by the same set of sequences throughout, so where it ends is a property of b, found once
        per change of the counts (by bisection) and shared by every sequence holding b."""
        if not n_full or blocks[0] == NULL_BLOCK_ID:        # a table opening with the null block shares nothing
            return 0, "", None
        users, bs, memo = self.users, self.bs, self._memo
        ends, ids, i = [], [], 0
        while i < n_full:
            b = blocks[i]
            j = memo.get(b)
            if j is None:
                u = users.get(b, 0)
                j = memo[b] = bisect_left(blocks, 1 - u, i, n_full, key=key) if u > 1 else -1
            if j < 0:
                break
            ends.append(j * bs)
            ids.append(f"b{blocks[j - 1]}")
            i = j
        if not ends:
            return 0, "", None
        return ends[-1] // bs, "/".join(ids), ends if len(ends) > 1 else None

    def record(self, so: Any, decoding: list[tuple[str, int]] | None = None) -> dict | None:
        """The log record of this step's decoding sequences (None when none decodes)."""
        if decoding is None:
            decoding = self.decoding(so)
        self._recount(decoding)
        if not decoding:
            return None
        bs, g, users = self.bs, self.kv_group, self.users
        key = lambda b: -users.get(b, 0)
        if self._memo_version != self._version:
            self._memo.clear()
            self._memo_version = self._version
        seqs = []
        for r, k in decoding:
            computed = self.computed[r]
            context = computed + 1                # the token decoded this step reads itself too
            table = self.tables[r]
            assert table is not None                       # decoding() keeps live tables only
            blocks = table[g] if g < len(table) else []
            shape = self._shape.get(r)
            if shape is None or shape[0] != self._version:
                shape = self._shape[r] = (self._version, *self._levels(blocks, self._counted.get(r, 0), key))
            _, n_shared, group, ends = shape
            row: dict[str, Any] = {"request": r, "group": group or r, "shared": n_shared * bs,
                                   "private": context - n_shared * bs}
            if ends is not None:
                row["levels"] = ends
            if k:
                row["draft"] = k
            seqs.append(row)
        ts = get_field(so, "ts")                     # a snapshot carries the time it was taken
        rec: dict[str, Any] = {"ts": self.clock() if ts is None else ts, "replica": self.replica, "step": self.step,
                               "seqs": seqs,
                               "block_size": bs}
        common = get_field(so, "num_common_prefix_blocks")
        if common is not None:
            common = [common] if isinstance(common, int) else common    # one int before KV-cache groups
            rec["num_common_prefix_blocks"] = list(common)
            if len(common) > 1:
                rec["kv_group"] = g
        scheduled = get_field(so, "num_scheduled_tokens") or {}
        rec["scheduled"] = len(scheduled)
        rec["max_query"] = max(scheduled.values())
        mins = [int(get_field(n, "num_computed_tokens")) for n in get_field(so, "scheduled_new_reqs") or ()]
        cached = get_field(so, "scheduled_cached_reqs")
        if cached is not None:
            mins += list(get_field(cached, "num_computed_tokens") or ())
        rec["min_computed"] = min(mins)
        return rec

    def write(self, so: Any) -> dict | None:
        """Update from one SchedulerOutput and append its record (if any, and if this step is one of
        `every`) as one JSON line."""
        self.update(so)
        self.step += 1
        if self.every > 1 and self.step % self.every:
            return None             # counts stay consistent with the tables; the next written step recounts
        rec = self.record(so)
        if rec is not None and self.out is not None:
            self.out.write(self._enc.encode(rec) + b"\n")
        return rec

    def encode(self, rec: dict) -> bytes:
        return self._enc.encode(rec) + b"\n"
