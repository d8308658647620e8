#!/usr/bin/env bash
# Session 37, call 1 (~9 min; carry [".whl", ".peers"]): the decode's splits merged in their cluster.
# Sites: `head` = HEAD's decode (.whl/var_head), `wheel` = the few-heads kernel's splits merged in
# their cluster (the 64-head kernel still through the workspace and the combine kernel), `c64` = both
# sm90 kernels merging in their cluster (.whl/var_c64, tools/prof/variant_so.sh over the wheel's build).
# Tests and sanitizers on c64 (the candidate), the A/B of the three (two passes), the per-kernel
# breakdown, then FlashMLA (built in the background) beside c64 and the decode bench's table.
set -uo pipefail
(MAX_JOBS=12 bash .peers/build_flashmla.sh > $OUT/flashmla_build.log 2>&1; echo "rc=$?" >> $OUT/flashmla_build.log) &
source tools/prof/device_sites.sh wheel head c64
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=/tmp/site_c64 timeout 200 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu" > $OUT/tests_decode_c64.log 2>&1
echo "decode tests c64: $(tail -1 $OUT/tests_decode_c64.log) ($(el) s)"
ROWS=("b16" "b1 h" "b64 h8" "b64 h32" "b128 h64" "V4 b128 s2 h128")
for rep in 1 2; do
  for v in head wheel c64; do
    PYTHONPATH=/tmp/site_$v timeout 80 python3 $R/tools/prof/decode_variants.py $v "${ROWS[@]}" 2>&1 | tail -1
  done
done | tee $OUT/ab_decode.log
echo "ab decode done ($(el) s)"
left 330 && { PYTHONPATH=/tmp/site_c64 timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_c64.log 2>&1
echo "memcheck c64: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_c64.log) ($(el) s)"; gzip -f $OUT/memcheck_decode_c64.log; }
left 380 && { PYTHONPATH=/tmp/site_c64 timeout 70 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/racecheck_decode_c64.log 2>&1
echo "racecheck c64: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_decode_c64.log) ($(el) s)"; gzip -f $OUT/racecheck_decode_c64.log; }
for v in head c64; do
  left 420 && PYTHONPATH=/tmp/site_$v timeout 30 python3 $R/tools/prof/decode_breakdown.py b16 "b64 h8" "b1 h" 2>&1 | tail -6 | sed "s/^/$v /"
done | tee $OUT/breakdown.log
wait
tail -2 $OUT/flashmla_build.log
export PYTHONPATH=/tmp/site_c64
python3 -c "import flash_mla" 2>/dev/null && left 470 && FLASHMLA=1 timeout 80 python3 $R/tools/prof/decode_variants.py c64 "${ROWS[@]}" 2>&1 | tail -2 | tee $OUT/flashmla_rows.log
left 480 && timeout $((560 - $(el))) python3 $R/bench/bench_sparse_mla_decode.py --json $OUT/bench_decode_c64.json > $OUT/bench_decode_c64.md 2>&1
echo "end ($(el) s)"
