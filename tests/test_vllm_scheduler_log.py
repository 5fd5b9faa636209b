"""The vLLM scheduler-output converter on recorded SchedulerOutput-shaped records (no vLLM needed)."""

import io
import json

from typer.testing import CliRunner

from cascade_plan.cli.app import app
from cascade_plan.logs.log_format import check_record
from cascade_plan.logs.vllm_scheduler import SchedulerLogWriter

BS = 4


def new_req(rid, prompt_len, blocks):
    return {"req_id": rid, "prompt_token_ids": list(range(prompt_len)), "block_ids": [blocks],
            "num_computed_tokens": 0, "sampling_params": None}


def step(new=(), cached=(), scheduled=None, finished=()):
    cached = list(cached)
    return {"scheduled_new_reqs": list(new),
            "scheduled_cached_reqs": {"req_ids": [c[0] for c in cached], "new_block_ids": [c[1] for c in cached],
                                      "num_computed_tokens": [c[2] for c in cached], "resumed_req_ids": set(),
                                      "num_output_tokens": [0] * len(cached)},
            "num_scheduled_tokens": scheduled or {}, "finished_req_ids": set(finished), "num_common_prefix_blocks": [0]}


def recorded_steps():
    """A 12-token system prompt (blocks 1-3) shared by all; prompt A (blocks 4-5) under it with two
    samples, prompt B (block 6) with two samples; every prompt 20 or 16 tokens; then decode."""
    a = [1, 2, 3, 4, 5]
    b = [1, 2, 3, 6]
    prefill = step(new=[new_req("a0", 20, a + [10]), new_req("a1", 20, a + [11]), new_req("b0", 16, b + [12]),
                       new_req("b1", 16, b + [13])], scheduled={"a0": 20, "a1": 20, "b0": 16, "b1": 16})
    d1 = step(cached=[("a0", None, 20), ("a1", None, 20), ("b0", None, 16), ("b1", None, 16)],
              scheduled={"a0": 1, "a1": 1, "b0": 1, "b1": 1})
    d2 = step(cached=[("a0", None, 21), ("a1", None, 21), ("b0", None, 17)], scheduled={"a0": 1, "a1": 1, "b0": 1},
              finished=["b1"])
    return [prefill, d1, d2]


def test_converter_reads_levels_from_shared_blocks():
    out = io.BytesIO()
    w = SchedulerLogWriter(out, replica="r0", block_size=BS, clock=lambda: 1.0)
    recs = [w.write(s) for s in recorded_steps()]
    assert recs[0] is None                                   # prefill only: no decode step
    by = {s["request"]: s for s in recs[1]["seqs"]}
    # a0: blocks 1-3 shared by 4, 4-5 by 2 -> levels at 12 and 20 tokens; context 21 = 20 shared + 1
    assert by["a0"] == {"request": "a0", "group": "b3/b5", "shared": 20, "private": 1, "levels": [12, 20]}
    assert by["b1"]["group"] == "b3/b6" and by["b1"]["levels"] == [12, 16] and by["b1"]["private"] == 1
    # step 2: b1 finished, so b0's block 6 is its own: only the system prompt is shared with it
    by2 = {s["request"]: s for s in recs[2]["seqs"]}
    assert by2["b0"] == {"request": "b0", "group": "b3", "shared": 12, "private": 6}
    lines = out.getvalue().decode().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert check_record(json.loads(line), "seq") is None


def test_converted_log_analyses(tmp_path):
    log = tmp_path / "vllm.jsonl"
    with open(log, "wb") as fh:
        w = SchedulerLogWriter(fh, replica=0, block_size=BS)
        for s in recorded_steps():
            w.write(s)
    res = CliRunner().invoke(app, ["analyze", str(log), "--model", "llama-3-8b", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["steps"] == 2 and doc["malformed"] == 0 and doc["requests"] == 4
