"""Merge probe runs into one calibration file. Pure Python (no torch).

``merge_documents(new, base)``: every row of ``new`` is kept; a row of ``base`` is kept unless ``new``
has a row (measured or skipped) of the same identity, so a re-measured point replaces the old one and
a point only the old run has (2-GPU all-reduce on a 1-GPU machine, say) survives. Rows kept from the
base that carry no ``run`` yet get the base's ``created_utc`` as ``run``; the new rows get the new one,
so every row says which run measured it. ``fitted`` is emptied: run ``cascade-plan calibrate`` after.
"""

from __future__ import annotations

import json


def _freeze(x) -> str:
    return json.dumps(x, sort_keys=True, default=str)


def measurement_key(r: dict) -> str:
    return _freeze(["attn", r.get("backend"), r.get("kernel"), r.get("variant"), r.get("config")])


def step_op_key(r: dict) -> str:
    return _freeze(["op", r.get("op"), r.get("config")])


def step_key(r: dict) -> str:
    c = r.get("config") or {}
    return _freeze(["step", r.get("workload"), r.get("model"), r.get("tp"), r.get("position"), r.get("backend"),
                    r.get("mode"), r.get("glue"), c.get("kv_dtype", "bf16"), c.get("weight_dtype", "bf16")])


def mla_key(r: dict) -> str:
    return _freeze(["mla", r.get("backend"), r.get("kernel"), r.get("variant"), r.get("config")])


def _skip_key(r: dict) -> str:
    if (r.get("config") or {}).get("kv_lora_rank"):
        return mla_key(r)
    if "op" in r:
        return step_op_key(r)
    if "workload" in r:
        return step_key(r)
    return measurement_key(r)


def _tag(rows, run):
    for r in rows:
        r.setdefault("run", run)
    return rows


def merged_grid(new: dict | None, base: dict | None, configs: int | None = None) -> dict:
    """The grid two runs' rows cover together: each axis the union of both runs' values, the backends of both, the
    modes joined (a run that finishes another adds only what it lacked: its own grid alone would misdescribe the
    file)."""
    new, base = new or {}, base or {}
    out = {**base, **new}
    axes: dict[str, list] = {}
    for g in (base, new):
        for k, vals in (g.get("axes") or {}).items():
            axes[k] = sorted({*axes.get(k, []), *vals}, key=lambda v: (isinstance(v, str), v))
    out["axes"] = axes
    modes = [m for g in (base, new) for m in str(g.get("mode") or "").replace(" (merged runs)", "").split("+") if m]
    out["mode"] = "+".join(dict.fromkeys(modes)) + " (merged runs)"
    out["backends"] = sorted({*(base.get("backends") or []), *(new.get("backends") or [])})
    if configs is not None:
        out["n_configs"] = configs
    return out


def merge_documents(new: dict, base: dict, keep_base_header: bool = False) -> dict:
    """A new document: `new`'s rows plus `base`'s rows that `new` does not re-measure (see module doc), over the
    union of both runs' grids. `keep_base_header`: the base's probe version, creation time, ceilings and notes stay
    (a run that only completes the base, `--only-missing`); else the newer run's win."""
    if base.get("hardware_id") != new.get("hardware_id") or (base.get("device") or {}).get("name") != \
            (new.get("device") or {}).get("name"):
        raise ValueError(f"cannot merge runs of different GPUs: {(base.get('device') or {}).get('name')!r} "
                         f"and {(new.get('device') or {}).get('name')!r}")
    run_new, run_base = new.get("created_utc"), base.get("created_utc")
    out = json.loads(json.dumps(new))
    base = json.loads(json.dumps(base))
    sections = ("measurements", "skipped", "step_ops", "steps", "step_skipped", "mla", "mla_skipped")
    new_keys = {_skip_key(r) for sec in sections for r in out.get(sec) or []}
    for sec in sections:
        if not (out.get(sec) or base.get(sec)):
            continue
        _tag(out.setdefault(sec, []), run_new)
        kept = [r for r in base.get(sec) or [] if _skip_key(r) not in new_keys]
        out[sec] += _tag(kept, run_base)
    runs = [x for x in (base.get("notes", {}).get("runs") or [{"created_utc": run_base,
                                                                 "probe_version": base.get("probe_version"),
                                                                 "grid": base.get("grid")}])]
    runs.append({"created_utc": run_new, "probe_version": new.get("probe_version"), "grid": new.get("grid")})
    if keep_base_header:
        for k in ("probe_version", "created_utc", "ceilings"):
            if k in base:
                out[k] = base[k]
        out["notes"] = {**(out.get("notes") or {}), **(base.get("notes") or {})}   # the base's notes stay
    else:
        out["notes"] = {**(base.get("notes") or {}), **(out.get("notes") or {})}   # a newer run's note wins
    out["grid"] = merged_grid(new.get("grid"), base.get("grid"),
                              len({_freeze(r.get("config")) for r in out.get("measurements") or []}) or None)
    out["notes"]["runs"] = runs
    out["notes"]["merged"] = ("rows of several probe runs on the same GPU kind: each row's `run` names the run "
                              "(created_utc) that measured it; a re-measured point replaces the older row")
    out["fitted"] = {}
    return out


def merge_sections(new: dict, base: dict, sections: tuple[str, ...] = ("mla", "mla_skipped")) -> dict:
    """`base` with only `sections` of `new` merged in (as merge_documents merges rows) and the run added to
    notes.runs: every other row, the grid, ceilings and notes of `base` stay as they are (a run that measured
    only MLA rows says nothing about the GQA grid or the ceilings of the file it joins)."""
    merged = merge_documents({**{k: v for k, v in new.items() if k not in _ROW_SECTIONS}, **{s: new.get(s) or []
                                                                                           for s in sections}}, base)
    out = json.loads(json.dumps(base))
    for s in sections:
        out[s] = merged[s]
    out.setdefault("notes", {})["runs"] = merged["notes"]["runs"]
    out["notes"]["merged"] = merged["notes"]["merged"]
    out["fitted"] = {}
    return out


def merge_tagged_rows(rows_doc: dict, cal: dict, *, kind: str, what: str, rows: str, section: str, skipped: str,
                      ours, key, add_skipped: bool = True) -> tuple[str, list[dict]]:
    """Merge one probe command's rows file (of `kind`, measured on the calibration's GPU) into the calibration
    `cal` in place: its `rows` list, each row tagged with the run that measured it (`run`: created_utc), joins
    `cal[section]`, a row of the same `key` that `ours` claims replaced; its `skipped` rows join `step_skipped`
    (unless add_skipped is false: a run merged before).
    The run and the new rows (the caller records the run in notes.runs). A file of another kind or GPU: SystemExit."""
    if rows_doc.get("kind") != kind:
        raise SystemExit(f"not a {what} rows file (kind {kind})")
    gpu, cal_gpu = rows_doc["device"]["name"], (cal.get("device") or {}).get("name")
    if gpu != cal_gpu:
        raise SystemExit(f"rows measured on {gpu!r}, calibration on {cal_gpu!r}: not merged")
    run = rows_doc["created_utc"]
    new = [{**r, "run": run} for r in rows_doc.get(rows, []) if ours(r)]
    keys = {key(r) for r in new}
    cal[section] = [r for r in cal.get(section, []) if not (ours(r) and key(r) in keys)] + new
    if add_skipped:
        cal["step_skipped"] = (list(cal.get("step_skipped") or [])
                               + [{**s, "run": run} for s in rows_doc.get(skipped, [])])
    return run, new


_ROW_SECTIONS = ("measurements", "skipped", "step_ops", "steps", "step_skipped", "mla", "mla_skipped")
