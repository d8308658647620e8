#!/usr/bin/env bash
# Session 32's seventh call (~1.5 min): dkv with 128 positions per CTA (two warpgroups sharing each
# q / dO chunk; .whl/var_p128 = this tree + dkv_p128/dkv_128_positions.patch) against dkv v2
# (var_dkv2 = this tree); the cuda sparse backward tests and memcheck on p128. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh dkv2 p128
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for v in p128 dkv2 p128; do
  PYTHONPATH=/tmp/site_$v timeout 40 python3 $R/tools/prof/sparse_bwd_variants.py $v 2>&1 | tail -1
done | tee $OUT/ab_dkv.log
PYTHONPATH=/tmp/site_p128 timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks or deterministic or writes_every)" > $OUT/tests_p128.log 2>&1
echo "tests p128: $(tail -1 $OUT/tests_p128.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_p128.log | head -5
PYTHONPATH=/tmp/site_p128 timeout 45 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda sparse_backward \
  > $OUT/memcheck_p128.log 2>&1
echo "memcheck p128: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_p128.log) ($(el) s)"
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
