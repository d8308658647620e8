#!/usr/bin/env bash
# One device call (~8 min) running the two calls prepared on 2026-12-06: the decode combine v2b
# A/B (device_call_comb2.sh) and the Triton key0 peel vs in-loop A/B (device_call.sh there).
# Carry [".whl"] with the wheel and .whl/var_comb2.
cd "$(dirname "$0")/../../.."
bash bench/results/2026-12-06-decode-combine/device_call_comb2.sh
echo "=== triton key0"
bash bench/results/2026-12-06-triton-key0-prepared/device_call.sh
