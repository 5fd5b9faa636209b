"""What the tests of benchmarks/ scripts share: loading one as a module."""

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark(name: str):
    """benchmarks/<name>.py as a module, with benchmarks/ on sys.path only while it loads (its sibling imports
    resolve; the test's path is left as it was)."""
    saved = list(sys.path)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path[:] = saved
