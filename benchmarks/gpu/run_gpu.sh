#!/usr/bin/env bash
# GPU benchmark: the cnn workload, bare TF2 loop vs tpuestimator's Estimator, in float32,
# mixed_bfloat16 and mixed_float16, each with and without XLA (jit_compile); plus the linear
# workload (loop overhead) bare vs Keras fit vs Estimator in float32. Installs nothing: it
# runs with the Python you give it, which must already have TensorFlow with CUDA and Keras 3.
#
# usage: benchmarks/gpu/run_gpu.sh [PYTHON] [OUT_DIR]
#   PYTHON   default: $PYTHON, else .venv/bin/python, else python3
#   OUT_DIR  default: $OUT (the device machine's output folder), else benchmarks/results/gpu
# env: GPU_BENCH_ALLOW_CPU=1 runs it without a GPU (a dry run of the script on a laptop);
#      GPU_BENCH_SMOKE=1 uses tiny sizes; GPU_BENCH_ROUNDS (default 15) timed rounds;
#      GPU_BENCH_VARIANTS overrides the precision/XLA list (e.g. "float32,mixed_bfloat16+jit").
# Wall-clock: under 5 minutes on one H200 (each step is bounded by `timeout`: 60 + 180 + 50 s
# at most, set by GPU_BENCH_CHECK_TIMEOUT, _CNN_TIMEOUT and _LINEAR_TIMEOUT; bench_loop.py
# rewrites its JSON after every variant, so a step cut short keeps what it measured). The results land in OUT_DIR: gpu_cnn.json, gpu_linear.json, env.txt, *.log.
set -uo pipefail
cd "$(dirname "$0")/../.."

PY="${1:-${PYTHON:-}}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
OUT_DIR="${2:-${OUT:-benchmarks/results/gpu}}"
mkdir -p "$OUT_DIR"
SMOKE=()
if [ "${GPU_BENCH_SMOKE:-0}" = "1" ]; then SMOKE=(--smoke); fi
export TF_CPP_MIN_LOG_LEVEL=2 PYTHONUNBUFFERED=1

start=$(date +%s)
{
  echo "python: $PY"; date -u
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
} > "$OUT_DIR/env.txt" 2>&1

# 1. TensorFlow sees a GPU (fails fast, with the reason, when it does not).
if ! timeout "${GPU_BENCH_CHECK_TIMEOUT:-60}" "$PY" - >> "$OUT_DIR/env.txt" 2>&1 <<'PYEOF'
import os, sys
import tensorflow as tf, keras
gpus = tf.config.list_physical_devices("GPU")
print("tensorflow", tf.__version__, "keras", keras.__version__, "cuda build", tf.test.is_built_with_cuda())
print("gpus", [tf.config.experimental.get_device_details(g) for g in gpus])
if not gpus and os.environ.get("GPU_BENCH_ALLOW_CPU") != "1":
    sys.exit("no GPU visible to TensorFlow: install tensorflow[and-cuda] into this Python, or set GPU_BENCH_ALLOW_CPU=1")
PYEOF
then
  echo "TensorFlow/GPU check failed:"; cat "$OUT_DIR/env.txt"; exit 2
fi
cat "$OUT_DIR/env.txt"

status=0
# 2. cnn: bare vs Estimator, 3 precisions x XLA off/on, one process (one CUDA start-up).
timeout "${GPU_BENCH_CNN_TIMEOUT:-180}" "$PY" benchmarks/bench_loop.py ${SMOKE[@]+"${SMOKE[@]}"} --workloads cnn --configs bare,estimator \
  --variants "${GPU_BENCH_VARIANTS:-float32,float32+jit,mixed_bfloat16,mixed_bfloat16+jit,mixed_float16,mixed_float16+jit}" \
  --repeats "${GPU_BENCH_ROUNDS:-15}" --out "$OUT_DIR" --name gpu_cnn 2>&1 | tee "$OUT_DIR/gpu_cnn.log" \
  | grep -v "^WARNING\|^I0000\|^W0000" || true
[ -s "$OUT_DIR/gpu_cnn.json" ] || status=1

# 3. linear (loop overhead on a GPU): bare vs Keras fit vs Estimator, float32.
timeout "${GPU_BENCH_LINEAR_TIMEOUT:-50}" "$PY" benchmarks/bench_loop.py ${SMOKE[@]+"${SMOKE[@]}"} --workloads linear --configs bare,keras,estimator \
  --repeats "${GPU_BENCH_ROUNDS:-15}" --out "$OUT_DIR" --name gpu_linear 2>&1 | tee "$OUT_DIR/gpu_linear.log" \
  | grep -v "^WARNING\|^I0000\|^W0000" || true
[ -s "$OUT_DIR/gpu_linear.json" ] || status=1

echo "done in $(( $(date +%s) - start )) s; results in $OUT_DIR (exit $status)"
exit $status
