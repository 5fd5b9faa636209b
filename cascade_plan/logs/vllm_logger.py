"""A logger to drop into a running vLLM: one batch-log record per decode step, written by the engine core.

Two ways in (docs/logs.md has the commands), both torch-free and vLLM-free until vLLM calls them:

- **general plugin** (`vllm.general_plugins` entry point `cascade_plan_steps`, installed with
  cascade-plan): vLLM calls `register()` in every process it starts; it does nothing unless
  `CASCADE_PLAN_LOG_DIR` is set, and then wraps `Scheduler.schedule` (AsyncScheduler inherits it);
- **scheduler class**: `--scheduler-cls cascade_plan.logs.vllm_logger.LoggingScheduler`, a subclass of
  vLLM's V1 `Scheduler` built when vLLM first asks for it (module `__getattr__`).

On the engine's thread the logger only copies the step's counts into a small snapshot
(`snapshot`: request ids, token counts, the new block ids, the draft counts, num_common_prefix_blocks)
and appends it to a bounded deque; a daemon thread turns snapshots into records
(`vllm_scheduler.SchedulerLogWriter`) and writes whole lines with one `os.write` per flush (every
`flush_s`), so an abrupt kill loses at most the last interval and never leaves half a line. When the
deque is full a step is dropped, counted, and the converter forgets the requests it could no longer
follow (they are skipped until they finish); a failure inside the logger switches it off with one
warning, never raising into the engine. At exit (atexit) and on SIGTERM/SIGINT everything queued is
written; the engine's own signal handlers run after ours, unchanged.

Environment: `CASCADE_PLAN_LOG_DIR` (where `steps-<replica>-<pid>.jsonl` go), `CASCADE_PLAN_REPLICA`
(default `<host>-dp<data-parallel rank>`), `CASCADE_PLAN_LOG_EVERY` (write one step in N, default 1).
"""

from __future__ import annotations

import atexit
import collections
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Protocol

from cascade_plan.logs.vllm_scheduler import SchedulerLogWriter, get_field

# The field layout was read from the vLLM V1 engine, main branch in 2026 (the v0.18-era releases, cascade attention
# opt-in), as modelled by engine/vllm_gate.py: vllm/v1/core/sched/output.py at 00e8f1fd0936d138370d01dbe1b4f8e12baf63b1,
# vllm/v1/core/sched/scheduler.py at 00024d314514900f361ad072af6931e403b7f589. Older V1 layouts
# (num_common_prefix_blocks as one int, resumed_from_preemption, no preempted_req_ids) are read too (docs/logs.md);
# not the V0 engine.
ENV_DIR, ENV_REPLICA, ENV_EVERY = "CASCADE_PLAN_LOG_DIR", "CASCADE_PLAN_REPLICA", "CASCADE_PLAN_LOG_EVERY"
MAX_QUEUED_STEPS = 4096          # ~ a few MB of snapshots at 256 sequences; beyond, steps are dropped


def snapshot(so: Any) -> dict:
    """The counts of one SchedulerOutput, copied (vLLM reuses and extends some of its lists in place)."""
    new = []
    for r in get_field(so, "scheduled_new_reqs") or ():
        ids, emb = get_field(r, "prompt_token_ids"), get_field(r, "prompt_embeds")
        new.append({"req_id": get_field(r, "req_id"),
                    "num_prompt_tokens": len(ids) if ids is not None else (len(emb) if emb is not None else 0),
                    "block_ids": [list(g) for g in get_field(r, "block_ids") or ()],
                    "num_computed_tokens": get_field(r, "num_computed_tokens")})
    c = get_field(so, "scheduled_cached_reqs")
    cached = None
    if c is not None:
        resumed = get_field(c, "resumed_req_ids")
        cached = {"req_ids": list(get_field(c, "req_ids") or ()),
                  "new_block_ids": [None if b is None else [list(g) for g in b]
                                    for b in get_field(c, "new_block_ids") or ()],
                  "num_computed_tokens": list(get_field(c, "num_computed_tokens") or ()),
                  "resumed_req_ids": set(resumed) if resumed is not None else None,
                  "resumed_from_preemption": list(get_field(c, "resumed_from_preemption") or ())}
    spec = get_field(so, "scheduled_spec_decode_tokens") or {}
    common = get_field(so, "num_common_prefix_blocks")
    return {"scheduled_new_reqs": new, "scheduled_cached_reqs": cached,
            "num_scheduled_tokens": dict(get_field(so, "num_scheduled_tokens") or {}),
            "scheduled_spec_decode_tokens": {r: range(len(v)) for r, v in spec.items()},
            "num_common_prefix_blocks": ([common] if isinstance(common, int)
                                         else (None if common is None else list(common))),
            "finished_req_ids": set(get_field(so, "finished_req_ids") or ()),
            "preempted_req_ids": set(get_field(so, "preempted_req_ids") or ()),
            "ts": time.time()}


class StepWriter(Protocol):
    """What StepLogger drives: vLLM's SchedulerLogWriter or SGLang's SglangBatchWriter."""

    def reset(self) -> None: ...
    def write(self, snap: Any) -> dict | None: ...
    def encode(self, rec: dict) -> bytes: ...


class StepLogger:
    """Bounded queue + background writer around a converter (`writer`: `write(snapshot) -> record or
    None`, `encode(record) -> bytes`, `reset()`; SchedulerLogWriter for vLLM, SglangBatchWriter for
    SGLang). `push` is the only call on the engine's thread."""

    def __init__(self, path: str, writer: StepWriter, flush_s: float = 1.0, max_queued: int = MAX_QUEUED_STEPS) -> None:
        self.path = path
        self._q: collections.deque = collections.deque()
        self._max = max_queued
        self.dropped = 0
        self.written = 0
        self._lost = False
        self.writer = writer
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._flush_s = flush_s
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._stop = False
        self._io = threading.Lock()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cascade-plan-step-log", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def push(self, snap: dict) -> None:
        if len(self._q) >= self._max:
            self.dropped += 1
            self._lost = True
            return
        self._q.append(snap)

    def _drain(self) -> None:
        with self._io:
            lines = []
            w = self.writer
            while self._q:
                snap = self._q.popleft()
                if self._lost:              # a step went missing: tables can no longer be followed
                    self._lost = False
                    w.reset()
                rec = w.write(snap)
                if rec is not None:
                    lines.append(w.encode(rec))
            if lines and self._fd is not None:
                data = b"".join(lines)
                while data:
                    data = data[os.write(self._fd, data):]
                self.written += len(lines)

    def _run(self) -> None:
        try:
            while not self._stop:
                self._wake.wait(self._flush_s)
                self._wake.clear()
                self._drain()
                self._idle.set()
            self._drain()
        except BaseException as exc:     # noqa: BLE001 - never take the engine down
            self.error = exc
            self._q.clear()
            self._max = 0
            print(f"cascade-plan step log: stopped writing {self.path}: {exc!r}", file=sys.stderr)

    def flush(self, timeout_s: float = 2.0) -> None:
        """Write everything queued now (from any thread; waits up to `timeout_s`)."""
        if self._thread.is_alive():
            self._idle.clear()
            self._wake.set()
            self._idle.wait(timeout_s)

    def close(self) -> None:
        if self._fd is None:
            return
        self._stop = True
        self._wake.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5.0)
        with self._io:
            if self._fd is not None:
                try:
                    os.fsync(self._fd)
                except OSError:
                    pass
                os.close(self._fd)
                self._fd = None
        if self.dropped:
            print(f"cascade-plan step log: {self.dropped} step(s) dropped (queue full) in {self.path}", file=sys.stderr)


def chain_signals(flush: Callable[[], Any],
                  signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)) -> bool:
    """Make SIGTERM/SIGINT flush the log first, then do what they did before (the engine's handler,
    the default action, or nothing if ignored). Only the main thread can set handlers: False elsewhere."""
    if threading.current_thread() is not threading.main_thread():
        return False
    for sig in signals:
        prev = signal.getsignal(sig)
        if prev is signal.SIG_IGN:
            continue

        def handler(signum: int, frame: Any, prev: Any = prev) -> Any:
            try:
                flush()
            except Exception:              # noqa: BLE001, S110 - the engine's handler must still run
                pass
            if callable(prev):
                return prev(signum, frame)
            signal.signal(signum, signal.SIG_DFL)      # default action: terminate as before
            os.kill(os.getpid(), signum)

        signal.signal(sig, handler)
    return True


# -- hooking into vLLM ----------------------------------------------------------------------------

def engine_block_sizes(scheduler: Any) -> tuple[list[int], int]:
    """Block size of every KV-cache group, from the engine config, and the group to read sharing
    from: the first full-attention group without a sliding window or attention chunks."""
    groups = get_field(get_field(scheduler, "kv_cache_config"), "kv_cache_groups") or ()
    sizes, pick = [], None
    for i, g in enumerate(groups):
        spec = get_field(g, "kv_cache_spec")
        sizes.append(int(get_field(spec, "block_size")))
        if (pick is None and type(spec).__name__ in ("FullAttentionSpec", "MLAAttentionSpec")
                and get_field(spec, "sliding_window") is None and get_field(spec, "attention_chunk_size") is None):
            pick = i
    if not sizes:
        sizes = [int(get_field(scheduler, "block_size", None)
                     or get_field(get_field(scheduler, "cache_config"), "block_size"))]
    return sizes, pick or 0


def replica_name(scheduler: Any) -> str:
    name = os.environ.get(ENV_REPLICA)
    if name:
        return name
    rank = get_field(get_field(get_field(scheduler, "vllm_config"), "parallel_config"), "data_parallel_rank", 0)
    return f"{socket.gethostname()}-dp{rank}"


def log_path(out_dir: str, replica: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(replica))
    return os.path.join(out_dir, f"steps-{safe}-{os.getpid()}.jsonl")


_LOGGERS: dict[int, StepLogger | None] = {}


def logger_for(scheduler: Any) -> StepLogger | None:
    """The logger of this scheduler, made on its first step (None once it failed)."""
    key = id(scheduler)
    if key not in _LOGGERS:
        try:
            out_dir = os.environ.get(ENV_DIR) or "cascade-plan-logs"
            os.makedirs(out_dir, exist_ok=True)
            sizes, group = engine_block_sizes(scheduler)
            replica = replica_name(scheduler)
            writer = SchedulerLogWriter(None, replica=replica, block_size=sizes, kv_group=group,
                                        every=int(os.environ.get(ENV_EVERY, "1") or 1))
            lg = StepLogger(log_path(out_dir, replica), writer)
            chain_signals(lg.flush)
            _LOGGERS[key] = lg
        except Exception as exc:           # noqa: BLE001 - a logger that cannot start stays out of the way
            print(f"cascade-plan step log: not logging: {exc!r}", file=sys.stderr)
            _LOGGERS[key] = None
    return _LOGGERS[key]


def push_step(lg: StepLogger | None, snap_of: Callable[[], dict | None]) -> None:
    """Queue the snapshot `snap_of()` takes (None: nothing to log) on a logger that is running; the first failure
    switches the logger off with one warning, never raising into the engine."""
    if lg is None or lg.error is not None:
        return
    try:
        snap = snap_of()
        if snap is not None:
            lg.push(snap)
    except Exception as exc:               # noqa: BLE001
        lg.error = exc
        print(f"cascade-plan step log: stopped: {exc!r}", file=sys.stderr)


def log_step(scheduler: Any, out: Any) -> None:
    push_step(logger_for(scheduler), lambda: snapshot(out))


def wrap_schedule(cls: Any) -> None:
    """Wrap `cls.schedule` (once) so every step's output is logged."""
    original = cls.schedule
    if getattr(original, "_cascade_plan_logged", False):
        return

    def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        log_step(self, out)
        return out

    schedule._cascade_plan_logged = True  # type: ignore[attr-defined]  # a marker on the function object
    cls.schedule = schedule


def register() -> None:
    """vLLM general-plugin entry point: log only when CASCADE_PLAN_LOG_DIR is set."""
    if not os.environ.get(ENV_DIR):
        return
    from vllm.v1.core.sched.scheduler import Scheduler

    wrap_schedule(Scheduler)


def __getattr__(name: str) -> type:
    """`LoggingScheduler`: vLLM's V1 Scheduler, logging each step (for --scheduler-cls)."""
    if name != "LoggingScheduler":
        raise AttributeError(name)
    from vllm.v1.core.sched.scheduler import Scheduler

    class LoggingScheduler(Scheduler):
        def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
            out = super().schedule(*args, **kwargs)
            log_step(self, out)
            return out

    globals()["LoggingScheduler"] = LoggingScheduler
    return LoggingScheduler
