"""Which per-sequence decode launches run the Gluon decode (TuneParams.decode_gluon, own_kernel_launch's
gluon_decode_route): pure host arithmetic, no torch or triton."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import GLUON_HEAD_DIMS, GLUON_TILE, gluon_decode_route
from cascade_plan.own_kernel_tune import DEFAULT_TUNE
from cascade_plan.own_kernel_tunes import PROBE_1_21_0_TUNE

ON = replace(DEFAULT_TUNE, decode_gluon=True)


def route(tune=ON, **kw):
    args = dict(kv_dtype="bf16", head_dim=128, q_per_kv=4, splits=1, seqs=1, external_states=False)
    args.update(kw)
    return gluon_decode_route(tune, **args)


def test_the_probe_does_not_route_to_gluon():
    """Probe 1.22.0 runs no launch on the Gluon decode: four launches timed on one H100 are not the grids'."""
    assert not DEFAULT_TUNE.decode_gluon and not PROBE_1_21_0_TUNE.decode_gluon
    assert not route(DEFAULT_TUNE)


def test_only_the_launches_its_tile_was_timed_on():
    """An unsplit launch writing its own output, without page blocks, over bf16 at head dims 64 and 128 with up to
    16 query heads per KV head; each condition alone turns it away."""
    assert GLUON_HEAD_DIMS == (64, 128) and GLUON_TILE == (128, 4)
    assert route() and route(head_dim=64) and route(q_per_kv=16) and route(q_per_kv=1)
    for kw in (dict(kv_dtype="fp8"), dict(head_dim=256), dict(head_dim=96), dict(q_per_kv=17), dict(splits=2),
               dict(seqs=2), dict(external_states=True)):
        assert not route(**kw), kw


@given(kv=st.sampled_from(["bf16", "fp8", "fp16"]), d=st.sampled_from([32, 64, 96, 128, 192, 256]),
       g=st.integers(1, 32), splits=st.integers(1, 64), seqs=st.sampled_from([1, 2, 4, 8, 16]), ext=st.booleans(),
       on=st.booleans())
def test_route_is_the_conjunction_of_its_conditions(kv, d, g, splits, seqs, ext, on):
    tune = replace(DEFAULT_TUNE, decode_gluon=on)
    want = on and kv == "bf16" and d in (64, 128) and g <= 16 and splits == 1 and seqs == 1 and not ext
    assert route(tune, kv_dtype=kv, head_dim=d, q_per_kv=g, splits=splits, seqs=seqs, external_states=ext) == want
