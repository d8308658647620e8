#!/usr/bin/env bash
# One call on the GPU machine: build, GPU tests, sanitizers, benchmarks; logs go to $OUT.
#   tools/device_check.sh [build] [test] [sanitize] [bench] [cpp] [demo] [cp]
# (no arguments = all). Used through the device tool:  bash tools/device_check.sh build test bench
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/sinkops-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=${*:-build test sanitize bench cpp cp demo}
has() { [[ " $stages " == *" $1 "* ]]; }
t0=$(date +%s)
log() { echo "=== [$(( $(date +%s) - t0 ))s] $*"; }

# The device's python3 (a venv) may lack pybind11 and has no network: carry the wheel in .whl/
# (git-ignored; `pip download pybind11 -d .whl`) and name .whl in the run's carry list.
if ! python3 -c "import pybind11" 2>/dev/null && ls .whl/pybind11-*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/pybind11-*.whl
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
# "ensure" builds only when the installed package lacks the CUDA module (a warm machine keeps it).
if has ensure && ! (cd /tmp && python3 -c "import sinkops._C" 2>/dev/null); then stages="$stages build"; fi
if has build; then
  log build
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
  SINKOPS_CUDA_ARCHS=${SINKOPS_CUDA_ARCHS:-90a} MAX_JOBS=16 \
    python3 -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.log" 2>&1 \
    || { tail -40 "$OUT/build.log"; exit 1; }
  grep -E "^\[sinkops\]" "$OUT/build.log"
  (cd /tmp && python3 -c "import sinkops._C; print('sinkops._C ok')")
fi
if has test; then
  log "gpu tests"
  (cd /tmp && python3 -m pytest -q -rs --timeout=300 -p no:cacheprovider "$OLDPWD/tests" -m gpu ${PYTEST_ARGS:-} 2>&1 \
     | tee "$OUT/test_gpu.log" | tail -40)
fi
if has alltests; then
  log "all tests on the GPU machine"
  (cd /tmp && python3 -m pytest -q -rs -p no:cacheprovider "$OLDPWD/tests" ${PYTEST_ARGS:-} 2>&1 \
     | tee "$OUT/test_all.log" | tail -30)
fi
if has sanitize; then
  log "compute-sanitizer"
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool python3 tools/sanitize_cases.py > "$OUT/sanitize_$tool.log" 2>&1
    tail -3 "$OUT/sanitize_$tool.log"
  done
fi
if has bench; then
  log benchmarks
  (cd /tmp && python3 "$OLDPWD/bench/bench_window_attention.py" --json "$OUT/bench_window.json" \
     --plot "$OUT/bench_window.png" 2>&1 | tee "$OUT/bench_window.log")
  (cd /tmp && python3 "$OLDPWD/bench/bench_sparse_mla.py" --json "$OUT/bench_mla.json" 2>&1 | tee "$OUT/bench_mla.log")
fi
if has cpp; then
  log "cmake microbenchmarks"
  cmake -S . -B build/cmake -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a > "$OUT/cmake.log" 2>&1 \
    && cmake --build build/cmake -j 16 >> "$OUT/cmake.log" 2>&1 || tail -20 "$OUT/cmake.log"
  for b in build/cmake/bench_*; do [ -x "$b" ] && "$b" 2>&1 | tee -a "$OUT/bench_cpp.log"; done
  (cd build/cmake && ctest --output-on-failure 2>&1 | tail -5)
fi
if has cp; then
  log "context parallel on $(nvidia-smi -L | wc -l) GPUs (NCCL)"
  (cd /tmp && python3 -m pytest -q -rs -p no:cacheprovider "$OLDPWD/tests/test_cp_distributed.py" 2>&1 \
     | tee "$OUT/test_cp.log" | tail -8)
  (cd /tmp && python3 "$OLDPWD/bench/bench_cp.py" --measure --nccl 2>&1 | tee "$OUT/bench_cp.log" | tail -30)
fi
if has demo; then
  log demo
  (cd /tmp && python3 -m sinkops.demo 2>&1 | tee "$OUT/demo.log")
fi
log done
