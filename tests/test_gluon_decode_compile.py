"""The Gluon decode (kernels_probe/attention/gluon_decode.py) compiles for sm_90 on the CPU, with K and V in buffers
of their own, each waited for on its own, and the host arithmetic of its launch. Gluon does not run under Triton's
interpreter: its results are checked against float32 on a GPU (benchmarks/decode_gluon_check.py)."""

from __future__ import annotations

import functools
import importlib.util
import json
import re

import pytest
from compile_support import compiled_json, run_without_interpreter

# only looked up, never imported here (as tests/test_kernel_pipelining.py): Triton imported in this process without
# TRITON_INTERPRET=1 would make the interpreter tests after this module in the same worker skip
if importlib.util.find_spec("triton") is None:
    pytest.skip("triton is not installed", allow_module_level=True)

SCRIPT = """
import json, re
from kernels_probe.attention.gluon_decode import compile_gluon_decode
from kernels_probe.attention.pipelining import resource_usage
shapes = {"d128": dict(block_n=128, warps=4, head_dim=128, q_per_kv=4),
          "d128-states": dict(block_n=128, warps=4, head_dim=128, q_per_kv=4, write_final=False),
          "d256-b2-qs": dict(block_n=64, warps=4, head_dim=256, q_per_kv=2, nbuf=2, q_smem=True),
          "fp8": dict(block_n=64, warps=4, head_dim=256, q_per_kv=2, kv_dtype="fp8", v_widen=True)}
r = {}
try:
    for name, kw in shapes.items():
        k = compile_gluon_decode(**kw)
        ptx = k.asm["ptx"]
        r[name] = {"shared_bytes": k.metadata.shared, **resource_usage(k.asm["cubin"]),
                   "waits": [int(n) for n in re.findall(r"cp\\.async\\.wait_group\\s+(\\d+)", ptx)],
                   "mma": len(re.findall(r"mma\\.sync", ptx)), "ldmatrix": len(re.findall(r"ldmatrix", ptx))}
except Exception as exc:
    r = {"skip": f"{type(exc).__name__}: {exc}"[:300]}
print(json.dumps(r))
"""


@functools.cache
def _compiled() -> dict:
    return compiled_json(SCRIPT, "the Gluon decode")


def test_k_and_v_are_waited_for_apart():
    """One buffer each: the loop waits twice a tile with one copy group left in flight (this tile's V while its
    K is read, then the next tile's K while its V is read), and once at the end for none; two buffers each leave
    three."""
    r = _compiled()
    assert sorted(r["d128"]["waits"]) == [0, 1, 1], r["d128"]
    assert sorted(r["d256-b2-qs"]["waits"]) == [0, 3, 3], r["d256-b2-qs"]


def test_shared_memory_is_the_buffers_it_asks_for():
    r = _compiled()
    assert r["d128"]["shared_bytes"] == 2 * 128 * 128 * 2                         # one K and one V tile, bf16
    assert r["d256-b2-qs"]["shared_bytes"] == 2 * 2 * 64 * 256 * 2 + 4 * 16 * 256 * 2   # two each, and q per warp
    assert r["fp8"]["shared_bytes"] >= 2 * 64 * 256          # fp8 tiles, and the widened V's scratch
    for name, v in r.items():
        assert v.get("registers") is None or 32 <= v["registers"] <= 255, (name, v)
        assert v["mma"] > 0 and v["ldmatrix"] > 0, (name, v)


def test_launch_arithmetic_splits_in_whole_tiles():
    """Host side only (no kernel runs): a split launch's ranges are whole tiles, the last one takes the rest."""
    code = """
import json, torch
from kernels_probe.attention.gluon_plans import GluonDecode
q = torch.zeros(3, 8, 128, dtype=torch.bfloat16); k = torch.zeros(40, 16, 2, 128, dtype=torch.bfloat16)
bt = torch.zeros(3, 40, dtype=torch.int32); lens = torch.full((3,), 600, dtype=torch.int32)
out = torch.empty_like(q)
r = {}
for splits in (1, 3, 7, 20):
    g = GluonDecode(q, k, k, bt, lens, 600, out, sm_count=132, splits=splits, block_n=64)
    r[splits] = [g.splits, g.tps, g.states is not None, g.const["WRITE_FINAL"]]
print(json.dumps(r))
"""
    r = json.loads(run_without_interpreter(code).strip().splitlines()[-1])
    # 600 tokens are 10 tiles of 64: 3 splits of 4 tiles (256 tokens) cover them in 3; 7 splits of 2 tiles in 5;
    # 20 splits are capped at one tile each
    assert r["1"] == [1, 640, False, True]
    assert r["3"] == [3, 256, True, False]
    assert r["7"] == [5, 128, True, False]
    assert r["20"] == [10, 64, True, False]


def test_more_query_heads_than_a_tile_holds_are_refused():
    code = """
from kernels_probe.attention.gluon_decode import gluon_decode_constants
for args in ((8, 17, 128, 16, 64, 4), (8, 4, 128, 16, 48, 4)):
    try:
        gluon_decode_constants(*args, True, None)
    except ValueError as exc:
        print("refused:", exc)
"""
    out = run_without_interpreter(code)
    lines = [ln for ln in out.splitlines() if ln.startswith("refused:")]
    assert len(lines) == 2 and "17" in lines[0] and "48" in lines[1], out
    assert re.search(r"multiple of 16 keys", lines[1])
