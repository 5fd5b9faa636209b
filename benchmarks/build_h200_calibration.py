"""Build calibrations/h200-probe-2026-12-01.json from the raw runs of 2026-12-01 (benchmarks/raw/h200-2026-12-01/)
merged over the 2026-11-30 file: the new runs' rows replace re-measured points; what only the old run has
(the full bf16 attention grid, 2-GPU all-reduce and TP-2 steps) is kept with its `run` tag. Then
`cascade-plan calibrate` fits it. Usage: python benchmarks/build_h200_calibration.py OLD.json"""

import json
import pathlib
import sys

from kernels_probe.calibration_file import write_atomic
from kernels_probe.merge import merge_documents, merge_sections

root = pathlib.Path(__file__).resolve().parents[1]
raw = root / "benchmarks" / "raw" / "h200-2026-12-01"
# the 2026-11-30 file (git show 6671a0c:calibrations/h200-probe-2026-11-30.json > old.json)
old = json.loads(pathlib.Path(sys.argv[1]).read_text())
doc = old
for name in ("coverage.json", "step-run2.json", "workload-rl-rollouts-64-fp8.json", "mla.json"):
    doc = merge_documents(json.loads((raw / name).read_text()), doc)
cov = json.loads((raw / "coverage.json").read_text())
axes = {k: sorted(set(old["grid"]["axes"].get(k, [])) | set(cov["grid"]["axes"].get(k, []))) for k in sorted(
        set(old["grid"]["axes"]) | set(cov["grid"]["axes"]))}
doc["grid"] = {**old["grid"], "mode": "full+coverage (merged runs)", "axes": axes,
               "n_configs": len({json.dumps(m["config"], sort_keys=True) for m in doc["measurements"]}),
               "backends": sorted({m["backend"] for m in doc["measurements"]})}
doc["ceilings"] = cov["ceilings"]
doc["created_utc"] = cov["created_utc"]
# the MLA runs at 16/32/64/128 query heads per GPU (TP 8/4/2/1), bf16 and fp8 latents, and probe --workload
# deepseek-v3-grpo-tp8 (its MLA shapes): their MLA rows only, later runs replacing re-measured points
for name in ("mla-tp.json", "mla-tp-run7.json", "mla-plan-deepseek-v3-grpo-tp8.json",
             "mla-plan-deepseek-v3-grpo-tp8-fp8.json"):
    doc = merge_sections(json.loads((raw / name).read_text()), doc)
out = root / "calibrations" / "h200-probe-2026-12-01.json"
write_atomic(out, doc)
print(f"wrote {out}: {len(doc['measurements'])} measurements, {len(doc['step_ops'])} op rows, "
      f"{len(doc['steps'])} steps")
