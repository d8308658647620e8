#!/usr/bin/env bash
# Session 34, call 2 (~7 min; not run as a whole: its parts ran as calls 2 and 3, see bench/NOTES.md): the stage size (queries per chunk), the prefill backward table (both backends, the chosen defaults) and
# the forward with pre-sorted indices. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/sparse_bwd_variants.py
for cfg in "cuda 256" "cuda 1024" "cuda 64" "triton 1024"; do
  set -- $cfg
  left 150 && SINKOPS_BWD_STAGE_MB=$2 PYTHONPATH=/tmp/site timeout 70 python3 $V "$1-stage$2" --backend $1 2>&1 | tail -1
done | tee $OUT/ab_stage.log
left 330 && PYTHONPATH=/tmp/site timeout 200 python3 $R/bench/bench_backward.py --only prefill --profile \
  > $OUT/bench_backward_prefill.log 2>&1
echo "bench_backward ($(el) s)"; grep -vE "^#" $OUT/bench_backward_prefill.log | head -40
left 500 && PYTHONPATH=/tmp/site timeout 60 python3 $R/bench/results/2026-12-07-s34/fwd_sorted.py 2>&1 | tee $OUT/fwd_sorted.log
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
