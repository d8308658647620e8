#!/usr/bin/env bash
# Session 36, call 1: the fused window backward (v9: one kernel, clusters of the group's heads) on
# the wheel of the working tree: its tests, an A/B against the two kernels (SINKOPS_WBWD_FUSED=0) on
# MiMo video 16 x 1024 and 64 x 1024 (image: the two kernels unless forced), two passes; the CUDA
# window backward tests; memcheck and racecheck of the fused kernel (SINKOPS_WBWD_FUSED=2).
# Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh wheel
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "fused" > $OUT/tests_fused.log 2>&1
echo "tests fused: $(tail -1 $OUT/tests_fused.log) ($(el) s)"
grep -E "^(FAILED|ERROR)|^E  " $OUT/tests_fused.log | head -20
V=$R/tools/prof/window_bwd_variants.py
for pass in 1 2; do
  for f in 0 1; do
    SINKOPS_WBWD_FUSED=$f PYTHONPATH=/tmp/site timeout 100 python3 $V fused=$f --fwd --more 2>&1 | tail -1
  done
done | tee $OUT/ab_fused.log
SINKOPS_WBWD_FUSED=2 PYTHONPATH=/tmp/site timeout 60 python3 $V forced 2>&1 | tail -1 | tee -a $OUT/ab_fused.log
echo "A/B done ($(el) s)"
left 330 && PYTHONPATH=/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu \
  $R/tests/test_backward.py -k "window and cuda" > $OUT/tests_window_cuda.log 2>&1
echo "tests window cuda: $(tail -1 $OUT/tests_window_cuda.log) ($(el) s)"
grep -E "^(FAILED|ERROR)" $OUT/tests_window_cuda.log | head -10
for tool in memcheck racecheck; do
  left 500 && SINKOPS_WBWD_FUSED=2 PYTHONPATH=/tmp/site timeout 80 compute-sanitizer --tool $tool \
    python3 $R/tools/sanitize_cases.py cuda backward > $OUT/${tool}_fused.log 2>&1
  echo "$tool fused: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/${tool}_fused.log | tail -1) ($(el) s)"
  grep -E "Race reported|hazard|Invalid" $OUT/${tool}_fused.log | head -3
done
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
