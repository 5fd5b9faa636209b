"""FlashInfer's tensor-core decode reads a context in whole KV tiles: the planner interpolates its rows along the
suffix axis in tiles (a partly filled tile counting the share of its empty part the rows show), so a rollout's first
token after a tile-aligned prompt costs most of what the probe's one-page row costs, not 1/16 of its rise."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascade_plan import load_hardware
from cascade_plan.calibration.calibration_file import find_committed
from cascade_plan.calibration.measured_grid import measured_rows
from cascade_plan.cost.ops.attention import MeasuredAttention, MeasuredTable, SingleLevel, measured_layer_s
from cascade_plan.cost.ops.tiles import fa2_decode_tile_tokens, partial_tile_shares, tiled_suffix

H200 = load_hardware("h200")
# Shipped H200 rows (calibrations/h200-probe-2026-12-01.json): FlashInfer tensor-core decode over shared pages,
# Qwen2.5-1.5B's layer (6 query heads per KV head, 2 KV heads, head dim 128, bf16), 64 prompts of 512 tokens x 16
# sequences, at suffixes 0, 16 and 1,024
QWEN_512 = {0: 0.000113087996840477, 16: 0.00012483199685811997}
# FlashInfer's cascade there (its FA3 prefill on Hopper) at a 16-token suffix; it has no row without a suffix
QWEN_512_CASCADE_16 = 0.00034899199008941653


def test_tile_lengths_follow_the_shared_memory_rule():
    # Hopper: two blocks per SM, K and V slices of 64 tokens per unit, at most 8 units, a power of two
    assert [fa2_decode_tile_tokens(d, 2, "9.0") for d in (64, 128, 256)] == [256, 128, 64]
    assert [fa2_decode_tile_tokens(d, 1, "9.0") for d in (64, 128, 256)] == [512, 256, 128]
    # A100 (164 KiB per SM): the same 128 tokens at head dim 128 in bf16; a GPU not in the table: no rule
    assert fa2_decode_tile_tokens(128, 2, "8.0") == 128
    assert fa2_decode_tile_tokens(128, 2, "7.5") == 0


def test_tiled_suffix_by_hand():
    assert tiled_suffix(512, 1, 128) == 128            # 513 tokens: five tiles, as 640
    assert tiled_suffix(512, 1, 128, 0.5) == 64.5      # half the empty 127 tokens counted
    assert tiled_suffix(512, 16, 256) == 256
    assert tiled_suffix(512, 0, 256) == 0              # no private token: no extra tile
    assert tiled_suffix(512, 1024, 256, 0.3) == 1024   # already on a tile
    assert tiled_suffix(700, 1, 256) == 68             # 701 tokens end in the tile 700 already opened
    assert tiled_suffix(512, 5, 0) == 5                # no tile rule: token by token


@given(st.integers(0, 1 << 18), st.integers(0, 1 << 14), st.integers(0, 1 << 14), st.sampled_from([0, 64, 128, 256]),
       st.floats(0, 1))
def test_tiled_suffix_never_shrinks_and_never_reorders(prefix, a, b, tile, share):
    lo, hi = sorted((a, b))
    t_lo, t_hi = tiled_suffix(prefix, lo, tile, share), tiled_suffix(prefix, hi, tile, share)
    assert t_lo >= lo and t_hi >= hi and t_lo <= t_hi + 1e-9
    if tile:
        assert (prefix + tiled_suffix(prefix, hi, tile)) % tile == 0 or hi == 0


def test_partial_tile_share_recovers_a_known_share():
    # t = 10 us + 1 us per priced token, 40% of a partly filled 128-token tile's empty part priced
    tile, share = 128, 0.4
    pts = np.array([[1, 8, 512, s] for s in (0, 16, 1024)] + [[1, 8, 1024, 0], [1, 8, 1000, 16]], float)
    t = 10 + tiled_suffix(pts[:, 2], pts[:, 3], tile, share)
    assert partial_tile_shares(pts, t, tile) == [pytest.approx(share)]   # the unaligned prefix and lone row add none


def test_a_fit_that_matches_its_rows_gives_their_tiled_interpolation():
    pts = np.array([[1, 1, 512, 0], [1, 1, 512, 16], [1, 1, 512, 1024]], float)
    t = np.array([100.0, 125.0, 300.0])
    tiled = pts.copy()
    tiled[:, 3] = tiled_suffix(pts[:, 2], pts[:, 3], 128, 0.5)
    tab = MeasuredTable(tiled, t, fit_s=t)
    raw = np.array([[1, 1, 512, 1]], float)
    q = raw.copy()
    q[:, 3] = tiled_suffix(512, 1, 128, 0.5)
    fit_at_raw = 100.0 + (125.0 - 100.0) * (1 - 0) / (tiled[1, 3] - 0)        # the rows' line at the raw point
    assert tab(q, np.array([fit_at_raw]), raw)[0] == pytest.approx(tab(q)[0])
    assert 100.0 < tab(q)[0] < 125.0


def _at(measured: MeasuredAttention, kernel: str, suffix: float) -> float:
    sl = SingleLevel(tuple(np.array([v], float) for v in (64, 16, 512, suffix)), np.array([True]))
    return float(measured_layer_s(measured, kernel, (6, 2, 128), sl)[0])


def test_first_token_after_a_tile_aligned_prompt_on_the_shipped_rows():
    probe = find_committed(H200)
    assert probe is not None
    fi = measured_rows(probe, "flashinfer", "bf16")
    assert fi is not None and fi.decode_tile_tokens == {64: 256, 128: 128, 256: 64}
    # the bf16 rows at 0, 16 and a tile-aligned longer suffix show 34-39% of the empty part paid (six shapes each)
    assert fi.decode_tile_share["per_sequence"] == pytest.approx(0.394, abs=0.001)
    assert fi.decode_tile_share["per_sequence_dup"] == pytest.approx(0.340, abs=0.001)
    assert fi.tile_tokens("cascade", (6, 2, 128)) == 0          # the cascade: its suffix pass in whole pages
    assert fi.page_tokens == 16 and _at(fi, "cascade", 1) == _at(fi, "cascade", 16) == QWEN_512_CASCADE_16
    share = fi.decode_tile_share["per_sequence"]
    one, sixteen = 1 + share * 127, 16 + share * 112             # both end in the fifth 128-token tile
    assert _at(fi, "per_sequence", 0) == QWEN_512[0]
    assert _at(fi, "per_sequence", 16) == QWEN_512[16]
    assert _at(fi, "per_sequence", 1) == pytest.approx(QWEN_512[0] + (QWEN_512[16] - QWEN_512[0]) * one / sixteen)
    # token by token (no rule), one token would be 1/16 of the rise: the whole step of the new tile missed
    plain = MeasuredAttention(fi.backend, fi.kv_dtype, fi.rows)
    assert _at(plain, "per_sequence", 1) == pytest.approx(QWEN_512[0] + (QWEN_512[16] - QWEN_512[0]) / 16)
    # fp8's 256-token tile, from Qwen2.5-1.5B's rows at 512 + 0, 16 and 1,024 tokens over shared pages (153.8, 193.8
    # and 337.7 us): ((193.8 - 153.8) / ((337.7 - 153.8) / 1024) - 16) / (256 - 16) = 0.861 of the tile's empty part
    fp8 = measured_rows(probe, "flashinfer", "fp8")
    assert fp8 is not None and fp8.decode_tile_tokens[128] == 256
    assert fp8.decode_tile_share["per_sequence"] == pytest.approx(0.861, abs=0.002)
    # the probe's Triton decode masks a tile's tail: no rule
    tr = measured_rows(probe, "triton", "bf16")
    assert tr is not None and tr.decode_tile_tokens == {}


def test_a_gpu_the_tile_rule_does_not_know_keeps_tokens(tmp_path):
    import json

    from cascade_plan.calibration.calibration_file import load_probe

    probe = find_committed(H200)
    assert probe is not None
    doc = json.loads(open(probe.path).read())
    doc["device"]["compute_capability"] = "9.0a"
    path = tmp_path / "cc.json"
    path.write_text(json.dumps(doc))
    fi = measured_rows(load_probe(str(path)), "flashinfer", "bf16")
    assert fi is not None and fi.decode_tile_tokens == {} and fi.decode_tile_share == {}
    assert _at(fi, "per_sequence", 1) == pytest.approx(QWEN_512[0] + (QWEN_512[16] - QWEN_512[0]) / 16)
