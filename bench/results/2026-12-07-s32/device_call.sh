#!/usr/bin/env bash
# Session 32's first call (~7 min): the sparse backward's dkv knobs, then the Triton window half.
# Carry [".whl"].
bash bench/results/2026-12-07-sparse-bwd/device_call_dkv.sh
mkdir -p $OUT/dkv && mv $OUT/*.log $OUT/gpu.txt $OUT/dkv/ 2>/dev/null
bash bench/results/2026-12-07-prepared/device_call_triton_short.sh
