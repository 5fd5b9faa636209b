"""Which GPUs, tensor-parallel degree, batch, kernels and KV dtype meet a latency or rollout budget, with
cascade attention on and off.

Sharing counts twice here. In time: a cascade step reads each shared prefix once (the step model prices
both modes). In memory: with prefix caching each shared prefix is stored once, so more sibling groups fit
at once and the batch runs in fewer waves. Every candidate is a whole configuration priced exactly as
`estimate` prices it: the workload's batch split into waves of whole sibling groups (batch_units.py), each
wave a workload of its own whose memory is `estimate`'s memory answer and whose mean step (run time over
decode steps) is `estimate`'s. The waves run one after another; the rollout is their sum.

Numbers carry their source. A candidate priced from the default efficiencies (no calibration for that GPU
or KV dtype) meets a target only if every time its measured error allows does (time_margin.py)."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import numpy as np

from cascade_plan.cost.capacity import DEFAULT_RESERVE_FRACTION, stored_weight_bytes
from cascade_plan.cost.cost_model import gpu_shape
from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.estimate import with_routing
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.cost.memory_fit import memory_fit
from cascade_plan.cost.run_load import POINT_BUDGET, RunGroup, group_runs, group_step_times
from cascade_plan.errors import InputError
from cascade_plan.inputs.choices import ParamsChoice
from cascade_plan.inputs.hardware import HardwareProfile
from cascade_plan.inputs.workload import Scenario
from cascade_plan.planning.time_margin import TimeErrors
from cascade_plan.serving.batch_units import (
    MAX_DISTINCT_WAVES,
    MAX_WAVES_WALKED,
    BatchUnits,
    batch_units,
    wave_tree,
    waves_of,
)

DEFAULT_TPS = (1, 2, 4, 8)
# Work of a whole search, counted before anything is priced, in node x segment cells of each run (~1 us each on
# one core for a wide forest) plus its evaluated steps, five to a cell (all waves of a configuration share one
# pass: the 8,192 steps of short-prompt-long-reasoning's default search weigh 2.5M, and it answers in ~2.5 s).
# 5M keeps the widest search a user may ask within about five seconds.
MAX_SEARCH_CELLS = 5_000_000
STEPS_PER_CELL = 5
# The kernels engines ship (FlashInfer's, on its default and FA2 prefill paths) and the probe's own (what is
# attainable); torch's flash attention reads duplicated prefixes without a block table and serves as a baseline.
DEFAULT_BACKENDS = ("flashinfer", "flashinfer-fa2", "triton")
UNCALIBRATED_BACKEND = "default"
SOURCES = {"probe": "calibrated", "aic": "imported"}
TARGET_WORDS = {"tpot_s": "TPOT", "worst_step_s": "slowest step", "rollout_s": "rollout",
                "min_tokens_per_s": "tokens/s"}


class Targets(msgspec.Struct, frozen=True):
    tpot_s: float | None = None             # mean decode step
    worst_step_s: float | None = None       # slowest decode step
    rollout_s: float | None = None          # the workload's whole batch, waves included
    min_tokens_per_s: float | None = None   # output tokens of the batch over its rollout

    def given(self) -> dict[str, float]:
        return {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None}


class SearchSpace(msgspec.Struct, frozen=True):
    hardware: tuple[HardwareProfile, ...]
    tps: tuple[int, ...] | None = None           # None: DEFAULT_TPS where the model splits and its weights fit
    backends: tuple[str, ...] | None = None      # None: DEFAULT_BACKENDS, those calibrated on each GPU
    kv_dtypes: tuple[str, ...] = ("bf16", "fp8")
    weight_dtypes: tuple[str, ...] | None = None  # None: the workload's
    max_gpus: int | None = None
    reserve_fraction: float = DEFAULT_RESERVE_FRACTION


class Candidate(msgspec.Struct, frozen=True):
    hardware: str
    tp: int
    backend: str
    kv_dtype: str
    weight_dtype: str
    cascade: bool
    sequences: int                  # decoding at once (the largest wave)
    waves: int
    tpot_s: float                   # mean step of the first wave: its run time over its decode steps
    worst_step_s: float
    rollout_s: float
    tokens_per_s: float
    gpus: int
    fits: bool
    meets: bool
    source: str                     # calibrated | imported | uncalibrated
    margin: dict                    # {error, source} of the speedup (as estimate's verdict), time_range
    numbers: str = ""               # probe/triton, aic/flashinfer, default
    misses: tuple[tuple[str, float], ...] = ()   # (target, value over bound: above 1 misses), worst case for ranges
    units: int = 0                  # sibling groups per (first) wave

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def worst_miss(self) -> float:
        return max((r for _, r in self.misses), default=0.0)

    def to_json(self) -> dict:
        return {f: getattr(self, f) for f in JSON_FIELDS}


JSON_FIELDS = ("hardware", "tp", "backend", "kv_dtype", "weight_dtype", "cascade", "sequences", "waves", "tpot_s",
               "worst_step_s", "rollout_s", "tokens_per_s", "gpus", "fits", "meets", "source", "margin")


class SearchResult(msgspec.Struct, frozen=True):
    workload: str
    model: str
    targets: Targets
    candidates: list[Candidate]     # best first
    notes: list[str]
    units: BatchUnits
    profiles: dict[str, HardwareProfile]    # the searched GPUs by id

    @property
    def best(self) -> Candidate | None:
        return next((c for c in self.candidates if c.meets), None)

    def best_with(self, cascade: bool) -> Candidate | None:
        return next((c for c in self.candidates if c.meets and c.cascade == cascade), None)

    @property
    def closest(self) -> Candidate | None:
        """The fitting candidate that misses its targets by the least (None when nothing fits)."""
        fitting = [c for c in self.candidates if c.fits]
        return min(fitting, key=lambda c: (c.worst_miss, c.gpus), default=None)


def rank_key(c: Candidate) -> tuple:
    """Those that meet every target first, fewest GPUs, then the most tokens/s per GPU."""
    return (not c.meets, not c.fits, c.gpus, -c.tokens_per_s_per_gpu, c.tpot_s)


def default_hardware_ids() -> list[str]:
    """Every built-in GPU with a calibration shipped for it (known from the files' names)."""
    from cascade_plan.inputs.hardware import builtin_hardware_ids
    from cascade_plan.planning.params_select import shipped_source

    return [h for h in builtin_hardware_ids() if shipped_source(h) != "default"]


def _tps(scn: Scenario, hw: HardwareProfile, wd: str, space: SearchSpace, notes: list[str]) -> list[int]:
    m = scn.model
    if space.tps is not None:
        bad = [t for t in space.tps if m.num_q_heads % t]
        if bad:
            raise InputError(f"--tp: {bad[0]} does not divide the {m.num_q_heads} query heads of {m.id}")
        tps = list(space.tps)
    else:
        tps = [t for t in DEFAULT_TPS if m.num_q_heads % t == 0]
    if space.max_gpus is not None:
        tps = [t for t in tps if t <= space.max_gpus]
    usable = hw.memory_bytes * (1 - space.reserve_fraction)
    fit = [t for t in tps if stored_weight_bytes(msgspec.structs.replace(scn, tp=t, weight_dtype=wd)) <= usable]
    if len(fit) < len(tps):
        left = sorted(set(tps) - set(fit))
        notes.append(f"{hw.id}: {wd} weights do not fit at TP {', '.join(map(str, left))} "
                     f"({stored_weight_bytes(msgspec.structs.replace(scn, tp=left[0], weight_dtype=wd)) / 1e9:,.0f} "
                     f"GB per GPU at TP {left[0]})")
    return fit


class _Priced(msgspec.Struct, frozen=True):
    run_s: dict[bool, float]        # per mode (cascade True/False): the wave's decode time
    worst_s: dict[bool, float]
    decode_steps: int
    sequences: int


def _price(groups: list[RunGroup], n: int, scn: Scenario, params: CostParams) -> list[_Priced]:
    """Each wave's run (`n` waves in `groups`), priced as `estimate` prices it, each group in one pass."""
    g = gpu_shape(scn.model, scn.hardware, scn.kv_dtype, scn.weight_dtype, scn.tp)
    out: list[_Priced | None] = [None] * n
    for group in groups:
        times = group_step_times(group, g, scn.model, scn.weight_dtype, scn.tp, params, scn.prefix_caching)
        for i, flat, steps, (ps, cas) in zip(group.index, group.flats, group.decode_steps, times):
            out[i] = _Priced(run_s={True: float((cas * group.weights).sum()), False: float((ps * group.weights).sum())},
                             worst_s={True: float(np.max(cas)), False: float(np.max(ps))}, decode_steps=steps,
                             sequences=flat.total_seqs)
    return [p for p in out if p is not None]


class _Kernels(msgspec.Struct, frozen=True):
    backend: str
    params: CostParams
    source: str
    margin: dict


def _kernels(scn: Scenario, space: SearchSpace, notes: list[str]) -> list[_Kernels]:
    """The kernels a GPU and KV dtype are priced with: each asked-for backend its calibration measured with
    that KV dtype, else the default efficiencies (uncalibrated)."""
    from cascade_plan.calibration.calibration_file import find_committed
    from cascade_plan.planning.params_select import select_params
    from cascade_plan.planning.speedup_margin import speedup_margin, step_kind

    hw, kv = scn.hardware, scn.kv_dtype
    probe = find_committed(hw)
    measured = set((probe.fits.kv_dtypes.get(kv) or {}) if probe is not None and probe.fits is not None else ())
    wanted = space.backends or DEFAULT_BACKENDS
    out = []

    def add(backend: str, choice: ParamsChoice) -> None:     # choice: what candidate_choice gives estimate
        params = with_routing(select_params(scn, choice), scn.moe_routing)
        m = speedup_margin(params, scn.model.id, step_kind(scn.model))
        out.append(_Kernels(backend=backend, params=params, source=SOURCES.get(params.origin or "", "uncalibrated"),
                            margin={"error": m.error if m else None, "source": m.source if m else None,
                                    "time_range": None}))

    for b in wanted:
        if b in measured:
            add(b, ParamsChoice(backend=b))
    if not out:
        if probe is not None:
            notes.append(f"{hw.id}: its calibration measured no {kv} KV with {', '.join(wanted)}: "
                         f"priced with the default efficiencies (uncalibrated)")
        add(UNCALIBRATED_BACKEND, ParamsChoice(uncalibrated=True))
    return out


def check_search_size(scn: Scenario, units: BatchUnits, pricings: int) -> None:
    """Refuse, before pricing anything, a search whose configurations x batch sizes x the tree's node x segment
    cells would take more than seconds (a forest of thousands of distinct prompts on every GPU); the same tree
    searched narrower, or `estimate`d, is not refused."""
    flat = flatten(scn.tree)
    nodes = max(1, flat.node_tokens.size) * np.unique(flat.leaf_output).size
    cells = nodes + min(flat.max_output, POINT_BUDGET) / STEPS_PER_CELL
    total = int(pricings * (units.total.bit_length() + 2) * cells)
    if total > MAX_SEARCH_CELLS:
        raise InputError(f"this search prices about {total:,} node x step cells ({pricings:,} GPU x TP x KV dtype x "
                         f"kernel configurations of a {flat.node_tokens.size:,}-node tree), more than the "
                         f"{MAX_SEARCH_CELLS:,} one search handles in seconds: narrow it with --hardware, --tp, "
                         "--kv-dtype or --backend, or `estimate` one configuration")


def concurrency_ladder(scn: Scenario, units: BatchUnits, reserve: float) -> list[tuple[int, bool]]:
    """Sibling groups decoding at once to try: powers of two up to the most that fit, that most, and the
    whole batch (shown once when it does not fit); each with whether its waves fit in memory."""
    def fits(k: int) -> bool:
        shapes = waves_of(units, k)
        return shapes is not None and all(
            memory_fit(msgspec.structs.replace(scn, tree=wave_tree(scn.tree, units, comp)), reserve,
                       alternatives=False).fits for comp, _ in shapes)

    total = units.total
    lo, hi = 0, total            # the most units that fit at once: fits(lo), not fits(hi + 1)
    if fits(total):
        lo = total
    else:
        hi = total - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
    ks = {1 << i for i in range(total.bit_length()) if (1 << i) <= lo} | ({lo} if lo else set()) | {total}
    # a forest's waves differ in shape, so more units at once need not need more memory: each size is checked
    return [(k, k <= lo if units.own else fits(k)) for k in sorted(ks)]


def search(scn: Scenario, space: SearchSpace, targets: Targets,
           progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Every candidate configuration for the workload, ranked (rank_key)."""
    from cascade_plan.planning.time_margin import default_time_errors

    if not space.hardware:
        raise InputError("--hardware: no GPU to search")
    units = batch_units(scn.tree)
    notes: list[str] = []
    total_out = float((lambda f: (f.leaf_seqs * f.leaf_output).sum())(flatten(scn.tree)))
    groups: dict[tuple, list[RunGroup]] = {}
    configs = [(hw, wd, kv) for hw in space.hardware for wd in (space.weight_dtypes or (scn.weight_dtype,))
               for kv in space.kv_dtypes]
    pricings = len(configs) * len(space.tps or DEFAULT_TPS) * len(space.backends or DEFAULT_BACKENDS)
    check_search_size(scn, units, pricings)
    cands: list[Candidate] = []
    unsearched: set[int] = set()
    for i, (hw, wd, kv) in enumerate(configs):
        base = msgspec.structs.replace(scn, hardware=hw, weight_dtype=wd, kv_dtype=kv)
        tps = _tps(base, hw, wd, space, notes)
        kernels = _kernels(base, space, notes) if tps else []
        for tp in tps:
            at_tp = msgspec.structs.replace(base, tp=tp)
            plans = []                  # (units at once, fits, [(composition, repeats)])
            for k, fits in concurrency_ladder(at_tp, units, space.reserve_fraction):
                shapes = waves_of(units, k)
                if shapes is None:
                    unsearched.add(k)
                    continue
                plans.append((k, fits, shapes))
            comps = tuple(dict.fromkeys(comp for _, _, shapes in plans for comp, _ in shapes))
            if comps not in groups:        # the waves' loads: the same on every GPU, TP and kernel
                groups[comps] = group_runs([flatten(wave_tree(scn.tree, units, c)) for c in comps])
            for kern in kernels:
                priced = dict(zip(comps, _price(groups[comps], len(comps), at_tp, kern.params)))
                errors = default_time_errors() if kern.source == "uncalibrated" else None
                cands += [_candidate(at_tp, kern, k, fits, [(priced[c], n) for c, n in shapes], cascade, total_out,
                                     targets, errors)
                          for k, fits, shapes in plans for cascade in (True, False)]
        if progress is not None:
            progress(i + 1, len(configs))
    if unsearched:
        sizes = ", ".join(f"{k:,}" for k in sorted(unsearched))
        notes.append(f"{sizes} sibling groups at once: each makes more than {MAX_DISTINCT_WAVES} distinct waves of "
                     f"this forest (or more than {MAX_WAVES_WALKED:,} waves), so those batch sizes were not searched")
    return SearchResult(workload=scn.name, model=scn.model.id, targets=targets,
                        candidates=sorted(cands, key=rank_key), notes=list(dict.fromkeys(notes)), units=units,
                        profiles={hw.id: hw for hw in space.hardware})


def _candidate(scn: Scenario, kern: _Kernels, k: int, fits: bool, priced: list[tuple[_Priced, int]], cascade: bool,
               total_out: float, targets: Targets, errors: dict[bool, TimeErrors] | None) -> Candidate:
    first = priced[0][0]
    rollout = sum(p.run_s[cascade] * n for p, n in priced)
    values = {"tpot_s": first.run_s[cascade] / first.decode_steps,
              "worst_step_s": max(p.worst_s[cascade] for p, _ in priced), "rollout_s": rollout}
    margin = kern.margin
    slow = dict(values)
    if errors is not None and errors.get(cascade) is not None:
        e = errors[cascade]
        lo, hi = e.time_range(1.0)
        margin = {**margin, "time_range": [lo, hi], "time_source": e.source}
        slow = {name: v * hi for name, v in values.items()}
    misses = []
    for name, bound in targets.given().items():
        if name == "min_tokens_per_s":
            misses.append((name, bound / (total_out / slow["rollout_s"])))
        else:
            misses.append((name, slow[name] / bound))
    return Candidate(
        hardware=scn.hardware.id, tp=scn.tp, backend=kern.backend, kv_dtype=scn.kv_dtype,
        weight_dtype=scn.weight_dtype, cascade=cascade, sequences=max(p.sequences for p, _ in priced),
        waves=sum(n for _, n in priced), tpot_s=values["tpot_s"], worst_step_s=values["worst_step_s"],
        rollout_s=rollout, tokens_per_s=total_out / rollout, gpus=scn.tp, fits=fits,
        meets=fits and all(r <= 1.0 for _, r in misses), source=kern.source, margin=margin,
        numbers=kern.params.numbers, misses=tuple(misses), units=k)


def candidate_scenario(scn: Scenario, result: SearchResult, c: Candidate) -> Scenario:
    """The workload one candidate's first wave is: what `estimate` prices to give the same numbers."""
    comp = (waves_of(result.units, c.units) or [((), 0)])[0][0]
    return msgspec.structs.replace(scn, hardware=result.profiles[c.hardware], tp=c.tp, kv_dtype=c.kv_dtype,
                                   weight_dtype=c.weight_dtype, tree=wave_tree(scn.tree, result.units, comp))


def candidate_choice(c: Candidate) -> ParamsChoice:
    return (ParamsChoice(uncalibrated=True) if c.backend == UNCALIBRATED_BACKEND
            else ParamsChoice(backend=c.backend))


class OwnRun(msgspec.Struct, frozen=True):
    """The workload's own configuration run as the search runs it: the most sibling groups that fit at once."""
    tpot_s: float                   # mean step of the first wave
    rollout_s: float                # every wave, one after another
    waves: int
    sequences: int                  # decoding at once


def own_run(scn: Scenario, params: CostParams, reserve: float = DEFAULT_RESERVE_FRACTION) -> dict[bool, OwnRun]:
    """Per mode (cascade True / False), the workload's own GPU, TP, dtypes and numbers in waves that fit (the
    whole batch at once where it fits; priced as if it fitted where not even one sibling group does)."""
    units = batch_units(scn.tree)
    fitting = [k for k, fits in concurrency_ladder(scn, units, reserve) if fits]
    shapes = waves_of(units, max(fitting, default=units.total)) or waves_of(units, units.total) or []
    comps = [c for c, _ in shapes]
    priced = _price(group_runs([flatten(wave_tree(scn.tree, units, c)) for c in comps]), len(comps), scn,
                    with_routing(params, scn.moe_routing))
    first = priced[0]
    return {cascade: OwnRun(tpot_s=first.run_s[cascade] / first.decode_steps,
                            rollout_s=sum(p.run_s[cascade] * n for p, (_, n) in zip(priced, shapes)),
                            waves=sum(n for _, n in shapes), sequences=max(p.sequences for p in priced))
            for cascade in (True, False)}
