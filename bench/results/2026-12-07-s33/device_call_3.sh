#!/usr/bin/env bash
# Session 33, call 3 (~4 min; carry [".whl"]): the Triton sparse prefill with the gather one block
# ahead (PREFETCH, sinkops/triton/sparse_mla.py) swept beside the default tile at 8, 16 (d 512 and
# d 576) and 32 heads; then the Triton sparse prefill GPU tests with PREFETCH forced on every tile.
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=/tmp/site timeout 300 python3 $R/tools/prof/triton_prefill_sweep.py 2>&1 | tee $OUT/triton_prefill_sweep_pf.log
echo "sweep done ($(el) s)"
PYTHONPATH=/tmp/site:$R/tools/prof:$R/tests timeout 150 python3 -m pytest -q -x -p no:cacheprovider -p force_prefill_prefetch -m gpu $R/tests/test_sparse_mla_prefill.py -k "triton" > $OUT/tests_prefill_triton_pf.log 2>&1
echo "triton prefill tests, PREFETCH forced: $(tail -1 $OUT/tests_prefill_triton_pf.log) ($(el) s)"
echo "end ($(el) s)"
