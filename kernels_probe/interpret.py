"""Run the probe's Triton kernels on the CPU through Triton's interpreter (tests, CI without a GPU).

``enable_interpreter()`` must run before ``triton`` is first imported in the process: Triton reads
``TRITON_INTERPRET`` when its kernels are decorated. It also patches one incompatibility between
Triton 3.6's interpreter and NumPy >= 2.3: the interpreter turns a scalar into a Python int with
``int(array)``, which NumPy now refuses for a one-element 1-d array, so every loop with a run-time
bound (``for t in range(start, end, BLOCK)``) fails under the interpreter. The patch reads the
single element instead.
"""

from __future__ import annotations

import os
import sys


def enable_interpreter() -> bool:
    """Turn Triton's interpreter on; returns False if triton was already imported without it."""
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        return False
    os.environ["TRITON_INTERPRET"] = "1"
    _patch_scalar_index()
    return True


def _patch_scalar_index() -> None:
    import numpy as np

    try:
        import triton.runtime.interpreter as interp
    except Exception:  # triton absent or reorganised: nothing to patch
        return
    original = getattr(interp, "_patch_lang_tensor", None)
    if original is None or getattr(original, "_cascade_plan_patched", False):
        return

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    patched._cascade_plan_patched = True
    interp._patch_lang_tensor = patched
