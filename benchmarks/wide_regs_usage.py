"""Registers, spills and programs per SM of head dim 256's decode tiles as the wide-regs stage launches them (default,
registers capped at 168, halves of the head dims, 32-token tiles of 3 stages), compiled for sm_90 by this machine's
Triton (no GPU needed): python benchmarks/wide_regs_usage.py"""

from __future__ import annotations

import sys

sys.path.insert(0, ".")

from kernels_probe.attention.pipelining import decode_pipeline  # noqa: E402


def main() -> int:
    import triton

    print(f"triton {triton.__version__}; registers/stack bytes per thread, programs per SM by registers and by shared "
          "memory")
    for kv in ("bf16", "fp8"):
        for tile in ((64, 2, 4), (32, 3, 4)):
            cells = []
            for halves, cap in ((False, None), (False, 168), (True, 168), (True, None)):
                r = decode_pipeline(*tile, prefetch=True, q_per_kv=2, head_dim=256, kv_dtype=kv, halves=halves,
                                    maxnreg=cap)
                res = r["resident"]
                cells.append(f"{'halves' if halves else 'whole'}/{cap or '-'}: {r['registers']}r {r['stack_bytes']}st "
                             f"{res['by_registers']},{res['by_shared']}")
            print(kv, "x".join(map(str, tile)), " | ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
