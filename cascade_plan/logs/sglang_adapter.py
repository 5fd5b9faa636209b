"""Write the batch log from SGLang's scheduler: each decode batch's radix-tree sharing, one record per step.

SGLang has no cascade decode on main, but its radix tree holds exactly the sharing to measure: every
running request keeps `last_node`, the tree node ending the prefix it matched and inserted, and the path
from it to the root is its cached prefix, split into nodes wherever two prompts diverge. Fields read
(sgl-project/sglang `python/sglang/srt/managers/schedule_batch.py` at commit
000eaffacf048e51b64d4d72985ef8f0b7054b39: `ScheduleBatch.reqs`, `ScheduleBatch.forward_mode`,
`Req.rid`, `Req.origin_input_ids`, `Req.output_ids`, `Req.last_node`;
`python/sglang/srt/mem_cache/radix_cache.py` at 006b0e3d317f1cd4a7300e919a4eaa878b1947e7:
`TreeNode.parent`, `.key` (its tokens; len), `.id`; the root is the node without a parent).

A request's context is `len(origin_input_ids) + len(output_ids)` tokens; its shared prefix is the run of
nodes from the root that another request of the batch also has on its path; a cascade level ends where
the number of such requests drops; the group id is the chain of the node ids ending each level. Only
decode batches are logged (`forward_mode.is_decode()`; mixed chunked-prefill batches are not).
Speculative decoding's draft tokens are not visible in the batch and are not logged.

Hook (docs/logs.md): `python -m cascade_plan.logs.sglang_adapter --model-path ... [sglang.launch_server
arguments]` starts SGLang's server with every scheduler process wrapped; on its thread the hook only
copies each request's id, length and last node, the rest runs in the logger's thread
(logs/vllm_logger.StepLogger: bounded, buffered, flushed at exit and on SIGTERM/SIGINT).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

import msgspec

from cascade_plan.logs.vllm_logger import ENV_DIR, ENV_REPLICA, StepLogger, chain_signals, log_path, push_step


def path_of(node: Any) -> tuple[tuple[int, int], ...]:
    """(node id, tokens) from the root's child down to `node` (the root itself excluded)."""
    out = []
    while node is not None and getattr(node, "parent", None) is not None:
        out.append((node.id, len(node.key)))
        node = node.parent
    out.reverse()
    return tuple(out)


def snapshot_batch(batch: Any) -> dict | None:
    """Hot path: a decode batch's counts and each request's `last_node` (a reference; its path is read
    in the logger's thread), or None for any other batch. A running request's nodes are locked
    (`lock_ref`), so they are not evicted meanwhile; a split of a node adds a parent and keeps every
    level's length, so reading the path a moment later gives the same sharing."""
    mode = getattr(batch, "forward_mode", None)
    if mode is None or not mode.is_decode():
        return None
    return {"ts": time.time(),
            "reqs": [(r.rid, len(r.origin_input_ids) + len(r.output_ids), r.last_node) for r in batch.reqs]}


class SglangBatchWriter:
    """Snapshots (snapshot_batch) -> per-sequence records of the batch-log format."""

    def __init__(self, replica: str | int = 0) -> None:
        self.replica = replica
        self.step = 0
        self._enc = msgspec.json.Encoder()

    def reset(self) -> None:       # no state carried between steps
        pass

    def write(self, snap: dict | None) -> dict | None:
        if not snap or not snap["reqs"]:
            return None
        self.step += 1
        paths: dict[int, tuple] = {}            # one walk per distinct last node
        reqs = []
        for rid, context, node in snap["reqs"]:
            key = id(node)
            if key not in paths:
                paths[key] = path_of(node)
            reqs.append((rid, context, paths[key]))
        readers: dict[int, int] = {}
        for _, _, path in reqs:
            for nid, _ in path:
                readers[nid] = readers.get(nid, 0) + 1
        seqs = []
        for rid, context, path in reqs:
            ends, ids, tokens = [], [], 0
            for i, (nid, n) in enumerate(path):
                users = readers[nid]
                if users < 2:
                    break
                tokens += n
                if i + 1 == len(path) or readers[path[i + 1][0]] != users:
                    ends.append(tokens)
                    ids.append(f"n{nid}")
            tokens = min(tokens, context)
            row: dict[str, Any] = {"request": str(rid), "group": "/".join(ids) if ids else str(rid),
                                   "shared": tokens, "private": context - tokens}
            if len(ends) > 1:
                row["levels"] = [min(e, context) for e in ends]
            seqs.append(row)
        return {"ts": snap["ts"], "replica": self.replica, "step": self.step, "seqs": seqs}

    def encode(self, rec: dict) -> bytes:
        return self._enc.encode(rec) + b"\n"


# -- hooking into SGLang --------------------------------------------------------------------------

_LOGGERS: dict[int, Any] = {}


def log_batch(scheduler: Any, batch: Any) -> None:
    """Queue one batch of `scheduler` (attention-TP rank 0 only: the ranks of one TP group run the same
    batch; with DP attention each DP group has its own rank 0 and batch)."""
    if getattr(scheduler, "attn_tp_rank", getattr(scheduler, "tp_rank", 0)) != 0:
        return
    key = id(scheduler)
    lg = _LOGGERS.get(key, False)
    if lg is False:
        try:
            out_dir = os.environ.get(ENV_DIR) or "cascade-plan-logs"
            os.makedirs(out_dir, exist_ok=True)
            replica = (os.environ.get(ENV_REPLICA)
                       or f"{socket.gethostname()}-dp{getattr(scheduler, 'dp_rank', None) or 0}")
            lg = StepLogger(log_path(out_dir, replica), SglangBatchWriter(replica))
            chain_signals(lg.flush)
        except Exception as exc:          # noqa: BLE001 - never take the engine down
            print(f"cascade-plan step log: not logging: {exc!r}", file=sys.stderr)
            lg = None
        _LOGGERS[key] = lg
    push_step(lg, lambda: snapshot_batch(batch))


def wrap_run_batch(cls: Any) -> None:
    original = cls.run_batch
    if getattr(original, "_cascade_plan_logged", False):
        return

    def run_batch(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        log_batch(self, batch)
        return original(self, batch, *args, **kwargs)

    run_batch._cascade_plan_logged = True  # type: ignore[attr-defined]  # a marker on the function object
    cls.run_batch = run_batch


def run_scheduler_process_logged(*args: Any, **kwargs: Any) -> Any:
    """The scheduler process entry, wrapped (picklable by reference, so spawned processes run it too)."""
    from sglang.srt.managers import scheduler as sched

    wrap_run_batch(sched.Scheduler)
    return sched.run_scheduler_process(*args, **kwargs)


def main(argv: list[str] | None = None) -> None:
    """`python -m cascade_plan.logs.sglang_adapter [sglang.launch_server arguments]`."""
    from sglang.srt.entrypoints import engine
    from sglang.srt.entrypoints.http_server import launch_server
    from sglang.srt.server_args import prepare_server_args

    os.environ.setdefault("CASCADE_PLAN_LOG_DIR", "cascade-plan-logs")
    if hasattr(engine, "Engine") and hasattr(engine.Engine, "run_scheduler_process_func"):
        engine.Engine.run_scheduler_process_func = staticmethod(run_scheduler_process_logged)
    if hasattr(engine, "run_scheduler_process"):          # releases that call the module's function
        engine.run_scheduler_process = run_scheduler_process_logged
    launch_server(prepare_server_args(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    main()
