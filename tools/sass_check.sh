#!/usr/bin/env bash
# Compile-checks one sm_90a translation unit on the CPU machine and reports what ptxas and the SASS
# say about its wgmma pipeline: registers, spills, ptxas's "wgmma serialized" warnings (C75xx) and
# the HGMMA vs WARPGROUP.DEPBAR counts (a DEPBAR after every HGMMA = serialized; bench/NOTES.md,
# "Decode v4"), and a hash of the instruction stream (the default-identity check of
# docs/DECISIONS.md).
#   bash tools/sass_check.sh csrc/cuda/sm90/sparse_mla_decode_sm90_v4.cu [extra nvcc flags]
# Needs nvcc and the nvidia-cutlass wheel (CuTe headers); cuobjdump comes from the CUDA toolkit or
# the triton wheel (triton/backends/nvidia/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
src=$1; shift
py=${PYTHON:-python3}
cute=$($py -c 'import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')
obj=$(mktemp --suffix=.o)
nvcc -std=c++17 -O3 -Xcompiler -fPIC --expt-relaxed-constexpr -Icsrc/include -Icsrc/cuda -DNDEBUG -DSINKOPS_SM90=1 \
  -I"$cute" -gencode arch=compute_90a,code=sm_90a -Xptxas -v "$@" -c "$src" -o "$obj" 2>&1 \
  | grep -E 'C75[0-9][0-9]|registers|spill' | cut -c1-200 || true
dump=$(command -v cuobjdump || $py -c 'import triton, os; print(os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/cuobjdump"))')
sass=$("$dump" -sass "$obj" 2>/dev/null)
echo "HGMMA $(grep -c HGMMA <<<"$sass" || true), WARPGROUP.DEPBAR $(grep -c 'WARPGROUP.DEPBAR' <<<"$sass" || true), USETMAXREG: $(grep -o 'USETMAXREG[^;]*' <<<"$sass" | tr '\n' ' ')"
# The instruction stream without addresses (every address width: a kernel past 64 KB of code has
# 5-digit ones), to show a knob's default build is byte-identical to the last tested one.
ins=$(grep -E '^\s+/\*[0-9a-f]{4,}\*/' <<<"$sass" | sed 's|/\*[0-9a-f]*\*/||g')
echo "SASS instructions $(wc -l <<<"$ins"), md5 $(md5sum <<<"$ins" | cut -c1-12)"
rm -f "$obj"
