#!/usr/bin/env bash
# One device call: sparse MLA prefill or decode _C variants (OP=prefill | decode, issue 10; FlashMLA
# beside) or window attention ones (OP=window, issue 11: window_variants.py's cases) tested and
# timed side by side, memcheck / racecheck of one variant, the multi-wave racecheck repro,
# bench_dispatch's host cost.
# Steps past LIMIT seconds are skipped (what ran comes back in $OUT). Inputs, built on the CPU
# machine and carried in .whl (git-ignored) with .peers:
#   .whl/sinkops-*.whl        a cp312 wheel (SINKOPS_CUDA_ARCHS=90a; its Python is replaced by the tree's)
#   .whl/var_NAME/_C*.so      one per variant (the name `wheel`: the wheel's own): tools/prof/variant_so.sh NAME PATCH
#                             "sparse_mla_prefill.cu sm90/sparse_mla_prefill_sm90.cu" [-D...] (decode:
#                             "sm90/sparse_mla_decode_sm90_v4.cu sm90/sparse_mla_decode_sm90_v32.cu"; the base:
#                             .whl/empty.patch; build the wheel from HEAD first: variant_so.sh links
#                             the other units' objects from that build)
#   .whl/mw                   tools/racecheck/multi_wave_repro.cu built for sm_90a (optional)
# Env: OP (prefill), VARIANTS (required, "base v1 v2": the first is the base), CHECK (the variant tested and
# sanitized: the last), LIMIT (s, 520), REPS (A/B passes, 2), SKIP_FM=1 (no FlashMLA), DISPATCH=0
# (no bench_dispatch), CASES (decode_variants.py's case substrings), TESTS (extra pytest files or
# node ids run on CHECK). Keep REPS x variants x ~10 s (decode ~30 s) + ~200 s under the call's 600 s.
#   run: OP=decode VARIANTS="base ef" bash tools/prof/device_variants.sh   (carry .whl and .peers)
set -uo pipefail
R=$PWD
LIMIT=${LIMIT:-520}
VARIANTS=$(echo ${VARIANTS:-})  # (trims spaces)
[ -n "$VARIANTS" ] || { echo 'set VARIANTS, e.g. "base ef"' >&2; exit 2; }
CHECK=${CHECK:-${VARIANTS##* }}
OP=${OP:-prefill}
TEST_FILE=tests/test_sparse_mla_$OP.py TEST_K="cuda and not emu"
case $OP in
  prefill) export RAGGED=1 ;;  # (prefill_variants.py also times ragged topk_length rows)
  decode) ;;
  window) TEST_FILE=tests/test_window_attention.py TEST_K="cuda or sm90" SKIP_FM=1 ;;
  *) echo "OP: prefill, decode or window" >&2; exit 2 ;;
esac
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { [ $(el) -lt $1 ]; }
[ "${SKIP_FM:-0}" = 1 ] || python3 -c "import flash_mla" 2>/dev/null ||
  (MAX_JOBS=12 bash .peers/build_flashmla.sh > $OUT/flashmla_build.log 2>&1; echo "flashmla rc=$?" >> $OUT/flashmla_build.log) \
  > /dev/null 2>&1 &
rm -rf /tmp/site
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/sinkops-*.whl || exit 1
(cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site/sinkops/ \;)
for v in $VARIANTS; do
  rm -rf /tmp/site_$v; cp -r /tmp/site /tmp/site_$v
  [ "$v" = wheel ] || cp .whl/var_$v/_C*.so /tmp/site_$v/sinkops/ || exit 1
done
site() { echo /tmp/site_$1; }
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=$(site $CHECK) timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu \
  $R/$TEST_FILE -k "$TEST_K" > $OUT/tests_${OP}_$CHECK.log 2>&1
echo "tests $OP $CHECK: $(tail -1 $OUT/tests_${OP}_$CHECK.log) ($(el) s)"
if [ -n "${TESTS:-}" ]; then
  PYTHONPATH=$(site $CHECK) timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu $(for t in $TESTS; do echo $R/$t; done) \
    > $OUT/tests_extra_$CHECK.log 2>&1
  echo "tests $TESTS $CHECK: $(tail -1 $OUT/tests_extra_$CHECK.log) ($(el) s)"
fi
for rep in $(seq 1 ${REPS:-2}); do
  for v in $VARIANTS; do PYTHONPATH=$(site $v) timeout 90 python3 $R/tools/prof/${OP}_variants.py $v ${CASES:-} 2>&1 | tail -1; done
done | tee $OUT/ab_$OP.log
echo "($(el) s)"
PYTHONPATH=$(site $CHECK) timeout 90 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda $OP > $OUT/memcheck_${OP}_$CHECK.log 2>&1
echo "memcheck $OP $CHECK: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_${OP}_$CHECK.log | tail -1) ($(el) s)"
if [ -x $R/.whl/mw ]; then
  for g in 12 480; do timeout 40 compute-sanitizer --tool racecheck $R/.whl/mw $g 2>&1 | grep -E "repro|RACECHECK SUMMARY" | tr '\n' ' '; echo; done | tee $OUT/racecheck_multi_wave_repro.log
fi
if left $((LIMIT - 190)); then
  PYTHONPATH=$(site $CHECK) timeout 100 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda $OP > $OUT/racecheck_${OP}_$CHECK.log 2>&1
  echo "racecheck $OP $CHECK: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_${OP}_$CHECK.log | tail -1) ($(el) s)"
fi
[ "${SKIP_FM:-0}" = 1 ] || for i in $(seq 1 60); do python3 -c "import flash_mla" 2>/dev/null && break; grep -q "flashmla rc" $OUT/flashmla_build.log 2>/dev/null && break; left $((LIMIT - 90)) || break; sleep 3; done
if [ "${SKIP_FM:-0}" != 1 ] && left $((LIMIT - 75)) && python3 -c "import flash_mla" 2>/dev/null; then
  for v in $VARIANTS; do FLASHMLA=1 PYTHONPATH=$(site $v) timeout 90 python3 $R/tools/prof/${OP}_variants.py $v ${CASES:-} 2>&1 | tail -2; done | tee $OUT/ab_${OP}_flashmla.log
fi
echo "($(el) s)"
if [ "${DISPATCH:-1}" = 1 ] && left $((LIMIT - 50)); then
  PYTHONPATH=$(site $CHECK) timeout $((LIMIT - $(el) - 5)) python3 $R/bench/bench_dispatch.py --backends cuda --calls 1000 > $OUT/dispatch.log 2>&1
  tail -12 $OUT/dispatch.log
fi
for f in $OUT/*sanitize* $OUT/*check_*; do [ -f "$f" ] && gzip -f "$f"; done 2>/dev/null
echo "total $(el) s"
