"""A calibration file, read: the document checked against the shared format (cascade_plan/calibration_schema/)
at the edge, and the shipped files found by GPU."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar, overload

import msgspec

from cascade_plan.calibration.file_validation import check_calibration, normalised_fits
from cascade_plan.calibration.holdout import is_tree
from cascade_plan.calibration_schema.attention import Measurement
from cascade_plan.calibration_schema.device import Ceilings, Device
from cascade_plan.calibration_schema.document import KIND, READABLE_VERSIONS, ROW_TYPES, CalibrationDoc, Notes
from cascade_plan.calibration_schema.fitted import Fitted, inconsistent
from cascade_plan.calibration_schema.grid import Grid
from cascade_plan.calibration_schema.imported import Crosscheck, MoeRowDoc, MoeSkewDoc, Source
from cascade_plan.calibration_schema.mla import MlaRow
from cascade_plan.calibration_schema.quantities import MAX_CALIBRATION_BYTES
from cascade_plan.calibration_schema.step_parts import StepPartsDoc
from cascade_plan.calibration_schema.steps import StepOpRow, StepRow
from cascade_plan.errors import InputError, format_path
from cascade_plan.inputs.hardware import HardwareProfile
from cascade_plan.inputs.yaml_source import load_json
from cascade_plan.resources import data_files

R = TypeVar("R")


class _Rows(Generic[R]):
    """A list of measured rows of a ProbeData (ROW_TYPES names its row type), typed on first use and kept on the
    instance, as a cached_property is: one descriptor for every row list instead of one property each."""

    def __init__(self, doc: str):
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Rows[R]: ...
    @overload
    def __get__(self, obj: ProbeData, owner: type | None = None) -> list[R]: ...

    def __get__(self, obj: ProbeData | None, owner: type | None = None) -> _Rows[R] | list[R]:
        if obj is None:
            return self
        rows = obj.__dict__[self.name] = obj._rows(self.name)
        return rows


@dataclass(frozen=True)
class ProbeData:
    """A calibration file: `fits`, its fitted section typed (what the planner computes with); its measured rows
    (`measurements`, `step_ops`, `steps`, `mla`), `grid`, `device`, `ceilings`, `source` and `crosscheck`
    typed (cascade_plan/calibration_schema/); and `doc`, the document as read, as plain data, which `calibrate`
    writes back with its new fitted section (it keeps every field the reader ignores). `decoded`: the document
    as decoded, where a shipped file's row lists are still JSON (read_shipped); the typed parts read it, so a
    command that never asks for `doc` never builds those lists' dicts. `checked`: the typed document where
    load_probe has already checked the whole file; otherwise (a shipped file, decoded only) each part is
    decoded on first use, and a malformed row is one error naming the file, the list, the row and the field."""

    path: str
    decoded: dict
    checked: CalibrationDoc | None = field(default=None, repr=False, compare=False)

    @cached_property
    def doc(self) -> dict:
        """The document as plain data: row lists read_shipped left as JSON are decoded, in place (every ProbeData
        of that read then shares them)."""
        d = self.decoded
        for k, v in d.items():
            if isinstance(v, msgspec.Raw):
                d[k] = msgspec.json.decode(v)
        return d

    @cached_property
    def fits(self) -> Fitted | None:
        """The fitted section as typed structs; None where the file is not fitted yet."""
        if self.checked is not None:
            return self.checked.fitted
        f = self.decoded.get("fitted")
        if not (isinstance(f, dict) and f.get("kv_dtypes")):
            return None
        return self._shared(f, "fitted", self._checked_fits)

    def _checked_fits(self, f: dict) -> Fitted:
        fits = self._typed(f, Fitted, "fitted")
        bad = inconsistent(fits)
        if bad:
            raise InputError(bad[1], file=self.path, field=format_path(bad[0]))
        return fits

    def _typed(self, data, typ, name: str):
        try:
            if isinstance(data, msgspec.Raw):      # a shipped file's row list, still JSON (read_shipped)
                return msgspec.json.decode(data, type=typ)
            return msgspec.convert(data, typ)
        except msgspec.ValidationError as exc:
            msg, _, where = str(exc).partition(" - at `")
            where = where.rstrip("`").removeprefix("$")
            raise InputError(msg.replace("`", ""), file=self.path, field=f"{name}{where}") from None

    def _rows(self, name: str) -> list:
        if self.checked is not None:
            return getattr(self.checked, name)
        raw = self.decoded.get(name)
        if raw is None or raw == []:
            return []
        return self._shared(raw, name, lambda r: self._typed(r, ROW_TYPES[name], name))

    @staticmethod
    def _shared(raw, name: str, make):
        """make(raw), once per decoded object: every ProbeData of one read_shipped document shares its typed parts."""
        hit = _TYPED.get((id(raw), name))
        if hit is not None and hit[0] is raw:          # the same object (kept alive in the entry): decoded already
            return hit[1]
        typed = make(raw)
        if len(_TYPED) >= 64:
            _TYPED.clear()
        _TYPED[(id(raw), name)] = (raw, typed)
        return typed

    def derived(self, name: str, make: Callable[["ProbeData"], Any]) -> Any:
        """make(self), once per decoded document: what the planner derives from the file alone (its step parts,
        its measured grid), shared by every ProbeData of one read_shipped document (`estimate` builds one per
        backend it weighs). The result is shared: callers must not change it."""
        return self._shared(self.decoded, "derived:" + name, lambda _doc: make(self))

    measurements = _Rows[Measurement]("The attention kernel rows (per-sequence decode, cascade prefix, suffix, "
                                      "merge, total).")
    step_ops = _Rows[StepOpRow]("The op rows of `probe --step` (GEMM, glue, all-reduce, layer graphs, MoE grouped "
                                "GEMMs).")
    steps = _Rows[StepRow]("Whole decode steps of models (validation only).")
    mla = _Rows[MlaRow]("The MLA kernel rows.")
    moe_rows = _Rows[MoeRowDoc]("An imported file's AIConfigurator MoE rows.")
    moe_skew = _Rows[MoeSkewDoc]("Skewed / balanced routing ratios an import carries from the probe.")

    def _part(self, name: str, typ, default=None):
        """One top-level part typed: the checked document's, else decoded from the file on first use."""
        if self.checked is not None:
            return getattr(self.checked, name)
        raw = self.decoded.get(name)
        return default if raw is None else self._typed(raw, typ, name)

    @cached_property
    def device(self) -> Device:
        if self.checked is None and "device" not in self.decoded:
            raise InputError("required field is missing", file=self.path, field="device")
        return self._part("device", Device)

    @cached_property
    def ceilings(self) -> Ceilings:
        if self.checked is None and "ceilings" not in self.decoded:
            raise InputError("required field is missing", file=self.path, field="ceilings")
        return self._part("ceilings", Ceilings)

    @cached_property
    def grid(self) -> Grid:
        return self._part("grid", Grid, Grid())

    @cached_property
    def source(self) -> Source | None:
        return self._part("source", Source)

    @cached_property
    def crosscheck(self) -> Crosscheck | None:
        return self._part("crosscheck", Crosscheck)

    @cached_property
    def notes(self) -> Notes:
        return self._part("notes", Notes, Notes())

    @property
    def step_glue(self) -> str:
        """The glue variant the probe's whole steps ran with (the one the step fit prices glue from)."""
        sp = self.notes.step_probe
        return sp.step_glue if sp is not None else "fused"

    @property
    def source_kind(self) -> str:
        """"probe" (our GPU probe) or "aic" (imported from AIConfigurator's tables)."""
        return source_kind(self.decoded)

    @property
    def hardware_id(self) -> str | None:
        return self.decoded.get("hardware_id")

    def require_hardware_id(self) -> str:
        """The hardware id, for what needs the profile of the GPU the file was measured on."""
        if not self.hardware_id:
            raise InputError("the calibration file names no hardware_id (the GPU it was measured on)",
                             file=self.path, field="hardware_id")
        return self.hardware_id

    @property
    def device_name(self) -> str:
        return self.device.name

    @property
    def l2_bytes(self) -> float:
        return float(self.device.l2_bytes)

    @property
    def fitted(self) -> dict:
        """The fitted section as plain data (what the fits are computed as and written back)."""
        return self.decoded.get("fitted") or {}

    @property
    def step_parts_doc(self) -> StepPartsDoc | None:
        """The fitted step parts as typed structs (probe_params.step_parts_of prices them); None: none fitted."""
        return self.fits.step_parts if self.fits is not None else None

    def select(self, backend: str, kernel: str, variant: str | None, kv_dtype: str) -> list[Measurement]:
        """One kernel's timed two-level rows (three-level tree rows are validation only: holdout.is_tree)."""
        return [m for m in self.measurements if m.backend == backend and m.kernel == kernel
                and (variant is None or m.variant == variant) and m.config.kv_dtype == kv_dtype and m.median_s
                and not is_tree(m.config)]


# Typed parts (row lists, fits) by the identity of the decoded object they came from (kept alive beside them, so
# an id is never reused while its entry stands): read_shipped decodes a file once per process, and every
# ProbeData made from that document shares its typed parts.
_TYPED: dict[tuple[int, str], tuple[object, object]] = {}


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
    typed = check_calibration(d, doc)   # typed: every row, every fitted number finite and in range
    fits = normalised_fits(typed)
    if fits is not None:                # optional fields filled in: readers index them directly
        d = {**d, "fitted": {**d["fitted"], "kv_dtypes": fits}}
    return ProbeData(str(path), d, typed)


def upgraded(d: dict) -> dict:
    """An older layout of the format as today's (calibration_schema/document.py: its history): the first AIConfigurator
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
    once per process: `estimate` and `report` look up the same files for several GPUs and verdicts. Its row
    lists stay JSON (msgspec.Raw) until ProbeData types them straight from it: `estimate` on a GQA model reads
    the attention and op rows of the 4 MB probe file, never its MLA, whole-step or skipped rows, and typing a
    list from JSON skips building a dict per row first."""
    key = _file_key(path)
    doc = _DECODED.get(key)
    if doc is None:
        if len(_DECODED) >= 32:
            _DECODED.clear()
        top = _TOP_LEVEL.decode(Path(path).read_bytes())
        doc = _DECODED[key] = {k: v if k in _RAW_LISTS else msgspec.json.decode(v) for k, v in top.items()}
    return doc


_TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
# what read_shipped leaves as JSON: the typed row lists, and the probe's skipped points (read by no command)
_RAW_LISTS = frozenset(ROW_TYPES) | {"skipped", "mla_skipped", "step_skipped"}


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


