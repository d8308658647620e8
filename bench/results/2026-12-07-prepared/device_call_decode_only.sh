#!/usr/bin/env bash
# The decode half of device_call.sh (~3.5 min; alone for a call with little device time left):
# combine v2b (`comb2`, `comb2dep`) against the wheel, two passes, then, while time allows, memcheck,
# the split rows' tests and the per-kernel breakdown (tools/prof/decode_breakdown.py) on comb2.
# Carry [".whl"]; the variants' build is in device_call.sh's header.
set -uo pipefail
source tools/prof/device_sites.sh wheel comb2 comb2dep
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for rep in 1 2; do
  for v in wheel comb2 comb2dep; do
    PYTHONPATH=/tmp/site_$v timeout 50 python3 $R/tools/prof/decode_variants.py $v b16 b1 h8 h32 2>&1 | tail -1
  done
done | tee $OUT/ab_decode_comb2.log
echo "ab decode done ($(el) s)"
left 150 && { PYTHONPATH=/tmp/site_comb2 timeout 40 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_comb2.log 2>&1
echo "memcheck comb2: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_comb2.log) ($(el) s)"; gzip -f $OUT/memcheck_decode_comb2.log; }
left 180 && { PYTHONPATH=/tmp/site_comb2 timeout 40 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu and (matches_oracle or topk_length or sink_edges)" > $OUT/tests_decode_comb2.log 2>&1
echo "decode tests comb2: $(tail -1 $OUT/tests_decode_comb2.log) ($(el) s)"; }
left 200 && { PYTHONPATH=/tmp/site_comb2 timeout 30 python3 $R/tools/prof/decode_breakdown.py b16 h8 2>&1 | tail -5 | tee $OUT/breakdown_comb2.log; }
echo "end ($(el) s)"
