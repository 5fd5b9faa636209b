"""Write the batch log from vLLM V1's scheduler output, one record per decode step.

vLLM needs nothing from cascade-plan and cascade-plan needs no vLLM: the converter reads the
fields of `vllm.v1.core.sched.output.SchedulerOutput` by name (objects or dicts of the same shape):
`scheduled_new_reqs[*].{req_id, prompt_token_ids, block_ids, num_computed_tokens}`,
`scheduled_cached_reqs.{req_ids, new_block_ids, num_computed_tokens, resumed_req_ids}`,
`num_scheduled_tokens`, `finished_req_ids`, `preempted_req_ids`.

Sharing is read from the block tables: with prefix caching, sequences that share a prefix point at
the same physical KV blocks. A sequence's shared prefix is its leading blocks that another running
sequence also points at; where the number of sequences on a block changes along the chain, a new
cascade level starts (system prompt -> document -> question). The group id is the chain of the
physical block ids ending each level. Hook it into the engine core (docs/logs.md):

    writer = SchedulerLogWriter(open("steps-r0.jsonl", "ab"), replica="r0", block_size=16)
    original = Scheduler.schedule
    def schedule(self):
        out = original(self)
        writer.write(out)
        return out
    Scheduler.schedule = schedule
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, BinaryIO

import msgspec


def _get(obj: Any, name: str, default=None):
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


class SchedulerLogWriter:
    """Keeps each running request's block table and prompt length across steps (vLLM sends the
    prompt and the full table only when a request is first scheduled)."""

    def __init__(self, out: BinaryIO | None, replica: str | int = 0, block_size: int = 16, kv_group: int = 0,
                 clock=time.time) -> None:
        self.out = out
        self.replica = replica
        self.block_size = block_size
        self.kv_group = kv_group
        self.clock = clock
        self.blocks: dict[str, list[int]] = {}
        self.prompt_len: dict[str, int] = {}
        self.computed: dict[str, int] = {}
        self.step = 0
        self._enc = msgspec.json.Encoder()

    def _table(self, block_ids) -> list[int]:
        return list(block_ids[self.kv_group]) if block_ids else []

    def update(self, so: Any) -> None:
        for rid in set(_get(so, "finished_req_ids") or ()) | set(_get(so, "preempted_req_ids") or ()):
            for d in (self.blocks, self.prompt_len, self.computed):
                d.pop(rid, None)
        for new in _get(so, "scheduled_new_reqs") or ():
            rid = _get(new, "req_id")
            self.blocks[rid] = self._table(_get(new, "block_ids"))
            self.prompt_len[rid] = len(_get(new, "prompt_token_ids") or ())
            self.computed[rid] = int(_get(new, "num_computed_tokens"))
        cached = _get(so, "scheduled_cached_reqs")
        if cached is not None:
            resumed = set(_get(cached, "resumed_req_ids") or ())
            for rid, new_blocks, n in zip(_get(cached, "req_ids"), _get(cached, "new_block_ids"),
                                          _get(cached, "num_computed_tokens")):
                if rid not in self.blocks:
                    continue            # started before the writer: no prompt length known
                if new_blocks is not None:
                    ids = self._table(new_blocks)
                    self.blocks[rid] = ids if rid in resumed else self.blocks[rid] + ids
                self.computed[rid] = int(n)

    def record(self, so: Any) -> dict | None:
        """The log record of this step's decoding sequences (None when none decodes)."""
        scheduled = _get(so, "num_scheduled_tokens") or {}
        decoding = [r for r, n in scheduled.items()
                    if r in self.blocks and n == 1 and self.computed[r] >= self.prompt_len[r]]
        if not decoding:
            return None
        bs = self.block_size
        users = Counter(b for r in decoding for b in self.blocks[r][: self.computed[r] // bs])
        seqs = []
        for r in decoding:
            context = self.computed[r] + 1          # the token decoded this step reads itself too
            full = self.blocks[r][: self.computed[r] // bs]
            n_shared = 0
            while n_shared < len(full) and users[full[n_shared]] > 1:
                n_shared += 1
            row = {"request": r, "group": "", "shared": n_shared * bs, "private": context - n_shared * bs}
            if n_shared:
                ends, ids = [], []
                for i in range(n_shared):
                    if i + 1 == n_shared or users[full[i + 1]] != users[full[i]]:
                        ends.append((i + 1) * bs)
                        ids.append(f"b{full[i]}")
                row["group"] = "/".join(ids)
                if len(ends) > 1:
                    row["levels"] = ends
            else:
                row["group"] = r
            seqs.append(row)
        return {"ts": self.clock(), "replica": self.replica, "step": self.step, "seqs": seqs}

    def write(self, so: Any) -> dict | None:
        """Update from one SchedulerOutput and append its record (if any) as one JSON line."""
        self.update(so)
        self.step += 1
        rec = self.record(so)
        if rec is not None and self.out is not None:
            self.out.write(self._enc.encode(rec) + b"\n")
        return rec
