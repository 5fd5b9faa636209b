"""The rows of `cascade-plan workloads`: each shipped workload's model, hardware, batch and checks."""

from __future__ import annotations

from cascade_plan.inputs.workload import parse_workload, total_sequences
from cascade_plan.inputs.workload_catalog import builtin_workloads, description


def workload_rows() -> list[dict]:
    """One row per shipped workload: what `cascade-plan workloads` lists."""
    rows = []
    for name, path in builtin_workloads().items():
        wl, _ = parse_workload(path)
        rows.append({"name": name, "model": wl.model, "hardware": wl.hardware, "tp": wl.tp,
                     "kv_dtype": wl.kv_dtype, "sequences": total_sequences(wl.tree),
                     "checks": sorted(k for k in (wl.checks.__struct_fields__ if wl.checks else ())
                                      if getattr(wl.checks, k) is not None),
                     "description": description(path), "path": str(path)})
    return rows
