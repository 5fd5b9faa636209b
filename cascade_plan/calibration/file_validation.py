"""Checking a calibration document against the shared format (cascade_plan/calibration_schema/), with
errors that name the file and the field: msgspec names a mapping's entries `[...]`, so the key that
holds an error is found here, level by level. A file that fails is one error line naming the field (the
whole measurement list is checked, not its first rows), and a fit whose result fails is refused before
anything is written."""

from __future__ import annotations

import msgspec

from cascade_plan.calibration_schema.document import CalibrationDoc
from cascade_plan.calibration_schema.fitted import Fitted, inconsistent
from cascade_plan.calibration_schema.imported import bad_rows
from cascade_plan.calibration_schema.quantities import Microseconds
from cascade_plan.errors import InputError


def _at(data, path: tuple):
    for part in path:
        data = data[part]
    return data


def _with_only(data, path: tuple, key):
    """`data` with the mapping at `path` cut down to its entry `key` (copies along the path only)."""
    if not path:
        return {key: data[key]}
    head, rest = path[0], path[1:]
    copy = dict(data) if isinstance(data, dict) else list(data)
    copy[head] = _with_only(data[head], rest, key)
    return copy


def _locate(data, typ, exc: msgspec.ValidationError) -> tuple[tuple, str]:
    """msgspec names a mapping's entries `[...]`: find which key holds the error, level by level, by
    converting the document with that mapping cut down to one entry. (path, message)."""
    from cascade_plan.inputs.yaml_source import parse_at

    msg, _, where = str(exc).partition(" - at `")
    where = where.rstrip("`")
    if where.startswith("key` in `"):
        where = where[len("key` in `"):]
    rest = where[1:]
    path: tuple = ()
    while "[...]" in rest:
        before, _, rest = rest.partition("[...]")
        path += parse_at("$" + before)
        try:
            container = _at(data, path)
        except (KeyError, IndexError, TypeError):
            break
        if not isinstance(container, dict):
            break
        for key in container:
            try:
                msgspec.convert(_with_only(data, path, key), typ)
            except msgspec.ValidationError:
                path += (key,)
                break
        else:
            break
    else:
        path += parse_at("$" + rest)
    return path, msg


def _rows_error(rows) -> tuple[tuple, str] | None:
    """msgspec names dict entries `[...]`: find the KV dtype and shape of the first bad matrix."""
    per_kv = rows.get("kv_dtypes") if isinstance(rows, dict) else None
    if not isinstance(per_kv, dict):
        return None
    for kv, per in per_kv.items():
        for key, m in (per.items() if isinstance(per, dict) else [("", per)]):
            try:
                msgspec.convert(m, list[list[Microseconds | None]])
            except msgspec.ValidationError as exc:
                msg, _, where = str(exc).partition(" - at `")
                return ("decode_rows", "kv_dtypes", kv, key) if key else ("decode_rows", "kv_dtypes", kv), \
                    f"{msg} (at {where.rstrip('`').replace('$', 'the matrix')})"
    return None


def check_calibration(data: dict, source) -> CalibrationDoc:
    """Validate a calibration document; `source` is the SourceDoc (for file and field in errors). Returns
    the typed document (optional fields filled in with their defaults)."""
    from cascade_plan.inputs.yaml_source import validation_error

    if not data.get("fitted"):             # `fitted: {}`: measured, not fitted yet
        data = {**data, "fitted": None}
    try:
        doc = msgspec.convert(data, CalibrationDoc)
    except msgspec.ValidationError as exc:
        if "[...]" in str(exc):
            rows = _rows_error(data.get("decode_rows")) if "$.decode_rows" in str(exc) else None
            if rows:
                raise source.error(rows[0], rows[1].replace("`", "")) from None
            path, msg = _locate(data, CalibrationDoc, exc)
            raise source.error(path, _plain(msg)) from None
        raise validation_error(source, exc) from None
    bad = inconsistent(doc.fitted) or bad_rows(doc.decode_rows, doc.mla_decode_rows)
    if bad:
        raise source.error(*bad)
    return doc


def normalised_fits(doc: CalibrationDoc) -> dict | None:
    """`fitted.kv_dtypes` as plain data with every optional field of every fit present (its default where the
    file leaves it out), so the planner's readers never meet a missing key the schema allows."""
    return msgspec.to_builtins(doc.fitted.kv_dtypes) if doc.fitted is not None else None


def check_fitted(fitted: dict, file: str) -> None:
    """A fit that produced a non-finite, negative or zero parameter is an error, not a calibration."""
    from cascade_plan.errors import format_path

    try:
        bad = inconsistent(msgspec.convert(fitted, Fitted))
        if bad:
            raise InputError(f"the fit produced an invalid parameter ({bad[1]}): the probe file's measurements are "
                             "inconsistent; nothing written", file=file, field=format_path(bad[0]))
    except msgspec.ValidationError as exc:
        path, msg = _locate(fitted, Fitted, exc)
        path = ("fitted",) + path
        raise InputError(f"the fit produced an invalid parameter ({msg.replace('`', '')}): the probe file's "
                         "measurements are inconsistent; nothing written", file=file, field=format_path(path)) from None


def _plain(msg: str) -> str:
    unknown = msg.startswith("Object contains unknown field")
    return msg.replace("`", "") + (" (not a field of this fit: check the spelling)" if unknown else "")
