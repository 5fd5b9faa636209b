"""Which probe version measured a calibration's attention rows (each row's `run`, matched to `notes.runs`). The
probe's own kernels (calibration/launch_rules.py OWN_KERNELS) change with its version, so a fit over rows of
several versions averages different kernels: `calibrate` says so. Only the rows the fit trains on count (the hold-out
rule's, calibration/holdout.py): held-out rows of another version, such as rollout starts whose kernels a merge
script showed unchanged, average nothing."""

from __future__ import annotations

from collections import Counter

import msgspec

from cascade_plan.calibration.holdout import is_held_out
from cascade_plan.calibration.launch_rules import OWN_KERNELS
from cascade_plan.calibration_schema.attention import AttentionConfigDoc


def own_kernel_versions(doc: dict) -> dict[tuple[str, str], Counter]:
    """(backend, KV dtype) -> training rows per probe version, for the probe's own kernels' attention rows
    ("unknown": a row whose run notes.runs does not list)."""
    version = {r.get("created_utc"): r.get("probe_version") for r in (doc.get("notes") or {}).get("runs") or []
               if isinstance(r, dict)}
    out: dict[tuple[str, str], Counter] = {}
    for m in doc.get("measurements") or []:
        if m.get("backend") in OWN_KERNELS and not is_held_out(msgspec.convert(m.get("config") or {},
                                                                                 AttentionConfigDoc)):
            key = (m["backend"], (m.get("config") or {}).get("kv_dtype", "bf16"))
            out.setdefault(key, Counter())[version.get(m.get("run")) or "unknown"] += 1
    return out


def mixed_version_lines(doc: dict) -> list[str]:
    """One line per backend and KV dtype whose rows more than one probe version measured (none: no line)."""
    lines = []
    for (backend, kv), n in sorted(own_kernel_versions(doc).items()):
        known = sorted(v for v in n if v != "unknown")
        if len(known) > 1:
            parts = ", ".join(f"{v} ({n[v]:,} rows)" for v in sorted(n))
            lines.append(f"{kv} {backend}: rows of several probe versions, whose kernels may differ: {parts}; the "
                         "fit averages them (re-probe, or take the older rows out: "
                         "benchmarks/drop_superseded_triton_rows.py)")
    return lines
