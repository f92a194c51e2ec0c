#!/usr/bin/env bash
# The GPU checks for a machine with a real NVIDIA GPU, in one run (about 6 minutes).
#   scripts/gpu-check.sh [LOG_DIR [STEP...]]   logs and JSON land in LOG_DIR (default ./gpu-check);
#   STEPs: check tests models pool (default: all four)
# 1. benchmarks/gpu_device_check.py: NVML, copy ceilings, pinned host tier, live pool on the GPU
# 2. the live pool tests on the real GPU (OWGPU_TEST_DEVICES=nvml)
# 3. benchmarks/bench_gpu_models.py --device cuda: the model table's GPU columns
# 4. benchmarks/bench_gpu_pool.py --gpu: hit vs miss and LB / LALB / LALB+O3 on the GPU
# Needs python3 with torch, torchvision, nvidia-ml-py, prometheus-client, sortedcontainers,
# pytest and pytest-asyncio; the project on PYTHONPATH (this script adds it).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-check}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
status=0
steps=" ${*:2} "
[ "$steps" = "  " ] && steps=" check tests models pool "
step() {  # step NAME SECONDS COMMAND...: run with a limit, log to $out/NAME.log, keep going
  local name=$1 limit=$2
  shift 2
  [[ $steps == *" $name "* ]] || return 0
  echo "=== $name"
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log" || { echo "=== $name FAILED ($?)"; status=1; }
}
nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.max,pcie.link.width.max \
  --format=csv | tee "$out/nvidia-smi.csv"
df -h /dev/shm | tail -1
step check 150 "$py" benchmarks/gpu_device_check.py --json "$out/check.json"
step tests 150 env OWGPU_TEST_DEVICES=nvml "$py" -m pytest -q -p no:cacheprovider \
  tests/integration/gpu/test_pool.py
step models 200 "$py" benchmarks/bench_gpu_models.py --device cuda --repeats 3
step pool 200 "$py" benchmarks/bench_gpu_pool.py --gpu --size-mb 512 --models 8 \
  --min-mb 64 --max-mb 512 --device-mb 1024 --requests 400 --rate 40
exit $status
