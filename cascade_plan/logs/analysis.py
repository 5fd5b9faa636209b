"""The seed's question over a log: how much sharing the engines saw, per replica and overall, and
where cascade attention would have paid under the current model and calibration."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cascade_plan.envelope import envelope
from cascade_plan.inputs import limits
from cascade_plan.logs.bad_lines import BadRecord
from cascade_plan.logs.duck_reader import LogTables
from cascade_plan.logs.engine_share import EngineShare
from cascade_plan.logs.log_costs import StepTimes
from cascade_plan.logs.vllm_logged import LoggedGate

QUANTILES = (0.1, 0.5, 0.9, 0.99)
# Per-replica tables are kept for a fleet of up to this many replicas (route's bound); a log with more
# is analysed overall only, and says so: its per-replica figures would be a larger output than the log.
MAX_REPLICA_TABLES = limits.MAX_REPLICAS
# name -> (unit, what it is), one value per logged step
METRICS = {
    "batch": ("sequences", "sequences decoding in the step"),
    "groups": ("groups", "sibling groups (distinct innermost shared prefixes)"),
    "siblings": ("sequences", "sequences per sibling group (mean over the step's groups)"),
    "prefix_tokens": ("tokens", "shared-prefix tokens per sharing sequence (mean over the step)"),
    "private_tokens": ("tokens", "private context tokens per sequence (mean over the step)"),
    "common_prefix_tokens": ("tokens", "prefix shared by every sequence of the step (all vLLM can cascade)"),
}


@dataclass(frozen=True)
class Distribution:
    mean: float
    quantiles: dict[float, float]
    max: float

    def to_json(self) -> dict:
        return {"mean": self.mean, **{f"p{round(q * 100)}": v for q, v in self.quantiles.items()}, "max": self.max}


@dataclass(frozen=True)
class LogVerdict:
    steps: int
    per_sequence_s: float          # decode time with per-sequence attention throughout
    cascade_s: float               # with cascade attention throughout
    best_s: float                  # cascade where it pays, per-sequence elsewhere
    steps_paying: int
    time_paying_s: float           # per-sequence time of the steps where cascade pays

    @property
    def share_steps_paying(self) -> float:
        return self.steps_paying / self.steps if self.steps else 0.0

    @property
    def share_time_paying(self) -> float:
        return self.time_paying_s / self.per_sequence_s if self.per_sequence_s else 0.0

    @property
    def saving_s(self) -> float:
        return self.per_sequence_s - self.best_s

    @property
    def saving_fraction(self) -> float:
        return self.saving_s / self.per_sequence_s if self.per_sequence_s else 0.0

    @property
    def speedup(self) -> float:
        """Always-cascade: total per-sequence time over total cascade time (estimate's run speedup)."""
        return self.per_sequence_s / self.cascade_s if self.cascade_s else float("nan")

    def to_json(self) -> dict:
        return {"steps": self.steps, "per_sequence_s": self.per_sequence_s, "cascade_s": self.cascade_s,
                "best_s": self.best_s, "speedup": self.speedup,
                "best_speedup": self.per_sequence_s / self.best_s if self.best_s else float("nan"),
                "steps_where_cascade_pays": self.steps_paying,
                "share_of_steps_where_cascade_pays": self.share_steps_paying,
                "share_of_decode_time_where_cascade_pays": self.share_time_paying,
                "projected_saving_s": self.saving_s, "projected_saving_fraction": self.saving_fraction}


@dataclass
class Analysis:
    tables: LogTables
    times: StepTimes
    metrics: dict[str, np.ndarray]
    overall: dict[str, Distribution]
    per_replica: dict[str, dict[str, Distribution]]
    verdict: LogVerdict
    verdict_per_replica: dict[str, LogVerdict]
    engine: EngineShare
    bad: list[BadRecord] = field(default_factory=list)
    vllm_logged: LoggedGate | None = None    # vLLM's own gate input, where the log carries it
    replica_names: list[str] = field(default_factory=list)     # every replica, sorted (tables or not)

    @property
    def per_replica_left_out(self) -> bool:
        return len(self.replica_names) > len(self.per_replica)

    @property
    def records(self) -> int:
        return sum(r for _, r, _ in self.tables.files)

    @property
    def malformed(self) -> int:
        return sum(m for _, _, m in self.tables.files)


def step_metrics(t: LogTables, common_prefix_tokens: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "batch": t.seqs,
            "groups": t.groups,
            "siblings": np.where(t.groups > 0, t.shared_seqs / np.maximum(t.groups, 1), 0.0),
            "prefix_tokens": np.where(t.shared_seqs > 0, t.ps_prefix_tokens / np.maximum(t.shared_seqs, 1), 0.0),
            "private_tokens": np.where(t.seqs > 0, t.suffix_tokens / np.maximum(t.seqs, 1), 0.0),
            "common_prefix_tokens": common_prefix_tokens,
        }


def distribution(x: np.ndarray) -> Distribution:
    if x.size == 0:
        return Distribution(float("nan"), {q: float("nan") for q in QUANTILES}, float("nan"))
    qs = np.quantile(x, QUANTILES)
    return Distribution(float(x.mean()), dict(zip(QUANTILES, map(float, qs))), float(x.max()))


def verdict(times: StepTimes, mask: np.ndarray | slice = slice(None)) -> LogVerdict:
    ps, cas = times.per_sequence_s[mask], times.cascade_s[mask]
    pays = cas < ps
    return LogVerdict(steps=int(ps.size), per_sequence_s=float(ps.sum()), cascade_s=float(cas.sum()),
                   best_s=float(np.minimum(ps, cas).sum()), steps_paying=int(pays.sum()),
                   time_paying_s=float(ps[pays].sum()))


def _group_quantiles(values: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """np.quantile's default ('linear') of each group of `values` (sorted within each group, groups
    contiguous at `starts`), for every group at once, with numpy's own index and interpolation
    arithmetic, so each figure is the one np.quantile gives for that group alone."""
    n = counts.astype(np.float64)
    out = []
    for q in QUANTILES:
        virtual = (n - 1) * q                                    # numpy's 'linear' virtual index
        below = np.floor(virtual)
        top = virtual >= n - 1                                   # numpy takes the last value twice there
        lo = np.where(top, n - 1, below).astype(np.int64)
        hi = np.where(top, n - 1, below + 1).astype(np.int64)
        gamma = virtual - np.where(top, -1.0, below)
        a, b = values[starts + lo], values[starts + hi]
        diff = b - a
        res = a + diff * gamma                                   # numpy's _lerp
        high = gamma >= 0.5
        res[high] = (b - diff * (1 - gamma))[high]
        out.append(res)
    return out


def _by_replica(t: LogTables, m: dict[str, np.ndarray],
                times: StepTimes) -> tuple[dict[str, dict[str, Distribution]], dict[str, LogVerdict]]:
    """Per-replica distributions and verdicts in a few sorts over the steps (never one pass over the
    steps per replica)."""
    names, inv = np.unique(t.replica, return_inverse=True)
    counts = np.bincount(inv, minlength=names.size)
    starts = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
    order = np.argsort(inv, kind="stable")
    dists: dict[str, list[Distribution]] = {}
    for key, x in m.items():
        x = np.asarray(x, dtype=float)
        sorted_x = x[np.lexsort((x, inv))]
        means = (np.add.reduceat(x[order], starts) / counts).tolist()
        qs = [v.tolist() for v in _group_quantiles(sorted_x, starts, counts)]
        maxs = np.maximum.reduceat(sorted_x, starts).tolist()
        dists[key] = [Distribution(mean, dict(zip(QUANTILES, qv)), mx) for mean, *qv, mx in zip(means, *qs, maxs)]
    ps, cas = times.per_sequence_s[order], times.cascade_s[order]
    pays = cas < ps
    sums = [np.add.reduceat(v, starts).tolist() for v in (ps, cas, np.minimum(ps, cas), np.where(pays, ps, 0.0))]
    paying = np.add.reduceat(pays.astype(np.int64), starts).tolist()
    per_replica = {str(r): {k: dists[k][i] for k in m} for i, r in enumerate(names)}
    verdicts = {str(r): LogVerdict(steps=int(counts[i]), per_sequence_s=sums[0][i], cascade_s=sums[1][i],
                                best_s=sums[2][i], steps_paying=paying[i], time_paying_s=sums[3][i])
                for i, r in enumerate(names)}
    return per_replica, verdicts


def analyze_tables(t: LogTables, times: StepTimes, engine: EngineShare,
                   bad: list[BadRecord] | None = None) -> Analysis:
    m = step_metrics(t, engine.common_prefix_tokens)
    names = [str(r) for r in np.unique(t.replica)] if t.steps else []
    keep = 0 < len(names) <= MAX_REPLICA_TABLES
    per_replica, v_rep = _by_replica(t, m, times) if keep else ({}, {})
    return Analysis(tables=t, times=times, metrics=m, overall={k: distribution(v) for k, v in m.items()},
                    per_replica=per_replica, verdict=verdict(times), verdict_per_replica=v_rep, engine=engine,
                    bad=bad or [], replica_names=names)


def to_json(a: Analysis, header: dict) -> dict:
    t = a.tables
    return {
        **envelope(header),
        "files": [{"file": f, "records": r, "malformed": m, "form": t.forms.get(f)} for f, r, m in t.files],
        "records": a.records, "malformed": a.malformed,
        "malformed_examples": [{"file": b.file, "line": b.line, "reason": b.reason} for b in a.bad],
        "steps": t.steps, "replicas": a.replica_names, "requests": int(t.request_steps.size),
        "per_replica_left_out": (f"{len(a.replica_names):,} replicas: per-replica tables are kept for up to "
                                 f"{MAX_REPLICA_TABLES:,}" if a.per_replica_left_out else None),
        "metrics": {k: {"unit": u, "what": w} for k, (u, w) in METRICS.items()},
        "distributions": {"overall": {k: d.to_json() for k, d in a.overall.items()},
                          "per_replica": {r: {k: d.to_json() for k, d in ds.items()}
                                          for r, ds in a.per_replica.items()}},
        "decode_time": {"overall": a.verdict.to_json(),
                        "per_replica": {r: v.to_json() for r, v in a.verdict_per_replica.items()}},
        "vllm": a.engine.to_json(a.times.pays),
        "vllm_logged": a.vllm_logged.to_json() if a.vllm_logged is not None else None,
    }
