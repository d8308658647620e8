#!/usr/bin/env bash
# Session 32's last call (~1.5 min): dkv with 32-channel chunks (n32 = this tree + dkv_n32/dkv_chunk32.patch:
# 64 KB of shared memory, 3 CTAs per SM) against this tree's dkv v2 (dkv2); the cuda sparse
# backward tests and memcheck on n32. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh dkv2 n32
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for v in n32 dkv2 n32; do
  PYTHONPATH=/tmp/site_$v timeout 40 python3 $R/tools/prof/sparse_bwd_variants.py $v 2>&1 | tail -1
done | tee $OUT/ab_dkv.log
PYTHONPATH=/tmp/site_n32 timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks or deterministic or writes_every)" > $OUT/tests_n32.log 2>&1
echo "tests n32: $(tail -1 $OUT/tests_n32.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_n32.log | head -5
PYTHONPATH=/tmp/site_n32 timeout 45 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda sparse_backward \
  > $OUT/memcheck_n32.log 2>&1
echo "memcheck n32: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_n32.log) ($(el) s)"
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
