#!/usr/bin/env bash
# A short device call (~4 min) for the Triton window kernels, graph replay, one pass (a second as time
# allows): key0 peel / in-loop / v0 (key0_v0_only_when_inf.patch) on MiMo video, 2x2048 d 80 and
# 16x1024 d 128; `t8` (tile_d128_8warps.patch: 8 warps, 32-key blocks at d 80-128, where the default
# tile spills 160-240 B) in every sink mode and `t8m` (the same at 128 rows, also spill-free); then
# the key0 / +inf GPU tests on v0; the Triton backward at d 128 with `bwd8` (bwd_d128_8warps.patch:
# 8 warps, 32-key tiles, spill-free dk/dv) against the tree's tiles. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh
K=$R/bench/results/2026-12-06-triton-key0-prepared
for v in v0 t8 t8m bwd8; do rm -rf /tmp/site_$v && cp -r /tmp/site /tmp/site_$v; done
patch -s -p1 -d /tmp/site_v0 < $K/key0_v0_only_when_inf.patch && patch -s -p1 -d /tmp/site_t8 < $K/tile_d128_8warps.patch &&
  patch -s -p1 -d /tmp/site_t8m < $K/tile_d128_8warps_m128.patch &&
  patch -s -p1 -d /tmp/site_bwd8 < $K/bwd_d128_8warps.patch || exit 1
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
W="$R/tools/prof/window_variants.py"
for rep in 1 2; do
  left 120 || break
  PYTHONPATH=/tmp/site timeout 60 python3 $W peel --backend triton --modes key0,null,none "mimo-video 16" 2x2048 "1024 d128" 2>&1 | tail -1
  PYTHONPATH=/tmp/site_t8 timeout 50 python3 $W t8 --backend triton --modes key0,null,none 2x2048 "1024 d128" 2>&1 | tail -1
  PYTHONPATH=/tmp/site_t8m timeout 50 python3 $W t8m --backend triton --modes key0,none 2x2048 "1024 d128" 2>&1 | tail -1
  PYTHONPATH=/tmp/site SINKOPS_TRITON_KEY0_IN_LOOP=1 timeout 40 python3 $W in_loop --backend triton "mimo-video 16" 2x2048 "1024 d128" 2>&1 | tail -1
  PYTHONPATH=/tmp/site_v0 timeout 40 python3 $W peel_v0 --backend triton "mimo-video 16" 2x2048 "1024 d128" 2>&1 | tail -1
done | tee $OUT/ab_triton_short.log
left 160 && { PYTHONPATH=/tmp/site_v0 timeout 40 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "triton and (key0 or posinf or neginf)" > $OUT/tests_key0.log 2>&1
echo "key0 tests v0: $(tail -1 $OUT/tests_key0.log) ($(el) s)"; }
left 200 && { PYTHONPATH=/tmp/site timeout 60 python3 $R/tools/prof/window_bwd_variants.py tree --triton 2>&1 | tail -1
  PYTHONPATH=/tmp/site_bwd8 timeout 60 python3 $R/tools/prof/window_bwd_variants.py bwd8 --triton 2>&1 | tail -1; } | tee $OUT/ab_triton_bwd.log
left 260 && { PYTHONPATH=/tmp/site_bwd8 timeout 60 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py -k "triton and window" > $OUT/tests_bwd8.log 2>&1
echo "backward tests bwd8: $(tail -1 $OUT/tests_bwd8.log) ($(el) s)"; }
echo "end ($(el) s)"
