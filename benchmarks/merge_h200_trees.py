"""Add a `--grid trees` run's three-level tree rows to a calibration file of the same GPU, keeping everything else of
the file (its ceilings, grid and notes, so `cascade-plan calibrate` fits what it fitted before: tree rows are
validation only, calibration/holdout.py is_tree). A tree row the file already holds is replaced.

Usage: python benchmarks/merge_h200_trees.py CALIBRATION.json TREES.json [OUT.json]"""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import measurement_key


def _tree(r: dict) -> bool:
    return bool((r.get("config") or {}).get("root_tokens"))


def main(argv: list[str]) -> None:
    src, run_path = pathlib.Path(argv[0]), pathlib.Path(argv[1])
    out = pathlib.Path(argv[2]) if len(argv) > 2 else src
    doc, run = json.loads(src.read_text()), json.loads(run_path.read_text())
    if doc.get("hardware_id") != run.get("hardware_id"):
        raise SystemExit(f"{run_path}: measured on {run.get('hardware_id')!r}, not {doc.get('hardware_id')!r}")
    for part in ("measurements", "skipped"):
        rows = [dict(r, run=r.get("run", run.get("created_utc"))) for r in run.get(part) or [] if _tree(r)]
        new = {measurement_key(r) for r in rows}
        doc[part] = [r for r in doc.get(part) or [] if measurement_key(r) not in new] + rows
        print(f"{part}: {len(rows)} tree rows added")
    doc["fitted"] = {}
    write_atomic(out, doc)
    print(f"wrote {out}: run `cascade-plan calibrate {out}`")


if __name__ == "__main__":
    main(sys.argv[1:])
