"""Running code that compiles Triton kernels for sm_90 on the CPU, in a subprocess without TRITON_INTERPRET:
importing triton in the test process without the interpreter would make the interpreter tests that run after it in
the same worker skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_without_interpreter(code: str) -> str:
    """`code`'s stdout, run by this Python without TRITON_INTERPRET from the repository's root; fails the test where
    it exits non-zero."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def compiled_json(code: str, what: str) -> dict:
    """The JSON object `code` prints last; a skip where it says {"skip": why} (no sm_90 compile here)."""
    r = json.loads(run_without_interpreter(code).strip().splitlines()[-1])
    if "skip" in r:
        pytest.skip(f"Triton could not compile {what} for sm_90 here: {r['skip']}")
    return r
