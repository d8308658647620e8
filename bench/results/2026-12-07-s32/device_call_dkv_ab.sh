#!/usr/bin/env bash
# One dkv variant V against this tree's dkv v2 (~1.5 min): `bash device_call_dkv_ab.sh V` with
# .whl/var_dkv2 (this tree) and .whl/var_V (tools/prof/variant_so.sh V <patch> "sm90/sparse_mla_backward_sm90.cu")
# carried; then the cuda sparse backward tests and memcheck on V. Session 32 ran it for n32
# (dkv_n32/dkv_chunk32.patch, results h100-2026-12-07-s32-call5) and p128
# (dkv_p128/dkv_128_positions.patch, h100-2026-12-07-s32-call7). Carry [".whl"].
set -uo pipefail
V=$1
source tools/prof/device_sites.sh dkv2 "$V"
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for v in "$V" dkv2 "$V"; do
  PYTHONPATH=/tmp/site_$v timeout 40 python3 $R/tools/prof/sparse_bwd_variants.py $v 2>&1 | tail -1
done | tee $OUT/ab_dkv.log
PYTHONPATH=/tmp/site_$V timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks or deterministic or writes_every)" > $OUT/tests_$V.log 2>&1
echo "tests $V: $(tail -1 $OUT/tests_$V.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_$V.log | head -5
PYTHONPATH=/tmp/site_$V timeout 45 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda sparse_backward \
  > $OUT/memcheck_$V.log 2>&1
echo "memcheck $V: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_$V.log) ($(el) s)"
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
