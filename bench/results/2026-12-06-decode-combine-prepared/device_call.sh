#!/usr/bin/env bash
# One device call (~5 min): the decode combine that merges several heads per CTA (`comb`, this
# tree's csrc/cuda/sparse_mla_decode_combine.cuh) against the HEAD-era wheel and against itself
# with one head per CTA (SINKOPS_DECODE_COMBINE_HEADS=1, the old grid rule), three passes; the
# per-kernel breakdown (main / combine) of both; the decode GPU suite, memcheck and racecheck on
# comb. Inputs in .whl: the wheel, var_comb (tools/prof/variant_so.sh comb .whl/empty.patch
# "sparse_mla_decode.cu", STALE_OK=1). Run: bash THIS (carry .whl).
set -uo pipefail
R=$PWD
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { [ $(el) -lt $1 ]; }
if [ ! -d /tmp/site_wheel ]; then
  rm -rf /tmp/site && python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/sinkops-*.whl || exit 1
  (cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site/sinkops/ \;)
  cp -r /tmp/site /tmp/site_wheel
fi
rm -rf /tmp/site_comb; cp -r /tmp/site_wheel /tmp/site_comb; cp .whl/var_comb/_C*.so /tmp/site_comb/sinkops/
# the tree's Python (the new test and sanitize cases) over both
(cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site_comb/sinkops/ \;)
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu_decode.txt
C="b16 b1 h8 h32 TP8 h64"
for rep in 1 2 3; do
  PYTHONPATH=/tmp/site_wheel timeout 90 python3 $R/tools/prof/decode_variants.py wheel $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site_comb timeout 60 python3 $R/tools/prof/decode_variants.py comb $C 2>&1 | tail -1
  SINKOPS_DECODE_COMBINE_HEADS=1 PYTHONPATH=/tmp/site_comb timeout 60 python3 $R/tools/prof/decode_variants.py comb1 $C 2>&1 | tail -1
done | tee $OUT/ab_decode_combine.log
echo "ab done ($(el) s)"
for v in wheel comb; do echo "## $v"; PYTHONPATH=/tmp/site_$v timeout 40 python3 $R/tools/prof/decode_breakdown.py b16 b1 h8 2>&1 | tail -8; done | tee $OUT/decode_breakdown.log
echo "breakdown done ($(el) s)"
PYTHONPATH=/tmp/site_comb timeout 150 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu" > $OUT/tests_decode_comb.log 2>&1
echo "decode tests comb: $(tail -1 $OUT/tests_decode_comb.log) ($(el) s)"
left 420 && { PYTHONPATH=/tmp/site_comb timeout 80 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_comb.log 2>&1
echo "memcheck comb: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_comb.log) ($(el) s)"; }
left 500 && { PYTHONPATH=/tmp/site_comb timeout 90 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/racecheck_decode_comb.log 2>&1
echo "racecheck comb: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_decode_comb.log) ($(el) s)"; }
gzip -f $OUT/*check_decode*.log 2>/dev/null
echo "end ($(el) s)"
