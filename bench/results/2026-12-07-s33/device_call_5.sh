#!/usr/bin/env bash
# Session 33, call 5 (~7 min; carry [".whl", ".peers"]): FlashMLA 9241ae3 built beside the auto
# tests, then the prefill benchmark on every issue-10 row (the TP8 rows now on the few-heads
# kernel) and the decode benchmark (the few-heads decode's math moved into FewHeadsSoftmax: no row
# may get slower), both with FlashMLA in the same run.
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
(MAX_JOBS=12 bash $R/.peers/build_flashmla.sh > $OUT/flashmla_build.log 2>&1; echo "flashmla build exit $?" >> $OUT/flashmla_build.log) &
PYTHONPATH=/tmp/site:$R/tests timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backend_specific.py -k "auto" > $OUT/tests_auto.log 2>&1
echo "auto tests: $(tail -1 $OUT/tests_auto.log) ($(el) s)"
wait
tail -2 $OUT/flashmla_build.log; echo "flashmla built ($(el) s)"
PYTHONPATH=/tmp/site timeout 240 python3 $R/bench/bench_sparse_mla_prefill.py --json $OUT/bench_prefill.json 2>&1 | tee $OUT/bench_prefill.log
echo "prefill bench done ($(el) s)"
left 420 && PYTHONPATH=/tmp/site timeout 150 python3 $R/bench/bench_sparse_mla_decode.py --json $OUT/bench_decode.json 2>&1 | tee $OUT/bench_decode.log
echo "end ($(el) s)"
