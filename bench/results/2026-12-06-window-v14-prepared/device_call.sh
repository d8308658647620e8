#!/usr/bin/env bash
# One device call (~9 min): window v14 (split K / V rings: wheel s128 s160 s176) and v15 candidate w3 A/B against
# the HEAD wheel, the d 128 tests + memcheck + racecheck on s160, the window suite on s128, the decode
# breakdown (what ran in the end: ../h100-2026-12-06-window-v14-decode-combine/device_call.sh). Inputs in .whl (see bench/NOTES.md "Window v14" and "v15 candidate"). Run: bash THIS (carry .whl).
set -uo pipefail
source tools/prof/device_sites.sh wheel s128 s160 s176 w3
VARS="wheel s128 s160 s176"
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for rep in 1 2 3; do
  for v in $VARS; do PYTHONPATH=/tmp/site_$v timeout 90 python3 $R/tools/prof/window_variants.py $v unbounded causal 2>&1 | tail -1; done
done | tee $OUT/ab_wide.log
echo "ab done ($(el) s)"
for rep in 1 2 3; do
  for v in wheel w3; do PYTHONPATH=/tmp/site_$v timeout 60 python3 $R/tools/prof/window_variants.py $v mimo w128 2>&1 | tail -1; done
done | tee $OUT/ab_narrow.log
echo "ab narrow done ($(el) s)"
PYTHONPATH=/tmp/site_s160 timeout 80 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "(cuda or sm90) and (wide or 128 or without_lse)" > $OUT/tests_window_s160.log 2>&1
echo "window tests s160: $(tail -1 $OUT/tests_window_s160.log) ($(el) s)"
left 300 && { PYTHONPATH=/tmp/site_s160 timeout 70 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda window > $OUT/memcheck_window_s160.log 2>&1
echo "memcheck s160: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_window_s160.log) ($(el) s)"; }
left 380 && { PYTHONPATH=/tmp/site_s160 timeout 90 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda window > $OUT/racecheck_window_s160.log 2>&1
echo "racecheck s160: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_window_s160.log) ($(el) s)"; }
left 470 && { PYTHONPATH=/tmp/site_s128 timeout 100 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "cuda or sm90" > $OUT/tests_window_s128.log 2>&1
echo "window tests s128: $(tail -1 $OUT/tests_window_s128.log) ($(el) s)"; }
gzip -f $OUT/*check_window*.log 2>/dev/null
echo "end ($(el) s)"
