"""vLLM's own view of the logged steps beside the planner's: where the log carries what vLLM's cascade
gate read (`num_common_prefix_blocks`, `block_size`, `scheduled`, `max_query`, `min_computed`, written
by logs/vllm_logger.py), run the gate on vLLM's number and on the planner's (the prefix every logged
sequence reads), with the same batch facts, and say how often they agree.

A second, narrow DuckDB scan over the JSON Lines files whose first record has these fields; other
files cost nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cascade_plan.cost.cost_model import kv_heads_per_gpu, q_heads_per_gpu
from cascade_plan.engine.vllm_gate import VllmGateInputs, vllm_uses_cascade
from cascade_plan.logs.duck_reader import LogTables
from cascade_plan.logs.sources import LogFile

if TYPE_CHECKING:  # pragma: no cover
    import duckdb
    
    from cascade_plan.inputs.workload import Scenario

COLUMNS = ("{ts: 'DOUBLE', replica: 'VARCHAR', block_size: 'BIGINT', num_common_prefix_blocks: 'BIGINT[]', "
           "kv_group: 'BIGINT', scheduled: 'BIGINT', max_query: 'BIGINT', min_computed: 'BIGINT'}")


@dataclass(frozen=True)
class LoggedGate:
    steps: int                       # steps of the analysis that carry vLLM's fields
    vllm_prefix_tokens: np.ndarray   # (steps,) num_common_prefix_blocks x block size, as logged
    planner_prefix_tokens: np.ndarray
    vllm_would_cascade: np.ndarray   # (steps,) bool, opted in (--no-disable-cascade-attn)
    planner_would_cascade: np.ndarray
    stages: dict[str, int]           # the check that decided vLLM's verdict -> steps

    def to_json(self) -> dict:
        n = max(self.steps, 1)
        agree = self.vllm_would_cascade == self.planner_would_cascade
        return {"steps_with_vllm_fields": self.steps,
                "share_of_steps_vllm_would_cascade": float(self.vllm_would_cascade.sum() / n),
                "share_of_steps_planner_predicts_cascade": float(self.planner_would_cascade.sum() / n),
                "share_of_steps_agreeing": float(agree.sum() / n),
                "share_of_steps_same_prefix": float((self.vllm_prefix_tokens == self.planner_prefix_tokens).sum() / n),
                "mean_common_prefix_tokens_vllm": float(self.vllm_prefix_tokens.mean()) if self.steps else 0.0,
                "mean_common_prefix_tokens_planner": float(self.planner_prefix_tokens.mean()) if self.steps else 0.0,
                "vllm_gate_stages": dict(sorted(self.stages.items())),
                "note": "vLLM's own num_common_prefix_blocks (all running requests, prefills included) against the "
                        "prefix every logged sequence reads; both through engine/vllm_gate.py with the logged batch "
                        "(requests, longest query, fewest computed tokens), FlashAttention backend, opted in"}


def _has_fields(con: duckdb.DuckDBPyConnection, f: LogFile) -> bool:
    row = con.execute("SELECT json_keys(json) FROM read_json_objects(?, format='newline_delimited', "
                      "ignore_errors=true) WHERE json IS NOT NULL LIMIT 1", [f.path]).fetchone()
    return row is not None and "num_common_prefix_blocks" in row[0]


def logged_gate(files: list[LogFile], t: LogTables, scn: Scenario,
                common_prefix_tokens: np.ndarray) -> LoggedGate | None:
    """None when no file carries vLLM's fields (or none of their steps is in `t`)."""
    import duckdb

    json_files = [f for f in files if f.fmt == "json" and "://" not in f.path]
    if not json_files or t.steps == 0:
        return None
    con = duckdb.connect()
    try:
        chosen = [f for f in json_files if _has_fields(con, f)]
        if not chosen:
            return None
        paths = "[" + ", ".join("'" + f.path.replace("'", "''") + "'" for f in chosen) + "]"
        rows = con.execute(
            "SELECT replica, ts, any_value(block_size), "
            "any_value(num_common_prefix_blocks[coalesce(kv_group, 0) + 1]), "
            "any_value(scheduled), any_value(max_query), any_value(min_computed) "
            f"FROM read_json({paths}, format='newline_delimited', ignore_errors=true, columns={COLUMNS}) "
            "WHERE block_size >= 1 AND num_common_prefix_blocks IS NOT NULL AND scheduled >= 1 AND max_query >= 1 "
            "AND min_computed >= 0 GROUP BY replica, ts").fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()
    index = {(str(r), float(ts)): i for i, (r, ts) in enumerate(zip(t.replica, t.ts))}
    m = scn.model
    base: dict[str, Any] = {"num_query_heads": q_heads_per_gpu(m, scn.tp), "num_kv_heads": kv_heads_per_gpu(m, scn.tp),
            "num_sms": scn.hardware.sm_count, "use_alibi": m.alibi, "sliding_window": m.sliding_window,
            "prefix_caching_enabled": scn.prefix_caching, "disable_cascade_attn": False}
    keep = [(index.get((str(r), float(ts))), bs, blocks, n, q, mc) for r, ts, bs, blocks, n, q, mc in rows]
    keep = [k for k in keep if k[0] is not None and k[2] is not None]
    if not keep:
        return None
    idx, bs, blocks, n, q, mc = (np.asarray(c, dtype=np.int64) for c in zip(*keep))
    planner = np.asarray(common_prefix_tokens, dtype=np.int64)[idx]

    # engine_common_prefix_tokens' rounding and cap, done here so rows repeat
    def capped(prefix: np.ndarray) -> np.ndarray:
        return np.minimum(prefix // bs * bs, mc) // bs * bs

    # steps repeat the same gate inputs: decide each distinct row once
    rows_in = np.stack([capped(blocks * bs), capped(planner), n, q > 1, bs])
    distinct, inverse = np.unique(rows_in, axis=1, return_inverse=True)
    verdicts = []
    for vpre, ppre, nreq, multi, b in distinct.T:
        facts = dict(num_requests=int(nreq), query_lens=(2 if multi else 1,) + (1,) * (int(nreq) - 1),
                     block_size=int(b), **base)
        verdicts.append((vllm_uses_cascade(VllmGateInputs(common_prefix_tokens=int(vpre), **facts)),
                         vllm_uses_cascade(VllmGateInputs(common_prefix_tokens=int(ppre), **facts))))
    inverse = inverse.reshape(-1)
    vp = [verdicts[j][0].common_prefix_tokens_used for j in inverse]
    pp = [verdicts[j][1].common_prefix_tokens_used for j in inverse]
    vu = [verdicts[j][0].heuristic_would_use for j in inverse]
    pu = [verdicts[j][1].heuristic_would_use for j in inverse]
    stages: dict[str, int] = {}
    for j in inverse:
        stages[verdicts[j][0].stage] = stages.get(verdicts[j][0].stage, 0) + 1
    if not vp:
        return None
    return LoggedGate(steps=len(vp), vllm_prefix_tokens=np.asarray(vp), planner_prefix_tokens=np.asarray(pp),
                      vllm_would_cascade=np.asarray(vu, bool), planner_would_cascade=np.asarray(pu, bool),
                      stages=stages)
