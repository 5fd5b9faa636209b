"""The go/no-go verdict, and what it rests on.

The seed's step 2 (is the redundant prefix traffic comparable to the weights?) decides go / marginal /
no-go, and a model run that says cascade is slower overrides a favourable byte ratio. Three things
stop a confident verdict: a configuration that does not fit in memory (no verdict: why, and what would
fit), numbers that were not measured (the verdict names its basis), and a shape the measurements do not
cover (a range over the sources we have, and no verdict when the range straddles 1x)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.cost.memory_fit import MemoryFit

# Go/no-go thresholds on (redundant prefix bytes per step) / (weight bytes per step). The seed: "if
# the prefix term is not comparable to the weights, stop here". Comparable = at least half.
GO_RATIO = 0.5
MARGINAL_RATIO = 0.1
# A run speedup at least this large is never called negligible, whatever the byte ratio.
MARGINAL_SPEEDUP = 1.05

JUDGED = ("go", "marginal", "no-go")
HEADS = {"go": "Go", "marginal": "Marginal", "no-go": "No-go", "does-not-fit": "Does not fit",
         "undecided": "Cannot judge"}
# What a verdict rests on, by CostParams.mode; a measured source needs no tag (the label says which).
BASIS_TAG = {"default": "uncalibrated: default efficiencies, not measured kernels",
             "ideal": "ideal: bytes at peak bandwidth, no fixed costs; a bound, not a prediction"}


class Verdict(msgspec.Struct, frozen=True):
    redundant_prefix_bytes: float
    weight_bytes: float
    ratio: float
    level: str                      # go | marginal | no-go | does-not-fit | undecided
    text: str
    basis: str = "calibrated"       # CostParams.mode of the numbers behind it
    evidence: str | None = None     # measurements that back or undermine it
    speedup_range: tuple[float, float] | None = None   # run speedup over the sources, where extrapolated
    margin_error: float | None = None   # measured relative error of the run speedup behind it (0.05 = ±5%)
    margin_source: str | None = None    # where that error was measured, in words

    @property
    def judged(self) -> bool:
        return self.level in JUDGED

    def to_json(self) -> dict:
        return {"level": self.level, "judged": self.judged, "basis": self.basis, "ratio": self.ratio,
                "redundant_prefix_bytes": self.redundant_prefix_bytes, "text": self.text, "evidence": self.evidence,
                "speedup_range": list(self.speedup_range) if self.speedup_range else None,
                "margin": None if self.margin_error is None else {"error": self.margin_error,
                                                                  "source": self.margin_source}}


def range_tag(v: Verdict) -> str:
    """What a speedup range means, in one word shown beside it everywhere (tables, report, plots)."""
    return "uncalibrated" if v.basis == "default" else "extrapolated"


def speedup_words(v: Verdict, run_speedup: float) -> str:
    """The run speedup as a verdict would state it: 'a to b (uncalibrated|extrapolated)' where the
    numbers behind it are not measured for this shape, else one figure."""
    rng = v.speedup_range
    return f"{rng[0]:.2f}x to {rng[1]:.2f}x ({range_tag(v)})" if rng else f"{run_speedup:.2f}x"


def _head(level: str, basis: str) -> str:
    tag = BASIS_TAG.get(basis)
    return f"{HEADS[level]} ({tag})" if tag and level in JUDGED else HEADS[level]


def go_no_go(redundant: float, weights: float, run_speedup: float | None = None, basis: str = "calibrated") -> Verdict:
    """The seed's step 2: is the redundant prefix traffic comparable to the weight traffic? The model's
    run speedup is quoted in every verdict and overrides the byte ratio where they point different
    ways (slower, no gain, or a gain the byte ratio calls negligible), so the verdict never contradicts
    the speedup line printed beside it."""
    ratio = redundant / weights
    pct = f"{ratio:.2f}x the weight bytes"
    run = "" if run_speedup is None else f" The model puts the whole run at {run_speedup:.2f}x."
    if run_speedup is not None and run_speedup < 1.0 - 1e-9:
        level = "no-go"
        body = (f"the redundant prefix traffic per step is {pct}, and with the kernels' fixed costs "
                f"cascade is slower over the whole run ({run_speedup:.2f}x). Keep per-sequence attention.")
    elif run_speedup is not None and run_speedup <= 1.0 + 1e-9:
        level = "no-go"
        body = (f"the redundant prefix traffic per step is {pct}, and cascade gains nothing over the whole run "
                f"({run_speedup:.2f}x). Keep per-sequence attention.")
    elif ratio >= GO_RATIO:
        level = "go"
        body = (f"the redundant prefix traffic per step is {pct}, comparable to or above the weights, "
                f"so reading the prefix once per batch can cut the step substantially.{run} Measure it next.")
    elif ratio >= MARGINAL_RATIO or (run_speedup is not None and run_speedup >= MARGINAL_SPEEDUP):
        level = "marginal"
        body = (f"the redundant prefix traffic per step is {pct}.{run} Cascade can shave a little off "
                "the step; it is unlikely to be worth a new code path on its own.")
    else:
        level = "no-go"
        body = (f"the redundant prefix traffic per step is only {pct}, not comparable to the weights.{run} "
                "Stop here: cascade attention cannot move this workload's step time much.")
    return Verdict(redundant_prefix_bytes=redundant, weight_bytes=weights, ratio=ratio, level=level,
                   text=f"{_head(level, basis)}: {body}", basis=basis)


def does_not_fit(mem: "MemoryFit", redundant: float, weights: float, basis: str) -> Verdict:
    """No go/no-go for a configuration that cannot run: why, and what would."""
    alts = "; or ".join(mem.would_fit) if mem.would_fit else "none of a larger TP, a smaller dtype or a smaller batch"
    text = (f"{HEADS['does-not-fit']}: {mem.reason}. No go/no-go for a configuration that cannot run "
            f"(its times are what it would take if it could). What would fit: {alts}.")
    return Verdict(redundant_prefix_bytes=redundant, weight_bytes=weights, ratio=redundant / weights,
                   level="does-not-fit", text=text, basis=basis)


def with_evidence(v: Verdict, evidence: str) -> Verdict:
    """The same verdict with measurements that back or undermine it appended."""
    return msgspec.structs.replace(v, text=f"{v.text} {evidence}", evidence=evidence)


def extrapolated(v: Verdict, why: str, lo: float, hi: float, sources: str) -> Verdict:
    """A verdict on a shape outside the measurements: a range of run speedups over the sources we
    have; no verdict when the range straddles 1x (cascade could win or lose)."""
    rng = f"{lo:.2f}x to {hi:.2f}x"
    if lo < 1.0 <= hi:
        text = (f"{HEADS['undecided']}: {why}. Over {sources} the whole-run speedup lies anywhere from {rng}, "
                "so cascade could win or lose here. Measure this shape (`cascade-plan probe --workload FILE`, or "
                "`--model ...` with the same flags) before deciding.")
        return msgspec.structs.replace(v, level="undecided", text=text, speedup_range=(lo, hi), evidence=why)
    level = v.level if lo >= 1.0 else "no-go"
    text = (f"{HEADS[level]} (extrapolated: {why}): over {sources} the whole-run speedup is {rng}; "
            f"{'every source says cascade wins' if lo >= 1.0 else 'every source says cascade loses'}, "
            "but the size of the effect is not measured.")
    return msgspec.structs.replace(v, level=level, text=text, speedup_range=(lo, hi), evidence=why)


def clears_margin(run_speedup: float, error: float) -> bool:
    """A gain is real when the run speedup clears 1x by more than its measured relative error: the
    speedup divided by (1 + error) still exceeds 1x."""
    return run_speedup > 1.0 + error


def with_margin(v: Verdict, run_speedup: float, error: float, source: str) -> Verdict:
    """The verdict held against the measured error of the numbers behind it: a go whose run speedup
    does not clear 1x by more than that error becomes marginal, and says so."""
    pct = f"±{error:.1%}"
    out = msgspec.structs.replace(v, margin_error=error, margin_source=source)
    if v.level != "go":
        return out
    if clears_margin(run_speedup, error):
        return msgspec.structs.replace(out, text=f"{v.text} {run_speedup:.2f}x clears 1x by more than the measured "
                                                 f"error of these numbers ({pct}; {source}).")
    text = (f"{_head('marginal', v.basis)}: within the error of these numbers ({pct}). The model puts the whole run "
            f"at {run_speedup:.2f}x, and numbers like these were off by up to {pct} in speedup ({source}), so the "
            f"gain may not be real. The redundant prefix traffic per step is {v.ratio:.2f}x the weight bytes. Measure "
            "this workload on the GPU (`cascade-plan probe --workload`) before building on it.")
    return msgspec.structs.replace(out, level="marginal", text=text)
