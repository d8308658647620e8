#!/usr/bin/env bash
# Session 37, call 2 (~4 min; carry [".whl"]; shortened to fit the ~570 s of device time left): the
# window backward's key0 loops without the row factor r (`rdrop`: .whl/var_rdrop,
# tools/prof/variant_so.sh with bench/results/2026-12-07-s36/prepared_key0_without_r.patch over this
# session's wheel) against the wheel (HEAD's window backward), with the forward beside them (issue
# 12's ratio); the CUDA window backward tests on rdrop; the sparse prefill backward on V4-Pro on this
# H200 (issue 12's 230 TFLOP/s, so far measured on H100s only); a second A/B pass while time allows.
set -uo pipefail
source tools/prof/device_sites.sh wheel rdrop
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/window_bwd_variants.py
for v in wheel rdrop; do PYTHONPATH=/tmp/site_$v timeout 50 python3 $V $v --fwd 2>&1 | tail -1; done | tee $OUT/ab_rdrop.log
echo "ab rdrop done ($(el) s)"
PYTHONPATH=/tmp/site_rdrop timeout 90 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "window and cuda" > $OUT/tests_rdrop.log 2>&1
echo "tests rdrop: $(tail -1 $OUT/tests_rdrop.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_rdrop.log | head -5
left 150 && PYTHONPATH=/tmp/site timeout $((230 - $(el))) python3 $R/bench/bench_backward.py --only prefill --quick --backends cuda --json $OUT/bench_backward_prefill.json > $OUT/bench_backward_prefill.md 2>&1
tail -8 $OUT/bench_backward_prefill.md
for v in rdrop wheel; do left 240 && PYTHONPATH=/tmp/site_$v timeout 40 python3 $V $v --fwd 2>&1 | tail -1; done | tee -a $OUT/ab_rdrop.log
echo "end ($(el) s)"
