"""A calibration file, read: the document checked against the shared format (cascade_plan/calibration_format.py)
at the edge, and the shipped files found by GPU."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import msgspec

from cascade_plan.calibration.file_validation import check_calibration, normalised_fits
from cascade_plan.calibration_format import (
    KIND,
    MAX_CALIBRATION_BYTES,
    READABLE_VERSIONS,
    Fitted,
    StepPartsDoc,
    inconsistent,
)
from cascade_plan.errors import InputError, format_path
from cascade_plan.inputs.hardware import HardwareProfile
from cascade_plan.inputs.yaml_source import load_json
from cascade_plan.resources import data_files


@dataclass(frozen=True)
class ProbeData:
    """A calibration file: `fits`, its fitted section typed (what the planner computes with), and `doc`, the
    document as read (the probe's measurement rows and the rest of what it wrote)."""

    path: str
    doc: dict
    checked: Fitted | None = field(default=None, repr=False, compare=False)   # `fits`, where already checked

    @cached_property
    def fits(self) -> Fitted | None:
        """The fitted section as typed structs; None where the file is not fitted yet."""
        if self.checked is not None:
            return self.checked
        f = self.doc.get("fitted")
        if not (isinstance(f, dict) and f.get("kv_dtypes")):
            return None
        try:
            fits = msgspec.convert(f, Fitted)
        except msgspec.ValidationError as exc:
            raise InputError(str(exc).replace("`", ""), file=self.path, field="fitted") from None
        bad = inconsistent(fits)
        if bad:
            raise InputError(bad[1], file=self.path, field=format_path(bad[0]))
        return fits

    @property
    def hardware_id(self) -> str | None:
        return self.doc.get("hardware_id")

    @property
    def device_name(self) -> str:
        return self.doc.get("device", {}).get("name", "unknown GPU")

    @property
    def l2_bytes(self) -> float:
        return float(self.doc["device"]["l2_bytes"])

    @property
    def fitted(self) -> dict:
        return self.doc.get("fitted") or {}

    @property
    def step_parts_doc(self) -> StepPartsDoc | None:
        """The fitted step parts as typed structs (probe_params.step_parts_of prices them); None: none fitted."""
        return self.fits.step_parts if self.fits is not None else None

    def select(self, backend: str, kernel: str, variant: str | None, kv_dtype: str) -> list[dict]:
        return [m for m in self.doc["measurements"] if m["backend"] == backend and m["kernel"] == kernel
                and (variant is None or m.get("variant") == variant) and m["config"]["kv_dtype"] == kv_dtype
                and m.get("median_s")]


def load_probe(path: Path) -> ProbeData:
    doc = load_json(Path(path), "calibration", MAX_CALIBRATION_BYTES)
    d = doc.data
    if d.get("kind") != KIND:
        raise doc.error(("kind",), f"not a cascade-plan calibration file (kind is {d.get('kind')!r})")
    if d.get("schema_version") not in READABLE_VERSIONS:
        raise doc.error(("schema_version",), f"unsupported schema_version {d.get('schema_version')!r}: this version "
                        f"of cascade-plan reads {', '.join(map(str, READABLE_VERSIONS))} "
                        "(newer files need a newer one)")
    d = upgraded(d)
    typed = check_calibration(d, doc)   # typed: every measurement, every fitted number finite and in range
    fits = normalised_fits(typed)
    if fits is not None:                # optional fields filled in: readers index them directly
        d = {**d, "fitted": {**d["fitted"], "kv_dtypes": fits}}
    return ProbeData(str(path), d, typed.fitted)


def upgraded(d: dict) -> dict:
    """An older layout of the format as today's (calibration_format's history): the first AIConfigurator
    imports (2026-11-30) wrote `step_parts` at the top level, where `fitted.step_parts` is read now."""
    fitted = d.get("fitted")
    if isinstance(d.get("step_parts"), dict) and isinstance(fitted, dict) and fitted and "step_parts" not in fitted:
        d = {k: v for k, v in d.items() if k != "step_parts"} | {"fitted": {**fitted, "step_parts": d["step_parts"]}}
    return d


def source_kind(doc: dict) -> str:
    """"probe" (our GPU probe) or "aic" (imported from AIConfigurator's tables)."""
    return "aic" if doc.get("source_kind") == "aic" else "probe"


# The best source first: the project's own probe measures the cascade kernels nobody else does.
SOURCE_PREFERENCE = ("probe", "aic")


def read_shipped(path: Path) -> dict:
    """A shipped calibration file, decoded only (shipped files are checked by the tests, not on every run),
    once per process: `estimate` and `report` look up the same files for several GPUs and verdicts."""
    key = _file_key(path)
    doc = _DECODED.get(key)
    if doc is None:
        if len(_DECODED) >= 32:
            _DECODED.clear()
        doc = _DECODED[key] = msgspec.json.decode(Path(path).read_bytes())
    return doc


def read_already(path: Path) -> dict | None:
    """The document read_shipped decoded for `path` earlier in this process (None: not decoded yet, or the
    file changed since): a reader of one field then need not parse the file again."""
    try:
        return _DECODED.get(_file_key(path))
    except OSError:
        return None


_DECODED: dict[tuple[str, int, int], dict] = {}


def _file_key(path: Path) -> tuple[str, int, int]:
    st = Path(path).stat()
    return str(path), st.st_mtime_ns, st.st_size


def find_committed(hw: HardwareProfile, source: str | None = None) -> ProbeData | None:
    """The shipped calibration for this profile that has fitted numbers: the project's probe file where
    there is one, else one imported from AIConfigurator (newest first within a kind); `source`
    restricts the kind. Shipped files are named <hardware id>-<kind>-....json, so only those are opened,
    the preferred kind first."""
    for kind in (source,) if source else SOURCE_PREFERENCE:
        found = []
        for p in data_files("calibrations", f"{hw.id}-{kind}-", ".json"):
            try:
                d = read_shipped(p)
            except (OSError, msgspec.DecodeError):
                continue
            if (d.get("kind") == KIND and d.get("hardware_id") == hw.id and (d.get("fitted") or {}).get("kv_dtypes")
                    and source_kind(d) == kind):
                found.append((d.get("created_utc", ""), str(p), d))
        if found:
            _, path, doc = max(found, key=lambda x: x[:2])
            return ProbeData(path, doc)
    return None


