#!/usr/bin/env bash
# Session 33, call 6 (~4 min; carry [".whl"] = the wheel of 70a7279 + var_n32: the few-heads prefill
# up to 32 heads, 32-head CTAs, built by variant_so.sh from this tree): the few-heads prefill rows
# (8 / 16 / 32 heads; FlashMLA's padded-to-64 time for 32 heads is its TP8 rows' of call 5), then on
# n32 the cuda prefill suite, the auto tests, memcheck and racecheck on the prefill cases.
set -uo pipefail
source tools/prof/device_sites.sh n32
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=/tmp/site_n32 timeout 150 python3 $R/bench/bench_sparse_mla_prefill.py TP 2>&1 | tee $OUT/bench_prefill_tp_n32.log
echo "bench done ($(el) s)"
PYTHONPATH=/tmp/site_n32:$R/tests timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_prefill.py $R/tests/test_backend_specific.py -k "cuda or auto" > $OUT/tests_prefill_n32.log 2>&1
echo "prefill cuda + auto tests: $(tail -1 $OUT/tests_prefill_n32.log) ($(el) s)"
PYTHONPATH=/tmp/site_n32 timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda prefill > $OUT/memcheck_prefill_n32.log 2>&1
echo "memcheck prefill: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_prefill_n32.log) ($(el) s)"; gzip -f $OUT/memcheck_prefill_n32.log
left 330 && { PYTHONPATH=/tmp/site_n32 timeout 100 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda prefill > $OUT/racecheck_prefill_n32.log 2>&1
echo "racecheck prefill: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_prefill_n32.log) ($(el) s)"; echo "hazards in few-heads kernels: $(grep -c 'few_heads' $OUT/racecheck_prefill_n32.log)"; gzip -f $OUT/racecheck_prefill_n32.log; }
echo "end ($(el) s)"
