"""The vLLM logger on recorded engine-shaped replays (tests/data/vllm-replay-*.jsonl, written by
tests/data/make_vllm_replays.py from vLLM's dataclasses, see tests/vllm_replay.py): preemption and
resumption under the V1 and V2 model runners, speculative decoding, two KV-cache groups with
prompt-embedding requests, and the plugin's flush at exit, on SIGTERM and after a kill."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from cascade_plan.cli.app import app
from cascade_plan.engine.vllm_gate import VllmGateInputs, vllm_uses_cascade
from cascade_plan.logs.log_format import check_record
from cascade_plan.logs.vllm_logger import (
    StepLogger,
    engine_block_sizes,
    snapshot,
    wrap_schedule,
)
from cascade_plan.logs.vllm_scheduler import SchedulerLogWriter
from tests.vllm_replay import (
    BS,
    CachedRequestData,
    FakeEmbeds,
    NewRequestData,
    SchedulerOutput,
)

DATA = Path(__file__).parent / "data"
NAMES = ("v1-preempt", "v2-preempt", "spec-decode", "two-groups")
ROOT = Path(__file__).resolve().parents[1]


def load(name):
    """[(SchedulerOutput, truth rows)] rebuilt as vLLM-shaped dataclass objects."""
    out = []
    for line in (DATA / f"vllm-replay-{name}.jsonl").read_text().splitlines():
        d = json.loads(line)
        so = d["so"]
        new = []
        for r in so["scheduled_new_reqs"]:
            emb = r.pop("prompt_embeds")
            new.append(NewRequestData(**{**r, "block_ids": tuple(r["block_ids"])},
                                      prompt_embeds=FakeEmbeds(emb["embeds_rows"]) if emb else None))
        c = so["scheduled_cached_reqs"]
        cached = CachedRequestData(**{**c, "resumed_req_ids": set(c["resumed_req_ids"]),
                                      "new_block_ids": [None if b is None else tuple(b) for b in c["new_block_ids"]]})
        out.append((SchedulerOutput(**{**so, "scheduled_new_reqs": new, "scheduled_cached_reqs": cached,
                                       "finished_req_ids": set(so["finished_req_ids"]),
                                       "preempted_req_ids": set(so["preempted_req_ids"])}), d["truth"]))
    return out


def convert(steps, **kw):
    w = SchedulerLogWriter(None, replica="r0", block_size=BS, clock=lambda: float(w.step), **kw)
    return [w.write(so) for so, _ in steps]


@pytest.mark.parametrize("name", NAMES)
def test_every_step_reproduces_the_replays_sharing(name):
    steps = load(name)
    recs = convert(steps)
    decoded = 0
    for (so, truth), rec in zip(steps, recs):
        if not truth:
            assert rec is None
            continue
        got = {s["request"]: s for s in rec["seqs"]}
        assert set(got) == {t["request"] for t in truth}
        for t in truth:
            g = got[t["request"]]
            assert (g["shared"], g["private"], g.get("levels"), g.get("draft")) == \
                   (t["shared"], t["private"], t.get("levels"), t.get("draft")), (rec["step"], t["request"])
        assert check_record(rec, "seq") is None
        decoded += len(truth)
    assert decoded > 200


def test_preempted_requests_come_back_under_both_runners():
    for name, gone in (("v1-preempt", ("d0-q1-s2", "d1-q0-s0", "d1-q2-s1")),
                       ("v2-preempt", ("d0-q1-s2", "d1-q0-s0", "d1-q2-s1"))):
        steps = load(name)
        recs = convert(steps)
        for rid in gone:
            pre = next(i for i, (so, _) in enumerate(steps) if rid in so.preempted_req_ids)
            assert any(rid in {s["request"] for s in r["seqs"]} for r in recs[pre + 2:] if r), (name, rid)
            # it comes back with its sharing: the system prompt and its document are cached blocks
            back = next(r for r in recs[pre + 2:] if r and rid in {s["request"] for s in r["seqs"]})
            assert next(s for s in back["seqs"] if s["request"] == rid)["shared"] >= 20 * BS
        resumed = [so for so, _ in steps if so.scheduled_cached_reqs.resumed_req_ids]
        new_again = [so for so, _ in steps if so.preempted_req_ids and name == "v2-preempt"]
        assert (len(resumed) > 0) == (name == "v1-preempt") and (name == "v1-preempt" or new_again)


def test_drafts_are_counted_as_drafts():
    recs = [r for r in convert(load("spec-decode")) if r]
    drafts = [s for r in recs for s in r["seqs"] if s.get("draft")]
    assert len(drafts) > 100 and {s["draft"] for s in drafts} == {2}
    assert all(r["max_query"] == 3 for r in recs if all(s.get("draft") for s in r["seqs"]))


def test_two_kv_cache_groups_and_prompt_embeddings():
    steps = load("two-groups")
    assert any(r.prompt_token_ids is None for so, _ in steps for r in so.scheduled_new_reqs)
    recs = [r for r in convert(steps) if r]
    assert all(len(r["num_common_prefix_blocks"]) == 2 and r["kv_group"] == 0 for r in recs)
    # group 1 is a sliding window: its tables open with the null block, so read from it nothing is shared
    one = [r for r in convert(steps, kv_group=1) if r]
    assert one and all(s["shared"] == 0 for r in one[5:] for s in r["seqs"])


def test_engine_config_gives_block_size_and_group():
    class FullAttentionSpec:
        block_size, sliding_window, attention_chunk_size = 32, None, None

    class SlidingWindowSpec:
        block_size, sliding_window = 16, 4096

    class G:
        def __init__(self, spec):
            self.kv_cache_spec = spec

    class Cfg:
        kv_cache_groups = (G(SlidingWindowSpec()), G(FullAttentionSpec()))

    class Sched:
        kv_cache_config = Cfg()

    assert engine_block_sizes(Sched()) == ([16, 32], 1)


def _analyze(path):
    res = CliRunner().invoke(app, ["analyze", str(path), "--model", "llama-3-8b", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    for k in ("files", "inputs", "generated", "header"):
        doc.pop(k, None)
    return doc


@pytest.mark.parametrize("name", ("v1-preempt", "spec-decode"))
def test_analyze_on_the_converted_log_equals_analyze_on_the_truth(name, tmp_path):
    steps = load(name)
    recs = convert(steps)
    conv, truth = tmp_path / "conv.jsonl", tmp_path / "truth.jsonl"
    conv.write_text("".join(json.dumps(r) + "\n" for r in recs if r))
    truth.write_text("".join(json.dumps({"ts": float(i + 1), "replica": "r0", "step": i + 1, "seqs": t}) + "\n"
                             for i, (_, t) in enumerate(steps) if t))
    a, b = _analyze(conv), _analyze(truth)
    assert a["steps"] == b["steps"] > 30
    assert a["distributions"] == b["distributions"] and a["decode_time"] == b["decode_time"]
    assert a["vllm"]["share_of_steps_vllm_would_cascade"] == b["vllm"]["share_of_steps_vllm_would_cascade"]


def _gate(prefix, rec, n):
    q = rec["max_query"]
    return vllm_uses_cascade(VllmGateInputs(
        common_prefix_tokens=prefix, num_requests=n, num_query_heads=32, num_kv_heads=8, num_sms=132,
        query_lens=(q,) + (1,) * (n - 1), block_size=rec["block_size"],
        min_num_computed_tokens=rec["min_computed"], disable_cascade_attn=False))


@pytest.mark.parametrize("name", NAMES)
def test_gate_from_logged_blocks_matches_the_planners_vllm_model(name):
    """vLLM's own num_common_prefix_blocks and the prefix the planner reads off the logged levels (the
    outermost levels every decoding sequence reads, capped like vLLM's by the fewest computed tokens of
    the batch) give the same gate input and decision on every step, prefills and recomputations included."""
    checked = mixed = 0
    for (so, truth), rec in zip(load(name), convert(load(name))):
        if rec is None:
            continue
        n = rec["scheduled"]
        everyone = 0
        ends = [s.get("levels", [s["shared"]]) for s in rec["seqs"]]
        groups = [s["group"].split("/") for s in rec["seqs"]]
        for lvl in range(min(len(e) for e in ends)):
            if len({tuple(g[: lvl + 1]) for g in groups}) == 1 and all(s["shared"] for s in rec["seqs"]):
                everyone = ends[0][lvl]
        mixed += n > len(rec["seqs"])
        logged = _gate(rec["num_common_prefix_blocks"][rec.get("kv_group", 0)] * rec["block_size"], rec, n)
        planner = _gate(everyone, rec, n)
        assert logged.used == planner.used, rec["step"]
        if n > 1:          # alone, a request's whole table is "common" to vLLM, and shared with no one to the log
            assert logged.common_prefix_tokens_used == planner.common_prefix_tokens_used, rec["step"]
        checked += 1
    assert checked > 30 and (mixed > 0 or name in ("spec-decode", "two-groups"))


# -- the plugin: hot path, flush at exit, on signals, after a kill ----------------------------------

def test_wrapped_scheduler_writes_what_the_converter_writes(tmp_path, monkeypatch):
    steps = load("v2-preempt")
    monkeypatch.setenv("CASCADE_PLAN_LOG_DIR", str(tmp_path))
    monkeypatch.setenv("CASCADE_PLAN_REPLICA", "r0")

    class Scheduler:
        block_size = BS
        it = iter(steps)

        def schedule(self):
            return next(self.it)[0]

    wrap_schedule(Scheduler)
    s = Scheduler()
    for _ in steps:
        s.schedule()
    from cascade_plan.logs import vllm_logger

    lg = vllm_logger._LOGGERS.pop(id(s))
    lg.close()
    lines = [json.loads(x) for x in Path(lg.path).read_text().splitlines()]
    want = [r for r in convert(steps) if r]
    assert ([{k: v for k, v in r.items() if k != "ts"} for r in lines]
            == [{k: v for k, v in r.items() if k != "ts"} for r in want])


def test_snapshot_copies_lists_the_engine_extends():
    so = load("v1-preempt")[0][0]
    snap = snapshot(so)
    so.scheduled_new_reqs[0].block_ids[0].append(999)
    assert 999 not in snap["scheduled_new_reqs"][0]["block_ids"][0]


def test_full_queue_drops_steps_and_never_blocks(tmp_path):
    lg = StepLogger(str(tmp_path / "x.jsonl"), SchedulerLogWriter(None, "r0", BS), max_queued=3, flush_s=60)
    for so, _ in load("v1-preempt")[:10]:
        lg.push(snapshot(so))
    lg.close()
    assert lg.dropped == 7


CHILD = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
from tests.test_vllm_replays import load
from cascade_plan.logs.vllm_logger import StepLogger, chain_signals, snapshot
from cascade_plan.logs.vllm_scheduler import SchedulerLogWriter
def engine_handler(signum, frame):          # what vLLM's engine core does on SIGTERM
    print("engine handler ran", flush=True)
    raise SystemExit(0)
signal.signal(signal.SIGTERM, engine_handler)
lg = StepLogger({path!r}, SchedulerLogWriter(None, "r0", 16), flush_s={flush})
chain_signals(lg.flush)
for so, _ in load("v1-preempt"):
    lg.push(snapshot(so))
print("pushed", flush=True)
time.sleep(30)
"""


def _child(tmp_path, flush):
    path = str(tmp_path / "steps.jsonl")
    p = subprocess.Popen([sys.executable, "-c", CHILD.format(root=str(ROOT), path=path, flush=flush)],
                         stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.stdout.readline().strip() == "pushed"
    return p, path


def _want():
    return len([r for r in convert(load("v1-preempt")) if r])


def test_sigterm_flushes_everything_then_runs_the_engines_handler(tmp_path):
    p, path = _child(tmp_path, flush=600)          # no periodic flush: only the signal can write
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    assert "engine handler ran" in out and p.returncode == 0
    lines = Path(path).read_text().splitlines()
    assert len(lines) == _want()


def test_abrupt_kill_loses_only_unflushed_steps_and_no_line_is_cut(tmp_path):
    import time

    p, path = _child(tmp_path, flush=0.05)
    time.sleep(1.0)
    p.kill()
    p.wait(timeout=30)
    text = Path(path).read_text()
    assert text.endswith("\n") and len(text.splitlines()) == _want()      # flushed before the kill
    res = CliRunner().invoke(app, ["analyze", path, "--model", "llama-3-8b", "--json", "--strict"])
    assert res.exit_code == 0, res.output


def test_analyze_shows_vllms_own_decision_beside_the_planners(tmp_path):
    log = tmp_path / "conv.jsonl"
    steps = load("v1-preempt")
    recs = [r for r in convert(steps) if r]
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    doc = _analyze(log)
    g = doc["vllm_logged"]
    assert g["steps_with_vllm_fields"] == len(recs) and g["share_of_steps_agreeing"] == 1.0
    # by hand from the replay: the gate's stages (Llama-3-8B on the H100 profile's 132 SMs, as _gate uses)
    want = {}
    for r in recs:
        st = _gate(r["num_common_prefix_blocks"][0] * r["block_size"], r, r["scheduled"]).stage
        want[st] = want.get(st, 0) + 1
    assert g["vllm_gate_stages"] == dict(sorted(want.items()))
    assert 0 < g["share_of_steps_vllm_would_cascade"] < 1
    res = CliRunner().invoke(app, ["analyze", str(log), "--model", "llama-3-8b"])
    assert res.exit_code == 0 and "vLLM's own count (num_common_prefix_blocks" in res.stdout
    # a log without vLLM's fields says nothing of it
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({k: r[k] for k in ("ts", "replica", "seqs")}) + "\n" for r in recs))
    assert _analyze(plain)["vllm_logged"] is None


def test_every_nth_step_writes_the_same_records_as_every_step():
    steps = load("v1-preempt")
    all_ = convert(steps)
    third = convert(steps, every=3)
    assert [r for i, r in enumerate(all_) if (i + 1) % 3 == 0] == [r for i, r in enumerate(third) if (i + 1) % 3 == 0]
    assert all(r is None for i, r in enumerate(third) if (i + 1) % 3)


def test_plugin_imports_no_vllm_or_torch_and_hooks_only_when_asked(tmp_path, monkeypatch):
    code = ("import sys, cascade_plan.logs.vllm_logger, cascade_plan.logs.sglang_adapter; "
            "print(sorted(m for m in ('torch', 'vllm', 'sglang', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    assert out.strip() == "[]"
    import types

    from cascade_plan.logs import vllm_logger

    class Scheduler:                 # stands in for vllm.v1.core.sched.scheduler.Scheduler
        block_size = BS
        it = iter(load("spec-decode"))

        def schedule(self):
            return next(self.it)[0]

    mod = types.ModuleType("vllm.v1.core.sched.scheduler")
    mod.Scheduler = Scheduler
    for name in ("vllm", "vllm.v1", "vllm.v1.core", "vllm.v1.core.sched"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "vllm.v1.core.sched.scheduler", mod)
    monkeypatch.delenv("CASCADE_PLAN_LOG_DIR", raising=False)
    vllm_logger.register()
    assert not getattr(Scheduler.schedule, "_cascade_plan_logged", False)      # not asked: untouched
    monkeypatch.setenv("CASCADE_PLAN_LOG_DIR", str(tmp_path))
    cls = vllm_logger.LoggingScheduler                                         # --scheduler-cls
    assert issubclass(cls, Scheduler)
    s = cls()
    for _ in range(20):
        s.schedule()
    lg = vllm_logger._LOGGERS.pop(id(s))
    lg.close()
    recs = [json.loads(x) for x in Path(lg.path).read_text().splitlines()]
    assert recs and any(q.get("draft") for r in recs for q in r["seqs"])
    vllm_logger.register()
    assert Scheduler.schedule._cascade_plan_logged




@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), runner=st.sampled_from(["v1", "v2"]), spec=st.integers(0, 3),
       groups=st.integers(1, 2), preempt=st.lists(st.tuples(st.integers(1, 25), st.integers(0, 8)), max_size=5))
def test_incremental_converter_equals_the_token_truth_on_random_replays(seed, runner, spec, groups, preempt):
    """Random prompts under a shared system prompt, random preemptions, drafts and groups: every
    decoding sequence's shared/private/levels/draft equal the token-level truth."""
    import random

    from tests.vllm_replay import FakeEngine, tokens

    e = FakeEngine(runner=runner, spec=spec, groups=groups, seed=seed)
    rng = random.Random(seed)
    system = tokens(seed, rng.randint(0, 6) * BS + rng.randint(0, BS - 1))
    for i in range(9):
        doc = tokens(seed + 1 + i % 3, rng.randint(1, 4) * BS)
        e.add(f"r{i}", system + doc + tokens(seed + 100 + i % 5, rng.randint(1, 20)), target=rng.randint(3, 30))
    events: dict[int, list[str]] = {}
    for step, who in preempt:
        events.setdefault(step, []).append(f"r{who}")
    w = SchedulerLogWriter(None, replica="r0", block_size=BS)
    for i in range(40):
        for rid in events.get(i, ()):
            e.preempt(rid)
        so, truth = e.step()
        rec = w.write(so)
        got = {s["request"]: s for s in rec["seqs"]} if rec else {}
        assert set(got) == {t["request"] for t in truth}
        for t in truth:
            g = got[t["request"]]
            assert (g["shared"], g["private"], g.get("levels"), g.get("draft")) == \
                   (t["shared"], t["private"], t.get("levels"), t.get("draft"))
        if not e.running and not e.waiting:
            break
