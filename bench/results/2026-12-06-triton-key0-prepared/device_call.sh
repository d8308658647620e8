#!/usr/bin/env bash
# A device call (~3 min) for issue 11's Triton sink cost: the Triton window kernel's key0 bias in
# the peeled block (default) against the bias in every block (SINKOPS_TRITON_KEY0_IN_LOOP=1), with
# the no-sink and null rows for the overhead, three passes, graph replay; then the knob's test.
# Inputs: .whl/sinkops-*.whl (any wheel of this tree's csrc; the tree's Python is copied over it).
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
W="$R/tools/prof/window_variants.py"
C="mimo 2x2048 w128"
for rep in 1 2 3; do
  timeout 120 python3 $W peel --backend triton --modes key0,null,none $C 2>&1 | tail -1
  SINKOPS_TRITON_KEY0_IN_LOOP=1 timeout 120 python3 $W in_loop --backend triton --modes key0 $C 2>&1 | tail -1
done | tee $OUT/ab_triton_key0.log
timeout 120 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "key0_bias_in_every_block" > $OUT/tests_key0.log 2>&1
tail -1 $OUT/tests_key0.log
