"""The SGLang adapter on an engine-shaped decode batch: fake classes with the field names of
sgl-project/sglang `python/sglang/srt/managers/schedule_batch.py` (commit 000eaffacf048e51b64d4d72985ef8f0b7054b39:
ScheduleBatch.reqs/forward_mode, Req.rid/origin_input_ids/output_ids/last_node) and
`python/sglang/srt/mem_cache/radix_cache.py` (006b0e3d317f1cd4a7300e919a4eaa878b1947e7: TreeNode.parent/key/id)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from cascade_plan.cli.app import app
from cascade_plan.logs import sglang_adapter
from cascade_plan.logs.log_format import check_record
from cascade_plan.logs.sglang_adapter import (
    SglangBatchWriter,
    snapshot_batch,
    wrap_run_batch,
)


class TreeNode:
    counter = 0

    def __init__(self, parent=None, n=0, id=None):
        self.parent, self.key = parent, list(range(n))
        self.id = TreeNode.counter if id is None else id
        TreeNode.counter += 1


class ForwardMode:
    def __init__(self, decode):
        self.decode = decode

    def is_decode(self):
        return self.decode


class Req:
    def __init__(self, rid, prompt, out, last_node):
        self.rid, self.origin_input_ids, self.output_ids, self.last_node = rid, [0] * prompt, [1] * out, last_node


class ScheduleBatch:
    def __init__(self, reqs, decode=True):
        self.reqs, self.forward_mode = reqs, ForwardMode(decode)


def tree():
    root = TreeNode(None, 0, id=0)
    s = TreeNode(root, 320, id=1)
    a, b = TreeNode(s, 149, id=2), TreeNode(s, 149, id=5)
    qa0, qa1, qb0 = TreeNode(a, 7, id=3), TreeNode(a, 8, id=4), TreeNode(b, 7, id=6)
    x = TreeNode(root, 100, id=7)
    reqs = [Req("a0-s0", 476, 5, qa0), Req("a0-s1", 476, 9, qa0), Req("a1-s0", 477, 3, qa1),
            Req("b0-s0", 476, 2, qb0), Req("b0-s1", 476, 4, qb0), Req("x", 100, 1, x)]
    return root, s, reqs


def test_batch_to_record_by_hand():
    _, _, reqs = tree()
    rec = SglangBatchWriter("r0").write(snapshot_batch(ScheduleBatch(reqs)))
    by = {s["request"]: s for s in rec["seqs"]}
    # system prompt read by 5, document A by 3, question qa0 by 2: three levels
    assert by["a0-s0"] == {"request": "a0-s0", "group": "n1/n2/n3", "shared": 476, "private": 5,
                           "levels": [320, 469, 476]}
    assert by["a1-s0"] == {"request": "a1-s0", "group": "n1/n2", "shared": 469, "private": 477 + 3 - 469,
                           "levels": [320, 469]}
    # document B and its question are read by the same two: one level
    assert by["b0-s1"] == {"request": "b0-s1", "group": "n1/n6", "shared": 476, "private": 4, "levels": [320, 476]}
    assert by["x"] == {"request": "x", "group": "x", "shared": 0, "private": 101}
    assert check_record(rec, "seq") is None


def test_a_node_split_keeps_the_sharing():
    _, s, reqs = tree()
    before = SglangBatchWriter().write(snapshot_batch(ScheduleBatch(reqs)))
    # radix_cache._split_node: a new parent takes the first tokens, the old node keeps its id and the rest
    top = TreeNode(s.parent, 200, id=99)
    s.parent, s.key = top, s.key[200:]
    after = SglangBatchWriter().write(snapshot_batch(ScheduleBatch(reqs)))
    assert before["seqs"] == after["seqs"]


def test_only_decode_batches_are_logged():
    _, _, reqs = tree()
    assert snapshot_batch(ScheduleBatch(reqs, decode=False)) is None


def test_hook_logs_rank_zero_and_analyze_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("CASCADE_PLAN_LOG_DIR", str(tmp_path))
    monkeypatch.setenv("CASCADE_PLAN_REPLICA", "sg0")
    _, _, reqs = tree()

    class Scheduler:
        def __init__(self, rank):
            self.tp_rank = rank

        def run_batch(self, batch):
            for r in batch.reqs:
                r.output_ids.append(1)
            return "ran"

    wrap_run_batch(Scheduler)
    s0, s1 = Scheduler(0), Scheduler(1)
    for _ in range(5):
        assert s0.run_batch(ScheduleBatch(reqs)) == "ran"
        s1.run_batch(ScheduleBatch(reqs))
    lg = sglang_adapter._LOGGERS.pop(id(s0))
    lg.close()
    assert id(s1) not in sglang_adapter._LOGGERS
    lines = [json.loads(x) for x in Path(lg.path).read_text().splitlines()]
    # both ranks ran each batch
    assert len(lines) == 5 and [r["seqs"][0]["private"] for r in lines] == [5, 7, 9, 11, 13]
    res = CliRunner().invoke(app, ["analyze", lg.path, "--model", "llama-3-8b", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["steps"] == 5 and doc["requests"] == 6
    # the prefix every request reads: none (x shares nothing); the mean batch is the 6 requests
    assert doc["distributions"]["overall"]["common_prefix_tokens"]["max"] == 0
    assert doc["distributions"]["overall"]["batch"]["mean"] == 6
