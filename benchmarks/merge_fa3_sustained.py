"""Put retime_fa3_sustained.py's sustained times into a calibration file's FlashInfer (FA3) cascade rows: each matched
row gets `sustained_s` (what fits and interpolation then use, Measurement.timed_s), `timing: "sustained"` and the
run it came from; its burst timing (`median_s`, p10, p90) stays as measured. Run `cascade-plan calibrate FILE`
afterwards.

    python benchmarks/merge_fa3_sustained.py calibrations/h200-probe-2026-12-01.json \\
        benchmarks/raw/h200-2026-12-01c/fa3-sustained.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cascade_plan.atomic import write_text_atomic
from kernels_probe.timing import SUSTAIN_S, SUSTAINED


def _key(cfg: dict) -> str:
    return json.dumps(cfg, sort_keys=True)


def merge(doc: dict, retimed: dict, run: str) -> int:
    by = {_key(r["config"]): r for r in retimed["rows"] if "sustained_s" in r}
    n = 0
    for m in doc["measurements"]:
        if (m["backend"], m["kernel"], m.get("variant")) != ("flashinfer", "cascade_total", "auto"):
            continue
        r = by.get(_key(m["config"]))
        if r is None:
            continue
        m.update(sustained_s=r["sustained_s"], timing=SUSTAINED, timing_run=run)
        n += 1
    doc.setdefault("notes", {})["sustained"] = (
        f"{n} FlashInfer cascade rows (backend flashinfer, FA3) re-timed back to back: flushed replays for "
        f"{retimed.get('sustain_s', SUSTAIN_S)} s, the median of the last half (`sustained_s`); `median_s` is the "
        f"burst timing ({run})")
    return n


def main(argv: list[str]) -> int:
    path, retimed_path = Path(argv[0]), Path(argv[1])
    doc = json.loads(path.read_text())
    retimed = json.loads(retimed_path.read_text())
    n = merge(doc, retimed, f"benchmarks/raw/{retimed_path.parent.name}/{retimed_path.name}")
    write_text_atomic(path, json.dumps(doc, indent=1) + "\n")
    print(f"{path}: {n} rows re-timed sustained")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
