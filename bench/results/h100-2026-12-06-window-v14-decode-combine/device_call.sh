#!/usr/bin/env bash
# The call that ran (an H100, 2026-12-06, 399 s; its logs are beside it): the window v14 / w3 A/B
# (../2026-12-06-window-v14-prepared/device_call.sh), the decode combine v2 A/B (`comb`:
# ../2026-12-06-decode-combine/tried_combine_heads_per_cta.patch; skipped by its time guard, the
# breakdown's graph column measured it), then tests and sanitizers, most informative first, each step
# skipped once its time is gone. Inputs in .whl (bench/NOTES.md "Window v14", "Decode combine v2").
set -uo pipefail
R=$PWD
t0=$(date +%s); el() { echo $(( $(date +%s) - t0 )); }
left() { [ $(el) -lt $1 ]; }
rm -rf /tmp/site && python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/sinkops-*.whl || exit 1
(cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site/sinkops/ \;)
for v in wheel s128 s160 s176 w3 comb; do rm -rf /tmp/site_$v; cp -r /tmp/site /tmp/site_$v; [ $v = wheel ] || cp .whl/var_$v/_C*.so /tmp/site_$v/sinkops/; done
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
W=$R/tools/prof/window_variants.py D=$R/tools/prof/decode_variants.py
for rep in 1 2 3; do
  for v in wheel s128 s160 s176; do PYTHONPATH=/tmp/site_$v timeout 90 python3 $W $v unbounded causal 2>&1 | tail -1; done
done | tee $OUT/ab_wide.log
echo "ab wide done ($(el) s)"
for rep in 1 2 3; do
  for v in wheel w3; do PYTHONPATH=/tmp/site_$v timeout 60 python3 $W $v mimo w128 2>&1 | tail -1; done
done | tee $OUT/ab_narrow.log
echo "ab narrow done ($(el) s)"
C="b16 b1 h8 h32 TP8 h64"
left 330 && for rep in 1 2; do
  PYTHONPATH=/tmp/site_wheel timeout 90 python3 $D wheel $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site_comb timeout 50 python3 $D comb $C 2>&1 | tail -1
  SINKOPS_DECODE_COMBINE_HEADS=1 PYTHONPATH=/tmp/site_comb timeout 50 python3 $D comb1 $C 2>&1 | tail -1
done | tee $OUT/ab_decode_combine.log
echo "ab decode done ($(el) s)"
left 420 && { for v in wheel comb; do echo "## $v"; PYTHONPATH=/tmp/site_$v timeout 30 python3 $R/tools/prof/decode_breakdown.py b16 b1 h8 2>&1 | tail -8; done | tee $OUT/decode_breakdown.log; }
left 440 && { PYTHONPATH=/tmp/site_comb timeout 90 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu and (combine or matches_oracle or topk_length or invalid or sink_edges)" > $OUT/tests_decode_comb.log 2>&1
echo "decode tests comb: $(tail -1 $OUT/tests_decode_comb.log) ($(el) s)"; }
left 520 && { PYTHONPATH=/tmp/site_comb timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_comb.log 2>&1
echo "memcheck comb: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_comb.log) ($(el) s)"; }
gzip -f $OUT/*check_*.log 2>/dev/null
echo "end ($(el) s)"
