"""What a backend hands the runner for one configuration: the kernels it times and the ones it cannot run.
Pure Python (no torch): each backend module (``triton_backend``, ``torch_backend``, ``flashinfer_backend``)
builds these from its own kernels; the runner checks, times and records them without knowing which is which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TimedKernel:
    """One timed row. ``run`` is what the CUDA graph captures; a kernel whose inputs must be computed
    eagerly first (torch's merge of two passes' outputs) gives ``prepare`` instead, which computes them
    and returns the callable to time. ``check`` (composites only) poisons the kernel's output, runs it
    and returns the output, which is compared with the float32 reference before anything is timed;
    pieces of a composite (a cascade's prefix, suffix, merge) have none. ``keep_output``: the checked
    output is kept to compare the backend's cascade with its own per-sequence decode. ``launch``: the
    launch shape recorded on the row (the Triton cascade's splits and slots), or a callable that returns it once
    the kernel has run (the Triton decode's page blocks, which its kernel decides from the block table)."""

    backend: str
    kernel: str
    run: Callable[[], Any] | None = None
    variant: str | None = None
    check: Callable[[], Any] | None = None
    prepare: Callable[[], Callable[[], Any]] | None = None
    keep_output: bool = False
    launch: dict | Callable[[], dict] | None = None

    def __post_init__(self) -> None:
        if (self.run is None) == (self.prepare is None):
            raise ValueError(f"{self.backend} {self.kernel}: give exactly one of run and prepare")

    @property
    def key(self) -> tuple[str, str, str | None]:
        return (self.backend, self.kernel, self.variant)

    def timed_callable(self) -> Callable[[], Any]:
        return self.prepare() if self.prepare is not None else self.run  # type: ignore[return-value]


@dataclass(frozen=True)
class SkippedKernel:
    """A row the backend cannot produce for this configuration, and why (it goes to the file's ``skipped``)."""

    backend: str
    kernel: str
    reason: str
    variant: str | None = None


BackendKernels = list[TimedKernel | SkippedKernel]


def poisoned_run(out, fn: Callable[[], Any]) -> Callable[[], Any]:
    """A check: fill `out` (the tensor `fn` writes) with NaN, run `fn`, return its result; an output the
    kernel failed to write stays NaN and fails the comparison."""
    def check():
        out.fill_(float("nan"))
        return fn()
    return check
