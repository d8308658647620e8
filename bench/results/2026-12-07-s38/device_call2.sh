#!/usr/bin/env bash
# Session 38, call 2 (~6 min; carry [".whl"]). (1) The window backward without the visibility test
# where a tile / block lies inside every row's window (`mskip`: window_attention_bwd_sm90_hdim64.cu
# rebuilt) against the wheel (HEAD), with the forward beside them; its CUDA backward tests, memcheck
# and racecheck. (2) Why decode v11 lost: `ip3` = in-place producer with WG0's order chosen per
# block by a bar.red vote, `ro` = HEAD's register producer with WG0 freeing a buffer as soon as its
# PV is done (the order's own cost), `ipo` = the in-place producer with HEAD's WG0 order (the
# producer's own cost). (3) On an H200, the sparse prefill backward (issue 12, so far H100s only).
set -uo pipefail
source tools/prof/device_sites.sh wheel mskip ip3 ro ipo
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/window_bwd_variants.py
for v in wheel mskip wheel mskip; do PYTHONPATH=/tmp/site_$v timeout 50 python3 $V $v --fwd 2>&1 | tail -1; done | tee $OUT/ab_mskip.log
echo "ab mskip done ($(el) s)"
PYTHONPATH=/tmp/site_mskip timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "window and cuda" > $OUT/tests_mskip.log 2>&1
echo "tests mskip: $(tail -1 $OUT/tests_mskip.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_mskip.log | head -5
ROWS=("V4 b128 s2 h128" "V3.2 b128 s2 h128" "b128 h64" "b16")
for v in wheel ro ipo ip3; do
  left 260 && PYTHONPATH=/tmp/site_$v timeout 50 python3 $R/tools/prof/decode_variants.py $v "${ROWS[@]}" 2>&1 | tail -1
done | tee $OUT/ab_decode.log
echo "ab decode done ($(el) s)"
left 300 && { PYTHONPATH=/tmp/site_mskip timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda backward > $OUT/memcheck_mskip.log 2>&1
echo "memcheck mskip: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_mskip.log) ($(el) s)"; gzip -f $OUT/memcheck_mskip.log; }
left 340 && { PYTHONPATH=/tmp/site_mskip timeout 60 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda backward > $OUT/racecheck_mskip.log 2>&1
echo "racecheck mskip: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_mskip.log) ($(el) s)"; gzip -f $OUT/racecheck_mskip.log; }
if grep -q H200 $OUT/gpu.txt; then
  left 380 && PYTHONPATH=/tmp/site_wheel timeout 70 python3 $R/tools/prof/sparse_bwd_variants.py wheel 2>&1 | tail -1 | tee $OUT/sparse_bwd_h200.log
fi
echo "end ($(el) s)"
