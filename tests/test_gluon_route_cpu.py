"""Under Triton's interpreter, which cannot run Gluon, a launch the Gluon route would take runs the Triton decode and
gives the float32 reference's result."""

from __future__ import annotations

import dataclasses

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from decode_interpreter_support import SMALL_TILES, run_plan, small_config  # noqa: E402

from cascade_plan.own_kernel_launch import gluon_decode_route  # noqa: E402
from kernels_probe.attention.data import build_data, reference_output  # noqa: E402
from kernels_probe.attention.reference import max_rel_err  # noqa: E402

ROUTED = dataclasses.replace(SMALL_TILES, decode_gluon=True, decode_page_group=1)


def test_the_interpreter_runs_the_triton_decode_where_the_route_would_take_gluon():
    d = build_data(small_config(head_dim=64), "cpu", seed=31)
    ref = reference_output(d)
    for table, shared in ((d.shared_table, 64), (d.dup_table, 0)):
        out, plan = run_plan(d, table, 72, ROUTED, splits=1, shared=shared)
        assert gluon_decode_route(plan.tune, kv_dtype="bf16", head_dim=64, q_per_kv=plan.G, splits=plan.splits,
                                  seqs=plan.seqs, external_states=plan.external_states)
        assert not plan.gluon and plan.block_n == 32
        assert max_rel_err(out, ref) < 1e-2
