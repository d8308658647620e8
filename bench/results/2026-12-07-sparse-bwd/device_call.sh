#!/usr/bin/env bash
# One device call (~7 min; timeout_s 450-590): the new CUDA sparse-prefill backward (sm_90a dq + dkv
# kernels, csrc/cuda/sm90/sparse_mla_backward_sm90.cuh): its GPU tests, its timing against Triton's
# (bench/bench_backward.py --only prefill, per-kernel times), memcheck and racecheck; then, as time
# allows, the decode combine A/B prepared in 2026-12-07-prepared (comb2 / comb2dep against the wheel).
# Carry [".whl"]: this tree's wheel (see 2026-12-07-prepared/device_call.sh for the recipe and the
# comb2 / comb2dep variants, rebuilt after it).
set -uo pipefail
source tools/prof/device_sites.sh wheel comb2 comb2dep
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks or deterministic or writes_every)" > $OUT/tests_sparse_bwd.log 2>&1
echo "sparse backward tests (cuda): $(tail -1 $OUT/tests_sparse_bwd.log) ($(el) s)"
grep -E "^(FAILED|ERROR)|Error|assert" $OUT/tests_sparse_bwd.log | head -20
PYTHONPATH=/tmp/site timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda sparse_backward \
  > $OUT/memcheck_sparse_bwd.log 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_sparse_bwd.log) ($(el) s)"; grep -m3 -E "Invalid|raised" $OUT/memcheck_sparse_bwd.log
left 260 && { PYTHONPATH=/tmp/site timeout 150 python3 $R/bench/bench_backward.py --only prefill --profile \
  > $OUT/bench_sparse_bwd.log 2>&1; grep -E "^\|" $OUT/bench_sparse_bwd.log; echo "bench ($(el) s)"; }
left 360 && { PYTHONPATH=/tmp/site timeout 60 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda sparse_backward \
  > $OUT/racecheck_sparse_bwd.log 2>&1; echo "racecheck: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_sparse_bwd.log) ($(el) s)"; }
left 400 && { for v in wheel comb2 comb2dep; do
    PYTHONPATH=/tmp/site_$v timeout 30 python3 $R/tools/prof/decode_variants.py $v b16 b1 h8 h32 2>&1 | tail -1
  done | tee $OUT/ab_decode_comb2.log; }
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
