#!/usr/bin/env bash
# Session 34, call 3 (~5 min): scalar reductions in the CUDA dkv kernel (`scal`, -DSINKOPS_SBWD_SCALAR_RED)
# against the wheel, both at the 16 MiB query-group rule; the backward GPU tests on the final Python;
# the deterministic mode with and without the sort; the prefill backward table. Carry [".whl"] (the wheel + .whl/var_scal).
set -uo pipefail
source tools/prof/device_sites.sh wheel scal
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/sparse_bwd_variants.py
for v in scal wheel; do
  left 120 && PYTHONPATH=/tmp/site_$v timeout 70 python3 $V cuda-$v --backend cuda 2>&1 | tail -1
done | tee $OUT/ab_scal.log
for s in 1 0; do SINKOPS_BWD_SORT_INDICES=$s PYTHONPATH=/tmp/site timeout 60 python3 $R/bench/results/2026-12-07-s34/det_sort.py 2>&1 | tail -1; done | tee $OUT/det_sort.log
PYTHONPATH=/tmp/site timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "sparse or chunks or deterministic or writes_every or sorted" > $OUT/tests_backward.log 2>&1
echo "tests: $(tail -1 $OUT/tests_backward.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_backward.log | head -8
left 260 && PYTHONPATH=/tmp/site timeout 150 python3 $R/bench/bench_backward.py --only prefill --profile > $OUT/bench_backward_prefill.log 2>&1
grep -E "^\| (V|prefill)" $OUT/bench_backward_prefill.log; echo "end ($(el) s)"
