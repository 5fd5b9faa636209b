"""Head dim 256's streaming launch at one program per SM (wide_head_stream_programs_per_sm, probe 1.22.0) on the
CPU, through Triton's interpreter: the prefetching 64-token 3-stage tile it runs gives the float32 reference's
result, as the launch before it does."""

from __future__ import annotations

import pytest

from kernels_probe.interpret import enable_interpreter

if not enable_interpreter():  # triton was imported earlier in this process without the interpreter
    pytest.skip("triton already imported without TRITON_INTERPRET=1", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from cascade_plan.own_kernel_tune import DEFAULT_TUNE  # noqa: E402
from cascade_plan.own_kernel_tunes import PROBE_1_21_0_TUNE  # noqa: E402
from kernels_probe.attention.data import build_data, reference_output  # noqa: E402
from kernels_probe.attention.grid import AttentionConfig  # noqa: E402
from kernels_probe.attention.reference import max_rel_err  # noqa: E402
from kernels_probe.attention.triton_plans import DecodePlan  # noqa: E402


def test_head_dim_256s_streaming_launch_on_prefetching_tiles_matches_the_reference():
    """2 sequences x 1 KV head of 2 query heads at head dim 256 over 3,072 private tokens on 2 SMs: probe 1.21.0
    streams 2 splits of 1,536 (2 per SM) on the base tile without page prefetch, merged in its own programs; 1.22.0
    one of 3,072 (1 per SM) on the 64-token 3-stage tile, page numbers ahead."""
    cfg = AttentionConfig(prefix_tokens=3072, group_size=2, n_groups=1, suffix_tokens=0, q_per_kv=2, num_kv_heads=1,
                          head_dim=256, page_size=16, kv_dtype="bf16")
    d = build_data(cfg, "cpu", seed=7)
    ref = reference_output(d)
    got = []
    for tune in (PROBE_1_21_0_TUNE, DEFAULT_TUNE):
        out = torch.full_like(d.q, float("nan"))
        plan = DecodePlan(d.q, d.k_cache, d.v_cache, d.dup_table, d.seq_lens, 3072, out, sm_count=2, tune=tune,
                          shared_prefix_tokens=0)
        plan()
        assert max_rel_err(out, ref) < 1e-2
        got.append((plan.splits, plan.tps, plan.block_n, plan.stages, plan.prefetch, plan.fused_merge))
    assert got == [(2, 1536, 64, 3, False, True), (1, 3072, 64, 3, True, False)]
