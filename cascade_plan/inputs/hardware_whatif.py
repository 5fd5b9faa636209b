"""What-if hardware: a built-in profile with numbers the user types (--hbm-bandwidth 4.8TB/s, --memory 141GB,
--bf16-tflops 1200, --l2 96MiB) instead of a sourced profile YAML. The changed profile's id and name say
"what-if, user-supplied" and list the numbers, so every table, JSON document, report and plot shows it; its
sources name the command line. The base GPU's calibration still applies, scaled to the new numbers
(planning/params_select.py: what_if_params): what was measured is the best guess for a GPU like it."""

from __future__ import annotations

import re

import msgspec

from cascade_plan.errors import InputError
from cascade_plan.inputs import limits
from cascade_plan.inputs.hardware import HardwareProfile

_UNITS = {
    "hbm_bytes_per_s": ("--hbm-bandwidth", "TB/s", {"tb/s": 1e12, "gb/s": 1e9, "tib/s": 1024**4, "b/s": 1}),
    "memory_bytes": ("--memory", "GB", {"gb": 1e9, "gib": 1024**3, "tb": 1e12, "mb": 1e6, "b": 1}),
    "dense_bf16_flop_per_s": ("--bf16-tflops", "TFLOP/s", {"tflop/s": 1e12, "tflops": 1e12, "pflop/s": 1e15,
                                                           "pflops": 1e15, "flop/s": 1}),
    "l2_bytes": ("--l2", "MB", {"mb": 1e6, "mib": 1024**2, "kib": 1024, "kb": 1e3, "gb": 1e9, "b": 1}),
}
_RANGE = {"hbm_bytes_per_s": limits.HBM_BYTES_PER_S, "memory_bytes": limits.MEMORY_BYTES,
          "dense_bf16_flop_per_s": limits.FLOP_PER_S, "l2_bytes": limits.L2_BYTES}
_SI = {"hbm_bytes_per_s": "bytes/s", "memory_bytes": "bytes", "dense_bf16_flop_per_s": "FLOP/s", "l2_bytes": "bytes"}
_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")


def parse_quantity(text: str, field: str) -> float:
    """'4.8', '4.8TB/s', '4800 GB/s' -> bytes/s (a bare number is in the option's default unit)."""
    option, default_unit, units = _UNITS[field]
    m = _NUMBER.match(str(text))
    unit = (m.group(2) or default_unit).lower() if m else ""
    if not m or unit not in units:
        raise InputError(f"{option}: cannot read {text!r}: give a number in {default_unit} or with a unit "
                         f"({', '.join(units)})")
    value = float(m.group(1)) * units[unit]
    if value <= 0 and field != "l2_bytes":
        raise InputError(f"{option}: must be positive, got {text!r}")
    lo, hi = _RANGE[field]                # the range a hardware profile's number must lie in (limits.py)
    if not lo <= value <= hi:
        raise InputError(f"{option}: {text!r} is {value:.3g} {_SI[field]}, outside the plausible {lo:.3g} to "
                         f"{hi:.3g} {_SI[field]}")
    return value


WHAT_IF_MARK = " (what-if, user-supplied: "


def what_if_base_id(hw: HardwareProfile) -> str | None:
    """The id of the profile a what-if GPU was made from; None for a profile as shipped or written."""
    i = hw.id.find(WHAT_IF_MARK)
    return hw.id[:i] if i > 0 else None


_KIND = {"hbm_bytes_per_s": "HBM", "memory_bytes": "memory", "dense_bf16_flop_per_s": "bf16", "l2_bytes": "L2"}


def _shown(field: str, text: str | None) -> str:
    """As the user typed it, with the default unit where they gave a bare number: 'HBM 4.8 TB/s', 'L2 60MiB'."""
    text = str(text).strip()
    return f"{_KIND[field]} {text}" + ("" if text[-1:].isalpha() or text.endswith("/s") else f" {_UNITS[field][1]}")


def what_if(hw: HardwareProfile, hbm_bandwidth: str | None = None, memory: str | None = None,
            bf16_tflops: str | None = None, l2: str | None = None) -> HardwareProfile:
    """`hw` with the given numbers replaced, labelled as user-supplied; `hw` itself when none is given."""
    given = {"hbm_bytes_per_s": hbm_bandwidth, "memory_bytes": memory, "dense_bf16_flop_per_s": bf16_tflops,
             "l2_bytes": l2}
    values = {f: parse_quantity(t, f) for f, t in given.items() if t is not None}
    if not values:
        return hw
    label = WHAT_IF_MARK[2:] + ", ".join(_shown(f, given[f]) for f in values)
    sources = {**hw.sources, **{f: f"user-supplied on the command line ({_UNITS[f][0]} {given[f]})" for f in values}}
    return msgspec.structs.replace(hw, id=f"{hw.id} ({label})", name=f"{hw.name} ({label})", sources=sources,
                                   **values)
