"""The batch-log format (schema_version 1): one record per decode step per replica.

Two forms, told apart per record by their fields:

- **per-sequence** (``seqs``): every running sequence with its request id, its group (the prompt it
  was sampled from, or a ``/``-separated prefix-hash chain for multi-level sharing), its shared-prefix
  tokens and its private context tokens (own prompt + generated so far). A chain of n groups carries
  ``levels``: the cumulative token end of each level, the last one equal to ``shared``.
- **compact**: the seed's per-batch numbers: ``batch`` sequences, ``prefix`` shared tokens per group,
  ``siblings`` sequences per group, ``groups`` groups (default ``batch // siblings``; the other
  sequences share nothing) and the mean ``private`` context tokens per sequence.

JSON Lines holds either form, nested. CSV and Parquet are flat: the compact form as is, the
per-sequence form as one row per (step, sequence) with the ``seqs`` fields as columns
(``levels`` as ``/``-separated ends). The msgspec structs below are the single source of the
rules; ``docs/log-schema.json`` is generated from them (a test keeps it in step).
"""

from __future__ import annotations

import re
from typing import Annotated

import msgspec

from cascade_plan.inputs import limits

SCHEMA_VERSION = 1
# Counts are bounded like the workload's (inputs/limits.py): no product of them overflows the scan's
# 64-bit integers, and a record far outside any engine is reported as malformed, not priced.
MAX_TS_S = 1e15                    # timestamps: any epoch, but finite (1e999 decodes to infinity)
NonNeg = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_SEQUENCES)]
Tokens = Annotated[int, msgspec.Meta(ge=0, le=limits.MAX_CONTEXT_TOKENS)]
Pos = Annotated[int, msgspec.Meta(ge=1, le=limits.MAX_SEQUENCES)]
Time = Annotated[float, msgspec.Meta(ge=-MAX_TS_S, le=MAX_TS_S,
                                     description="seconds (any epoch); every record of one step carries the same "
                                                 "value")]
Replica = Annotated[str | int, msgspec.Meta(description="engine replica (data-parallel rank, host:port, ...)")]


class Seq(msgspec.Struct, frozen=True):
    """One running sequence in one decode step."""

    request: Annotated[str, msgspec.Meta(description="request / sequence id, stable across steps")]
    group: Annotated[str, msgspec.Meta(
        description="prompt it was sampled from; 'a/b/c' = prefix-hash chain, one id per level")]
    shared: Annotated[Tokens, msgspec.Meta(description="tokens of KV shared with other sequences (all levels)")]
    private: Annotated[Tokens, msgspec.Meta(description="tokens of KV of its own: private prompt + generated so far")]
    levels: Annotated[list[Tokens], msgspec.Meta(
        description="cumulative token end of each level of a chain group (last == shared)")] | None = None
    draft: Annotated[NonNeg, msgspec.Meta(
        description="speculative-decoding draft tokens verified for it this step (not in private)")] | None = None


class StepRecord(msgspec.Struct, frozen=True):
    """Per-sequence form: one decode step of one replica."""

    ts: Time
    replica: Replica
    seqs: list[Seq]
    step: NonNeg | None = None
    # What vLLM's own cascade gate saw in this step (written by logs/vllm_logger.py; all optional):
    block_size: Annotated[Pos, msgspec.Meta(description="KV-cache block size in tokens (engine config)")] | None = None
    num_common_prefix_blocks: Annotated[list[NonNeg], msgspec.Meta(
        description="vLLM's SchedulerOutput.num_common_prefix_blocks: per KV-cache group, the leading blocks "
                    "every running request holds")] | None = None
    kv_group: Annotated[NonNeg, msgspec.Meta(
        description="the KV-cache group whose block tables gave `seqs` (index into "
                    "num_common_prefix_blocks)")] | None = None
    scheduled: Annotated[NonNeg, msgspec.Meta(
        description="requests the engine ran in the step, prefills included (the gate's num_reqs)")] | None = None
    max_query: Annotated[Tokens, msgspec.Meta(
        description="most tokens scheduled for one request (1 in pure decode without drafts)")] | None = None
    min_computed: Annotated[Tokens, msgspec.Meta(
        description="fewest already-computed tokens among the scheduled requests (caps vLLM's cascade "
                    "prefix)")] | None = None


class CompactRecord(msgspec.Struct, frozen=True):
    """Compact form: one decode step of one replica, as the seed asks to log it."""

    ts: Time
    replica: Replica
    batch: Annotated[Pos, msgspec.Meta(description="sequences in the step")]
    prefix: Annotated[Tokens, msgspec.Meta(description="shared prefix tokens of each sibling group")]
    siblings: Annotated[Pos, msgspec.Meta(description="sequences per sibling group")]
    private: Annotated[float, msgspec.Meta(ge=0, le=limits.MAX_CONTEXT_TOKENS,
                                           description="mean private context tokens per sequence")]
    groups: NonNeg | None = None
    step: NonNeg | None = None


class SeqRow(msgspec.Struct, frozen=True):
    """Per-sequence form, flat (CSV/Parquet): one row per (step, sequence)."""

    ts: Time
    replica: str | int
    request: str
    group: str
    shared: Tokens
    private: Tokens
    levels: str | None = None
    step: NonNeg | None = None


_WHOLE = re.compile(r"[+-]?[0-9]+(\.0*)?")
FLAT_COUNTS = {"compact": ("batch", "prefix", "siblings", "groups"), "seq": ("shared", "private")}


def check_record(record: dict, form: str, flat: bool = False) -> str | None:
    """The first rule a decoded record of `form` ('seq' | 'compact') breaks, as 'field: reason', or
    None. Cross-field rules a struct cannot say are checked here too (the SQL reader applies the same
    ones). `flat`: a CSV/Parquet row (strings are converted to numbers; per-sequence rows are SeqRow)."""
    if not isinstance(record, dict):
        return "a record is a JSON object"
    kind: type[CompactRecord] | type[SeqRow] | type[StepRecord] = (
        CompactRecord if form == "compact" else (SeqRow if flat else StepRecord))
    if flat:
        record = {k: v for k, v in record.items() if v not in (None, "")}
        for name in FLAT_COUNTS[form]:          # as the SQL reader reads them: whole numbers, "64" or 64.0, not "1e3"
            v = record.get(name)
            if isinstance(v, str):
                if not _WHOLE.fullmatch(v.strip()):
                    return f"{name}: a whole number, got {v[:40]!r}"
                record[name] = int(float(v))
            elif isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
                return f"{name}: a whole number, got {v!r}"
    try:
        rec = msgspec.convert(record, kind, strict=not flat)
    except msgspec.ValidationError as exc:
        msg = str(exc)
        if " - at `$." in msg:
            text, path = msg.rsplit(" - at `$.", 1)
            return f"{path.rstrip('`')}: {text}"
        return msg
    if isinstance(rec, SeqRow):
        if rec.levels is None:
            return None
        try:
            ends = [int(v) for v in rec.levels.split("/")]
        except ValueError:
            return "levels: '/'-separated whole numbers"
        rec = StepRecord(ts=rec.ts, replica=rec.replica,
                         seqs=[Seq(rec.request, rec.group, rec.shared, rec.private, ends)])
    if isinstance(rec, StepRecord):
        for i, s in enumerate(rec.seqs):
            if s.levels is not None:
                if len(s.levels) > limits.MAX_DEPTH:
                    return f"seqs[{i}].levels: at most {limits.MAX_DEPTH} levels (a workload's deepest tree)"
                if len(s.levels) != len(s.group.split("/")) or not s.levels or s.levels[-1] != s.shared:
                    return f"seqs[{i}].levels: one cumulative end per group of the chain, the last equal to shared"
                if any(b < a for a, b in zip(s.levels, s.levels[1:])) or min(s.levels) < 0:
                    return f"seqs[{i}].levels: ends must not decrease"
    else:
        groups = rec.groups if rec.groups is not None else rec.batch // rec.siblings
        if groups * rec.siblings > rec.batch:
            return "groups: groups x siblings exceeds batch"
    return None


def json_schema() -> dict:
    """The documented JSON Schema of a JSON Lines record (either form)."""
    (step, compact), defs = msgspec.json.schema_components((StepRecord, CompactRecord),
                                                           ref_template="#/$defs/{name}")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "cascade-plan batch log record (schema_version 1), one JSON object per line",
            "anyOf": [step, compact], "$defs": defs}
