"""Option groups declared once and handed to a command as one object.

A command names the object in its signature (`choice: ParamsChoice = ParamsChoice()`,
`what_if: WhatIf = WhatIf()`) and wears the group's decorator: the decorator puts the group's options
where that parameter stands (so `--help` lists them there, with the same names, help and defaults
everywhere) and, on each call, gathers their values back into the one object. Typer reads the options
from the signature the decorator writes."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Optional

import msgspec
import typer

from cascade_plan.cli.common import (
    BackendOpt,
    Bf16TflopsOpt,
    CalibrationOpt,
    CsvOpt,
    ForceOpt,
    GroupsOpt,
    HbmBandwidthOpt,
    IdealOpt,
    JsonOpt,
    KvCacheDtypeChoice,
    KvDtypeOpt,
    KvDtypeOption,
    L2Opt,
    MemoryOpt,
    OutputOpt,
    PrefixOpt,
    PrivateOpt,
    SamplesOpt,
    TpOpt,
    UncalibratedOpt,
    WeightDtypeOption,
    print_json,
)
from cascade_plan.inputs.choices import ParamsChoice, WhatIf


class _Group:
    def as_kwargs(self) -> dict[str, Any]:
        """The fields by name, to pass on as keyword arguments."""
        return msgspec.structs.asdict(self)  # type: ignore[arg-type]


class QuickWorkload(_Group, msgspec.Struct, frozen=True):
    """A workload described on the command line instead of in a file."""
    prefix: Optional[int] = None
    groups: int = 1
    samples: Optional[int] = None
    output_tokens: Optional[int] = None
    private_tokens: int = 0


class Deployment(_Group, msgspec.Struct, frozen=True):
    """How the model runs; each one overrides the workload's."""
    kv_dtype: Optional[KvCacheDtypeChoice] = None
    weight_dtype: Optional[KvDtypeOpt] = None
    tp: Optional[int] = None


class TableOutput(_Group, msgspec.Struct, frozen=True):
    """A JSON document or CSV instead of the tables."""
    json_out: bool = False
    csv_out: bool = False

    def emit(self, json_doc: Callable[[], dict], csv_text: Callable[[], str], tables: Callable[[], None]) -> None:
        """Print what was asked for; each argument is called only when its form is the one printed."""
        if self.json_out:
            print_json(json_doc())
        elif self.csv_out:
            typer.echo(csv_text(), nl=False)
        else:
            tables()


# field of the object -> the option's annotation (flags, help, panel); defaults are the object's own
CALIBRATION_OPTIONS: dict[str, Any] = {"ideal": IdealOpt, "calibration": CalibrationOpt, "backend": BackendOpt,
                                       "force": ForceOpt, "uncalibrated": UncalibratedOpt}
WHAT_IF_OPTIONS: dict[str, Any] = {"hbm_bandwidth": HbmBandwidthOpt, "memory": MemoryOpt,
                                   "bf16_tflops": Bf16TflopsOpt, "l2": L2Opt}
QUICK_WORKLOAD_OPTIONS: dict[str, Any] = {"prefix": PrefixOpt, "groups": GroupsOpt, "samples": SamplesOpt,
                                          "output_tokens": OutputOpt, "private_tokens": PrivateOpt}
DEPLOYMENT_OPTIONS: dict[str, Any] = {"kv_dtype": KvDtypeOption, "weight_dtype": WeightDtypeOption, "tp": TpOpt}
TABLE_OUTPUT_OPTIONS: dict[str, Any] = {"json_out": JsonOpt, "csv_out": CsvOpt}


def bundle(cls: type, options: dict[str, Any], only: tuple[str, ...] | None = None) -> Callable[[Callable], Callable]:
    """A decorator that replaces the parameter annotated `cls` by `options` (those named in `only`, in the
    table's order) and passes the command one `cls` built from them (fields left out keep their defaults)."""
    names = [n for n in options if only is None or n in only]
    unknown = set(only or ()) - set(options)
    if unknown:
        raise ValueError(f"no such option in the group: {sorted(unknown)}")
    defaults = {f.name: f.default for f in msgspec.structs.fields(cls)}

    def decorate(fn: Callable) -> Callable:
        sig = inspect.signature(fn, eval_str=True)
        marker = [p for p in sig.parameters.values() if p.annotation is cls]
        if len(marker) != 1:
            raise TypeError(f"{fn.__name__} needs exactly one parameter annotated {cls.__name__}")
        target = marker[0].name
        clash = set(names) & set(sig.parameters)
        if clash:
            raise TypeError(f"{fn.__name__} declares {sorted(clash)} itself and through {cls.__name__}")
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name != target:
                params.append(p)
                continue
            params += [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=defaults[n],
                                         annotation=options[n]) for n in names]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs[target] = cls(**{n: kwargs.pop(n) for n in names if n in kwargs})
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        if sig.return_annotation is not inspect.Signature.empty:
            wrapper.__annotations__["return"] = sig.return_annotation
        return wrapper

    return decorate


def calibration_options(fn: Callable | None = None, *, only: tuple[str, ...] | None = None) -> Callable:
    """--ideal, --calibration, --backend, --force, --uncalibrated (or the ones in `only`) as one ParamsChoice."""
    decorate = bundle(ParamsChoice, CALIBRATION_OPTIONS, only)
    return decorate(fn) if fn is not None else decorate


def what_if_options(fn: Callable) -> Callable:
    """--hbm-bandwidth, --memory, --bf16-tflops, --l2 as one WhatIf."""
    return bundle(WhatIf, WHAT_IF_OPTIONS)(fn)


def quick_workload_options(fn: Callable) -> Callable:
    """--prefix, --groups, --samples, --output-tokens, --private-tokens as one QuickWorkload."""
    return bundle(QuickWorkload, QUICK_WORKLOAD_OPTIONS)(fn)


def deployment_options(fn: Callable) -> Callable:
    """--kv-dtype, --weight-dtype, --tp as one Deployment."""
    return bundle(Deployment, DEPLOYMENT_OPTIONS)(fn)


def table_output_options(fn: Callable) -> Callable:
    """--json, --csv as one TableOutput."""
    return bundle(TableOutput, TABLE_OUTPUT_OPTIONS)(fn)
