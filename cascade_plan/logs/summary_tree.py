"""The workload tree that best summarises a log, as a workload YAML every other command takes.

Per step and cascade level: how many shared nodes there were and their token-weighted mean length;
the typical step (the median over the steps that use the typical depth) gives each level's tokens
and copies, the sequences per innermost node give `samples`, requests' logged lifetimes give
`output_tokens` and their private prompt. Sequences that share nothing become a leaf of their own."""

from __future__ import annotations

from typing import Any

import numpy as np

from cascade_plan.logs.duck_reader import LogTables


def _median_int(x: np.ndarray, floor: int = 0) -> int:
    return max(floor, int(round(float(np.median(x))))) if x.size else floor


def summary_tree(t: LogTables) -> tuple[dict[str, Any], list[str]]:
    """(tree as a workload `tree:` mapping, notes on how it was inferred)."""
    notes = []
    if t.request_steps.size:
        output = _median_int(t.request_steps, 1)
        private = _median_int(t.request_private)
        notes.append(f"output_tokens and private_tokens: medians over {t.request_steps.size} requests' logged "
                     "steps (requests cut by the log's ends count short)")
    else:
        # compact form: no request ids; with requests at every age, mean private context ~ output / 2
        output = _median_int(2 * t.suffix_tokens / np.maximum(t.seqs, 1), 1)
        private = 0
        notes.append("output_tokens: twice the median private context per sequence (compact log, no request ids)")

    S = t.steps
    depth = np.zeros(S, np.int64)
    if t.node_step.size:
        np.maximum.at(depth, t.node_step, t.node_level)
    used = depth[depth > 0]
    unshared = _median_int(t.seqs - t.shared_seqs)
    if used.size == 0:
        return {"tokens": 0, "samples": max(1, _median_int(t.seqs, 1)), "output_tokens": output,
                "private_tokens": private}, notes + ["no step shares a prefix"]
    D = int(np.bincount(used).argmax())
    typical = depth == D
    notes.append(f"{int(typical.sum())} of {S} steps share over {D} level(s); their medians give the tree")
    inst = np.zeros((D + 1, S))
    tok = np.zeros((D + 1, S))
    readers = np.zeros(S)
    keep = t.node_level <= D
    np.add.at(inst, (t.node_level[keep], t.node_step[keep]), t.node_instances[keep])
    np.add.at(tok, (t.node_level[keep], t.node_step[keep]), (t.node_tokens * t.node_instances)[keep])
    deepest = t.node_level == D
    np.add.at(readers, t.node_step[deepest], t.node_readers[deepest])
    levels: list[dict[str, Any]] = []
    prev = 1.0
    for lvl in range(1, D + 1):
        n = float(np.median(inst[lvl, typical]))
        mean_tok = np.where(inst[lvl] > 0, tok[lvl] / np.maximum(inst[lvl], 1), 0)
        levels.append({"tokens": _median_int(mean_tok[typical]), "copies": max(1, int(round(n / prev)))})
        prev = max(n, 1.0)
    samples = _median_int(readers[typical] / np.maximum(inst[D, typical], 1), 1)
    leaf = levels[-1]
    leaf.update({"samples": samples, "output_tokens": output, "private_tokens": private})
    node: dict[str, Any] = leaf
    for lv in reversed(levels[:-1]):
        node = {**lv, "children": [node]}
    if unshared:
        notes.append(f"{unshared} sequences per step (median) share nothing: a leaf of their own")
        node = {"tokens": 0, "children": [node, {"tokens": 0, "samples": unshared, "output_tokens": output,
                                                 "private_tokens": private}]}
    return node, notes


def workload_yaml(tree: dict, notes: list[str], *, name: str, source: str, model: str, hardware: str,
                  kv_dtype: str, weight_dtype: str, tp: int) -> str:
    import yaml

    doc = {"schema_version": 1, "name": name, "description": f"summarised from {source} by cascade-plan analyze",
           "model": model, "hardware": hardware, "kv_dtype": kv_dtype, "weight_dtype": weight_dtype, "tp": tp,
           "tree": tree}
    head = "".join(f"# {n}\n" for n in notes)
    return ("# The workload tree that best summarises a batch log (cascade-plan analyze --workload-out).\n" + head
            + yaml.safe_dump(doc, sort_keys=False))
