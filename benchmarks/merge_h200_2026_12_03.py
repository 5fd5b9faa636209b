"""Merge the H200 runs of 2026-12-03 (benchmarks/raw/h200-2026-12-03/) into a calibration file of the same GPU, then
`cascade-plan calibrate` fits it. The runs, oldest first, each replacing the rows it re-measured:

* step13.json: `--step --no-attention` (Llama-3-8B's GEMMs, glue, layer graphs at TP 1; the stepped workloads'
  and held-out whole steps, every backend, Triton's with the probe 1.3 kernels);
* step-regimes.json: `--step --no-attention --step-set regimes` (small models' GEMMs, glue, layer graphs; held-out
  regime steps);
* regimes.json: `--grid regimes --backend triton --backend flashinfer` (cut short by its time budget: FlashInfer's
  long-context and long-suffix rows came in the next run);
* all13.json: `--grid all --only-missing` over the file less its Triton rows: every Triton row of the full and
  coverage grids again with the probe 1.3 kernels, and FlashInfer's rows the regimes run did not reach.

The file keeps its grid (axes joined with the new runs'), its 2-GPU rows and everything else no run re-measured.
Usage: python benchmarks/merge_h200_2026_12_03.py CALIBRATION.json [OUT.json]"""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import merge_documents

RAW = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "raw" / "h200-2026-12-03"
RUNS = ("step13.json", "step-regimes.json", "regimes.json", "all13.json")


def main(argv: list[str]) -> None:
    src = pathlib.Path(argv[0])
    out = pathlib.Path(argv[1]) if len(argv) > 1 else src
    base = json.loads(src.read_text())
    runs = {name: json.loads((RAW / name).read_text()) for name in RUNS}
    doc = base
    for run in runs.values():
        doc = merge_documents(run, doc)
    axes = {}
    for g in [base["grid"]] + [runs[n]["grid"] for n in ("regimes.json", "all13.json")]:
        for k, v in (g.get("axes") or {}).items():
            axes[k] = sorted(set(axes.get(k, [])) | set(v), key=str)
    doc["grid"] = {**base["grid"], "mode": "full+coverage+regimes (merged runs)", "axes": axes,
                   "n_configs": len({json.dumps(m["config"], sort_keys=True) for m in doc["measurements"]}),
                   "backends": sorted({m["backend"] for m in doc["measurements"]})}
    write_atomic(out, doc)
    print(f"wrote {out}: {len(doc['measurements'])} measurements, {len(doc['step_ops'])} op rows, "
          f"{len(doc['steps'])} steps")


if __name__ == "__main__":
    main(sys.argv[1:])
