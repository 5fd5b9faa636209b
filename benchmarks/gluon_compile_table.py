"""What the Gluon decode's kernels compile to for sm_90, without a GPU (Triton's own ptxas, cuobjdump and nvdisasm):
per variant the registers a thread, bytes spilled, shared memory, the programs an SM holds, and its tile loop's SASS
(instructions, MMAs, async copies, local-memory loads and stores). Run it under the GPU's Triton to read what that
GPU will run (the device has 3.6; CI 3.9):

    python benchmarks/gluon_compile_table.py [--json out.json]

Must run without TRITON_INTERPRET."""

from __future__ import annotations

import argparse
import json
import sys

sys.path.insert(0, ".")

# (kernel, options): "grid" gluon_decode's kernels (compile_gluon_decode), "persist" gluon_decode_persist's
VARIANTS = [
    ("grid", dict(block_n=128, head_dim=128, q_per_kv=4)),
    ("persist", dict(block_n=128, head_dim=128, q_per_kv=4)),
    ("persist", dict(block_n=128, head_dim=128, q_per_kv=4, q_lanes=False)),
    ("persist", dict(block_n=64, head_dim=128, q_per_kv=4)),
    ("persist", dict(block_n=64, head_dim=128, q_per_kv=4, nbuf=2)),
    ("persist", dict(block_n=128, head_dim=128, q_per_kv=4, swap=True)),
    ("persist", dict(block_n=128, head_dim=64, q_per_kv=4)),
    ("grid", dict(block_n=64, head_dim=256, q_per_kv=2, swap=True)),
    ("persist", dict(block_n=64, head_dim=256, q_per_kv=2, swap=True)),
    ("grid", dict(block_n=128, head_dim=128, q_per_kv=4, write_final=False, fused_merge=True)),
    ("grid", dict(block_n=64, head_dim=256, q_per_kv=2, write_final=False, fused_merge=True, swap=True)),
    ("grid", dict(block_n=64, head_dim=256, q_per_kv=2, kv_dtype="fp8", write_final=False, fused_merge=True,
                  swap=True, v_widen=True)),
]


def row(kind: str, options: dict) -> dict:
    from kernels_probe.attention.gluon_decode import compile_gluon_decode
    from kernels_probe.attention.gluon_decode_persist import compile_gluon_persist
    from kernels_probe.attention.pipelining import resident_programs, resource_usage, sass_loops

    kernel = (compile_gluon_persist if kind == "persist" else compile_gluon_decode)(**options)
    usage = resource_usage(kernel.asm["cubin"])
    shared = int(kernel.metadata.shared)
    held = resident_programs(usage.get("registers"), options.get("warps", 4), shared)
    loop = next((lp for lp in sass_loops(kernel.asm["cubin"]) if "HMMA" in lp["ops"]), None)
    ops = loop["ops"] if loop else {}
    return {"kernel": kind, "options": options, **usage, "shared_bytes": shared,
            "per_sm": min(v for v in held.values() if v),
            "tile_loop": {"instructions": loop["instructions"] if loop else None,
                          **{k: ops.get(k, 0) for k in ("HMMA", "LDGSTS", "LDSM", "LDL", "STL")}}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None, help="write the rows here as JSON")
    args = ap.parse_args()
    import triton

    rows = [row(kind, opts) for kind, opts in VARIANTS]
    texts = [" ".join(f"{k}={v}" for k, v in r["options"].items()) for r in rows]
    w = max(len(t) for t in texts)
    print(f"Triton {triton.__version__}, sm_90; tile loop: SASS of the innermost loop with MMAs")
    print(f"{'kernel':8s} {'options':{w}s} {'regs':>4s} {'spill':>5s} {'shared':>7s} {'/SM':>3s} "
          f"{'loop':>5s} {'HMMA':>4s} {'LDGSTS':>6s} {'LDSM':>4s} {'LDL':>3s} {'STL':>3s}")
    for r, opts in zip(rows, texts):
        lp = r["tile_loop"]
        print(f"{r['kernel']:8s} {opts:{w}s} {r.get('registers', 0):4d} {r.get('stack_bytes', 0):5d} "
              f"{r['shared_bytes']:7d} {r['per_sm']:3d} {lp['instructions'] or 0:5d} {lp['HMMA']:4d} "
              f"{lp['LDGSTS']:6d} {lp['LDSM']:4d} {lp['LDL']:3d} {lp['STL']:3d}")
    if args.json:
        from pathlib import Path

        from cascade_plan.atomic import write_text_atomic

        write_text_atomic(Path(args.json), json.dumps({"triton": triton.__version__, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
