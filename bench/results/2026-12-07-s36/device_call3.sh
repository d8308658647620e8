#!/usr/bin/env bash
# Session 36, call 3 (short: the budget's last ~150 s): the window backward's key0 kernels without
# the row factor r (1 wherever Q is not 0 under key0; `rdrop`) against HEAD's (`head`), both built
# with tools/prof/variant_so.sh over the session's build; the cuda window backward tests on rdrop.
# Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh head rdrop
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/window_bwd_variants.py
for v in head rdrop; do PYTHONPATH=/tmp/site_$v timeout 40 python3 $V $v 2>&1 | tail -1; done | tee $OUT/ab_rdrop.log
PYTHONPATH=/tmp/site_rdrop timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "window and cuda" > $OUT/tests_rdrop.log 2>&1
echo "tests rdrop: $(tail -1 $OUT/tests_rdrop.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_rdrop.log | head -5
for v in rdrop head; do left 110 && PYTHONPATH=/tmp/site_$v timeout 40 python3 $V $v 2>&1 | tail -1; done | tee -a $OUT/ab_rdrop.log
echo "end ($(el) s)"
