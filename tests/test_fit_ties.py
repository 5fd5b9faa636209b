"""A fit the training rows cannot tell apart is decided by a rule, not by floating-point noise: `calibrate` on the
shipped H200 file writes the kernel parameters the file ships, on any machine."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from cascade_plan.calibration.fitting import TIE_REL, _least_latency

ROOT = Path(__file__).resolve().parent.parent


def _th(tau: float, row: float = 1e-9, cost: float = 1.0):
    return np.log([1e-5, row, 1e-12, 4e12, 1e14, tau]), cost


def test_among_tied_fits_the_smallest_token_latency_wins():
    ends = [_th(9e-10), _th(1e-12, cost=1.0 * (1 + TIE_REL / 10)), _th(5e-10)]
    assert math.exp(_least_latency(ends)[5]) == pytest.approx(1e-12)
    # a fit that is better, not tied, wins whatever its latency
    better = [_th(9e-10, cost=0.9), _th(1e-12)]
    assert math.exp(_least_latency(better)[5]) == pytest.approx(9e-10)
    # tied on latency too: the smaller per-row cost
    rows = [_th(1e-12, row=1e-8), _th(1e-12, row=1e-10)]
    assert math.exp(_least_latency(rows)[1]) == pytest.approx(1e-10)


def test_calibrate_reproduces_the_shipped_kernel_fits():
    from cascade_plan.calibration.calibration_file import load_probe
    from cascade_plan.calibration.probe_fit import calibrate

    path = ROOT / "calibrations" / "h200-probe-2026-12-01.json"
    shipped = json.loads(path.read_text())["fitted"]["kv_dtypes"]
    fitted = calibrate(load_probe(path))["kv_dtypes"]
    n = 0
    for kv, per in shipped.items():
        for backend, kernels in per.items():
            for kind, k in kernels.items():
                if not isinstance(k, dict) or "token_latency_s" not in k:
                    continue
                got = fitted[kv][backend][kind]
                for f in ("bw_bytes_per_s", "flop_per_s", "overhead_s", "token_latency_s"):
                    assert got[f] == pytest.approx(k[f], rel=1e-4, abs=1e-11), (kv, backend, kind, f)
                n += 1
    assert n >= 30
