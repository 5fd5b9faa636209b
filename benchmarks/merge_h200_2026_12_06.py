"""Add two sets of H200 rows the calibration lacked, keeping its grid, ceilings, probe version and notes:

- FlashInfer's rows of the run of 2026-12-06 (benchmarks/raw/h200-2026-12-06/regimes-owed-rows.json): the regimes
  grid's Qwen2.5-1.5B layer (query groups of 6, 2 KV heads, head dim 128) at 64 prompts of 512 tokens x 16 with fp8
  KV and a 16- or 1,024-token suffix, every FlashInfer kernel. `--merge-into --only-missing` had written them into a
  copy of the file whose grid, ceilings, probe version and notes were the run's.
- Triton's cascade rows (the whole cascade and its prefix, suffix and merge passes) of the probe 1.4 run
  (benchmarks/raw/h200-2026-12-04/all-probe-1.4.json) at the grid's rollout starts (64 x 16 at 512 tokens, 32 x 16
  at 2K, one group of 1,024; no suffix or a 16-token one) on every regime shape. Probe 1.4 changed Triton's decode
  (page-aware blocks), not its cascade: on the 219 configurations both runs timed, the cascade rows of 1.4 over 1.3
  have median ratio 1.002 (each pass 1.002-1.005), and the 2026-12-06 diagnosis run (probe 1.5.5,
  benchmarks/raw/h200-2026-12-06/diag.json) times 32 x 16 at 2K with a 16-token suffix, head dim 256, at 128.6 us
  against 1.4's 129.7. Triton's rows below a 128-token suffix existed nowhere else, so the planner priced a
  rollout's first step by a suffix-pass fit trained at 128 tokens and more: 12 us for 512 sequences' one-page suffix
  pass at head dim 256 that takes 51 us. Only rows the hold-out rule keeps out of the fits join (rollout starts and
  the regimes' shapes), so Triton's fits stay trained on probe 1.3's rows alone; its decode rows stay probe 1.3's.
- Triton's cascade rows of the regimes run of 2026-12-06, second session
  (benchmarks/raw/h200-2026-12-06b/triton-owed-rows.json, probe 1.5.5): the seven regimes configurations with no
  Triton rows at all, among them Qwen2.5-1.5B's layer at 64 x 16 sequences and 512 tokens with fp8 KV and a 16-token
  suffix (a rollout start). The planner had priced that first step's one-page suffix pass for 1,024 sequences from a
  fit trained at 128 tokens and more: 5 us, where the run measures 28.5 us. All seven are held out of the fits.
  Probe 1.5.5's cascade kernels are probe 1.3's: on the 77 regimes configurations both timed
  (benchmarks/raw/h200-2026-12-06b/triton-rt.json) the cascade rows' median ratio is 0.998 (each pass 0.989-0.999).
  Their decode rows are not merged: probe 1.5.5's per-sequence decode is not probe 1.3's (median 0.79 there).

Usage: python benchmarks/merge_h200_2026_12_06.py CALIBRATION.json [OUT.json], then `cascade-plan calibrate OUT.json`.
The rollout starts are held out of the fits (calibration/holdout.py: rollout_start)."""

import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import msgspec  # noqa: E402
from merge_h200_2026_12_05 import RUN as PROBE_1_4_RUN  # noqa: E402
from merge_h200_2026_12_05 import add_rows  # noqa: E402

from cascade_plan.calibration.holdout import is_held_out  # noqa: E402
from cascade_plan.calibration_schema.attention import AttentionConfigDoc  # noqa: E402
from kernels_probe.calibration_file import write_atomic  # noqa: E402

RAW = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "raw"
RUN = RAW / "h200-2026-12-06" / "regimes-owed-rows.json"
TRITON_OWED = RAW / "h200-2026-12-06b" / "triton-owed-rows.json"
CASCADE_KERNELS = ("cascade_total", "cascade_prefix", "cascade_suffix", "cascade_merge")
ROLLOUT_START_SUFFIXES = (0, 16)
SOURCES = (
    (RUN, lambda m: m["backend"] in ("flashinfer", "flashinfer-fa2"), "flashinfer_rows_2026_12_06",
     "{n} FlashInfer rows of the regimes grid measured on 2026-12-06 (probe 1.5.5's FlashInfer wrappers, the same "
     "kernels): Qwen2.5-1.5B's layer at 64 x 16 sequences, 512-token prompts, fp8 KV, suffix 16 and 1,024"),
    (PROBE_1_4_RUN, lambda m: (m["backend"] == "triton" and m["kernel"] in CASCADE_KERNELS
                               and m["config"]["suffix_tokens"] in ROLLOUT_START_SUFFIXES
                               and is_held_out(msgspec.convert(m["config"], AttentionConfigDoc))),
     "triton_cascade_rows_2026_12_04",
     "{n} Triton cascade rows of the probe 1.4 run of 2026-12-04 at the rollout starts this file lacked (its cascade "
     "kernels are probe 1.3's: median ratio 1.002 on the configurations both runs timed), all held out of the fits; "
     "Triton's decode rows stay probe 1.3's"),
    (TRITON_OWED, lambda m: m["backend"] == "triton" and m["kernel"] in CASCADE_KERNELS,
     "triton_cascade_rows_2026_12_06",
     "{n} Triton cascade rows of the regimes grid measured on 2026-12-06 (probe 1.5.5, whose cascade kernels are "
     "probe 1.3's: median ratio 0.998 on the 77 regimes configurations both timed) at the seven configurations that "
     "had no Triton rows, all held out of the fits; their decode rows are not merged"),
)


def main(argv: list[str]) -> None:
    src = pathlib.Path(argv[0])
    out = pathlib.Path(argv[1]) if len(argv) > 1 else src
    doc = json.loads(src.read_text())
    for path, keep, key, note in SOURCES:
        doc, n = add_rows(doc, json.loads(path.read_text()), keep, key, note)
        print(f"{path.name}: {n} rows added")
    write_atomic(out, doc)
    print(f"wrote {out}: {len(doc['measurements'])} measurements")


if __name__ == "__main__":
    main(sys.argv[1:])
