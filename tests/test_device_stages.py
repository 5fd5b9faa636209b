"""The device run script runs every stage the decode-against-FlashInfer benchmark defines: a stage added to
benchmarks/decode_vs_flashinfer.py's STAGE_PLANS but not to benchmarks/h200_probe_run.sh's case would be silently
skipped by a device call that names it (the loop has no default branch)."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# stages of the benchmark's first sessions, run by calling the script directly, never through the run script
RUN_DIRECTLY = {"sweep", "tiny"}


def _script_stages() -> set[str]:
    text = (ROOT / "benchmarks" / "h200_probe_run.sh").read_text()
    out: set[str] = set()
    for m in re.finditer(r"^ {4}([\w|-]+)\)", text, re.M):
        out |= set(m.group(1).split("|"))
    return out


def test_every_benchmark_stage_is_a_case_of_the_run_script_and_documented():
    saved = list(sys.path)       # the benchmark puts the checkout on sys.path as it loads
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        dvf = importlib.import_module("decode_vs_flashinfer")
    finally:
        sys.path[:] = saved
    stages = set(dvf.STAGE_PLANS)
    assert "regimes-losers" in stages and "wide-head-waves" in stages
    assert stages - RUN_DIRECTLY <= _script_stages()
    header = (ROOT / "benchmarks" / "h200_probe_run.sh").read_text().split("set -o pipefail")[0]
    undocumented = {s for s in stages - RUN_DIRECTLY if not re.search(rf"^#\s+{re.escape(s)}\s", header, re.M)}
    assert not undocumented, undocumented
