#!/usr/bin/env bash
# Session 33, call 2 (~5 min; carry [".whl"]): the Triton sparse prefill's tile sweep at 8 and 16
# heads (tools/prof/triton_prefill_sweep.py), then bench/gather_ceiling.py again with the V4
# decode rows at their 576 contiguous bytes.
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
PYTHONPATH=/tmp/site timeout 330 python3 $R/tools/prof/triton_prefill_sweep.py "h8 k640" "h16 k1152" 2>&1 | tee $OUT/triton_prefill_sweep.log
echo "sweep done ($(el) s)"
left 420 && PYTHONPATH=/tmp/site timeout 150 python3 $R/bench/gather_ceiling.py --json $OUT/gather_ceiling.json 2>&1 | tee $OUT/gather_ceiling.log
echo "end ($(el) s)"
