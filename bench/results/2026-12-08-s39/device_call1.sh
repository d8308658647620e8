#!/usr/bin/env bash
# Session 39, call 1 (<= 8 min, time-guarded; carry [".whl", ".peers"]). NOT RUN: no device was lent
# this session (eleven start attempts refused or failed); kept for the next session, whose wheel
# must be rebuilt from the tree first. Prefill v1.7: a query's two head blocks as a 2-CTA cluster
# sharing the gathered rows. One wheel: `alone` = the default (HEAD's unpaired kernel, SASS-identical),
# `pair` = the same wheel with SINKOPS_PREFILL_PAIR=1. Tests first (a wrong or hung kernel stops the
# call early), then the A/B (two passes each), the sanitizers on the pairs, FlashMLA in the same
# call; the decode suite too (session 38's test of both v4 conversion paths is owed).
set -uo pipefail
(MAX_JOBS=12 bash .peers/build_flashmla.sh > $OUT/flashmla_build.log 2>&1; echo "rc=$?" >> $OUT/flashmla_build.log) &
source tools/prof/device_sites.sh wheel
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
export PYTHONPATH=/tmp/site_wheel
timeout 150 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_prefill.py -k "cuda and not emu" > $OUT/tests_prefill.log 2>&1
echo "prefill tests: $(tail -1 $OUT/tests_prefill.log) ($(el) s)"
grep -q " passed" $OUT/tests_prefill.log || { tail -40 $OUT/tests_prefill.log; exit 1; }
for rep in 1 2; do
  left 260 && timeout 80 python3 $R/tools/prof/prefill_variants.py alone 2>&1 | tail -1
  left 260 && SINKOPS_PREFILL_PAIR=1 timeout 80 python3 $R/tools/prof/prefill_variants.py pair 2>&1 | tail -1
done | tee $OUT/ab_prefill.log
echo "ab prefill done ($(el) s)"
left 300 && { SINKOPS_PREFILL_PAIR=1 timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda prefill > $OUT/memcheck_prefill.log 2>&1
echo "memcheck: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_prefill.log) ($(el) s)"; gzip -f $OUT/memcheck_prefill.log; }
left 340 && { SINKOPS_PREFILL_PAIR=1 timeout 80 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda prefill > $OUT/racecheck_prefill.log 2>&1
echo "racecheck: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_prefill.log) ($(el) s)"; grep -E "Race reported|hazard" $OUT/racecheck_prefill.log | sort | uniq -c | head -20 > $OUT/racecheck_sites.txt; gzip -f $OUT/racecheck_prefill.log; }
wait
tail -2 $OUT/flashmla_build.log
python3 -c "import flash_mla" 2>/dev/null && left 420 && FLASHMLA=1 SINKOPS_PREFILL_PAIR=1 timeout 70 python3 $R/tools/prof/prefill_variants.py pair 2>&1 | tail -2 | tee $OUT/flashmla_rows.log
left 400 && { timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu" > $OUT/tests_decode.log 2>&1
echo "decode tests: $(tail -1 $OUT/tests_decode.log) ($(el) s)"; }
echo "end ($(el) s)"
