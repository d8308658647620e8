#!/usr/bin/env bash
# Session 38, call 3 (~5 min; carry [".whl"]): the v4 conversion with one bf16 multiply per pair
# (`fold`: SINKOPS_DECODE_FOLDED_SCALE=1 in both v4 decode units) against the wheel (HEAD), two
# passes over the decode rows (64-head and few-heads kernels), then its decode tests and memcheck.
set -uo pipefail
source tools/prof/device_sites.sh wheel fold
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
ROWS=("V4 b128 s2 h128" "b128 h64" "b16" "b1 h64" "b64 h8" "Pro TP8" "b64 h32")
for rep in 1 2; do
  for v in wheel fold; do
    left 200 && PYTHONPATH=/tmp/site_$v timeout 50 python3 $R/tools/prof/decode_variants.py $v "${ROWS[@]}" 2>&1 | tail -1
  done
done | tee $OUT/ab_fold.log
echo "ab fold done ($(el) s)"
left 230 && { PYTHONPATH=/tmp/site_fold timeout 140 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu" > $OUT/tests_decode_fold.log 2>&1
echo "decode tests fold: $(tail -1 $OUT/tests_decode_fold.log) ($(el) s)"; }
left 330 && { PYTHONPATH=/tmp/site_fold timeout 45 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_fold.log 2>&1
echo "memcheck fold: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_fold.log) ($(el) s)"; gzip -f $OUT/memcheck_fold.log; }
echo "end ($(el) s)"
