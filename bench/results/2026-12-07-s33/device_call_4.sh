#!/usr/bin/env bash
# Session 33, call 4 (~7 min; carry [".whl"] = a wheel of the tree with the few-heads prefill kernel,
# sparse_mla_prefill_few_heads_sm90.cuh, and the few-heads decode's math moved into FewHeadsSoftmax):
# timing first (TP8 rows: cuda = the few-heads kernel, sm80, Triton), then the cuda prefill suite,
# the few-heads decode tests, memcheck on the prefill and decode cases, racecheck on the prefill's.
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=/tmp/site timeout 150 python3 $R/bench/bench_sparse_mla_prefill.py TP8 2>&1 | tee $OUT/bench_prefill_tp8.log
echo "bench done ($(el) s)"
PYTHONPATH=/tmp/site:$R/tests timeout 200 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_prefill.py -k "cuda" > $OUT/tests_prefill_cuda.log 2>&1
echo "prefill cuda tests: $(tail -1 $OUT/tests_prefill_cuda.log) ($(el) s)"
PYTHONPATH=/tmp/site:$R/tests timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu" > $OUT/tests_decode_cuda.log 2>&1
echo "decode cuda tests: $(tail -1 $OUT/tests_decode_cuda.log) ($(el) s)"
PYTHONPATH=/tmp/site timeout 90 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda prefill,decode > $OUT/memcheck_prefill_decode.log 2>&1
echo "memcheck prefill+decode: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_prefill_decode.log) ($(el) s)"; gzip -f $OUT/memcheck_prefill_decode.log
left 480 && { PYTHONPATH=/tmp/site timeout 100 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda prefill > $OUT/racecheck_prefill.log 2>&1
echo "racecheck prefill: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' $OUT/racecheck_prefill.log | tail -1) ($(el) s)"; grep -o 'few_heads[a-z_0-9]*' $OUT/racecheck_prefill.log | sort | uniq -c; gzip -f $OUT/racecheck_prefill.log; }
echo "end ($(el) s)"
