#!/usr/bin/env bash
# Session 35, call 1 (~9 min): the dkv kernel's sums by bulk reductions (`bulk`,
# -DSINKOPS_SBWD_BULK_RED=1: the accumulators staged in shared memory, each position's 256-byte row
# added by cp.reduce.async.bulk beside the next chunk's products) against the wheel (float2
# atomics), two passes; the cuda sparse backward tests, memcheck and racecheck on bulk; the owed
# racechecks (Triton's sparse backward, the CUDA decode with its few-heads kernel) on the wheel;
# the prefill backward table on bulk (both backends) if time is left.
# Carry [".whl"] (the wheel of HEAD + .whl/var_bulk).
set -uo pipefail
source tools/prof/device_sites.sh wheel bulk
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/sparse_bwd_variants.py
for pass in 1 2; do
  for v in bulk wheel; do
    PYTHONPATH=/tmp/site_$v timeout 80 python3 $V cuda-$v --backend cuda 2>&1 | tail -1
  done
done | tee $OUT/ab_bulk.log
echo "A/B done ($(el) s)"
PYTHONPATH=/tmp/site_bulk timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks or deterministic or writes_every or sorted)" > $OUT/tests_bulk.log 2>&1
echo "tests bulk: $(tail -1 $OUT/tests_bulk.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_bulk.log | head -5
SINKOPS_BWD_DKV_QUERY_GROUP=2 PYTHONPATH=/tmp/site_bulk timeout 60 compute-sanitizer --tool memcheck \
  python3 $R/tools/sanitize_cases.py cuda sparse_backward > $OUT/memcheck_bulk.log 2>&1
echo "memcheck bulk: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_bulk.log) ($(el) s)"
rc() {  # racecheck NAME SITE BACKENDS GROUP
  SINKOPS_BWD_DKV_QUERY_GROUP=2 PYTHONPATH=/tmp/site_$2 timeout 100 compute-sanitizer --tool racecheck \
    python3 $R/tools/sanitize_cases.py $3 $4 > $OUT/racecheck_$1.log 2>&1
  echo "racecheck $1: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/racecheck_$1.log | tail -1) ($(el) s)"
  grep -E "Race reported|hazard" $OUT/racecheck_$1.log | grep -oE "in (function |kernel )?[A-Za-z_0-9:<>, ]+" | sort | uniq -c | head -5
}
left 380 && rc bulk bulk cuda sparse_backward
left 400 && PYTHONPATH=/tmp/site_bulk timeout 150 python3 $R/bench/bench_backward.py \
  --only prefill --profile > $OUT/bench_backward_prefill_bulk.log 2>&1
grep -E "^\| (V|prefill)" $OUT/bench_backward_prefill_bulk.log; echo "table ($(el) s)"
left 470 && rc triton_sparse_bwd wheel triton sparse_backward
left 520 && rc cuda_decode wheel cuda decode
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
