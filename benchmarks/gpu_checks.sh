#!/bin/bash
# Every GPU measurement and test in one run, each under a time limit, logs in a folder:
#
#     bash benchmarks/gpu_checks.sh [LOGDIR]        # LOGDIR: $OUT if set, else gpu-logs/
#
# For a borrowed GPU with little time: on an H200 (2026-11-28) the models, kernels and tests took
# 209 s together (the tests 85 s with 8 workers); the tilings and convolutions add about 100 s.
# In order of what the GPU speed work needs first:
#   wgmma.log    pytest -m cuda tests/cuda/test_cuda_wgmma.py: Hopper's wgmma schedule, built
#                and checked only in the emulator so far, against NumPy on the GPU (an sm_90
#                GPU; skipped elsewhere), before anything times it
#   models.log   benchmarks/cuda_models.py --profile: each model against PyTorch eager, with
#                every kernel's time (VirtualMachine.profile)
#   tilings.log  benchmarks/cuda_tilings.py: the matmul tilings and convolution rules the
#                default schedules pick from
#   cuda.log     benchmarks/cuda.py: kernels against cuBLAS and PyTorch, beside their estimates
#   pytest.log   pytest -m cuda: the tests that need a GPU
#   tune.log     benchmarks/tune.py --only gpu: the tuning issue's GPU goals (fp16 and fp32
#                4096^3 matmuls tuned, against cuBLAS; GPU_TRIALS candidates each, default 48)
# Limits (seconds) from T_WGMMA, T_MODELS, T_TILINGS, T_CUDA, T_PYTEST, T_TUNE. Needs pycuda and a GPU
# (pip install -e ".[cuda,test]"); without them each script says what is missing.
set -u
cd "$(dirname "$0")/.."
LOGS=${1:-${OUT:-gpu-logs}}
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1
start=$SECONDS

step() {  # step NAME LIMIT COMMAND...: run it, keep its log, say how it ended
    local name=$1 limit=$2
    shift 2
    echo "== $name ($((SECONDS - start)) s)"
    timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
    echo "$name: exit $?"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1
step wgmma "${T_WGMMA:-90}" python3 -m pytest -v -m cuda -p no:cacheprovider --tb=short -rfEs tests/cuda/test_cuda_wgmma.py
grep -E "^(FAILED|ERROR|SKIPPED)|passed|failed|skipped" "$LOGS/wgmma.log" | tail -8
step models "${T_MODELS:-200}" python3 benchmarks/cuda_models.py --no-estimate --profile
grep -E "^(model|resnet|gpt|mobilenet|goals)" "$LOGS/models.log"
step tilings "${T_TILINGS:-160}" python3 benchmarks/cuda_tilings.py
cat "$LOGS/tilings.log"
step cuda "${T_CUDA:-100}" python3 benchmarks/cuda.py
head -12 "$LOGS/cuda.log"
step pytest "${T_PYTEST:-190}" python3 -m pytest -v -m cuda -n 8 -p no:cacheprovider --tb=short -rfE tests
grep -E "^(FAILED|ERROR)|passed|failed|skipped" "$LOGS/pytest.log" | tail -15
step tune "${T_TUNE:-240}" python3 benchmarks/tune.py --only gpu --gpu-trials "${GPU_TRIALS:-48}"
cat "$LOGS/tune.log"
echo "== done ($((SECONDS - start)) s)"
