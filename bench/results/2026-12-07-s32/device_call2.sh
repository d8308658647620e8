#!/usr/bin/env bash
# Session 32's second call (~7 min): the sparse backward's dkv v2 (a rolled chunk loop, ~900 SASS
# instructions against ~9900; .whl/var_dkv2 = this tree's csrc) against the wheel's dkv v1, its GPU
# tests, memcheck and racecheck, bench_backward --only prefill on it (Triton in the same run); then
# the Triton window kernel with the key0 bias in every block (this tree) against v0 (the +inf
# epilogue only where a sink is +inf), and the key0 tests. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh wheel dkv2
K=$R/bench/results/2026-12-06-triton-key0-prepared
rm -rf /tmp/site_v0 && cp -r /tmp/site /tmp/site_v0 && patch -s -p1 -d /tmp/site_v0 < $K/key0_v0_only_when_inf.patch || exit 1
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
for v in dkv2 wheel; do
  PYTHONPATH=/tmp/site_$v timeout 50 python3 $R/tools/prof/sparse_bwd_variants.py $v 2>&1 | tail -1
done | tee $OUT/ab_dkv.log
PYTHONPATH=/tmp/site_dkv2 timeout 100 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_backward.py \
  -k "cuda and (sparse or chunks or deterministic or writes_every)" > $OUT/tests_dkv2.log 2>&1
echo "tests dkv2: $(tail -1 $OUT/tests_dkv2.log) ($(el) s)"; grep -E "^(FAILED|ERROR)" $OUT/tests_dkv2.log | head
PYTHONPATH=/tmp/site_dkv2 timeout 60 compute-sanitizer --tool memcheck python3 $R/tools/sanitize_cases.py cuda sparse_backward \
  > $OUT/memcheck_dkv2.log 2>&1
echo "memcheck dkv2: $(grep -E 'ERROR SUMMARY' $OUT/memcheck_dkv2.log) ($(el) s)"
PYTHONPATH=/tmp/site_dkv2 timeout 60 compute-sanitizer --tool racecheck python3 $R/tools/sanitize_cases.py cuda sparse_backward \
  > $OUT/racecheck_dkv2.log 2>&1
echo "racecheck dkv2: $(grep -E 'RACECHECK SUMMARY' $OUT/racecheck_dkv2.log) ($(el) s)"; grep -E "dkv" $OUT/racecheck_dkv2.log | head -3
W="$R/tools/prof/window_variants.py"
left 300 && for v in "" _v0; do
  PYTHONPATH=/tmp/site$v timeout 60 python3 $W "inloop$v" --backend triton --modes key0,null,none "mimo-video 16" 2x2048 "1024 d128" 2>&1 | tail -1
done | tee $OUT/ab_triton_key0.log
left 330 && { PYTHONPATH=/tmp/site timeout 40 python3 -m pytest -q -p no:cacheprovider -m gpu $R/tests/test_window_attention.py -k "triton and (key0 or posinf or neginf)" > $OUT/tests_key0.log 2>&1
  echo "key0 tests (tree): $(tail -1 $OUT/tests_key0.log) ($(el) s)"; }
left 380 && { PYTHONPATH=/tmp/site_dkv2 timeout 150 python3 $R/bench/bench_backward.py --only prefill --profile \
  > $OUT/bench_sparse_bwd.log 2>&1; grep -E "^\|" $OUT/bench_sparse_bwd.log; echo "bench ($(el) s)"; }
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
