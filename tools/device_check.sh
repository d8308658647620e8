#!/usr/bin/env bash
# One call on the GPU machine: install, GPU tests, sanitizers, benchmarks; logs go to $OUT.
#   bash tools/device_check.sh [install|build] [pyoverlay] [flashmla] [smoke] [test] [window] [windowbench] [mla] [decode] [decodebench] [backward] [sanitize] [bench] [mlabench] [dispatch] [cpp] [demo] [cp]
# (no arguments = all but build). Build the wheel on the CPU machine first (no device time spent
# compiling): SINKOPS_CUDA_ARCHS=90a SINKOPS_SYCL=0 PYENV_VERSION=3.12.1 python3.12 -m pip wheel \
#   --no-deps -w .whl .   and carry .whl (and .peers for FlashMLA, see ../shared/peers).
# "install" takes .whl/sinkops-*.whl; "build" compiles here instead (~150 s of device time).
set -uo pipefail
cd "$(dirname "$0")/.."
R=$PWD
OUT=${OUT:-/tmp/sinkops-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=${*:-install flashmla smoke test backward sanitize bench dispatch cpp demo}
has() { [[ " $stages " == *" $1 "* ]]; }
t0=$(date +%s)
log() { echo "=== [$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
# FlashAttention-4 for the window benchmarks, when tools/prof/fa4_bundle.sh's parts were unpacked
if [ -d /tmp/fa4/site ]; then
  export PYTHONPATH=$PYTHONPATH:/tmp/fa4/site:/tmp/fa4/site/nvidia_cutlass_dsl/dsl_packages
fi

if has flashmla && [ -f .peers/build_flashmla.sh ]; then
  log "FlashMLA build in the background (.peers/build_flashmla.sh)"
  (MAX_JOBS=6 bash .peers/build_flashmla.sh > "$OUT/flashmla_build.log" 2>&1; echo "rc=$?" >> "$OUT/flashmla_build.log") &
  FLASHMLA_PID=$!
fi
if has install; then
  log install
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/sinkops-*.whl || exit 1
fi
if has pyoverlay; then
  # Python-only changes since the wheel was built: this tree's sinkops/**/*.py over the installed ones
  log "pyoverlay: this tree's Python sources over /tmp/site/sinkops"
  (cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site/sinkops/ \;)
fi
if has build; then
  log build
  SINKOPS_CUDA_ARCHS=${SINKOPS_CUDA_ARCHS:-90a} SINKOPS_SYCL=0 MAX_JOBS=16 \
    python3 -m pip install --no-build-isolation --no-deps --target /tmp/site -v . > "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
(cd /tmp && python3 -m sinkops) || exit 1
if has smoke; then
  log smoke
  # a hung kernel (a pipeline deadlock) must not eat the call: stop here when the smoke fails
  (cd /tmp && timeout 180 python3 "$R/tools/smoke_gpu.py" > "$OUT/smoke.log" 2>&1); rc=$?
  tail -3 "$OUT/smoke.log"
  [ $rc -eq 0 ] || { log "smoke failed (rc $rc): stopping"; cat "$OUT/smoke.log" | tail -30; exit 1; }
fi
if has test; then
  log "gpu tests"
  (cd /tmp && python3 -m pytest -q -rs --timeout=600 -p no:cacheprovider "$R/tests" -m gpu ${PYTEST_ARGS:-} 2>&1 \
     | tee "$OUT/test_gpu.log" | tail -25)
fi
# memcheck and racecheck of one backend's group of sanitize_cases.py, logs in $OUT
sanitize_both() {
  for tool in memcheck racecheck; do
    (cd /tmp && timeout 300 compute-sanitizer --tool $tool python3 "$R/tools/sanitize_cases.py" "$1" "$2" \
       > "$OUT/sanitize_$2_$tool.log" 2>&1; tail -2 "$OUT/sanitize_$2_$tool.log")
  done
}
if has window; then
  log "window attention (the sm_90a path): CUDA gpu tests, memcheck, racecheck"
  (cd /tmp && timeout 500 python3 -m pytest -q -rs -p no:cacheprovider "$R/tests/test_window_attention.py" -m gpu \
     -k "cuda or auto_window" 2>&1 | tee "$OUT/test_window_gpu.log" | tail -6)
  sanitize_both cuda window
fi
if has windowbench; then
  log "window attention side by side (sm90, sm80, Triton, FA4 when importable)"
  (cd /tmp && python3 "$R/bench/bench_window_attention.py" --json "$OUT/bench_window.json" ${WINDOW_BENCH_ARGS:-} 2>&1 \
     | tee "$OUT/bench_window.log")
fi
if has mla; then
  log "sparse MLA prefill (the sm_90a path): gpu tests, memcheck, racecheck"
  (cd /tmp && timeout 400 python3 -m pytest -q -rs -p no:cacheprovider "$R/tests/test_sparse_mla_prefill.py" "$R/tests/test_backend_specific.py" -m gpu 2>&1 \
     | tee "$OUT/test_prefill_gpu.log" | tail -6)
  sanitize_both cuda prefill
fi
if has decode; then
  log "sparse MLA decode (the sm_90a path): gpu tests, memcheck, racecheck"
  (cd /tmp && timeout 400 python3 -m pytest -q -rs -p no:cacheprovider "$R/tests/test_sparse_mla_decode.py" -m gpu \
     -k "cuda" 2>&1 | tee "$OUT/test_decode_gpu.log" | tail -6)
  sanitize_both cuda decode
fi
if has backward; then
  log "backward: gpu tests, sanitizers (Triton and CUDA backward kernels), benchmark"
  (cd /tmp && python3 -m pytest -q -rs -p no:cacheprovider "$R/tests/test_backward.py" -m gpu 2>&1 \
     | tee "$OUT/test_backward_gpu.log" | tail -6)
  for tool in memcheck racecheck; do
    (cd /tmp && compute-sanitizer --tool $tool python3 "$R/tools/sanitize_cases.py" cuda,triton backward \
       > "$OUT/sanitize_backward_$tool.log" 2>&1; tail -2 "$OUT/sanitize_backward_$tool.log")
  done
  (cd /tmp && python3 "$R/bench/bench_backward.py" --json "$OUT/bench_backward.json" 2>&1 | tee "$OUT/bench_backward.log")
fi
if has sanitize; then
  log "compute-sanitizer"
  (cd /tmp && compute-sanitizer --tool memcheck python3 "$R/tools/sanitize_cases.py" cuda,triton \
     > "$OUT/sanitize_memcheck.log" 2>&1; tail -4 "$OUT/sanitize_memcheck.log")
  (cd /tmp && compute-sanitizer --tool racecheck python3 "$R/tools/sanitize_cases.py" cuda \
     > "$OUT/sanitize_racecheck.log" 2>&1; tail -4 "$OUT/sanitize_racecheck.log")
fi
if has bench; then
  log benchmarks
  (cd /tmp && python3 "$R/bench/bench_window_attention.py" --json "$OUT/bench_window.json" 2>&1 | tee "$OUT/bench_window.log")
  (cd /tmp && python3 "$R/bench/bench_sparse_mla.py" --json "$OUT/bench_mla.json" 2>&1 | tee "$OUT/bench_mla.log")
fi
if [ -n "${FLASHMLA_PID:-}" ]; then
  log "waiting for FlashMLA"
  wait "$FLASHMLA_PID"
  tail -2 "$OUT/flashmla_build.log"
fi
if has mlabench; then
  log "sparse MLA prefill side by side (FlashMLA, sm90, sm80, Triton)"
  (cd /tmp && python3 "$R/bench/bench_sparse_mla_prefill.py" --json "$OUT/bench_prefill.json" 2>&1 | tee "$OUT/bench_prefill.log")
fi
if has decodebench; then
  log "sparse MLA decode side by side (FlashMLA, sm90, sm80, Triton)"
  (cd /tmp && python3 "$R/bench/bench_sparse_mla_decode.py" --json "$OUT/bench_decode.json" ${DECODE_BENCH_ARGS:-} 2>&1 \
     | tee "$OUT/bench_decode.log")
fi
if has dispatch; then
  log "dispatch (host cost per call)"
  (cd /tmp && python3 "$R/bench/bench_dispatch.py" --json "$OUT/dispatch.json" 2>&1 | tee "$OUT/dispatch.log")
fi
if has cpp; then
  log "cmake microbenchmarks"
  cmake -S . -B /tmp/sinkops-cmake -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a > "$OUT/cmake.log" 2>&1 \
    && cmake --build /tmp/sinkops-cmake -j 16 >> "$OUT/cmake.log" 2>&1 || tail -20 "$OUT/cmake.log"
  for b in /tmp/sinkops-cmake/bench_*; do [ -x "$b" ] && "$b" 2>&1 | tee -a "$OUT/bench_cpp.log"; done
  (cd /tmp/sinkops-cmake && ctest --output-on-failure 2>&1 | tail -5)
fi
if has cp; then
  log "context parallel on $(nvidia-smi -L | wc -l) GPUs (NCCL)"
  (cd /tmp && python3 -m pytest -q -rs -p no:cacheprovider "$R/tests/test_cp_distributed.py" 2>&1 \
     | tee "$OUT/test_cp.log" | tail -8)
  (cd /tmp && python3 "$R/bench/bench_cp.py" --measure --nccl 2>&1 | tee "$OUT/bench_cp.log" | tail -30)
fi
if has demo; then
  log demo
  (cd /tmp && python3 -m sinkops.demo 2>&1 | tee "$OUT/demo.log" | tail -25)
fi
log done
