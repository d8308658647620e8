#!/usr/bin/env bash
# Session 33, call 1 (~6 min; carry [".whl"] with the wheel of 628b1e9 and var_comb2 / var_comb2dep,
# built here by tools/prof/variant_so.sh from bench/results/2026-12-06-decode-combine/*.patch):
# decode combine v2b A/B against the wheel (two passes), the split rows' tests and memcheck on comb2,
# the per-kernel breakdown, then bench/gather_ceiling.py (issue 10's small-head targets against the
# pure-gather ceiling).
set -uo pipefail
source tools/prof/device_sites.sh wheel comb2 comb2dep
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for rep in 1 2; do
  for v in wheel comb2 comb2dep; do
    PYTHONPATH=/tmp/site_$v timeout 50 python3 $R/tools/prof/decode_variants.py $v b16 "b1 h" h8 h32 2>&1 | tail -1
  done
done | tee $OUT/ab_decode_comb2.log
echo "ab decode done ($(el) s)"
for v in comb2 comb2dep; do
  PYTHONPATH=/tmp/site_$v timeout 60 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu and (matches_oracle or topk_length or sink_edges)" > $OUT/tests_decode_$v.log 2>&1
  echo "decode tests $v: $(tail -1 $OUT/tests_decode_$v.log) ($(el) s)"
done
PYTHONPATH=/tmp/site_comb2 timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_comb2.log 2>&1
echo "memcheck comb2: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_comb2.log) ($(el) s)"; gzip -f $OUT/memcheck_decode_comb2.log
for v in wheel comb2 comb2dep; do
  PYTHONPATH=/tmp/site_$v timeout 30 python3 $R/tools/prof/decode_breakdown.py b16 h8 "b1 h" 2>&1 | tail -6 | sed "s/^/$v /"
done | tee $OUT/breakdown.log
PYTHONPATH=/tmp/site timeout 200 python3 $R/bench/gather_ceiling.py --json $OUT/gather_ceiling.json 2>&1 | tee $OUT/gather_ceiling.log
echo "end ($(el) s)"
