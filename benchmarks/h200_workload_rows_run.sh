#!/usr/bin/env bash
# probe --workload rows of one workload shape, kept apart from the shipped file (a held-out check of the fits):
# bf16 on every backend, then fp8 KV on Triton (no FlashInfer fp8 JIT build). One device call, from the repository
# root with the wheels carried in .whl (docs/probe.md):
#   bash benchmarks/h200_workload_rows_run.sh [NAME PLAN_BF16 PLAN_FP8]
# Default: the held-out Qwen3-30B-A3B MoE shape (32 prompts x 16 samples, 2,048-token prefix, 512 output tokens);
# its plans came from cascade-plan probe --model calibrations/configs/qwen3-30b-a3b.json --prefix 2048 --groups 32
# --samples 16 --output-tokens 512 (derived on the CPU, as WorkloadProbePlan.describe()).
set -o pipefail
name=${1:-qwen3}
plan_bf16=${2:-benchmarks/plan-qwen3-30b-a3b-32x16-bf16.json}
plan_fp8=${3:-benchmarks/plan-qwen3-30b-a3b-32x16-fp8.json}
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST=9.0a TORCH_CUDA_ARCH_LIST=9.0a MAX_JOBS=14
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
timeout 340 python3 -m kernels_probe --out $OUT/$name-bf16.json --plan $plan_bf16 > $OUT/log-$name-bf16.txt 2>&1
echo "bf16 rc=$? at $(( $(date +%s) - t0 )) s"
tail -25 $OUT/log-$name-bf16.txt
left=$(( ${TOTAL_S:-540} - ($(date +%s) - t0) ))
timeout $left python3 -m kernels_probe --out $OUT/$name-fp8.json --plan $plan_fp8 --backend triton > $OUT/log-$name-fp8.txt 2>&1
echo "fp8 rc=$? at $(( $(date +%s) - t0 )) s"
tail -25 $OUT/log-$name-fp8.txt
ls -la $OUT
