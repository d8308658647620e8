#!/usr/bin/env bash
# Session 34, call 4 (~3 min): two warpgroups per dkv CTA (`p128`, -DSINKOPS_SBWD_DKV_WARPGROUPS=2:
# 128 positions, each q / dO chunk read once for both) against the wheel, both with dkv v3's groups;
# the cuda backward tests and memcheck on p128. Carry [".whl"] (the wheel + .whl/var_p128).
set -uo pipefail
source tools/prof/device_sites.sh wheel p128
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/sparse_bwd_variants.py
for v in p128 wheel; do
  PYTHONPATH=/tmp/site_$v timeout 70 python3 $V cuda-$v --backend cuda 2>&1 | tail -1
done | tee $OUT/ab_p128.log
PYTHONPATH=/tmp/site_p128 timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks or deterministic or writes_every or sorted)" > $OUT/tests_p128.log 2>&1
echo "tests p128: $(tail -1 $OUT/tests_p128.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_p128.log | head -5
SINKOPS_BWD_DKV_QUERY_GROUP=2 PYTHONPATH=/tmp/site_p128 timeout 50 compute-sanitizer --tool memcheck \
  python3 $R/tools/sanitize_cases.py cuda sparse_backward > $OUT/memcheck_p128.log 2>&1
echo "memcheck p128: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_p128.log) ($(el) s)"
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
