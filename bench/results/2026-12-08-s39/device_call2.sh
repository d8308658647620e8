#!/usr/bin/env bash
# Session 39, call 2 (<= 8 min, time-guarded; carry [".whl", ".peers"]). NOT RUN: no device was lent
# this session; for the next one, on a wheel rebuilt from the tree. The decode pair (bench/NOTES.md
# "Prefill v1.7", its decode part): the two head blocks of a 128-head row as a 2-CTA cluster. One
# wheel: `alone` = the default (HEAD's kernel, SASS-identical), `pair` = SINKOPS_DECODE_PAIR=1.
# Tests first, then the A/B (two passes each), the sanitizers on the pairs, FlashMLA beside it.
set -uo pipefail
(MAX_JOBS=12 bash .peers/build_flashmla.sh > $OUT/flashmla_build.log 2>&1; echo "rc=$?" >> $OUT/flashmla_build.log) &
source tools/prof/device_sites.sh wheel
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
export PYTHONPATH=/tmp/site_wheel
timeout 150 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu" > $OUT/tests_decode.log 2>&1
echo "decode tests: $(tail -1 $OUT/tests_decode.log) ($(el) s)"
grep -q " passed" $OUT/tests_decode.log || { tail -40 $OUT/tests_decode.log; exit 1; }
ROWS=("V4 b128 s2 h128" "V3.2 b128 s2 h128" "V3.2 b1")
for rep in 1 2; do
  left 260 && timeout 70 python3 $R/tools/prof/decode_variants.py alone "${ROWS[@]}" 2>&1 | tail -1
  left 260 && SINKOPS_DECODE_PAIR=1 timeout 70 python3 $R/tools/prof/decode_variants.py pair "${ROWS[@]}" 2>&1 | tail -1
done | tee $OUT/ab_decode.log
echo "ab decode done ($(el) s)"
left 300 && { SINKOPS_DECODE_PAIR=1 timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode.log 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode.log) ($(el) s)"; gzip -f $OUT/memcheck_decode.log; }
left 340 && { SINKOPS_DECODE_PAIR=1 timeout 80 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/racecheck_decode.log 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_decode.log) ($(el) s)"; grep -E "Race reported|hazard" $OUT/racecheck_decode.log | sort | uniq -c | head -20 > $OUT/racecheck_sites.txt; gzip -f $OUT/racecheck_decode.log; }
wait
tail -2 $OUT/flashmla_build.log
python3 -c "import flash_mla" 2>/dev/null && left 420 && FLASHMLA=1 SINKOPS_DECODE_PAIR=1 timeout 70 python3 $R/tools/prof/decode_variants.py pair "${ROWS[@]}" 2>&1 | tail -2 | tee $OUT/flashmla_rows.log
echo "end ($(el) s)"
