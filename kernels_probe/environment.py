"""What the probe needs on this machine, checked without importing torch unless it is installed."""

from __future__ import annotations

import importlib.util


def missing_requirements() -> list[str]:
    """Human sentences for each missing requirement of the GPU probe; empty when ready."""
    missing: list[str] = []
    has_torch = importlib.util.find_spec("torch") is not None
    if not has_torch:
        missing.append("torch is not installed: pip install 'cascade-plan[probe]'")
    if importlib.util.find_spec("triton") is None:
        missing.append("triton is not installed: pip install 'cascade-plan[probe]' (Linux with a CUDA GPU)")
    if has_torch:
        try:
            import torch

            if not torch.cuda.is_available():
                missing.append("no CUDA GPU is visible to torch (torch.cuda.is_available() is False)")
        except Exception as exc:  # a broken torch install is missing too
            missing.append(f"torch cannot be imported ({type(exc).__name__}: {exc})")
    return missing
