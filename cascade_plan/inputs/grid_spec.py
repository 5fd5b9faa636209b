"""Parse sweep axes written on the command line: `256:65536:log`, `1:512:log:20`, `0:4096:lin:9`,
`0:4096:512` (a step), `1,2,4,8`, or one number."""

from __future__ import annotations

import math

import numpy as np

from cascade_plan.errors import InputError
from cascade_plan.inputs import limits

# Largest value each axis takes: the workload schema's bounds.
AXIS_MAXIMUM = {"--prefix": limits.MAX_TOKENS, "--batch": limits.MAX_SAMPLES, "--suffix": limits.MAX_CONTEXT_TOKENS}


def _bounded_int(text: str, option: str, maximum: int) -> int:
    try:
        number = float(text)
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a number") from None
    if not math.isfinite(number):
        raise InputError(f"{option}: {text!r} is not a finite number")
    if number < 0:
        raise InputError(f"{option}: {text.strip()} must not be negative")
    if number > maximum:
        raise InputError(f"{option}: {text.strip()} is above the largest value cascade-plan plans for ({maximum:,})")
    return int(number)


def _count_of(spec: str, start: int, stop: int, step: int | None, count: int | None, option: str) -> None:
    n = count if count is not None else ((stop - start) // step + 1 if step else 0)
    if n > limits.MAX_AXIS_VALUES:
        raise InputError(f"{option}: {spec!r} gives {n:,} values; an axis takes at most {limits.MAX_AXIS_VALUES:,}")


def parse_axis(spec: str, option: str, minimum: int = 0, maximum: int | None = None) -> np.ndarray:
    """Values of one sweep axis, each in [minimum, maximum] (default: the schema's bound for the
    option), at most limits.MAX_AXIS_VALUES of them."""
    top = maximum if maximum is not None else AXIS_MAXIMUM.get(option, limits.MAX_CONTEXT_TOKENS)

    def _int(text: str, option: str) -> int:
        return _bounded_int(text, option, top)

    spec = spec.strip()
    parts = spec.split(":")
    if len(parts) == 1:
        values = [_int(v, option) for v in spec.split(",") if v.strip()]
    elif len(parts) in (3, 4):
        start, stop = _int(parts[0], option), _int(parts[1], option)
        if stop < start:
            raise InputError(f"{option}: {spec!r}: the end must not be below the start")
        kind = parts[2]
        count = _int(parts[3], option) if len(parts) == 4 else None
        if count is not None:
            _count_of(spec, start, stop, None, count, option)
        if kind == "log":
            if start < 1:
                raise InputError(f"{option}: {spec!r}: a log axis starts at 1 or more")
            if count is None:
                # Powers of two between the ends (plus the ends): the natural steps of KV sizes.
                lo, hi = int(np.ceil(np.log2(start))), int(np.floor(np.log2(stop)))
                values = sorted({start, stop, *(2**k for k in range(lo, hi + 1))})
            else:
                values = np.unique(np.round(np.geomspace(start, stop, max(count, 2)))).astype(int).tolist()
        elif kind == "lin":
            values = np.unique(np.round(np.linspace(start, stop, max(count or 10, 2)))).astype(int).tolist()
        elif len(parts) == 3:
            step = _int(kind, option)
            if step < 1:
                raise InputError(f"{option}: {spec!r}: the step must be at least 1")
            _count_of(spec, start, stop, step, None, option)
            values = list(range(start, stop + 1, step))
        else:
            raise InputError(f"{option}: {spec!r}: write START:STOP:log[:N], START:STOP:lin[:N], START:STOP:STEP "
                             "or a list")
    else:
        raise InputError(f"{option}: {spec!r}: write START:STOP:log[:N], START:STOP:lin[:N], START:STOP:STEP or a list")
    if len(values) > limits.MAX_AXIS_VALUES:
        raise InputError(f"{option}: {spec!r} gives {len(values):,} values; an axis takes at most "
                         f"{limits.MAX_AXIS_VALUES:,}")
    arr = np.asarray(values, dtype=np.int64)
    if arr.size == 0:
        raise InputError(f"{option}: {spec!r} gives no values")
    if arr.min() < minimum:
        raise InputError(f"{option}: values must be at least {minimum}")
    return arr
