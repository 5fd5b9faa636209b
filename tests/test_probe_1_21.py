"""Probe 1.21.0 changes the per-sequence decode's kernel body only (its page arithmetic unsigned,
decode_unsigned_pages): the tune is 1.20.0's with that switch, and no launch moves, so the planner's launch model and
the calibrations' recorded launches stay valid."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from cascade_plan.own_kernel_pages import decode_launch
from cascade_plan.own_kernel_plan import decode_launch_plan
from cascade_plan.own_kernel_tune import TuneParams
from cascade_plan.own_kernel_tunes import PROBE_1_20_0_TUNE, PROBE_1_21_0_TUNE

SM = 132


def test_probe_1_21_0_is_1_20_0_with_unsigned_page_arithmetic():
    assert not PROBE_1_20_0_TUNE.decode_unsigned_pages and PROBE_1_21_0_TUNE.decode_unsigned_pages
    assert PROBE_1_21_0_TUNE == dataclasses.replace(PROBE_1_20_0_TUNE, decode_unsigned_pages=True)
    # a TuneParams built field by field (as calibrations record theirs) keeps the signed kernel unless it says so
    assert not TuneParams().decode_unsigned_pages


@settings(max_examples=300, deadline=None)
@given(batch=st.integers(1, 512), kv_heads=st.sampled_from([1, 2, 4, 8, 16]),
       q_per_kv=st.sampled_from([1, 2, 4, 5, 8, 12, 16]), private=st.integers(1, 8192),
       shared=st.sampled_from([0, 512, 4096, 32768]), head_dim=st.sampled_from([64, 128, 256]),
       streaming=st.booleans())
def test_no_launch_moves(batch, kv_heads, q_per_kv, private, shared, head_dim, streaming):
    tokens = shared + private
    args = (batch, kv_heads, q_per_kv, tokens, shared, SM)
    assert (decode_launch_plan(*args, PROBE_1_21_0_TUNE, head_dim=head_dim)
            == decode_launch_plan(*args, PROBE_1_20_0_TUNE, head_dim=head_dim))
    assert (decode_launch(*args, PROBE_1_21_0_TUNE, head_dim=head_dim, streaming=streaming)
            == decode_launch(*args, PROBE_1_20_0_TUNE, head_dim=head_dim, streaming=streaming))
