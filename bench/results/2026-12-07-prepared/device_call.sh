#!/usr/bin/env bash
# One device call (<= ~7 min, steps guarded by the step timer; run with timeout_s 480) running the A/Bs prepared on
# 2026-12-06/07: decode combine v2b (`comb2`, `comb2dep`) against the wheel, two passes; the Triton
# window variants (key0 peel, in-loop, `v0`; `t8` in every sink mode at d 80 / 128), two passes;
# then, as time allows, the decode suite's split rows and memcheck on comb2, and the key0 / +inf GPU
# tests on v0. Carry [".whl"]: a wheel of this tree (README's device recipe) and the two variants,
#   D=bench/results/2026-12-06-decode-combine; for v in comb2:combine_batched_loads comb2dep:combine_batched_loads_dependent; do
#   PYTHON=/work/venv/bin/python bash tools/prof/variant_so.sh ${v%%:*} $D/${v#*:}.patch "sparse_mla_decode.cu"; done
# The longer per-topic calls: ../2026-12-06-*/device_call*.sh.
set -uo pipefail
source tools/prof/device_sites.sh wheel comb2 comb2dep
K=$R/bench/results/2026-12-06-triton-key0-prepared
rm -rf /tmp/site_v0 && cp -r /tmp/site /tmp/site_v0 && patch -s -p1 -d /tmp/site_v0 < $K/key0_v0_only_when_inf.patch || exit 1
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for rep in 1 2; do
  for v in wheel comb2 comb2dep; do
    PYTHONPATH=/tmp/site_$v timeout 60 python3 $R/tools/prof/decode_variants.py $v b16 b1 h8 h32 2>&1 | tail -1
  done
done | tee $OUT/ab_decode_comb2.log
echo "ab decode done ($(el) s)"
W="$R/tools/prof/window_variants.py"
rm -rf /tmp/site_t8 && cp -r /tmp/site /tmp/site_t8 && patch -s -p1 -d /tmp/site_t8 < $K/tile_d128_8warps.patch || exit 1
C="mimo 2x2048 w128 1024 d128"
for rep in 1 2; do
  left 260 || break
  PYTHONPATH=/tmp/site timeout 90 python3 $W peel --backend triton --modes key0,null,none $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site SINKOPS_TRITON_KEY0_IN_LOOP=1 timeout 60 python3 $W in_loop --backend triton --modes key0 $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site_v0 timeout 60 python3 $W peel_v0 --backend triton --modes key0 $C 2>&1 | tail -1
  PYTHONPATH=/tmp/site_t8 timeout 60 python3 $W t8 --backend triton --modes key0,null,none 2x2048 "1024 d128" 2>&1 | tail -1
done | tee $OUT/ab_triton_key0.log
echo "ab key0 done ($(el) s)"
left 300 && { PYTHONPATH=/tmp/site_comb2 timeout 50 python3 -m pytest -q -x -p no:cacheprovider -m gpu $R/tests/test_sparse_mla_decode.py -k "cuda and not emu and (matches_oracle or topk_length or invalid or sink_edges or few_heads)" > $OUT/tests_decode_comb2.log 2>&1
echo "decode tests comb2: $(tail -1 $OUT/tests_decode_comb2.log) ($(el) s)"; }
left 340 && { PYTHONPATH=/tmp/site_comb2 timeout 40 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda decode > $OUT/memcheck_decode_comb2.log 2>&1
echo "memcheck comb2: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_decode_comb2.log) ($(el) s)"; gzip -f $OUT/memcheck_decode_comb2.log; }
left 370 && { PYTHONPATH=/tmp/site_v0 timeout 40 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "triton and (key0 or posinf or neginf)" > $OUT/tests_key0.log 2>&1
echo "key0 tests v0: $(tail -1 $OUT/tests_key0.log) ($(el) s)"; }
echo "end ($(el) s)"
