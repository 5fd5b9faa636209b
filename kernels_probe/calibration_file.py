"""The calibration file, written: a versioned JSON document, written atomically. Pure Python (no torch).

Top level: schema_version, kind, probe_version, created_utc, hardware_id, device, ceilings, grid,
measurements, skipped, fitted (left empty here; the planner's calibrate step fills it), plus notes.
The format (version, history, typed structs) is the package cascade_plan/calibration_schema/, which the
planner reads it with too. Every document is written through it: write_atomic refuses one that
validate_document finds a problem with, and that check is the writer's structs (calibration_schema/probe_rows.py:
every row kind with every field the probe writes, no other) plus what a struct cannot say (known backends and
kernels, p10 <= median <= p90).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import pathlib

import msgspec

from cascade_plan.calibration_schema.document import KIND, SCHEMA_VERSION
from cascade_plan.calibration_schema.probe_rows import ProbeDocument
from cascade_plan.gpus import hardware_id_for
from kernels_probe import PROBE_VERSION
from kernels_probe.attention.grid import BACKENDS, KERNELS

__all__ = ["KIND", "SCHEMA_VERSION", "hardware_id_for", "load", "new_document", "validate_document", "write_atomic"]


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def new_document(*, device: dict, ceilings: dict, grid: dict, measurements: list[dict], skipped: list[dict],
                 notes: dict | None = None, created_utc: str | None = None) -> dict:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "probe_version": PROBE_VERSION,
        "created_utc": created_utc or utc_now(),
        "hardware_id": hardware_id_for(device.get("name")),
        "device": device,
        "ceilings": ceilings,
        "grid": grid,
        "measurements": measurements,
        "skipped": skipped,
        "fitted": {},
        "notes": notes or {},
    }


def validate_document(doc: dict) -> list[str]:
    """Problems with a calibration document (empty list = valid)."""
    errs: list[str] = []
    if not isinstance(doc, dict):
        return ["document is not a JSON object"]
    if doc.get("schema_version") != SCHEMA_VERSION:
        errs.append(f"schema_version must be {SCHEMA_VERSION}, got {doc.get('schema_version')!r}")
    if doc.get("kind") != KIND:
        errs.append(f"kind must be {KIND!r}")
    try:          # the shared format: every field present, none unknown, typed and in range (first problem only)
        msgspec.convert(doc, ProbeDocument)
    except msgspec.ValidationError as exc:
        errs.append(str(exc))
    for i, m in enumerate(doc.get("measurements", [])):
        where = f"measurements[{i}]"
        if m.get("backend") not in BACKENDS:
            errs.append(f"{where}.backend {m.get('backend')!r} not in {BACKENDS}")
        if m.get("kernel") not in KERNELS:
            errs.append(f"{where}.kernel {m.get('kernel')!r} not in {KERNELS}")
    # what the structs (the step sections' too: every field, the op, the mode) cannot say: the timings' order.
    # Absent step sections are fine: probe 1.0 files have none.
    for section in ("measurements", "steps"):
        for i, r in enumerate(doc.get(section) or []):
            med = r.get("median_s")
            if isinstance(med, (int, float)) and not (r.get("p10_s", 0) <= med <= r.get("p90_s", math.inf)):
                errs.append(f"{section}[{i}]: p10_s <= median_s <= p90_s does not hold")
    return errs


def write_atomic(path: pathlib.Path | str, doc: dict) -> pathlib.Path:
    """Write doc as JSON to path atomically (cascade_plan.atomic: temp file, fsync, os.replace):
    readers see the old file or the whole new one, never a part (also on Ctrl-C or a crash). A document
    validate_document finds a problem with is refused (ValueError) and path is not written; the document goes to
    PATH.refused.json beside it instead, so a GPU run's measurements outlive a defect in what it wrote."""
    from cascade_plan.atomic import write_text_atomic

    path = pathlib.Path(path)
    text = json.dumps(doc, indent=1, sort_keys=False, allow_nan=False) + "\n"
    problems = validate_document(doc)
    if problems:
        kept = write_text_atomic(refused_path(path), text)
        raise ValueError(f"not a calibration document the probe writes ({len(problems)} problems): "
                         + "; ".join(problems[:5]) + f"; the document is kept in {kept}")
    return write_text_atomic(path, text)


def refused_path(path: pathlib.Path) -> pathlib.Path:
    """Where write_atomic keeps a document it refuses."""
    return path.with_name(path.name + ".refused.json")


def load(path: pathlib.Path | str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
