"""Record the vLLM replays of tests/test_vllm_replays.py: python tests/data/make_vllm_replays.py

Each `vllm-replay-<name>.jsonl` holds one SchedulerOutput per line (the fields of vLLM's dataclasses,
sets as sorted lists, prompt embeddings as {"embeds_rows": n}) and the step's true sharing ("truth")."""

import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.vllm_replay import FakeEmbeds, replay

NAMES = ("v1-preempt", "v2-preempt", "spec-decode", "two-groups")


def plain(x):
    if isinstance(x, FakeEmbeds):
        return {"embeds_rows": x.n}
    if dataclasses.is_dataclass(x):
        return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, set):
        return sorted(x)
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    return x


if __name__ == "__main__":
    for name in NAMES:
        with open(Path(__file__).parent / f"vllm-replay-{name}.jsonl", "w") as fh:
            fh.writelines(json.dumps({"so": plain(so), "truth": truth}, separators=(",", ":")) + "\n"
                          for so, truth in replay(name))
