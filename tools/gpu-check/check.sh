#!/bin/sh
# The real backend on one GPU, in one run: every strategy's numerics against the one-device reference
# on the device (1 rank over NCCL; 2 and 4 ranks over Gloo staging the GPU's tensors); on two models,
# `calibrate --device cuda` and every strategy's steps at degree 1 from 1K to 16K tokens through
# `validate --device cuda` on that calibration; the same steps in eager PyTorch
# (tools/measure/gpu_training_step.py); the host's cost of a framework layer's calls besides its
# kernels (gpu_components.py's host_ops); a GEMM under a minute of sustained load against its burst
# time (gemm_sustained); a step with activation offload validated (GPU only); and one results table
# (results.md): validate's errors, and the C++ step's
# speed as a ratio to eager PyTorch's. With --device cpu it rehearses the same on
# the CPU (tiny models, short lengths, no eager PyTorch step), so that a GPU is needed only to run it.
#
# usage: tools/gpu-check/check.sh --bin DIR [--device cuda|cpu] [--out DIR] [--seq LIST] [--steps N]
#                                 [--models LIST]
#   --bin     folder holding paradyse-real and real_backend_tests: a build's, or make-bundle.sh's
#             bin/ (its lib/ beside it is put on the library path)
#   --device  cuda (default) or cpu
#   --out     results folder (default out/gpu-check)
#   --seq     lengths of the timed steps (default 1024,2048,4096,8192,16384; cpu: 128,256)
#   --steps   measured steps per length (default 3)
#   --models  models to calibrate and validate on: files in tools/measure/models/ (their eager PyTorch
#             steps are timed too) or presets (default gpt-h2048-8l,gpt-h4096-4l; cpu: tiny-gpt,tiny-llama)
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin="" device=cuda out=out/gpu-check seq="" steps=3 models=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --device) device=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --seq) seq=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) sed -n 2,18p "$0" >&2; exit 2 ;;
  esac
done
[ -n "$bin" ] && [ -x "$bin/paradyse-real" ] || { echo "check: --bin must hold paradyse-real" >&2; exit 2; }
case "$device" in cuda | cpu) ;; *) echo "check: --device is cuda or cpu, got '$device'" >&2; exit 2 ;; esac
bin=$(cd "$bin" && pwd)
[ -n "$seq" ] || { [ "$device" = cuda ] && seq=1024,2048,4096,8192,16384 || seq=128,256; }
[ -n "$models" ] || { [ "$device" = cuda ] && models=gpt-h2048-8l,gpt-h4096-4l || models=tiny-gpt,tiny-llama; }
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/numerics.txt "$out"/local-*.json "$out"/validate-*.json "$out"/eager-*.json "$out"/host-ops.json \
  "$out"/results.md
log="$out/log.txt"
: >"$log"
say() { printf '%s\n' "$*" | tee -a "$log"; }

# LibTorch, CUDA and NCCL come from the machine's torch package; the rest from the bundle.
site=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' 2>/dev/null)
libs="$bin/../lib"
[ -n "$site" ] && libs="$libs:$site/torch/lib$(for d in "$site"/nvidia/*/lib "$site"/nvidia/cu*/lib; do
  [ -d "$d" ] && printf ':%s' "$d"; done)"
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
real="$bin/paradyse-real"
say "paradyse gpu-check on $(hostname), device $device, $(date -u +%Y-%m-%dT%H:%MZ)"
[ "$device" = cuda ] && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$log"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tee -a "$log"
[ -f "$bin/../built-against.json" ] && say "bundle built against $(cat "$bin/../built-against.json")"
"$real" run --help >/dev/null 2>>"$log" || { say "paradyse-real does not start (see $log)"; exit 1; }

# Each step has a bound of its own (exit 124 when it ran out), so that one that hangs leaves the
# others their time. 0. One step, to fail fast when the basics do not hold.
timeout 120 "$real" run --device "$device" --ranks 1 --seq 1024 --steps 1 >>"$log" 2>&1
say "smoke step: exit $?"

# 1. Numerics: every strategy against the one-device reference, on the device.
say "== numerics"
start=$(date +%s)
PARADYSE_TEST_DEVICE=$device timeout 300 "$bin/real_backend_tests" "[numerics]" >"$out/numerics.txt" 2>&1
numerics_status=$?
tail -n 3 "$out/numerics.txt" | tee -a "$log"
say "numerics: exit $numerics_status in $(( $(date +%s) - start )) s"

# 2. Each model: this device calibrated by paradyse's own backend, every strategy's steps at degree 1
# validated against the simulator on that calibration, and 3. the same steps in eager PyTorch.
longest=${seq##*,}
for model in $(echo "$models" | tr , ' '); do
  config="$repo/tools/measure/models/$model.json"
  [ -f "$config" ] || config=$model  # a preset
  start=$(date +%s)
  timeout 240 "$real" calibrate --device "$device" --ranks 1 --model "$config" --max-seq "$longest" --passes 1 --any-speed \
    --out "$out/local-$device-$model.json" >>"$log" 2>&1
  say "calibrate $model: exit $? in $(( $(date +%s) - start )) s"
  start=$(date +%s)
  timeout 300 "$real" validate --device "$device" --ranks 1 --model "$config" --plan all --seq "$seq" --steps "$steps" \
    --rounds 1 --any-speed --cluster "$out/local-$device-$model.json" --json >"$out/validate-$model.json" 2>>"$log"
  say "validate $model: exit $? in $(( $(date +%s) - start )) s"
  # Activation offload at the longest length: the copies on their stream against the host link the
  # calibration measured (a CPU's calibration has none: its memory is the host's).
  if [ "$device" = cuda ]; then
    start=$(date +%s)
    timeout 120 "$real" validate --device "$device" --ranks 1 --model "$config" --plan ulysses_z --recompute offload \
      --seq "$longest" --steps "$steps" --rounds 1 --any-speed --cluster "$out/local-$device-$model.json" --json \
      >"$out/validate-$model-offload.json" 2>>"$log"
    say "validate $model with offload: exit $? in $(( $(date +%s) - start )) s"
  fi
  if [ "$device" = cuda ] && [ -f "$config" ]; then
    start=$(date +%s)
    timeout 240 python3 "$repo/tools/measure/gpu_training_step.py" --model "$config" --seq "$seq" --warmup 2 \
      --steps "$steps" --out "$out/eager-$model.json" 2>>"$log"
    say "eager $model: exit $? in $(( $(date +%s) - start )) s"
  fi
done

# 4. What a framework's layer issues besides its kernels, on this host: metadata-only ops and a
# torch.compile'd region, for the framework files' layer calls.
start=$(date +%s)
timeout 180 python3 "$repo/tools/measure/gpu_components.py" --device "$device" --only host_ops \
  --out "$out/host-ops.json" >>"$log" 2>&1
say "host ops: exit $? in $(( $(date +%s) - start )) s"

# 5. A GEMM under a minute of sustained load against its burst time: the clock training runs at.
if [ "$device" = cuda ]; then
  start=$(date +%s)
  timeout 120 python3 "$repo/tools/measure/gpu_components.py" --only gemm_sustained \
    --out "$out/gemm-sustained.json" >>"$log" 2>&1
  say "sustained GEMM: exit $? in $(( $(date +%s) - start )) s"
fi

python3 "$repo/tools/gpu-check/table.py" "$out" --numerics-status "$numerics_status" | tee "$out/results.md"
