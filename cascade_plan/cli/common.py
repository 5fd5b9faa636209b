"""Pieces every command shares: option types, error handling, JSON output, scenario from options."""

from __future__ import annotations

import enum
import functools
import inspect
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import msgspec
import typer

from cascade_plan.errors import InputError
from cascade_plan.inputs.limits import MAX_CALIBRATION_BYTES, MAX_COPIES
from cascade_plan.inputs.model_presets import PRESETS
from cascade_plan.inputs.yaml_source import read_bytes_bounded

if TYPE_CHECKING:  # pragma: no cover
    from cascade_plan.inputs.workload import Scenario


class KvDtypeOpt(str, enum.Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"
    int4 = "int4"


class KvCacheDtypeChoice(str, enum.Enum):
    """What --kv-dtype / --kv-cache-dtype accept: the planner's dtypes and vLLM's spellings of them."""
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    fp8_e4m3 = "fp8_e4m3"
    fp8_e5m2 = "fp8_e5m2"
    int8 = "int8"
    int4 = "int4"
    auto = "auto"


#: vLLM's --kv-cache-dtype values that name one of the planner's dtypes: both fp8 formats are one byte
#: per element; `auto` is the model's dtype, bf16 for every shipped preset.
KV_CACHE_DTYPE_ALIASES = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "auto": "bf16"}


def kv_dtype_value(text: str, option: str = "--kv-dtype") -> str:
    """The planner's KV dtype for any accepted spelling (case-insensitive)."""
    key = text.strip().lower()
    key = KV_CACHE_DTYPE_ALIASES.get(key, key)
    if key not in {e.value for e in KvDtypeOpt}:
        raise InputError(f"{option}: unknown dtype {text!r}: use bf16, fp16, fp8 (fp8_e4m3, fp8_e5m2), int8, int4 "
                         "or auto")
    return key


def kv_dtype_of(value: KvCacheDtypeChoice | str | None) -> str | None:
    # A plain string: typer turns what a callback returns back into the option's enum by value.
    return None if value is None else kv_dtype_value(getattr(value, "value", value))

WorkloadArg = Annotated[Optional[Path], typer.Argument(
    help="Workload YAML, or the name of a shipped one (`cascade-plan workloads` lists them). Leave out to describe the "
         "workload with "
         "--model/--prefix/--groups/--samples/--output-tokens instead.", show_default=False)]
def _complete_models(incomplete: str) -> list[str]:
    return [m for m in PRESETS if m.startswith(incomplete.lower())]


def _complete_hardware(incomplete: str) -> list[str]:
    from cascade_plan.inputs.hardware import builtin_hardware_ids

    return [h for h in builtin_hardware_ids() if h.startswith(incomplete.lower())]


ModelOpt = Annotated[Optional[str], typer.Option(
    "--model", help="Model preset id (see `cascade-plan models`), a Hugging Face repo id (a preset's, or one in the "
                    "local HF cache), a model folder, or a path to a config.json.",
    rich_help_panel="Workload without a file", autocompletion=_complete_models)]
HardwareOpt = Annotated[Optional[str], typer.Option(
    "--hardware", help="Hardware profile id (see `cascade-plan hardware`; h100, a100 work too) or a profile YAML; "
                       "overrides the workload's. Default without a workload: h100-sxm.",
    autocompletion=_complete_hardware)]
PrefixOpt = Annotated[Optional[int], typer.Option(
    "--prefix", min=0, help="Shared prompt tokens per group.", rich_help_panel="Workload without a file")]
GroupsOpt = Annotated[int, typer.Option(
    "--groups", min=1, max=MAX_COPIES, help="Distinct prompts (groups of siblings) in the batch.",
    rich_help_panel="Workload without a file")]
SamplesOpt = Annotated[Optional[int], typer.Option(
    "--samples", min=1, help="Sequences decoding under each prompt (n, beams, rollouts per prompt).",
    rich_help_panel="Workload without a file")]
OutputOpt = Annotated[Optional[int], typer.Option(
    "--output-tokens", min=1, help="Tokens each sequence decodes.", rich_help_panel="Workload without a file")]
PrivateOpt = Annotated[int, typer.Option(
    "--private-tokens", min=0, help="Prompt tokens private to each sequence (not shared).",
    rich_help_panel="Workload without a file")]
KvDtypeOption = Annotated[Optional[KvCacheDtypeChoice], typer.Option(
    "--kv-dtype", "--kv-cache-dtype", callback=kv_dtype_of, case_sensitive=False, show_default=False,
    help="KV cache dtype (overrides the workload's); vLLM's spellings work too: fp8_e4m3 and fp8_e5m2 are fp8, auto "
         "is the model's dtype (bf16).")]
WeightDtypeOption = Annotated[Optional[KvDtypeOpt], typer.Option("--weight-dtype",
                                                                 help="Weight dtype (overrides the workload's).")]
class MoeRoutingChoice(str, enum.Enum):
    balanced = "balanced"
    skewed = "skewed"


MoeRoutingOpt = Annotated[Optional[MoeRoutingChoice], typer.Option(
    "--moe-routing", case_sensitive=False, show_default=False,
    help="MoE models: how the router spreads tokens over the experts (overrides the workload's): balanced (the "
         "default) or skewed (a few experts take most tokens); the output says what prices it.")]
TP_FLAGS = ("--tp", "-tp", "--tensor-parallel-size")          # ours, then vLLM's two spellings
TpOpt = Annotated[Optional[int], typer.Option(*TP_FLAGS, min=1, max=64,
                                              help="Tensor-parallel degree (overrides the workload's).")]
IdealOpt = Annotated[bool, typer.Option(
    "--ideal", help="Peak bandwidth and FLOP/s, zero overheads: the seed's back-of-envelope arithmetic.")]
CalibrationOpt = Annotated[Optional[Path], typer.Option(
    "--calibration", help="Calibration JSON from `cascade-plan probe` + `calibrate`. Default: the one shipped for the "
                          "chosen GPU, if any (the output says which).", rich_help_panel="Calibration")]
BackendOpt = Annotated[Optional[str], typer.Option(
    "--backend", help="Kernels the calibrated numbers describe: flashinfer (what engines ship; the default), "
                      "flashinfer-fa2, torch, or triton (the probe's own: what is attainable). Files imported from "
                      "AIConfigurator have flashinfer, flashinfer-fa2 and triton (their cascade kernels, transferred).",
    rich_help_panel="Calibration")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Apply a calibration measured on another GPU.",
                                        rich_help_panel="Calibration")]
UncalibratedOpt = Annotated[bool, typer.Option("--uncalibrated", help="Ignore shipped calibrations; use the "
                                               "default efficiencies.", rich_help_panel="Calibration")]
def _attention_backend(value: str | None) -> str | None:
    from cascade_plan.engine.attention_backend import parse_attention_backend

    try:
        return parse_attention_backend(value)
    except InputError as exc:
        raise typer.BadParameter(str(exc).split(": ", 1)[1]) from None


AttentionBackendOpt = Annotated[Optional[str], typer.Option(
    "--attention-backend", callback=_attention_backend, rich_help_panel="Engine (vLLM)", show_default=False,
    help="The attention backend vLLM runs, as vLLM spells it: auto (the default: vLLM's own pick, FlashInfer on "
         "Blackwell B200/B300/GB200/GB300, FlashAttention on other NVIDIA GPUs), FLASH_ATTN, FLASHINFER, TRITON_ATTN "
         "or FLEX_ATTENTION. Only FLASH_ATTN has a cascade path.")]
JsonOpt = Annotated[bool, typer.Option("--json",
                                       help="Print a JSON document (stable keys, SI units) instead of tables.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Print CSV (one row per point) instead of tables.")]
ReserveOpt = Annotated[float, typer.Option(
    "--reserve", min=0, max=0.9, help="Fraction of GPU memory kept free of weights and KV (activations, CUDA graphs; "
                                      "vLLM's gpu_memory_utilization=0.9 keeps 0.10). A configuration whose weights or "
                                      "KV do not fit in the rest gets no go/no-go.")]
GpuMemoryUtilizationOpt = Annotated[Optional[float], typer.Option(
    "--gpu-memory-utilization", min=0.1, max=1.0, show_default=False,
    help="vLLM's spelling of the reserve: the share of GPU memory the engine may use (--reserve is 1 minus it; "
         "0.9 keeps 0.10). Give this or --reserve.")]
WHAT_IF = ("What-if hardware (labelled user-supplied in every output; the GPU's calibration is scaled to the new "
           "peaks: bandwidth-bound parts by the bandwidth ratio, compute-bound by the FLOP ratio, fixed costs kept)")
HbmBandwidthOpt = Annotated[Optional[str], typer.Option(
    "--hbm-bandwidth", help="Replace the GPU's HBM bandwidth: TB/s, or with a unit (4.8, 4800GB/s).",
    rich_help_panel=WHAT_IF, show_default=False)]
MemoryOpt = Annotated[Optional[str], typer.Option(
    "--memory", help="Replace the GPU's memory: GB, or with a unit (141, 96GiB).", rich_help_panel=WHAT_IF,
    show_default=False)]
Bf16TflopsOpt = Annotated[Optional[str], typer.Option(
    "--bf16-tflops", help="Replace the GPU's dense bf16 rate in TFLOP/s (1200, 2.2PFLOP/s).", rich_help_panel=WHAT_IF,
    show_default=False)]
L2Opt = Annotated[Optional[str], typer.Option(
    "--l2", help="Replace the GPU's L2 size: MB, or with a unit (60MiB).", rich_help_panel=WHAT_IF, show_default=False)]


def handles_input_errors(fn: Callable) -> Callable:
    """Bad input: one line on stderr, exit 2, no traceback. A command with a `reserve` option also takes
    vLLM's `--gpu-memory-utilization` (added here, so that every such command accepts it)."""
    sig = inspect.signature(fn, eval_str=True)
    reserve = sig.parameters.get("reserve")

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            _refuse_non_finite(kwargs)
            if reserve is not None:
                _reserve_from_utilization(kwargs, reserve.default)
            return fn(*args, **kwargs)
        except InputError as exc:
            typer.echo(f"error: {one_line(str(exc))}", err=True)
            raise typer.Exit(2) from None

    if reserve is not None and "gpu_memory_utilization" not in sig.parameters:
        extra = inspect.Parameter("gpu_memory_utilization", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                  annotation=GpuMemoryUtilizationOpt)
        params = list(sig.parameters.values())
        params.insert(params.index(reserve) + 1, extra)
        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]  # typer reads it
    wrapper.handles_input_errors = True      # type: ignore[attr-defined]  # cli.app adds it where missing
    return wrapper


def _reserve_from_utilization(kwargs: dict, default: float) -> None:
    """--gpu-memory-utilization U means --reserve 1 - U (vLLM keeps the rest for activations and graphs)."""
    util = kwargs.pop("gpu_memory_utilization", None)
    if util is None:
        return
    if kwargs.get("reserve", default) != default:
        raise InputError("give --reserve or --gpu-memory-utilization, not both (--reserve is 1 minus the utilization)")
    kwargs["reserve"] = round(1.0 - util, 12)


def one_line(text: str) -> str:
    """An error message as one printable line: a line break or control character in a name the user
    typed (a path, a workload name) is shown escaped, so the error never spans lines."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _refuse_non_finite(kwargs: dict) -> None:
    """A float option given as nan, inf or 1e999 (click parses them all) is refused by name, for every
    command at once: no command's arithmetic ever sees a non-finite option."""
    for name, value in kwargs.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"--{name.replace('_', '-')}: {value} is not a finite number")


def dumps_json(doc: dict, indent: int = 2) -> str:
    """Strict JSON (no NaN or Infinity, which JSON does not have). Inputs are range-checked where they
    enter, so a non-finite number here is refused rather than written as invalid JSON."""
    try:
        # json's C encoder, then msgspec's whitespace pass: the same text as json.dumps(indent=...), whose
        # pure-Python indenting encoder took most of analyze's time on a log of 20,000 replicas
        import msgspec

        return msgspec.json.format(json.dumps(doc, sort_keys=False, allow_nan=False), indent=indent)
    except ValueError:
        raise InputError("the result contains a non-finite number (an input far outside any real GPU or model?); "
                         "nothing written") from None


def print_json(doc: dict) -> None:
    sys.stdout.write(dumps_json(doc) + "\n")


def scenario_from_options(workload: Path | None, *, model: str | None, hardware: str | None, prefix: int | None,
                          groups: int = 1, samples: int | None, output_tokens: int | None, private_tokens: int = 0,
                          kv_dtype: KvCacheDtypeChoice | None = None, weight_dtype: KvDtypeOpt | None = None,
                          tp: int | None = None) -> Scenario:
    """A Scenario from a workload file (with overrides) or from the quick command-line description."""
    from cascade_plan.inputs.hardware import load_hardware
    from cascade_plan.inputs.model_spec import load_model
    from cascade_plan.inputs.workload import Scenario, check_tp, load_scenario, simple_tree

    quick = {"--model": model, "--prefix": prefix, "--samples": samples, "--output-tokens": output_tokens}
    if workload is not None:
        given = [k for k, v in quick.items() if v is not None]
        if given:
            raise InputError(f"give either a workload file or {', '.join(given)}, not both")
        scn = load_scenario(workload, hardware)
    else:
        missing = [k for k, v in quick.items() if v is None]
        if missing:
            raise InputError("no workload file given; describe one with " + ", ".join(missing) +
                             " (e.g. --model llama-3-8b --prefix 4096 --groups 2 --samples 64 --output-tokens 1024)")
        assert model is not None and prefix is not None and samples is not None and output_tokens is not None
        m = load_model(model)
        tree = simple_tree(prefix, groups, samples, output_tokens, private_tokens)
        scn = Scenario(name=f"{model}, {groups}x{samples} seqs, prefix {prefix}, output {output_tokens}",
                       model=m, hardware=load_hardware(hardware or "h100-sxm"), kv_dtype="bf16",
                       weight_dtype="bf16", tp=1, prefix_caching=True, block_size=16, tree=tree)
    changes: dict[str, Any] = {}
    if kv_dtype is not None:
        changes["kv_dtype"] = kv_dtype.value
    if weight_dtype is not None:
        changes["weight_dtype"] = weight_dtype.value
    if tp is not None:
        check_tp(scn.model, tp)
        changes["tp"] = tp
    return msgspec.structs.replace(scn, **changes) if changes else scn


def refuse_replacing_non_calibration(path: Path, option: str) -> None:
    """A calibration is written over `path` only when `path` is missing or already a calibration file:
    `--out wl.yaml` never replaces a workload (or any other file) with a calibration."""
    import msgspec

    if not Path(path).exists():
        return
    refusal = InputError(f"{option}: {path} exists and is not a cascade-plan calibration file; give a new file name "
                         "(nothing was written)")
    try:
        doc = msgspec.json.decode(read_bytes_bounded(path, "existing --out", MAX_CALIBRATION_BYTES))
    except (InputError, msgspec.DecodeError):
        raise refusal from None
    if not (isinstance(doc, dict) and doc.get("kind") == "cascade-plan-calibration"):
        raise refusal
