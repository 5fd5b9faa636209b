"""The probe's options, defined once: ``python -m kernels_probe`` builds its argparse parser from them and
``cascade-plan probe`` its typer options, so both have the same names, help, defaults and bounds (a test
compares the two). Pure Python (no torch); the CLI reads it at start-up, so argparse and the grid are
imported only where they are used.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from cascade_plan.inputs.limits import MAX_SECONDS

if TYPE_CHECKING:
    import argparse

GRIDS = ("full", "coverage", "full+coverage", "regimes", "trees", "all")
STEP_SETS = ("default", "regimes")     # kernels_probe/steps/step_probe.py: step_set_shapes
MAX_PAGE_TOKENS = 4_096                 # tokens per KV page: every engine uses 1..256


class ProbeOption(msgspec.Struct, frozen=True):
    """One option: `name` is the Python parameter (and argparse dest); `kind` is "flag" (a bool switch),
    "value" (one value of `type`) or "repeat" (a value that may be given several times)."""

    name: str
    flag: str
    help: str
    kind: str = "value"
    type: Callable[[str], Any] = str
    default: Any = None
    required: bool = False
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None


class Bounded:
    """argparse type: `kind`(text) within [min, max], else argparse's one-line usage error (exit 2)."""

    def __init__(self, kind: Callable[[str], Any], lo: float | None, hi: float | None):
        self.kind, self.min, self.max = kind, lo, hi
        self.__name__ = getattr(kind, "__name__", "value")    # argparse names the type in its errors

    def __call__(self, text: str):
        import argparse

        try:
            v = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {self.__name__} value: {text!r}") from None
        if (self.min is not None and v < self.min) or (self.max is not None and v > self.max):
            lo = "" if self.min is None else f"{self.min:g}<="
            hi = "" if self.max is None else f"<={self.max:g}"
            raise argparse.ArgumentTypeError(f"{text} is not in the range {lo}x{hi}")
        return v


_OPTIONS = (
    ProbeOption("out", "--out", "Calibration JSON to write (atomically).", type=pathlib.Path, required=True,
                metavar="FILE"),
    ProbeOption("quick", "--quick", "A small grid that finishes in under a minute.", kind="flag", default=False),
    ProbeOption("backend", "--backend", "Backends to time: triton (ours), torch, flashinfer. Repeat the option; "
                                        "default all available.", kind="repeat", metavar="NAME"),
    ProbeOption("page_size", "--page-size", "KV page size in tokens.", type=int, default=16, min=1,
                max=MAX_PAGE_TOKENS, metavar="N"),
    ProbeOption("time_budget", "--time-budget", "Stop timing new grid points after this many seconds (what was "
                                                "measured is kept).", type=float, min=1, max=MAX_SECONDS,
                metavar="SECONDS"),
    ProbeOption("step", "--step", "Also measure the rest of the decode step: weight GEMMs (bf16, fp8), engine glue "
                                  "(fused and torch), NCCL all-reduce (2+ GPUs), and whole model-shaped decode steps "
                                  "per attention backend (validation only).", kind="flag", default=False),
    ProbeOption("grid", "--grid", "Attention grid: full, coverage (fp8 KV on every backend, query groups 1-16, "
                                  "batches to 1024, 64K prefix), full+coverage, or regimes (head dims 64 and 256, "
                                  "query groups 6 and 12, 128K-256K prefixes, 8K suffixes, 1,024 sequences on "
                                  "small layers), trees (three-level prefix trees: a root prompt shared by every "
                                  "sequence, group prefixes, suffixes), or all (the four).", default="full",
                choices=GRIDS),
    ProbeOption("merge_into", "--merge-into", "An existing calibration file: --out gets its rows plus this run's (a "
                                              "re-measured point replaces the old row); then run `cascade-plan "
                                              "calibrate` on it.", type=pathlib.Path, metavar="FILE"),
    # python -m kernels_probe only (cascade-plan probe derives the plan itself, from --workload)
    ProbeOption("no_attention", "--no-attention", "Skip the attention grid (with --step).", kind="flag",
                default=False),
    ProbeOption("plan", "--plan", "A workload probe plan (JSON of WorkloadProbePlan.describe(), as `cascade-plan "
                                  "probe --workload` derives it): measure exactly that workload's shapes.",
                type=pathlib.Path, metavar="FILE"),
    ProbeOption("mla", "--mla", "Also MLA rows (FlashInfer's MLA wrapper, DeepSeek-V3 shape).", kind="flag",
                default=False),
    ProbeOption("mla_grid", "--mla-grid", "With --mla: the first run's 128-head grid, or query heads per GPU at TP "
                                          "8/4/2/1 over batch 1-1024, prefix 1K-32K, suffix 1-2048, bf16 and fp8 "
                                          "latent.", default="shipped", choices=("shipped", "tp")),
    ProbeOption("no_held_out", "--no-held-out", "With --step: skip the held-out model steps.", kind="flag",
                default=False),
    ProbeOption("only_missing", "--only-missing", "With --merge-into FILE: time only the grid's configurations some "
                                                  "requested backend has no row of in FILE (finish a run its time "
                                                  "budget cut short).", kind="flag", default=False),
    ProbeOption("step_set", "--step-set",
                "With --step: default (Llama-3-8B's GEMMs and glue at TP 1 and 2, the stepped workloads, held-out "
                "steps, multi-GPU rows), or regimes (GEMMs, glue and layer graphs of small models at hidden "
                "1024-3072, M to 1024, and held-out steps at 1,024 sequences, head dims 64 and 256, a 128K prefix, "
                "4K suffixes).", default="default", choices=STEP_SETS),
)
PROBE_OPTIONS: dict[str, ProbeOption] = {o.name: o for o in _OPTIONS}
# The options both front ends have; the rest are python -m kernels_probe's alone.
SHARED = ("out", "quick", "backend", "page_size", "time_budget", "step", "grid", "merge_into")
MODULE_ORDER = ("out", "quick", "backend", "page_size", "step", "no_attention", "time_budget", "grid", "plan",
                "mla", "mla_grid", "no_held_out", "step_set", "merge_into", "only_missing")


def add_to_parser(ap: argparse.ArgumentParser, name: str) -> None:
    o = PROBE_OPTIONS[name]
    if o.kind == "flag":
        ap.add_argument(o.flag, dest=o.name, action="store_true", help=o.help)
        return
    kw: dict[str, Any] = {"dest": o.name, "help": o.help, "metavar": o.metavar, "default": o.default}
    if o.choices:
        kw["choices"] = o.choices
    kw["type"] = Bounded(o.type, o.min, o.max) if (o.min is not None or o.max is not None) else o.type
    if o.kind == "repeat":
        kw["action"] = "append"
    if o.required:
        kw["required"] = True
    ap.add_argument(o.flag, **kw)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kernels_probe", description=description)
    for name in MODULE_ORDER:
        add_to_parser(ap, name)
    return ap


def command_parser(module: str, doc: str | None, *, budget_s: float) -> argparse.ArgumentParser:
    """The parser of a probe command beside this one (python -m kernels_probe.moe.moe_run, .moe_steps): described by
    the first paragraph of its module's doc, with the options they all have (--out FILE, --quick, --budget-s S)."""
    import argparse

    ap = argparse.ArgumentParser(prog=f"python -m {module}", description=(doc or "").split("\n\n")[0])
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget-s", type=float, default=budget_s, help="stop starting new points after this long")
    return ap


def check_choices(backends: list[str] | None, grid: str) -> str | None:
    """The one-line error for an unknown backend or grid (None when both are known)."""
    from kernels_probe.attention.grid import BACKENDS

    unknown = sorted(set(backends or []) - set(BACKENDS))
    if unknown:
        return f"--backend: unknown backend {unknown[0]!r}: use {', '.join(BACKENDS)}"
    if grid not in GRIDS:
        return f"--grid: unknown grid {grid!r}: use {', '.join(GRIDS)}"
    return None
