"""Take out of a calibration file the Triton rows with fp8 KV that an older probe's kernels measured, then
`cascade-plan calibrate` refits it.

The probe's Triton kernels are its own and change with its version. Up to probe 1.2 they widened an e4m3 cache to
bf16 and ran bf16 dots; probe 1.3 widens it to fp16 (one conversion per two values), 1.36x faster per-sequence
decode over fp8 pages at the median (docs/probe-notes.md, "Probe 1.3 kernels"). Re-probing replaced every Triton
row of the full, coverage and regimes grids, but not the rows of `probe --workload rl-rollouts-64 --kv-dtype fp8`
(probe 1.1, 2026-12-01) nor the fp8-KV whole steps of that day (rl-rollouts-64 and the two MoE workloads): the
fits then averaged two kernels, and validation priced probe 1.3's kernels against steps that ran probe 1.1's.
Those rows stay in benchmarks/raw/h200-2026-12-01/ (workload-rl-rollouts-64-fp8.json, moe_steps*.json).

Rule: a Triton attention row or whole step (a step counts by its attention backend) with fp8 KV whose run
(`run`, matched to notes.runs) is older than the file's first run of probe `--since` (1.3.0). What was taken out
is recorded in notes.removed. Usage:
    python benchmarks/drop_superseded_triton_rows.py CALIBRATION.json [OUT.json] [--since 1.3.0]"""

from __future__ import annotations

import json
import pathlib
import sys
from collections.abc import Callable

from kernels_probe.calibration_file import write_atomic

SECTIONS = ("measurements", "skipped", "steps")


def kv_dtype(row: dict) -> str:
    return row.get("kv_dtype") or (row.get("config") or {}).get("kv_dtype") or "bf16"


def superseded(doc: dict, since: str) -> tuple[str, Callable[[dict], bool]]:
    """(the first run of probe `since`, a predicate over rows): Triton rows with fp8 KV measured before it."""
    firsts = [r["created_utc"] for r in (doc.get("notes") or {}).get("runs") or [] if r.get("probe_version") == since]
    if not firsts:
        raise SystemExit(f"no run of probe {since} in notes.runs: nothing supersedes the older rows")
    first = min(firsts)
    return first, lambda r: r.get("backend") == "triton" and kv_dtype(r) == "fp8" and (r.get("run") or "") < first


def drop(doc: dict, since: str = "1.3.0") -> dict:
    first, old = superseded(doc, since)
    out = dict(doc)
    removed = []
    for sec in SECTIONS:
        gone = [r for r in doc.get(sec) or [] if old(r)]
        if gone:
            out[sec] = [r for r in doc[sec] if not old(r)]
            removed.append({"section": sec, "rows": len(gone), "runs": sorted({r.get("run") for r in gone}),
                            "workloads": sorted({r["workload"] for r in gone if "workload" in r})})
    notes = dict(out.get("notes") or {})
    notes["removed"] = list(notes.get("removed") or []) + [{
        "what": f"Triton rows and steps with fp8 KV measured before probe {since}'s first run ({first})",
        "why": "probe kernels before 1.3 ran bf16 dots over an e4m3 cache; 1.3 runs fp16 dots (1.36x faster decode "
               "over fp8 pages at the median): these rows describe kernels the file no longer prices",
        "kept_in": "benchmarks/raw/h200-2026-12-01/", "sections": removed}]
    out["notes"] = notes
    out["fitted"] = {}
    return out


def main(argv: list[str]) -> None:
    args = [a for a in argv if not a.startswith("--")]
    since = argv[argv.index("--since") + 1] if "--since" in argv else "1.3.0"
    args = [a for a in args if a != since]
    src = pathlib.Path(args[0])
    dst = pathlib.Path(args[1]) if len(args) > 1 else src
    doc = drop(json.loads(src.read_text()), since)
    write_atomic(dst, doc)
    for r in doc["notes"]["removed"][-1]["sections"]:
        print(f"{r['section']}: {r['rows']} rows removed (runs {', '.join(r['runs'])})"
              + (f"; workloads {', '.join(r['workloads'])}" if r["workloads"] else ""))
    print(f"wrote {dst}: run `cascade-plan calibrate {dst}` next")


if __name__ == "__main__":
    main(sys.argv[1:])
