"""The launches the probe's own kernels choose, read from the tune a calibration file records (`notes.tune`) and
its GPU's SM count: where a fit may price a launch apart (calibration/fitting.py fit_kernel `filled`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cascade_plan.calibration.calibration_file import ProbeData

# Backends whose kernels are the probe's own (kernels_probe/attention/triton_launch.py picks their launches)
OWN_KERNELS = ("triton",)
TUNE_KEYS = ("target_programs_per_sm", "decode_short_tokens", "decode_block_n", "decode_block_n_large_batch")


def filled_launch(probe: ProbeData, backend: str) -> tuple[int, int, int] | None:
    """((sequence, KV head) rows per layer, tokens a row must exceed, the tile's tokens) from which the
    per-sequence decode of `backend` runs unsplit with its large-batch tile: the batch alone gives
    target_programs_per_sm programs per SM, and a row holds more tokens than the short-split tile takes
    (triton_launch.decode_tile). None: not the probe's own kernel, no such tile in the recorded tune, or no tune
    or SM count recorded."""
    if backend not in OWN_KERNELS:
        return None
    tune = (probe.decoded.get("notes") or {}).get("tune") or {}
    sms = probe.device.sm_count
    if not sms or any(not isinstance(tune.get(k), int) or isinstance(tune.get(k), bool) for k in TUNE_KEYS):
        return None
    if (tune["decode_block_n_large_batch"], tune.get("decode_stages_large_batch")) == (
            tune["decode_block_n"], tune.get("decode_stages")):
        return None
    return tune["target_programs_per_sm"] * sms, tune["decode_short_tokens"], tune["decode_block_n_large_batch"]
