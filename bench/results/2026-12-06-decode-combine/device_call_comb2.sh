#!/usr/bin/env bash
# One short device call (~5 min): the combine with batched split loads (`comb2`, one head per CTA,
# the old grid rule; `comb2dep`: the same, always launched as a programmatic dependent) against the
# HEAD-era wheel, graph replay, three passes; the per-kernel breakdown; the decode GPU suite's split
# rows, memcheck and racecheck on comb2. Inputs: .whl (the wheel; var_comb2 and var_comb2dep from
# tools/prof/variant_so.sh NAME THIS_FOLDER/combine_batched_loads[_dependent].patch "sparse_mla_decode.cu").
set -uo pipefail
source tools/prof/device_sites.sh wheel comb2 comb2dep
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
C="b16 b1 h8 h32"
for rep in 1 2 3; do
  for v in wheel comb2 comb2dep; do PYTHONPATH=/tmp/site_$v timeout 90 python3 $R/tools/prof/decode_variants.py $v $C 2>&1 | tail -1; done
done | tee $OUT/ab_decode_comb2.log
echo "ab done ($(el) s)"
left 260 && { PYTHONPATH=/tmp/site_comb2 timeout 30 python3 $R/tools/prof/decode_breakdown.py b16 h8 2>&1 | tail -5 | tee $OUT/breakdown_comb2.log; }
left 350 && { PYTHONPATH=/tmp/site_comb2 timeout 60 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu and (matches_oracle or topk_length or invalid or sink_edges or few_heads)" > $OUT/tests_decode_comb2.log 2>&1
echo "decode tests comb2: $(tail -1 $OUT/tests_decode_comb2.log) ($(el) s)"; }
left 350 && { PYTHONPATH=/tmp/site_comb2 timeout 50 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_comb2.log 2>&1
echo "memcheck comb2: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_comb2.log) ($(el) s)"; gzip -f $OUT/memcheck_decode_comb2.log; }
left 390 && { PYTHONPATH=/tmp/site_comb2 timeout 60 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/racecheck_decode_comb2.log 2>&1
echo "racecheck comb2: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_decode_comb2.log) ($(el) s)"; gzip -f $OUT/racecheck_decode_comb2.log; }
echo "end ($(el) s)"
