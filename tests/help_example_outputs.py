"""What each `cascade-plan ... --help` example must print, beside exiting 0: a line or number that says the
example did its job. The figures are arithmetic or structure, not calibrated times, so a new calibration
moves none of them: KV bytes per token 2*L*Hkv*d*b (Llama-3-8B: 2*32*8*128*2 = 131,072 B; Llama-3-70B at TP 8:
one KV head per GPU, 2*80*1*128*2 = 40,960 B), redundant prefix reads (2 prompts x 63 extra reads x 512 MiB
= 63 GiB), usable memory (141 GB less the 10% reserve = 118 GiB), decode steps = output tokens, siblings
that prefix-aware routing keeps together (all 16)."""

from __future__ import annotations

import json
import re
from typing import Callable


def _flat(text: str) -> str:
    """The output with every run of whitespace one space (rich wraps tables to the terminal's width)."""
    return " ".join(text.split())


def has(*patterns: str) -> Callable[[str], None]:
    def check(output: str) -> None:
        flat = _flat(output)
        for p in patterns:
            assert re.search(p, flat), f"expected {p!r} in the output:\n{output[:3000]}"
    return check


def json_doc(predicate: Callable[[dict], bool], what: str) -> Callable[[str], None]:
    def check(output: str) -> None:
        doc = json.loads(output)
        assert doc["schema_version"] == 1 and predicate(doc), f"{what}: {json.dumps(doc)[:2000]}"
    return check


def _shipped_count(output: str) -> None:
    from cascade_plan.inputs.workload_catalog import builtin_workloads

    n = len(builtin_workloads())
    has(rf"wrote report/report\.md \({n} workloads\)")(output)


def _every_shipped_workload(output: str) -> None:
    from cascade_plan.inputs.workload_catalog import builtin_workloads

    names = list(builtin_workloads())
    assert len(names) >= 5
    has(*(rf"(^| ){re.escape(n)} " for n in names))(output)


def _route_rows(doc: dict) -> bool:
    rows = {r["policy"]: r for r in doc["policies"]}
    return (set(rows) == {"random", "round-robin", "least-loaded", "prefix-aware"} and doc["forks_together"]
            and all(r["siblings_per_group"] == 16 and r["siblings_mean"] == 16.0 for r in rows.values()))


KV_8B = r"KV bytes per token 131,072 B = 128 KiB"
EXPECTED: dict[str, Callable[[str], None]] = {
    "estimate rl-rollouts-64 --ideal": has(r"Numbers: ideal", KV_8B, r"redundant prefix reads 63 GiB",
                                           r"128 sequences, 1024 decode steps"),
    "estimate --model llama-3-8b --hardware h100-sxm --prefix 4096 --groups 2 --samples 64 --output-tokens 1024":
        has(r"llama-3-8b, 2x64 seqs, prefix 4096, output 1024", KV_8B, r"shared prefix, level 0 2 x 4,096 tokens"),
    "estimate --model meta-llama/Meta-Llama-3-70B --hardware h100 --tp 8 --prefix 8000 --samples 16 "
    "--output-tokens 512":
        has(r"llama-3-70b on NVIDIA H100", r"TP 8; 16 sequences, 512 decode steps",
            r"KV bytes per token 40,960 B = 40 KiB"),
    "estimate rl-rollouts-64 --hardware h100 --hbm-bandwidth 4.8 --memory 141GB":
        has(r"what-if, user-supplied: HBM 4\.8 TB/s, memory 141GB", r"118 GiB usable", r"Numbers: what-if on measured"),
    "breakeven rl-rollouts-64": has(r"Breakeven: llama-3-8b on NVIDIA H100 SXM5 80GB, KV bf16, TP 1, 2 prompt group",
                                    r"Shortest shared prefix", r"suffix 512"),
    "breakeven --model llama-3-70b --hardware h200 --tp 8 --prefix 256:65536:log --batch 1:512:log --suffix 0,512,4096":
        has(r"llama-3-70b on NVIDIA H200 SXM 141GB, KV bf16, TP 8", r"suffix 0 . suffix 512 . suffix 4,096"),
    "compare rl-rollouts-64 --hardware a100-80gb,h100-sxm,h200,b200 --kv-dtype bf16,fp8":
        has(*(rf" {gpu} {kv} " for gpu in ("a100-80gb", "h100-sxm", "h200", "b200") for kv in ("bf16", "fp8"))),
    "capacity rl-rollouts-64 --tpot-ms 12":
        has(r"rl-rollouts-64 \(llama-3-8b\): 704 configurations searched", r"targets: TPOT <= 12 ms",
            r"Answer: 1 x GB300, triton, cascade on, bf16 KV: 5\.42 ms TPOT",
            r"Launch: vllm serve meta-llama/Meta-Llama-3-8B -tp 1 --kv-cache-dtype auto --max-num-seqs 128"),
    "capacity deepseek-v3-grpo-tp8 --rollout-s 120 --hardware h200,b200 --plot pareto.png":
        has(r"Answer: 8 x B200 at TP 8, triton, cascade on, bf16 KV, fp8 weights", r"vLLM's MLA backends have no "
            r"cascade path", r"wrote pareto\.png"),
    "capacity --model llama-3-70b --prefix 8000 --groups 8 --samples 16 --output-tokens 512 --tpot-ms 30 -tp 4,8":
        has(r"targets: TPOT <= 30 ms", r"Answer: 4 x GB200 at TP 4, triton, cascade on",
            r"vllm serve meta-llama/Meta-Llama-3-70B -tp 4"),
    "plot rl-rollouts-64 --out plots/ --kind steps": has(r"^plots/rl-rollouts-64/step-times\.png \(Step time"),
    "report --out report/ --no-plots": _shipped_count,
    "report rl-rollouts-64 beam-search --out report/ --svg --no-plots": has(r"wrote report/report\.md \(2 workloads\)"),
    "check rl-rollouts-64 short-prompt-long-reasoning":
        has(r"PASS rl-rollouts-64 min_sequences_fit: 429 sequences >= 128", r"PASS short-prompt-long-reasoning",
            r"6 passed, 0 failed"),
    "workloads": _every_shipped_workload,
    "estimate rl-rollouts-64": has(r"Numbers: calibrated", KV_8B),
    "validate h200-probe-2026-12-01.json": has(r"Held-out accuracy on NVIDIA H200", r"decode_shared",
                                               r"Whole decode steps", r"Step targets", r"MoE / MLA step targets",
                                               r"mla_moe"),
    "validate h200-aic-vllm.json --json": json_doc(lambda d: d["calibration"] == "h200-aic-vllm.json"
                                                   and d["crosscheck"]["gpu"] == "h200", "the AIC file's crosscheck"),
    "aic-check": has(r"Planner vs AIConfigurator's own estimate, \d+ configurations", r"attention", r"step"),
    "aic-check h100-sxm --quick --json": json_doc(lambda d: d["rows"] and {r["gpu"] for r in d["rows"]} == {"h100-sxm"},
                                                  "rows of h100-sxm only"),
    "simulate-log rl-rollouts-64 --out sim.jsonl": has(r"wrote sim\.jsonl: 1024 decode steps of rl-rollouts-64"),
    "route --model llama-3-8b --hardware h200 --replicas 8 --samples 16 --prefix 4096 --plot out/":
        has(r"1,000,000 requests in groups of 16 over 8 replicas", r"prefix-aware 16\.00 ",
            r"wrote out/route-speedup-vs-replicas\.png"),
    "route --model llama-3-8b --replicas 8 --samples 16 --forks-together --json":
        json_doc(_route_rows, "four policies, each keeping all 16 forks together"),
    "rl --model llama-3-8b --hardware h200 --prompts 64 --samples 16 --prompt-tokens 4096 --completion-tokens 1024 "
    "--replicas 8": has(r"64 prompts x 16 completions per RL step over 8 replicas",
                        r"Wall time (saved|LOST \(cascade is slower here\)) per 1,000 RL steps"),
}
