"""Engine-shaped vLLM V1 replays: a small scheduler with prefix caching that emits SchedulerOutput-shaped
objects (dataclasses with vLLM's field names) and, beside them, the sharing each step truly has.

Field names copy vllm-project/vllm `vllm/v1/core/sched/output.py` at commit
00e8f1fd0936d138370d01dbe1b4f8e12baf63b1 (NewRequestData, CachedRequestData, SchedulerOutput); how they
are filled follows `vllm/v1/core/sched/scheduler.py` at 00024d314514900f361ad072af6931e403b7f589:
preempted requests lose their blocks and computed tokens; the V1 runner gets them back in
`scheduled_cached_reqs` with `resumed_req_ids` and the whole table, the V2 runner in `scheduled_new_reqs`;
`num_common_prefix_blocks[g]` counts running[0]'s leading blocks whose reference count equals the number
of running requests (0 for a sliding-window group, whose table starts with the null block 0);
a decode step with k drafts schedules 1 + k tokens and lists them in `scheduled_spec_decode_tokens`.

`tests/data/make_vllm_replays.py` records replays with this into tests/data; the truth is computed from
token sequences (identical token prefixes hit the same cached blocks), not from the block tables."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

BS = 16


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list[int] | None
    mm_features: list
    sampling_params: object
    pooling_params: object
    block_ids: tuple[list[int], ...]
    num_computed_tokens: int
    lora_request: object
    prompt_embeds: object = None
    prefill_token_ids: list[int] | None = None


@dataclass
class CachedRequestData:
    req_ids: list[str]
    resumed_req_ids: set[str]
    new_token_ids: list[list[int]]
    all_token_ids: dict[str, list[int]]
    new_block_ids: list[tuple[list[int], ...] | None]
    num_computed_tokens: list[int]
    num_output_tokens: list[int]


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    scheduled_encoder_inputs: dict[str, list[int]]
    num_common_prefix_blocks: list[int]
    finished_req_ids: set[str]
    free_encoder_mm_hashes: list[str]
    preempted_req_ids: set[str] | None = None


class FakeEmbeds:
    """Stands in for a (tokens, hidden) tensor: only its length is read."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


@dataclass
class Req:
    rid: str
    prompt: list[int]
    target: int
    out: list[int] = field(default_factory=list)
    blocks: list[list[int]] = field(default_factory=list)
    computed: int = 0
    embeds: bool = False
    state: str = "waiting"          # waiting | running | preempted | done
    sent: bool = False              # the workers know it (NewRequestData sent)

    @property
    def tokens(self):
        return self.prompt + self.out


class FakeEngine:
    def __init__(self, *, runner="v1", groups=1, window_blocks=4, spec=0, seed=0):
        self.runner, self.groups, self.window, self.spec = runner, groups, window_blocks, spec
        self.rng = random.Random(seed)
        self.cache: dict[tuple, int] = {}      # token prefix (whole blocks) -> block id (group 0)
        self.ref: dict[int, int] = {}
        self.next_id = 1                       # 0 is the null block
        self.running: list[Req] = []
        self.waiting: list[Req] = []
        self.finished: set[str] = set()
        self.pending_preempt: set[str] = set()

    def _new_block(self):
        b = self.next_id
        self.next_id += 1
        return b

    def _alloc(self, r: Req, upto: int):
        """Group 0: one block per BS tokens, full prompt/output blocks shared through the cache."""
        t = r.tokens
        need = -(-upto // BS)
        g0 = r.blocks[0]
        while len(g0) < need:
            i = len(g0)
            key = tuple(t[: (i + 1) * BS]) if (i + 1) * BS <= len(t) else None
            b = self.cache.get(key) if key else None
            if b is None:
                b = self._new_block()
                if key:
                    self.cache[key] = b
            g0.append(b)
            self.ref[b] = self.ref.get(b, 0) + 1
        if self.groups > 1:                    # sliding-window group: own ids, null beyond the window
            g1 = r.blocks[1]
            while len(g1) < need:
                g1.append(self._new_block())
            for i in range(max(0, need - self.window)):
                g1[i] = 0

    def _free(self, r: Req):
        for b in r.blocks[0]:
            self.ref[b] -= 1
        r.blocks = [[] for _ in range(self.groups)]

    def add(self, rid, prompt, target, embeds=False):
        self.waiting.append(Req(rid, list(prompt), target, embeds=embeds, blocks=[[] for _ in range(self.groups)]))

    def preempt(self, rid):
        self.pending_preempt.add(rid)

    def _hits(self, r: Req) -> int:
        t, n = r.tokens, 0
        while (n + 1) * BS <= len(t) - 1 and tuple(t[: (n + 1) * BS]) in self.cache:
            n += 1
        return n * BS

    def step(self, truth=True):
        """One schedule() call: (SchedulerOutput, truth rows of the decoding requests, or None)."""
        preempted = set()
        for r in list(self.running):
            if r.rid in self.pending_preempt:
                self._free(r)
                r.computed, r.state = 0, "preempted"
                self.running.remove(r)
                self.waiting.insert(0, r)
                preempted.add(r.rid)
        self.pending_preempt -= preempted
        new, cached, sched, spec = [], [], {}, {}
        resumed = set()
        for r in self.running:                 # running: decode (with drafts) or finish a prefill
            k = self.spec if r.computed >= len(r.prompt) else 0
            n = len(r.tokens) - r.computed + k
            before = len(r.blocks[0]), (len(r.blocks[1]) if self.groups > 1 else 0)
            self._alloc(r, r.computed + n)
            nb = [r.blocks[0][before[0]:]] + ([r.blocks[1][before[1]:]] if self.groups > 1 else [])
            cached.append((r, tuple(nb) if any(nb) else None))
            sched[r.rid] = n
            if k:
                spec[r.rid] = [-1] * k
        for r in list(self.waiting):           # admit everything waiting (prefix-cache hits first)
            self.waiting.remove(r)
            r.computed = self._hits(r)
            n = len(r.tokens) - r.computed
            self._alloc(r, r.computed + n)
            self.running.append(r)
            sched[r.rid] = n
            if r.state == "preempted" and self.runner == "v1":
                resumed.add(r.rid)
                cached.append((r, tuple(list(g) for g in r.blocks)))
            else:
                new.append(r)
            r.state = "running"
        so = SchedulerOutput(
            scheduled_new_reqs=[NewRequestData(
                r.rid, None if r.embeds else list(r.prompt), [], None, None, tuple(list(g) for g in r.blocks),
                r.computed, None, prompt_embeds=FakeEmbeds(len(r.prompt)) if r.embeds else None,
                prefill_token_ids=list(r.tokens) if self.runner == "v2" else None) for r in new],
            scheduled_cached_reqs=CachedRequestData(
                req_ids=[r.rid for r, _ in cached], resumed_req_ids=resumed, new_token_ids=[], all_token_ids={},
                new_block_ids=[b for _, b in cached], num_computed_tokens=[r.computed for r, _ in cached],
                num_output_tokens=[len(r.out) for r, _ in cached]),
            num_scheduled_tokens=dict(sched), total_num_scheduled_tokens=sum(sched.values()),
            scheduled_spec_decode_tokens=spec, scheduled_encoder_inputs={},
            num_common_prefix_blocks=self._common(), finished_req_ids=set(self.finished),
            free_encoder_mm_hashes=[], preempted_req_ids=preempted)
        self.finished = set()
        truth = self._truth(sched, spec) if truth else None
        self._advance(sched, spec)
        return so, truth

    def _common(self):
        if not self.running:
            return [0] * self.groups
        n = 0
        for b in self.running[0].blocks[0]:
            if self.ref.get(b, 0) != len(self.running):
                break
            n += 1
        return [n] + [0] * (self.groups - 1)

    def _truth(self, sched, spec):
        dec = [r for r in self.running if sched[r.rid] == 1 + len(spec.get(r.rid, ())) and r.computed >= len(r.prompt)]
        rows = []
        for r in dec:
            full = r.computed // BS
            counts = []
            for i in range(full):
                key = r.tokens[: (i + 1) * BS]
                counts.append(sum(1 for o in dec if o.computed // BS > i and o.tokens[: (i + 1) * BS] == key))
            n_shared = 0
            while n_shared < full and counts[n_shared] > 1:
                n_shared += 1
            row = {"request": r.rid, "group": r.rid, "shared": n_shared * BS, "private": r.computed + 1 - n_shared * BS}
            if n_shared:
                ends = [(i + 1) * BS for i in range(n_shared) if i + 1 == n_shared or counts[i + 1] != counts[i]]
                row["group"] = "/".join(f"t{hash(tuple(r.tokens[:e])) & 0xffffffff:x}" for e in ends)
                if len(ends) > 1:
                    row["levels"] = ends
            if spec.get(r.rid):
                row["draft"] = len(spec[r.rid])
            rows.append(row)
        return rows

    def _advance(self, sched, spec):
        for r in list(self.running):
            n = sched[r.rid]
            k = len(spec.get(r.rid, ()))
            if r.computed + n - k < len(r.tokens):          # prefill chunk: nothing sampled
                r.computed += n
                continue
            accepted = self.rng.randint(0, k) if k else 0
            r.computed = len(r.tokens) + accepted
            r.out += [self.rng.randrange(10**6, 2 * 10**6) for _ in range(accepted + 1)]
            if len(r.out) >= r.target:
                self._free(r)
                r.state = "done"
                self.running.remove(r)
                self.finished.add(r.rid)


def tokens(seed, n):
    rng = random.Random(seed)
    return [rng.randrange(1000, 100000) for _ in range(n)]


def scenario(name: str):
    """(engine, [(step, action)]) for the recorded replays."""
    system = tokens(1, 20 * BS)                 # 320-token system prompt shared by all
    docs = [tokens(10 + d, 9 * BS + 5) for d in range(2)]
    kw = {"v1-preempt": {"runner": "v1"}, "v2-preempt": {"runner": "v2"}, "spec-decode": {"spec": 2, "seed": 3},
          "two-groups": {"groups": 2}}[name]
    e = FakeEngine(**kw)
    n = 0
    for d, doc in enumerate(docs):
        for q in range(3):
            for s in range(3 if name != "spec-decode" else 4):
                e.add(f"d{d}-q{q}-s{s}", system + doc + tokens(100 + 10 * d + q, 7 + q), target=40 + 7 * n,
                      embeds=(name == "two-groups" and n % 5 == 0))
                n += 1
    events = {}
    if name.endswith("preempt"):
        events = {6: ["d0-q1-s2"], 9: ["d1-q0-s0", "d1-q2-s1"]}
    return e, events


def replay(name: str, steps: int = 170):
    e, events = scenario(name)
    out = []
    for i in range(steps):
        for rid in events.get(i, ()):
            e.preempt(rid)
        so, truth = e.step()
        out.append((so, truth))
        if not e.running and not e.waiting:
            break
    return out
