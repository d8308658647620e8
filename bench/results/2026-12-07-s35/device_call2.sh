#!/usr/bin/env bash
# Session 35, call 2 (~5 min): the final tree (`final`: dkv v4 with 288-byte sum rows, the maximum
# shared-memory carveout for both dkv kernels, dkv_acc's alignment check; this tree's Python: auto
# takes the CUDA sparse backward at every head count) against call 1's `bulk` (272-byte rows, the
# driver's carveout), two passes; the whole backward GPU suite (every backend) on final, memcheck and
# racecheck of the sparse backward cases. Carry [".whl"] (the wheel of 5680877, .whl/var_bulk, var_final).
set -uo pipefail
source tools/prof/device_sites.sh bulk final
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/sparse_bwd_variants.py
for pass in 1 2; do
  for v in final bulk; do
    PYTHONPATH=/tmp/site_$v timeout 80 python3 $V cuda-$v --backend cuda 2>&1 | tail -1
  done
done | tee $OUT/ab_final.log
echo "A/B done ($(el) s)"
PYTHONPATH=/tmp/site_final timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  > $OUT/tests_backward_final.log 2>&1
echo "backward tests: $(tail -1 $OUT/tests_backward_final.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_backward_final.log | head -8
PYTHONPATH=/tmp/site_final timeout 80 compute-sanitizer --tool memcheck \
  python3 $R/tools/sanitize_cases.py cuda,triton sparse_backward > $OUT/memcheck_final.log 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_final.log) ($(el) s)"
left 480 && SINKOPS_BWD_DKV_QUERY_GROUP=2 PYTHONPATH=/tmp/site_final timeout 90 compute-sanitizer --tool racecheck \
  python3 $R/tools/sanitize_cases.py cuda sparse_backward > $OUT/racecheck_final.log 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_final.log) ($(el) s)"
grep -E "Race reported" $OUT/racecheck_final.log | grep -oE "at void [A-Za-z_0-9:]+" | sort | uniq -c | head -5
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
