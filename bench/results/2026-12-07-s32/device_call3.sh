#!/usr/bin/env bash
# Session 32's third call (~4 min): dkv v2 (this tree, .whl/var_dkv2) against v2 with scalar
# reductions (var_scal2) and Triton's backward, by kernel; ncu's view of both dkv kernels (warp
# stalls, occupancy, memory); the Triton key0 tests on this tree (bias in every block + the v0
# epilogue). Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh dkv2 scal2
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for v in dkv2 scal2 dkv2 scal2; do
  PYTHONPATH=/tmp/site_$v timeout 50 python3 $R/tools/prof/sparse_bwd_variants.py $v 2>&1 | tail -1
done | tee $OUT/ab_dkv.log
PYTHONPATH=/tmp/site_dkv2 timeout 60 python3 $R/tools/prof/sparse_bwd_variants.py triton --backend triton 2>&1 | tail -1 | tee -a $OUT/ab_dkv.log
PYTHONPATH=/tmp/site_dkv2 timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "triton and (key0 or posinf or neginf)" > $OUT/tests_key0.log 2>&1
echo "key0 tests (tree): $(tail -1 $OUT/tests_key0.log) ($(el) s)"
left 300 && { PYTHONPATH=/tmp/site_dkv2 timeout 120 ncu -k regex:dkv -c 2 --section SpeedOfLight --section Occupancy \
  --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats \
  python3 $R/tools/prof/one_sparse_bwd.py triton,cuda > $OUT/ncu_dkv.log 2>&1; echo "ncu ($(el) s)";
  grep -E "sparse_mla_bwd_dkv|Duration|Achieved Occupancy|Theoretical Occupancy|Block Limit|Warp Cycles Per Issued|Issue Slots Busy|L2 Hit|Memory Throughput|Registers Per|Shared Memory Config|Stall" $OUT/ncu_dkv.log | head -60; }
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
