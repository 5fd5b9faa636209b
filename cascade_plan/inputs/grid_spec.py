"""Parse sweep axes written on the command line: `256:65536:log`, `1:512:log:20`, `0:4096:lin:9`,
`0:4096:512` (a step), `1,2,4,8`, or one number."""

from __future__ import annotations

import numpy as np

from cascade_plan.errors import InputError


def _int(text: str, option: str) -> int:
    try:
        value = int(float(text))
    except ValueError:
        raise InputError(f"{option}: {text!r} is not a number") from None
    if value < 0:
        raise InputError(f"{option}: {value} must not be negative")
    return value


def parse_axis(spec: str, option: str, minimum: int = 0) -> np.ndarray:
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
            values = list(range(start, stop + 1, step))
        else:
            raise InputError(f"{option}: {spec!r}: write START:STOP:log[:N], START:STOP:lin[:N], START:STOP:STEP or a list")
    else:
        raise InputError(f"{option}: {spec!r}: write START:STOP:log[:N], START:STOP:lin[:N], START:STOP:STEP or a list")
    arr = np.asarray(values, dtype=np.int64)
    if arr.size == 0:
        raise InputError(f"{option}: {spec!r} gives no values")
    if arr.min() < minimum:
        raise InputError(f"{option}: values must be at least {minimum}")
    return arr
