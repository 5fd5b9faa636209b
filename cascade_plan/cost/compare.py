"""The same workload on several GPUs / KV dtypes: one row of figures per configuration (render/compare_table.py
draws them)."""

from __future__ import annotations

import numpy as np

from cascade_plan.cost.cost_params import CostParams
from cascade_plan.cost.estimate import estimate
from cascade_plan.cost.flat_tree import flatten
from cascade_plan.errors import InputError
from cascade_plan.inputs.workload import Scenario

# Node x segment cells priced over all rows: a run prices every shared node in every segment of steps
# between two output lengths (run_load), ~0.1 us a cell on one core. 24M keeps a compare within ~3 s.
MAX_COMPARE_CELLS = 24_000_000


def check_compare_size(scns: list[Scenario]) -> None:
    """Refuse, before pricing anything, a compare whose rows x (nodes x distinct output lengths) would
    take more than seconds; a single `estimate` of the same tree is never refused here."""
    if len(scns) <= 1:
        return
    cells_by_tree: dict[int, int] = {}
    total = 0
    for scn in scns:
        key = id(scn.tree)
        if key not in cells_by_tree:
            flat = flatten(scn.tree)
            cells_by_tree[key] = max(1, flat.node_tokens.size) * np.unique(flat.leaf_output).size
        total += cells_by_tree[key]
    if total > MAX_COMPARE_CELLS:
        per = max(cells_by_tree.values())
        raise InputError(f"{len(scns)} configurations of a tree this wide ({per:,} node x output-length cells each) "
                         f"are {total:,} cells to price, more than the {MAX_COMPARE_CELLS:,} one compare handles in "
                         f"seconds: compare at most {max(1, MAX_COMPARE_CELLS // per)} GPU x KV dtype pairs at once, "
                         "or `estimate` each")

def compare_rows(scns: list[Scenario], params: list[CostParams], estimator=estimate) -> list[dict]:
    """One row per scenario; `estimator` is `estimate` or anything with its signature that returns an
    Estimate (the CLI passes one that attaches the verdict's evidence)."""
    check_compare_size(scns)
    rows = []
    for scn, p in zip(scns, params):
        est = estimator(scn, p)
        rows.append({
            "hardware": scn.hardware.id, "kv_dtype": scn.kv_dtype,
            "numbers": p.numbers, "numbers_label": p.label, "kv_bytes_per_token": est.kv_bytes_per_token,
            "weight_s": est.steps[0].weight_s, "final_per_sequence_step_s": est.final_step.per_sequence.step_s,
            "final_cascade_step_s": est.final_step.cascade.step_s, "run_per_sequence_s": est.run_per_sequence_s,
            "run_cascade_s": est.run_cascade_s, "run_speedup": est.run_speedup,
            "max_sequences_fit": est.memory.max_sequences, "fits": est.memory.fits,
            "verdict": est.verdict.level, "verdict_text": est.verdict.text,
            "speedup_range": list(est.verdict.speedup_range) if est.verdict.speedup_range else None,
            "uncalibrated": p.mode == "default",
        })
    return rows
