#!/usr/bin/env bash
# Session 34, call 1 (~9 min): the sparse backward's sorted indices x dkv query groups (issue 12):
# the A/B over env knobs of one wheel (SINKOPS_BWD_SORT_INDICES, SINKOPS_BWD_DKV_QUERY_GROUP), both
# backends; the backward tests (cuda + triton), memcheck and racecheck of the CUDA backward.
# device_call2.sh: the prefill backward table; the forward with pre-sorted indices.
# Carry [".whl"] (the wheel of this tree).
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/sparse_bwd_variants.py
for b in cuda triton; do
  for cfg in "0 1" "1 1" "1 64" "1 128" "1 256"; do
    set -- $cfg
    [ $b = triton ] && [ "$2" = 1 -o "$2" = 256 ] && [ "$1" = 1 ] && continue
    left 360 && SINKOPS_BWD_SORT_INDICES=$1 SINKOPS_BWD_DKV_QUERY_GROUP=$2 PYTHONPATH=/tmp/site timeout 70 \
      python3 $V "$b-sort$1-g$2" --backend $b 2>&1 | tail -1
  done
done | tee $OUT/ab_sort_groups.log
echo "A/B done ($(el) s)"
PYTHONPATH=/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "sparse or chunks or deterministic or writes_every or sorted" > $OUT/tests_backward.log 2>&1
echo "tests: $(tail -1 $OUT/tests_backward.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_backward.log | head -8
for g in 128 2; do
  SINKOPS_BWD_DKV_QUERY_GROUP=$g PYTHONPATH=/tmp/site timeout 60 compute-sanitizer --tool memcheck \
    python3 $R/tools/sanitize_cases.py cuda,triton sparse_backward > $OUT/memcheck_g$g.log 2>&1
  echo "memcheck g$g: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_g$g.log) ($(el) s)"
done
SINKOPS_BWD_DKV_QUERY_GROUP=2 PYTHONPATH=/tmp/site timeout 90 compute-sanitizer --tool racecheck \
  python3 $R/tools/sanitize_cases.py cuda sparse_backward > $OUT/racecheck.log 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/racecheck.log | tail -1) ($(el) s)"
grep -E "Race reported|hazard" $OUT/racecheck.log | grep -oE "in (function |kernel )?[A-Za-z_0-9:<>, ]+" | sort | uniq -c | head -5
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
