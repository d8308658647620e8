#!/usr/bin/env bash
# One device call (issue 10, prefill v1.5): the TMA-store epilogue (SINKOPS_PREFILL_TMA_STORE) tested
# and timed against v1.3, FlashMLA beside, memcheck / racecheck, the multi-wave racecheck repro, and
# bench_dispatch's host cost per call. Steps past LIMIT seconds are skipped (what ran comes back in
# $OUT). Inputs, built on the CPU machine and carried in .whl (git-ignored) with .peers:
#   .whl/sinkops-*.whl        a cp312 wheel (SINKOPS_CUDA_ARCHS=90a; its Python is replaced by the tree's)
#   .whl/var_lazy/_C*.so      the default build (= the device-tested v1.3 SASS)
#   .whl/var_tma/_C*.so       tools/prof/variant_so.sh tma .whl/empty.patch "sparse_mla_prefill.cu
#                             sm90/sparse_mla_prefill_sm90.cu" -DSINKOPS_PREFILL_TMA_STORE=1
#   .whl/mw                   tools/racecheck/multi_wave_repro.cu built for sm_90a
# Env: LIMIT (s, default 520), REPS (A/B passes, 2), SKIP_FM=1 (no FlashMLA build).
#   run: bash tools/prof/device_prefill_tma_store.sh   (carry .whl and .peers)
set -uo pipefail
R=$PWD
LIMIT=${LIMIT:-520}
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { [ $(el) -lt $1 ]; }
[ "${SKIP_FM:-0}" = 1 ] || (MAX_JOBS=12 bash .peers/build_flashmla.sh > $OUT/flashmla_build.log 2>&1; echo "flashmla rc=$?" >> $OUT/flashmla_build.log) &
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/sinkops-*.whl || exit 1
(cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site/sinkops/ \;)
for v in lazy tma; do rm -rf /tmp/site_$v; cp -r /tmp/site /tmp/site_$v; cp .whl/var_$v/_C*.so /tmp/site_$v/sinkops/; done
site() { echo /tmp/site_$1; }
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=$(site tma) timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu \
  $R/tests/test_sparse_mla_prefill.py -k "cuda and not emu" > $OUT/tests_prefill_tma.log 2>&1
echo "tests prefill tma: $(tail -1 $OUT/tests_prefill_tma.log) ($(el) s)"
for rep in $(seq 1 ${REPS:-2}); do
  for v in lazy tma; do RAGGED=1 PYTHONPATH=$(site $v) timeout 60 python3 $R/tools/prof/prefill_variants.py $v 2>&1 | tail -1; done
done | tee $OUT/ab_prefill_tma.log
echo "($(el) s)"
PYTHONPATH=$(site tma) timeout 90 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda prefill > $OUT/memcheck_prefill_tma.log 2>&1
echo "memcheck prefill tma: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_prefill_tma.log | tail -1) ($(el) s)"
for g in 12 480; do timeout 40 compute-sanitizer --tool racecheck $R/.whl/mw $g 2>&1 | grep -E "repro|RACECHECK SUMMARY" | tr '\n' ' '; echo; done | tee $OUT/racecheck_multi_wave_repro.log
echo "($(el) s)"
if left $((LIMIT - 190)); then
  PYTHONPATH=$(site tma) timeout 100 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda prefill > $OUT/racecheck_prefill_tma.log 2>&1
  echo "racecheck prefill tma: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_prefill_tma.log | tail -1) ($(el) s)"
fi
[ "${SKIP_FM:-0}" = 1 ] || for i in $(seq 1 40); do grep -q "flashmla rc" $OUT/flashmla_build.log 2>/dev/null && break; left $((LIMIT - 90)) || break; sleep 3; done
tail -1 $OUT/flashmla_build.log 2>/dev/null
if left $((LIMIT - 75)) && python3 -c "import flash_mla" 2>/dev/null; then
  for v in lazy tma; do FLASHMLA=1 PYTHONPATH=$(site $v) timeout 60 python3 $R/tools/prof/prefill_variants.py $v 2>&1 | tail -2; done | tee $OUT/ab_prefill_flashmla.log
fi
echo "($(el) s)"
if left $((LIMIT - 50)); then
  PYTHONPATH=$(site tma) timeout $((LIMIT - $(el) - 5)) python3 $R/bench/bench_dispatch.py --backends cuda --calls 1000 > $OUT/dispatch.log 2>&1
  tail -12 $OUT/dispatch.log
fi
for f in $OUT/*sanitize* $OUT/*check_*; do [ -f "$f" ] && gzip -f "$f"; done 2>/dev/null
echo "total $(el) s"
