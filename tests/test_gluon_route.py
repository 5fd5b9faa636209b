"""Which per-sequence decode launches run the Gluon decode (TuneParams.decode_gluon, own_kernel_launch's
gluon_decode_route): pure host arithmetic, no torch or triton."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from cascade_plan.own_kernel_launch import (
    GLUON_HEAD_DIMS,
    GLUON_TILE,
    gluon_decode_route,
    gluon_decode_tile,
    persistent_programs,
)
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
       on=st.booleans(), wide=st.booleans())
def test_route_is_the_conjunction_of_its_conditions(kv, d, g, splits, seqs, ext, on, wide):
    tune = replace(DEFAULT_TUNE, decode_gluon=on, decode_gluon_wide=wide)
    heads = (d in (64, 128) and g <= 16) or (wide and d == 256 and g <= 8)
    want = on and kv == "bf16" and heads and splits == 1 and seqs == 1 and not ext
    assert route(tune, kv_dtype=kv, head_dim=d, q_per_kv=g, splits=splits, seqs=seqs, external_states=ext) == want


def test_the_probe_runs_no_persistent_launch():
    assert DEFAULT_TUNE.decode_gluon_persist == 0 and PROBE_1_21_0_TUNE.decode_gluon_persist == 0
    assert not DEFAULT_TUNE.decode_gluon_wide


def test_head_dim_256_only_where_asked_on_transposed_dots():
    """decode_gluon_wide adds head dim 256 at up to 8 query heads per KV head (one MMA's N), on 64-token tiles of
    four warps with the dots transposed; the other head dims keep their tile."""
    wide = replace(ON, decode_gluon_wide=True)
    assert not route(ON, head_dim=256, q_per_kv=2)
    assert route(wide, head_dim=256, q_per_kv=2) and route(wide, head_dim=256, q_per_kv=8)
    assert not route(wide, head_dim=256, q_per_kv=9) and not route(wide, head_dim=256, kv_dtype="fp8")
    assert not route(replace(wide, decode_gluon=False), head_dim=256, q_per_kv=2)
    assert gluon_decode_tile(256) == (64, 4, True)
    assert gluon_decode_tile(128) == gluon_decode_tile(64) == (*GLUON_TILE, False)


def test_persistent_programs_by_hand():
    """2,048 items on 132 SMs at 2 an SM (264 resident): 8 rounds, 256 programs of 8 items each; 4,096 items: 16
    rounds of 256; 265 items: 2 rounds, 133 programs (132 of 2, one of 1); fewer items than resident: one each."""
    assert persistent_programs(2048, 132, 2) == 256
    assert persistent_programs(4096, 132, 2) == 256
    assert persistent_programs(265, 132, 2) == 133
    assert persistent_programs(200, 132, 2) == 200
    assert persistent_programs(0, 132, 2) == 1


@given(items=st.integers(1, 200_000), sms=st.integers(1, 200), per_sm=st.integers(1, 8))
def test_persistent_programs_fit_and_balance(items, sms, per_sm):
    """Never more programs than resident slots or items; every program takes rounds or rounds - 1 items (strided
    by the program count), with rounds the fewest any launch of that many resident programs needs."""
    p = persistent_programs(items, sms, per_sm)
    rounds = -(-items // (sms * per_sm))
    assert 1 <= p <= min(items, sms * per_sm)
    taken = [len(range(i, items, p)) for i in (0, p - 1)]
    assert taken[0] == rounds and taken[1] in (rounds - 1, rounds)
