#!/usr/bin/env bash
# probe --workload for the held-out Qwen3-30B-A3B MoE shape (32 prompts x 16 samples, 2,048-token prefix, 512
# output tokens): bf16 on every backend, then fp8 KV on Triton. Rows stay apart from the shipped file.
# The device call, from the repository root with the wheels carried in .whl (docs/probe.md).
# Plans: cascade-plan probe --model calibrations/configs/qwen3-30b-a3b.json --prefix 2048 --groups 32 --samples 16
#   --output-tokens 512 (derived on the CPU, as WorkloadProbePlan.describe())
set -o pipefail
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST=9.0a TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=14
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 340 python3 -m kernels_probe --out $OUT/qwen3-bf16.json --plan benchmarks/plan-qwen3-30b-a3b-32x16-bf16.json > $OUT/log-bf16.txt 2>&1
echo "bf16 rc=$? at $(( $(date +%s) - t0 )) s"
tail -25 $OUT/log-bf16.txt
left=$(( 540 - ($(date +%s) - t0) ))
timeout $left python3 -m kernels_probe --out $OUT/qwen3-fp8.json --plan benchmarks/plan-qwen3-30b-a3b-32x16-fp8.json --backend triton > $OUT/log-fp8.txt 2>&1
echo "fp8 rc=$? at $(( $(date +%s) - t0 )) s"
tail -25 $OUT/log-fp8.txt
ls -la $OUT
