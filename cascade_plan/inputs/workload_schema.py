"""JSON Schema of the workload YAML, generated from the typed schema (msgspec structs in workload.py), for
editor completion and validation. `cascade-plan schema` prints it; schemas/workload.schema.json is the
committed copy (a test keeps the two equal): regenerate with `cascade-plan schema > schemas/workload.schema.json`."""

from __future__ import annotations

import json

import msgspec

from cascade_plan.inputs.hardware import ALIASES, builtin_hardware_ids
from cascade_plan.inputs.model_presets import PRESETS
from cascade_plan.inputs.workload import Workload

# What editors show on hover. Keyed by struct, then field; a test requires one for every property.
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "Workload": {
        "schema_version": "Workload format version; this cascade-plan reads 1.",
        "model": "A model preset id (`cascade-plan models`), a Hugging Face repo id a preset cites or that the local "
                 "HF cache holds, a model folder, or a path to a config.json (relative to this file).",
        "tree": "The prefix-sharing tree: prompt tokens shared by everything below each node.",
        "name": "Name in reports and check output (default: the file name).",
        "description": "Free text: what this workload represents.",
        "hardware": "A hardware profile id (`cascade-plan hardware`; aliases such as h100, a100) or a path to a "
                    "profile YAML.",
        "kv_dtype": "KV cache element type.",
        "weight_dtype": "Weight element type.",
        "tp": "Tensor-parallel degree (KV heads and weights are split across this many GPUs).",
        "prefix_caching": ("The shared prefix is stored once, in shared physical KV blocks (vLLM/SGLang prefix "
                           "caching)."),
        "block_size": "KV page size in tokens.",
        "checks": "Capacity gates for `cascade-plan check` (command-line options win).",
        "moe_routing": ("MoE models: how the router spreads a step's tokens over the experts. balanced (uniform, the "
                        "default) or skewed (a few experts take most tokens, as on narrow data such as one RL prompt "
                        "set); skewed is priced from skewed rows where measured, else from the ratio the H200 probe "
                        "measured, and the output says which."),
    },
    "TreeNode": {
        "name": "Label for this node in reports.",
        "tokens": "Prompt tokens shared by everything below this node.",
        "copies": "How many distinct instances of this node exist under its parent.",
        "children": "Child nodes (an internal node); a leaf has `samples` instead.",
        "samples": "On a leaf: sequences decoding under it (n, beams, rollouts per prompt).",
        "output_tokens": "On a leaf: tokens each sequence decodes.",
        "private_tokens": "On a leaf: prompt tokens of each sequence's own (not shared).",
    },
    "Checks": {
        "min_run_speedup": "Fail below this run speedup (per-sequence time / cascade time).",
        "max_step_s": "Fail if the slowest decode step, in the mode the planner picks, exceeds this many seconds.",
        "max_run_s": "Fail if the whole decode, in the mode the planner picks, exceeds this many seconds.",
        "max_tpot_ms": "Fail if the mean decode step (TPOT), in the mode the planner picks, with the batch in waves of "
                       "sibling groups that fit in memory, exceeds this many milliseconds; a failure names the "
                       "cheapest configuration that passes (`cascade-plan capacity`).",
        "max_rollout_s": "Fail if the decode of the whole batch, in waves of sibling groups that fit in memory, in the "
                         "mode the planner picks, exceeds this many seconds; a failure names the cheapest "
                         "configuration that passes.",
        "min_sequences_fit": "Fail if fewer sequences of this shape fit in GPU memory beside the weights.",
        "cascade_chosen": "Require that the planner picks cascade (true) or per-sequence attention (false).",
        "vllm_uses_cascade": "Require vLLM's cascade gate (opted in) to use cascade (true) or not (false).",
    },
}


def workload_json_schema() -> dict:
    schema = msgspec.json.schema(Workload)
    defs = schema["$defs"]
    for struct, fields in DESCRIPTIONS.items():
        for field, text in fields.items():
            defs[struct]["properties"][field]["description"] = text
    # Completion offers the built-in ids; any other string (a path, a repo id) stays valid.
    defs["Workload"]["properties"]["model"]["examples"] = list(PRESETS)
    defs["Workload"]["properties"]["hardware"]["examples"] = builtin_hardware_ids() + sorted(ALIASES)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "cascade-plan workload (schema_version 1)", **schema}


def schema_text() -> str:
    return json.dumps(workload_json_schema(), indent=2) + "\n"
