"""An efficiency correction surface over (size, rows) of one kernel kind, fitted from probe data."""

from __future__ import annotations

import msgspec
import numpy as np


class Surface(msgspec.Struct, frozen=True):
    """Natural-log efficiency correction over (log10 bytes per layer, log10 rows per layer), on a
    regular grid, bilinear in between and clamped outside. It carries what one bandwidth and one
    FLOP rate cannot: partial waves and occupancy at small batch, split-K choices, L2 effects."""

    log_bytes: tuple[float, ...]
    log_rows: tuple[float, ...]
    values: tuple[tuple[float, ...], ...]        # [bytes index][rows index]

    def __call__(self, bytes_, rows) -> np.ndarray:
        xb, xr = np.asarray(self.log_bytes), np.asarray(self.log_rows)
        v = np.asarray(self.values)
        lb = np.clip(np.log10(np.maximum(np.asarray(bytes_, float), 1.0)), xb[0], xb[-1])
        lr = np.clip(np.log10(np.maximum(np.asarray(rows, float), 1.0)), xr[0], xr[-1])
        i = np.clip(np.searchsorted(xb, lb) - 1, 0, len(xb) - 2)
        j = np.clip(np.searchsorted(xr, lr) - 1, 0, len(xr) - 2)
        tb = (lb - xb[i]) / (xb[i + 1] - xb[i])
        tr = (lr - xr[j]) / (xr[j + 1] - xr[j])
        val = ((1 - tb) * (1 - tr) * v[i, j] + tb * (1 - tr) * v[i + 1, j]
               + (1 - tb) * tr * v[i, j + 1] + tb * tr * v[i + 1, j + 1])
        # Outside the measured rows the correction fades out over half a decade: beyond the data only
        # the physical terms (bandwidth, FLOPs, latency, fixed costs) extrapolate.
        raw = np.log10(np.maximum(np.asarray(rows, float), 1.0))
        dist = np.maximum(xr[0] - raw, 0) + np.maximum(raw - xr[-1], 0)
        return val * np.clip(1 - dist / 0.5, 0, 1)

    def to_dict(self) -> dict:
        return {"log_bytes": list(self.log_bytes), "log_rows": list(self.log_rows),
                "values": [list(r) for r in self.values]}

    @classmethod
    def from_dict(cls, d: dict) -> "Surface":
        return cls(tuple(d["log_bytes"]), tuple(d["log_rows"]), tuple(tuple(r) for r in d["values"]))
