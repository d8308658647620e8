#!/usr/bin/env bash
# Session 32's H200 check (~1 min; it ran on an H100: results in h100-2026-12-07-s32-call6): the CUDA sparse backward with dkv v2 (.whl/var_dkv2 = this
# tree's csrc) against Triton's, op and kernels, V4-Pro and V4-Flash. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh dkv2
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
{ PYTHONPATH=/tmp/site_dkv2 timeout 50 python3 $R/tools/prof/sparse_bwd_variants.py cuda 2>&1 | tail -1
  PYTHONPATH=/tmp/site_dkv2 timeout 60 python3 $R/tools/prof/sparse_bwd_variants.py triton --backend triton 2>&1 | tail -1; } | tee $OUT/ab_h200.log
echo "end ($(el) s)"
