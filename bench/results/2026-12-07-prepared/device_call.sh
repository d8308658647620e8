#!/usr/bin/env bash
# One device call (~7-8 min; run with timeout_s 600) running both prepared halves in turn:
# device_call_decode_only.sh (decode combine v2b, `comb2` / `comb2dep` against the wheel, memcheck
# and the split rows' tests) and device_call_triton_short.sh (the Triton window variants: key0 peel,
# in-loop, `v0`; `t8` / `t8m` at d 80 / 128; the key0 / +inf tests on v0; the backward's `bwd8`).
# Carry [".whl"]: a wheel of this tree, built here for the device's Python (~6-9 min; leaves the
# objects that variant_so.sh links against in build/temp.*-312):
#   mkdir -p .whl && SINKOPS_CUDA_ARCHS=90a SINKOPS_SYCL=0 PYENV_VERSION=3.12.1 python3.12 -m pip wheel --no-deps -w .whl .
# and the two decode variants (seconds each):
#   D=bench/results/2026-12-06-decode-combine; for v in comb2:combine_batched_loads comb2dep:combine_batched_loads_dependent; do
#   PYTHON=/work/venv/bin/python bash tools/prof/variant_so.sh ${v%%:*} $D/${v#*:}.patch "sparse_mla_decode.cu"; done
HERE=bench/results/2026-12-07-prepared
bash $HERE/device_call_decode_only.sh
bash $HERE/device_call_triton_short.sh
