#!/usr/bin/env bash
# A device call (~4 min) for issue 11's Triton sink cost, graph replay, two passes: the Triton window
# kernel's key0 bias in the peeled block (default) against the bias in every block
# (SINKOPS_TRITON_KEY0_IN_LOOP=1), each also with the epilogue's v_0 load and select only in tiles
# holding a +inf sink (`v0`: key0_v0_only_when_inf.patch over the tree's Python), with the no-sink
# and null rows for the overhead; then the in-loop knob's GPU test and the +inf sink tests on `v0`.
# Inputs: .whl/sinkops-*.whl (any wheel of this tree's csrc; the tree's Python is copied over it).
set -uo pipefail
source tools/prof/device_sites.sh
HERE=$R/bench/results/2026-12-06-triton-key0-prepared
rm -rf /tmp/site_v0 && cp -r /tmp/site /tmp/site_v0 && patch -s -p1 -d /tmp/site_v0 < $HERE/key0_v0_only_when_inf.patch || exit 1
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
W="$R/tools/prof/window_variants.py"
C="mimo 2x2048 w128 1024 d128"
for rep in 1 2; do
  PYTHONPATH=/tmp/site timeout 120 python3 $W peel --backend triton --modes key0,null,none $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site SINKOPS_TRITON_KEY0_IN_LOOP=1 timeout 120 python3 $W in_loop --backend triton --modes key0 $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site_v0 timeout 120 python3 $W peel_v0 --backend triton --modes key0 $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site_v0 SINKOPS_TRITON_KEY0_IN_LOOP=1 timeout 120 python3 $W in_loop_v0 --backend triton --modes key0 $C 2>&1 | tail -1
done | tee $OUT/ab_triton_key0.log
echo "ab done ($(el) s)"
PYTHONPATH=/tmp/site_v0 timeout 150 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "triton and (key0 or posinf or neginf or matches_oracle)" > $OUT/tests_key0.log 2>&1
tail -1 $OUT/tests_key0.log
echo "end ($(el) s)"
