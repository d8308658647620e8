#!/usr/bin/env bash
# Compile-checks the sm90 window backward (csrc/cuda/sm90/window_attention_bwd_sm90.cuh) at the
# head dims given (default 64 128) through tools/sass_check.sh: registers, spills, HGMMA count.
#   PYTHON=/work/venv/bin/python bash tools/prof/check_window_bwd_sm90.sh [64 80 96 128]
set -euo pipefail
cd "$(dirname "$0")/../.."
for d in "${@:-64 128}"; do
  for D in $d; do echo "== head dim $D"; bash tools/sass_check.sh "csrc/cuda/sm90/window_attention_bwd_sm90_hdim$D.cu"; done
done
