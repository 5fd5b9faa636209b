#!/usr/bin/env bash
# One device call of the MoE expert-GEMM probe (kernels_probe/moe/moe_probe.py, docs/probe-notes.md "MoE experts"):
# routed-expert grouped GEMMs (gate_up, down) of Mixtral-8x7B (TP 1, 2) and DeepSeek-V3 (TP 8, 4), bf16 and
# fp8 weights, balanced and skewed routing, M = 1..1024, backends triton / torch._grouped_mm / per-expert
# loop; each point checked against a float32 reference before it is timed. Run from the repository root;
# writes $OUT/moe/moe_rows.json and $OUT/moe/moe_probe.log and prints a short table last. Stops starting
# new points after ${1:-165} s (Triton JIT included), killed at ${2:-225} s.
set -o pipefail
budget=${1:-165}; limit=${2:-225}
mkdir -p "$OUT/moe"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__, 'grouped_mm', hasattr(torch, '_grouped_mm'))"
  timeout "$limit" python3 -m kernels_probe.moe.moe_run --out "$OUT/moe/moe_rows.json" --budget-s "$budget"
  echo "moe_probe rc=$?"
} 2>&1 | tee "$OUT/moe/moe_probe.log"
