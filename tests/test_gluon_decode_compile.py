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
from kernels_probe.attention.gluon_decode_persist import compile_gluon_persist
from kernels_probe.attention.pipelining import resource_usage, sass_loops
shapes = {"d128": dict(block_n=128, warps=4, head_dim=128, q_per_kv=4),
          "d128-states": dict(block_n=128, warps=4, head_dim=128, q_per_kv=4, write_final=False),
          "d128-fused": dict(block_n=128, warps=4, head_dim=128, q_per_kv=4, write_final=False, fused_merge=True),
          "swap-fused": dict(block_n=64, warps=4, head_dim=256, q_per_kv=2, write_final=False, fused_merge=True,
                             swap=True),
          "d256-b2-qs": dict(block_n=64, warps=4, head_dim=256, q_per_kv=2, nbuf=2, q_smem=True),
          "fp8": dict(block_n=64, warps=4, head_dim=256, q_per_kv=2, kv_dtype="fp8", v_widen=True),
          "persist": dict(block_n=128, warps=4, head_dim=128, q_per_kv=4, persist=True),
          "persist-b2": dict(block_n=64, warps=4, head_dim=128, q_per_kv=4, nbuf=2, persist=True),
          "persist-swap-d256": dict(block_n=64, warps=4, head_dim=256, q_per_kv=2, swap=True, persist=True)}
r = {}
try:
    for name, kw in shapes.items():
        k = compile_gluon_persist(**kw) if kw.pop("persist", False) else compile_gluon_decode(**kw)
        ptx = k.asm["ptx"]
        r[name] = {"shared_bytes": k.metadata.shared, **resource_usage(k.asm["cubin"]),
                   "waits": [int(n) for n in re.findall(r"cp\\.async\\.wait_group\\s+(\\d+)", ptx)],
                   "mma": len(re.findall(r"mma\\.sync", ptx)), "ldmatrix": len(re.findall(r"ldmatrix", ptx)),
                   "atomics": re.findall(r"atom\\.[\\w.]+", ptx), "cg_loads": len(re.findall(r"ld\\.global\\.cg", ptx)),
                   "tile_loop": next((lp["ops"] for lp in sass_loops(k.asm["cubin"]) if "HMMA" in lp["ops"]), None)}
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


def test_a_split_launch_merges_in_its_last_split_where_asked():
    """The fused merge: one counting atomic, acquire and release at GPU scope, and the other splits' states read
    past L1 (.cg: L1 is not coherent across SMs); none without it."""
    r = _compiled()
    for name in ("d128-fused", "swap-fused"):
        assert r[name]["atomics"] == ["atom.global.gpu.acq_rel.add.u32"], r[name]
        assert r[name]["cg_loads"] > 0, r[name]
    for name in ("d128", "d128-states", "persist"):
        assert r[name]["atomics"] == [] and r[name]["cg_loads"] == 0, r[name]


def test_the_persistent_kernel_waits_as_the_grid_one_and_once_more_an_item():
    """The persistent kernel's tile loop waits as gluon_decode's does (one copy group left in flight with one buffer
    each, three with two), and once more at each item's start, for the q that rides with its first tile's K."""
    r = _compiled()
    assert sorted(r["persist"]["waits"]) == [0, 1, 1, 1], r["persist"]
    assert sorted(r["persist-b2"]["waits"]) == [0, 3, 3, 3], r["persist-b2"]
    # K and V tiles, then q buffers (one a buffer of K and V, 16 padded rows of bf16), the lanes' merge scratch
    assert r["persist"]["shared_bytes"] >= 2 * 128 * 128 * 2 + 16 * 128 * 2, r["persist"]
    assert r["persist-b2"]["shared_bytes"] >= 2 * 2 * 64 * 128 * 2 + 2 * 16 * 128 * 2, r["persist-b2"]
    # transposed: q padded to 8 rows; its tile loop waits as the untransposed one's
    assert sorted(r["persist-swap-d256"]["waits"]) == [0, 1, 1, 1], r["persist-swap-d256"]
    assert r["persist-swap-d256"]["shared_bytes"] >= 2 * 64 * 256 * 2 + 8 * 256 * 2, r["persist-swap-d256"]
    # a warp's 16 keys x 256 head dims: S^T in 16 MMAs of k 16 (one N of 8 query heads), acc^T in 16 of m 16
    assert r["persist-swap-d256"]["mma"] == 32, r["persist-swap-d256"]


def test_the_persistent_tile_loop_copies_ahead_and_spills_nothing():
    """The persistent kernel's tile loop (the innermost loop with MMAs, in SASS): both waits, the four barriers,
    the copies of the tile NBUF ahead, K and V (128 keys x 128 head dims of bf16: 16 copies of 16 bytes a thread
    each), and the next item's q, a copy a lane at head dim 128 (4 x 16 rows: 8 a thread), read at every tile by
    ldmatrix (32 for K and V, 8 for q), and nothing spilled: the item's merge and store sit outside it."""
    loop = _compiled()["persist"]["tile_loop"]
    if loop is None:
        pytest.skip("no nvdisasm in this Triton")
    assert loop.get("DEPBAR") == 2 and loop.get("BAR") == 4, loop
    assert loop.get("LDGSTS") == 40 and loop.get("HMMA") == 64 and loop.get("LDSM") == 40, loop
    assert "LDL" not in loop and "STL" not in loop, loop


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
    sep = GluonDecode(q, k, k, bt, lens, 600, out, sm_count=132, splits=splits, block_n=64, fused_merge=False)
    r[splits] = [g.splits, g.tps, g.states is not None, g.const["WRITE_FINAL"], g.const["FUSED_MERGE"],
                 g.merge is not None, sep.merge is not None, list(g.counts.shape)]
print(json.dumps(r))
"""
    r = json.loads(run_without_interpreter(code).strip().splitlines()[-1])
    # 600 tokens are 10 tiles of 64: 3 splits of 4 tiles (256 tokens) cover them in 3; 7 splits of 2 tiles in 5;
    # 20 splits are capped at one tile each
    # split launches merge in their last split (no merge kernel) unless told not to; 3 x 2 KV heads: 6 counts
    assert r["1"] == [1, 640, False, True, False, False, False, [6]]
    assert r["3"] == [3, 256, True, False, True, False, True, [6]]
    assert r["7"] == [5, 128, True, False, True, False, True, [6]]
    assert r["20"] == [10, 64, True, False, True, False, True, [6]]


def test_persistent_launch_arithmetic():
    """Host side only: the persistent launch's program count, capped where an SM holds fewer of the compiled
    kernel than asked, and the launches it refuses (split, V widened, transposed over more query heads than the
    transposed dots hold)."""
    code = """
import json, torch
from kernels_probe.attention.gluon_plans import GluonDecode
q = torch.zeros(256, 32, 128, dtype=torch.bfloat16); k = torch.zeros(40, 16, 8, 128, dtype=torch.bfloat16)
bt = torch.zeros(256, 40, dtype=torch.int32); lens = torch.full((256,), 600, dtype=torch.int32)
out = torch.empty_like(q)
r = {"programs": [GluonDecode(q, k, k, bt, lens, 600, out, sm_count=sm, block_n=128, persist=per).programs
                  for sm, per in ((132, 2), (132, 1), (3, 2))]}
from types import SimpleNamespace
from kernels_probe.attention.gluon_decode_persist import compile_gluon_persist, resident_per_sm
def compiled(regs, shared):
    return SimpleNamespace(n_regs=regs, metadata=SimpleNamespace(shared=shared))
r["per_sm"] = [resident_per_sm(compiled(255, 102400), 4, 3), resident_per_sm(compiled(168, 51200), 4, 3),
               resident_per_sm(compiled(168, 51200), 4, 2), resident_per_sm(compiled(64, 200000), 4, 2)]
try:    # compiled, not loaded (no n_regs): the registers from its cubin
    kern = compile_gluon_persist(block_n=64, head_dim=128, q_per_kv=4)
    r["unloaded"] = [getattr(kern, "n_regs", None), kern.metadata.shared, resident_per_sm(kern, 4, 4)]
except Exception as exc:
    r["unloaded"] = str(exc)[:200]
for kw in (dict(splits=3), dict(v_widen=True), dict(swap=True, q_per_kv=16)):
    try:
        qq = torch.zeros(256, 8 * kw.pop("q_per_kv", 4), 128, dtype=torch.bfloat16)
        GluonDecode(qq, k, k, bt, lens, 600, torch.empty_like(qq), sm_count=132, block_n=128, persist=2, **kw)
    except ValueError as exc:
        r.setdefault("refused", []).append(str(exc))
print(json.dumps(r))
"""
    r = json.loads(run_without_interpreter(code).strip().splitlines()[-1])
    # 256 sequences x 8 KV heads = 2,048 items: 8 rounds of 256 at 2 an SM, 16 of 128 at 1; on 3 SMs 6 programs
    assert r["programs"] == [256, 128, 6]
    # an SM holds two programs of 255 registers x 4 warps (256 x 32 x 4 = 32K of 64K registers), three of 168
    # (5,376 a warp), one of 200,000 bytes of shared memory (227 KB): asked for more, a launch gets that many
    assert r["per_sm"] == [2, 3, 2, 1]
    # a warmup's kernel has no n_regs until loaded: head dim 128 on 64/4 asks over 170 registers (two an SM: 216 under
    # Triton 3.9, 255 under 3.6) and under 76 KB (three or more), so four asked gives two only if the cubin's
    # registers are read
    if isinstance(r["unloaded"], str):
        pytest.skip(f"no sm_90 compile here: {r['unloaded']}")
    assert r["unloaded"][0] is None and r["unloaded"][1] <= 227 * 1024 // 3, r["unloaded"]
    assert r["unloaded"][2] == 2, r["unloaded"]
    assert len(r["refused"]) == 3, r
    assert "unsplit" in r["refused"][0] and "widened" in r["refused"][1] and "at most 8" in r["refused"][2]


def test_the_probe_launch_takes_the_persistent_kernel_where_asked():
    """Host side only: DecodePlan on the Gluon route launches one program per item unless decode_gluon_persist
    asks for the persistent kernel, and its launch record says how many programs that took."""
    code = """
import json, dataclasses, torch
from cascade_plan.own_kernel_tune import DEFAULT_TUNE
from kernels_probe.attention.triton_plans import DecodePlan
q = torch.zeros(256, 32, 128, dtype=torch.bfloat16); k = torch.zeros(400, 16, 8, 128, dtype=torch.bfloat16)
bt = torch.zeros(256, 320, dtype=torch.int32); lens = torch.full((256,), 5120, dtype=torch.int32)
r = {}
for per in (0, 2):
    tune = dataclasses.replace(DEFAULT_TUNE, decode_gluon=True, decode_gluon_persist=per, decode_page_group=1)
    p = DecodePlan(q, k, k, bt, lens, 5120, torch.empty_like(q), sm_count=132, tune=tune)
    r[per] = [p.gluon, p.gluon_programs, p.launch_record().get("gluon_programs"), "Q_VEC" in p.gluon_const]
print(json.dumps(r))
"""
    r = json.loads(run_without_interpreter(code).strip().splitlines()[-1])
    assert r["0"] == [True, 0, None, False]
    assert r["2"] == [True, 256, 256, True]     # 2,048 items, 8 rounds of 256 programs


def test_head_dim_256_takes_the_transposed_kernels_where_asked():
    """Host side only: with decode_gluon_wide, an unsplit head-dim-256 launch of 2 query heads per KV head (1,024 x 4
    KV heads at 1.5K tokens, as the probe row 64 groups of 16 x 4 at 512 + 1K) runs the transposed grid kernel, or
    the persistent one with SWAP, on 64-token tiles; the route's query-head limit is the transposed dots'."""
    code = """
import json, dataclasses, torch
from cascade_plan.own_kernel_launch import GLUON_WIDE_MAX_Q_PER_KV
from cascade_plan.own_kernel_tune import DEFAULT_TUNE
from kernels_probe.attention.gluon_decode import SWAP_MAX_G
from kernels_probe.attention.triton_plans import DecodePlan
q = torch.zeros(1024, 8, 256, dtype=torch.bfloat16); k = torch.zeros(200, 16, 4, 256, dtype=torch.bfloat16)
bt = torch.zeros(1024, 100, dtype=torch.int32); lens = torch.full((1024,), 1536, dtype=torch.int32)
r = {"limit": GLUON_WIDE_MAX_Q_PER_KV == SWAP_MAX_G}
for per in (0, 2):
    tune = dataclasses.replace(DEFAULT_TUNE, decode_gluon=True, decode_gluon_wide=True, decode_gluon_persist=per,
                               decode_page_group=1)
    p = DecodePlan(q, k, k, bt, lens, 1536, torch.empty_like(q), sm_count=132, tune=tune)
    r[per] = [p.gluon, p.block_n, p.warps, getattr(p, "gluon_const", {}).get("SWAP"), p.gluon_programs > 0]
print(json.dumps(r))
"""
    r = json.loads(run_without_interpreter(code).strip().splitlines()[-1])
    assert r["limit"]
    assert r["0"] == [True, 64, 4, True, False]     # the grid kernel, transposed
    assert r["2"] == [True, 64, 4, True, True]      # the persistent one, transposed


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


def test_the_compile_table_reads_one_variant():
    """benchmarks/gluon_compile_table.py's row: registers, spills, shared memory, programs an SM and the tile loop,
    here for the persistent kernel at head dim 64 (fewer than 255 registers: more than two an SM)."""
    code = """
import json, sys
sys.path.insert(0, "benchmarks")
from gluon_compile_table import row
print(json.dumps(row("persist", dict(block_n=128, head_dim=64, q_per_kv=4))))
"""
    r = json.loads(run_without_interpreter(code).strip().splitlines()[-1])
    if r.get("registers") is None or r["tile_loop"]["instructions"] is None:
        pytest.skip("no cuobjdump or nvdisasm in this Triton")
    assert r["registers"] < 255 and r["per_sm"] >= 2, r
    assert r["tile_loop"]["HMMA"] == 32 and r["tile_loop"]["LDL"] == 0, r
