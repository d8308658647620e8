#!/usr/bin/env bash
# Compile-checks the DRAFT sm90 window backward (csrc/cuda/sm90/window_attention_bwd_sm90.cuh): one
# TU instantiating its kernels, through tools/sass_check.sh (registers, spills, HGMMA count).
#   PYTHON=/work/venv/bin/python bash tools/prof/check_window_bwd_sm90.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
tu=$(mktemp --suffix=.cu)  # outside csrc/: the build globs csrc/cuda/sm90/*.cu
trap 'rm -f "$tu"' EXIT
cat > "$tu" <<'CU'
#include "sm90/window_attention_bwd_sm90.cuh"
namespace sinkops::cuda::sm90 {
template __global__ void window_attention_bwd_dkdv_sm90_kernel<__nv_bfloat16, 64, true>(const __grid_constant__ WindowBwdDkdvArgs);
template __global__ void window_attention_bwd_dkdv_sm90_kernel<__nv_bfloat16, 64, false>(const __grid_constant__ WindowBwdDkdvArgs);
template __global__ void window_attention_bwd_dkdv_sm90_kernel<__nv_bfloat16, 128, true>(const __grid_constant__ WindowBwdDkdvArgs);
template __global__ void window_attention_bwd_dkdv_sm90_kernel<__half, 80, false>(const __grid_constant__ WindowBwdDkdvArgs);
template __global__ void window_attention_bwd_dq_sm90_kernel<__nv_bfloat16, 64, 1>(const __grid_constant__ WindowBwdDqArgs);
template __global__ void window_attention_bwd_dq_sm90_kernel<__nv_bfloat16, 64, 2>(const __grid_constant__ WindowBwdDqArgs);
template __global__ void window_attention_bwd_dq_sm90_kernel<__nv_bfloat16, 128, 1>(const __grid_constant__ WindowBwdDqArgs);
}
CU
bash tools/sass_check.sh "$tu"
