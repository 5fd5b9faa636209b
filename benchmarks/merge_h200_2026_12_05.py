"""Add FlashInfer's rows of the probe 1.4 run (benchmarks/raw/h200-2026-12-04/all-probe-1.4.json) at the configurations
the H200 calibration lacks: the grid's new 1,024-sequence points where a rollout starts (64 x 16 at 512 tokens, 32 x
16 at 2K, one group of 1,024; no suffix or a 16-token one) on every regime shape, and the three-level tree rows the
earlier trees run left out. FlashInfer's kernels are the same in both runs; its rows the calibration already holds
stay as they are. Triton's rows and whole steps stay probe 1.3's: the probe 1.4 Triton rows time page-aware blocks
the fitted model does not price (docs/probe-notes.md), so the planner keeps pricing the kernel its rows measured.

Usage: python benchmarks/merge_h200_2026_12_05.py CALIBRATION.json [OUT.json], then `cascade-plan calibrate OUT.json`.
The rollout starts among the added rows are held out of the fits (calibration/holdout.py: rollout_start)."""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import measurement_key, merged_grid

RUN = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "raw" / "h200-2026-12-04" / "all-probe-1.4.json"
BACKENDS = ("flashinfer", "flashinfer-fa2")


def add_rows(base: dict, run: dict, keep, note_key: str, note: str) -> tuple[dict, int]:
    """`base` with `run`'s rows that `keep` (a row -> bool) takes and it lacks, each tagged with the run that measured
    it; every other row, the ceilings and notes as they were, the grid's axes widened to the added rows' values; each
    run of an added row joins notes.runs and `note` (given the number of rows added: "{n}") goes under
    notes[note_key]."""
    have = {measurement_key(m) for m in base["measurements"]}
    new = [{**m, "run": m.get("run") or run.get("created_utc")} for m in run["measurements"]
           if keep(m) and measurement_key(m) not in have]
    doc = {**base, "measurements": base["measurements"] + new}
    configs = {json.dumps(m["config"], sort_keys=True) for m in doc["measurements"]}
    # the grid's axes take the added rows' values (the run's grid would name configurations that did not join)
    added_axes = {k: sorted({m["config"][k] for m in new if k in m["config"]}) for k in base["grid"].get("axes") or {}}
    doc["grid"] = merged_grid({"axes": added_axes}, base["grid"], len(configs))
    notes = doc["notes"] = dict(base.get("notes") or {})
    if new or note_key not in notes:         # a second run over its own output keeps the first one's note
        notes[note_key] = note.format(n=len(new))
    if new and "runs" in notes:          # every run that measured an added row, as the run's own notes list it
        listed = {r.get("created_utc"): r for r in (run.get("notes") or {}).get("runs") or []}
        listed.setdefault(run.get("created_utc"), {"created_utc": run.get("created_utc"),
                                                   "probe_version": run.get("probe_version"), "grid": run.get("grid")})
        have_runs = {r.get("created_utc") for r in notes["runs"]}
        notes["runs"] = [*notes["runs"], *(listed[t] for t in sorted({m["run"] for m in new} - have_runs)
                                           if t in listed)]
    return doc, len(new)


def main(argv: list[str], run_path: pathlib.Path = RUN, note_key: str = "flashinfer_rows_2026_12_04",
         note: str = ("{n} FlashInfer rows of the probe 1.4 run of 2026-12-04 at configurations this file lacked "
                      "(1,024-sequence rollout starts, three-level trees); Triton's rows stay probe 1.3's")) -> None:
    src = pathlib.Path(argv[0])
    out = pathlib.Path(argv[1]) if len(argv) > 1 else src
    doc, n = add_rows(json.loads(src.read_text()), json.loads(run_path.read_text()),
                      lambda m: m["backend"] in BACKENDS, note_key, note)
    write_atomic(out, doc)
    print(f"wrote {out}: {n} FlashInfer rows added, {len(doc['measurements'])} measurements")


if __name__ == "__main__":
    main(sys.argv[1:])
