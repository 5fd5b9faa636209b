"""The number types of the calibration file: every count and physical quantity it may hold, with its range as
an annotation (msgspec.Meta), so a value out of range is refused where a file is read or written, not in numpy."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

# Bounds of the counts and physical quantities a calibration may hold: the same numbers as
# inputs/limits.py (a test pins them equal), here so that the probe can check its file without the planner.
MAX_CALIBRATION_BYTES = 32 << 20
MAX_COPIES = 1_000_000
MAX_SAMPLES = 1_000_000
MAX_SEQUENCES = 1_000_000_000
MAX_CONTEXT_TOKENS = 100_000_000
MAX_BLOCK_SIZE = 1_048_576
MAX_HEADS = 65_536
MAX_HEAD_DIM = 65_536
HBM_BYTES_PER_S = (1e9, 1e15)
FLOP_PER_S = (1e11, 1e19)
L2_BYTES = (0.0, 1e11)
Seconds = Annotated[float, msgspec.Meta(ge=0, le=1e4)]           # one kernel, one layer: well under hours
Fraction = Annotated[float, msgspec.Meta(ge=0, le=1)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_CONTEXT_TOKENS)]
Bandwidth = Annotated[float, msgspec.Meta(ge=HBM_BYTES_PER_S[0], le=HBM_BYTES_PER_S[1] * 100)]
FlopRate = Annotated[float, msgspec.Meta(ge=FLOP_PER_S[0], le=FLOP_PER_S[1])]
FiniteNonNeg = Annotated[float, msgspec.Meta(ge=0, le=1e30)]
LogValue = Annotated[float, msgspec.Meta(ge=-1e3, le=1e3)]       # log10 axes of the surface
Correction = Annotated[float, msgspec.Meta(ge=-20, le=20)]        # natural-log corrections: e^20 is 5e8x already
Rate = Annotated[float, msgspec.Meta(ge=0, le=1e30)]              # 0 (not fitted) or at least MIN_RATE, checked below
MIN_RATE = 1e6
KvDtype = Literal["bf16", "fp16", "fp8"]         # the KV element types the probe times and the planner prices
Text = Annotated[str, msgspec.Meta(max_length=100_000)]
Positive = Annotated[float, msgspec.Meta(gt=0, le=1e30)]
LogAxis = Annotated[float, msgspec.Meta(ge=-64, le=128)]          # log2 of a row count or a byte count
Microseconds = Annotated[float, msgspec.Meta(gt=0, le=1e10)]
AtLeastOne = Annotated[int, msgspec.Meta(ge=1, le=MAX_SEQUENCES)]
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, le=1e4)]
Bytes = Annotated[float, msgspec.Meta(ge=0, le=1e18)]
TokenCounts = list[Annotated[float, msgspec.Meta(ge=1, le=1e7)]]
GpuCount = Annotated[str, msgspec.Meta(pattern=r"^[1-9][0-9]{0,5}$")]
SpeedupError = Annotated[float, msgspec.Meta(ge=-1, le=1e3)]    # predicted / measured - 1
