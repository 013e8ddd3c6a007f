#!/usr/bin/env bash
# Everything that needs a CUDA GPU, in one go, for a machine lent for a few minutes:
#   bash bench/gpu_check.sh [LOG_DIR]
# 1. the CUDA tests (tests/test_cuda.py: bf16 inference against the CPU, bf16 training eager and
#    compiled, self-play through the GPU and the inference server), 2. bench/net.py (network
#    throughput, design and small sizes), 3. bench/gpu.py (the design's GPU targets), 4. the probe that
#    found the bf16 training's NaN (bench/cuda_nan_probe.py; fixed, kept as a check). Each step has
#    its own time limit, so one that hangs leaves the others their time; logs and result files go to
#    LOG_DIR (default bench/results). Uses the python3 on PATH with the repository on PYTHONPATH (no
#    install needed where torch, numba, numpy, pandas, pyyaml, tqdm and pytest are present).
set -u
cd "$(dirname "$0")/.."
out=${1:-bench/results}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
status=0

step() {  # step NAME SECONDS COMMAND...: run with a time limit, log to $out/NAME.log
  local name=$1 limit=$2 start rc
  shift 2
  start=$(date +%s)
  echo "== $name (limit ${limit} s)"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  tail -n 25 "$out/$name.log"
  echo "== $name: exit $rc after $(($(date +%s) - start)) s"
  [ $rc -eq 0 ] || status=1
}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, numba, numpy; print(sys.version.split()[0], "torch", torch.__version__,
    "numba", numba.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available())'
} 2>&1 | tee "$out/gpu-env.log"

step cuda-tests "${CUDA_TESTS_S:-200}" python3 -m pytest -q -p no:cacheprovider tests/test_cuda.py tests/test_encode.py
step net "${NET_S:-150}" python3 bench/net.py --seconds 1
step gpu "${GPU_S:-260}" python3 bench/gpu.py --seconds 3
step nan-probe "${PROBE_S:-150}" python3 bench/cuda_nan_probe.py poison  # fixed: 0 runs should stop
cp bench/results/net-nvidia-*.json bench/results/gpu-nvidia-*.json "$out/" 2>/dev/null
exit $status
