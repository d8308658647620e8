#!/usr/bin/env bash
# Session 38, call 1 (~7 min; carry [".whl", ".peers"]): decode v11, the in-place staged gather.
# Sites: `wheel` = HEAD (default build, SINKOPS_DECODE_IN_PLACE=0), `ip1` = the producer stages each
# block's raw bytes by cp.async in the free buffer itself (fence in the producer), `ip2` = the same
# with the async-proxy fence in WG0 after its ready wait. Tests first (a wrong or hung kernel stops
# the call early), the A/B (two passes), the sanitizers on the candidate, FlashMLA beside it.
set -uo pipefail
(MAX_JOBS=12 bash .peers/build_flashmla.sh > $OUT/flashmla_build.log 2>&1; echo "rc=$?" >> $OUT/flashmla_build.log) &
source tools/prof/device_sites.sh wheel ip1 ip2
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for v in ip2 ip1; do
  PYTHONPATH=/tmp/site_$v timeout 150 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu" > $OUT/tests_decode_$v.log 2>&1
  echo "decode tests $v: $(tail -1 $OUT/tests_decode_$v.log) ($(el) s)"
done
ROWS=("V4 b128 s2 h128" "V3.2 b128 s2 h128" "b128 h64" "b16" "V3.2 b1" "b64 h32")
for rep in 1 2; do
  for v in wheel ip1 ip2; do
    left 330 && PYTHONPATH=/tmp/site_$v timeout 70 python3 $R/tools/prof/decode_variants.py $v "${ROWS[@]}" 2>&1 | tail -1
  done
done | tee $OUT/ab_decode.log
echo "ab decode done ($(el) s)"
C=${CAND:-ip2}
left 330 && { PYTHONPATH=/tmp/site_$C timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_$C.log 2>&1
echo "memcheck $C: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_$C.log) ($(el) s)"; gzip -f $OUT/memcheck_decode_$C.log; }
left 390 && { PYTHONPATH=/tmp/site_$C timeout 70 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/racecheck_decode_$C.log 2>&1
echo "racecheck $C: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_decode_$C.log) ($(el) s)"; grep -E "Race reported|hazard" $OUT/racecheck_decode_$C.log | sort | uniq -c | head -20 > $OUT/racecheck_sites_$C.txt; gzip -f $OUT/racecheck_decode_$C.log; }
for v in wheel $C; do
  left 440 && PYTHONPATH=/tmp/site_$v timeout 30 python3 $R/tools/prof/decode_breakdown.py b16 "h128" 2>&1 | tail -6 | sed "s/^/$v /"
done | tee $OUT/breakdown.log
wait
tail -2 $OUT/flashmla_build.log
export PYTHONPATH=/tmp/site_$C
python3 -c "import flash_mla" 2>/dev/null && left 500 && FLASHMLA=1 timeout 70 python3 $R/tools/prof/decode_variants.py $C "${ROWS[@]}" 2>&1 | tail -2 | tee $OUT/flashmla_rows.log
echo "end ($(el) s)"
