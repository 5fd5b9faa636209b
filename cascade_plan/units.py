"""Unit conversion and formatting. KV and memory sizes print binary (KiB/MiB/GiB) as the seed does;
bandwidth, FLOP/s and weight totals print decimal (TB/s, TFLOP/s, GB)."""

from __future__ import annotations

from collections.abc import Callable

KiB, MiB, GiB, TiB, PiB = 1024, 1024**2, 1024**3, 1024**4, 1024**5
KB, MB, GB, TB = 1e3, 1e6, 1e9, 1e12


def fmt_bytes_binary(n: float) -> str:
    n = float(n)
    for unit, size in (("PiB", PiB), ("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(n) >= size:
            return f"{n / size:,.3g} {unit}" if n / size < 1000 else f"{n / size:,.0f} {unit}"
    return f"{n:,.0f} B"


def fmt_bytes_decimal(n: float) -> str:
    n = float(n)
    for unit, size in (("TB", TB), ("GB", GB), ("MB", MB), ("KB", KB)):
        if abs(n) >= size:
            return f"{n / size:,.3g} {unit}"
    return f"{n:,.0f} B"


def fmt_bytes(n: float) -> str:
    """Both forms, for places where people may think in either: '17 GiB (18.3 GB)'."""
    if abs(n) < KiB:
        return f"{n:,.0f} B"
    return f"{fmt_bytes_binary(n)} ({fmt_bytes_decimal(n)})"


def fmt_seconds(s: float, digits: int = 3) -> str:
    """Seconds in the unit that suits them, `digits` significant digits (whole seconds from 100 s)."""
    s = float(s)
    if s >= 100:
        return f"{s:,.{max(0, digits - 3)}f} s"
    if s >= 1:
        return f"{s:.{digits}g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.{digits}g} ms"
    if s >= 1e-6:
        return f"{s * 1e6:.{digits}g} µs"
    return f"{s * 1e9:.{digits}g} ns"


def fmt_apart(a: float, b: float, fmt: Callable[[float, int], str], digits: int, most: int = 9) -> tuple[str, str]:
    """`a` and `b` with the fewest digits, from `digits` on, at which they read differently: a comparison that
    fails on the digits beyond the usual ones never prints as `1.01x < 1.01x`."""
    shown = fmt(a, digits), fmt(b, digits)
    for d in range(digits + 1, most + 1):
        if shown[0] != shown[1] or a == b:
            break
        shown = fmt(a, d), fmt(b, d)
    return shown


def fmt_bandwidth(bytes_per_s: float) -> str:
    return f"{bytes_per_s / TB:.3g} TB/s"


def fmt_count(n: float) -> str:
    n = float(n)
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:,.0f}"


def fmt_speedup(x: float) -> str:
    return f"{x:.2f}x"


def fmt_pct(x: float | None, signed: bool = False) -> str:
    """A fraction as a percentage, one decimal (0.034 -> 3.4%, signed: +3.4%); "—" where there is none."""
    if x is None:
        return "—"
    return f"{x:+.1%}" if signed else f"{x:.1%}"
