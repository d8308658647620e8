#!/usr/bin/env bash
# A/B of the CUDA sparse backward's dkv kernel knobs (~2 min): the wheel (float2 atomicAdd),
# `scal` (-DSINKOPS_SBWD_SCALAR_RED=1: two scalar reductions per pair), `nopf` (scal and
# -DSINKOPS_SBWD_NO_PREFETCH=1), `ovl`
# (-DSINKOPS_SBWD_OVERLAP=1: a chunk's reductions beside the next chunk's products), `ovls` (ovl and scal),
# built with tools/prof/variant_so.sh from this tree. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh wheel scal nopf ovl ovls
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for v in scal wheel ovl ovls nopf; do
  left 230 && PYTHONPATH=/tmp/site_$v timeout 50 python3 $R/tools/prof/sparse_bwd_variants.py $v 2>&1 | tail -1
done | tee $OUT/ab_dkv.log
left 260 && { PYTHONPATH=/tmp/site_ovls timeout 50 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks)" > $OUT/tests_ovls.log 2>&1; echo "tests ovls: $(tail -1 $OUT/tests_ovls.log)"; }
echo "end ($(el) s)"
