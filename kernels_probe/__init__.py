"""kernels_probe: the GPU side of cascade-plan.

Real decode-attention kernels (Triton, over a paged KV cache), torch's flash attention and, where
importable, FlashInfer, timed with CUDA graphs into a calibration JSON file that the planner reads.

This module imports nothing heavy: torch and triton are imported by the submodules that need them,
so ``kernels_probe.environment`` can say what is missing on a machine without them.
"""

PROBE_VERSION = "1.3.0"  # 1.3: fp16 dots over fp8 KV, the many-slot merge, decode_splits
__version__ = PROBE_VERSION
