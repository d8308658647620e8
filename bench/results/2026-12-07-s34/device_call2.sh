#!/usr/bin/env bash
# Session 34, call 2 (~7 min): the stage size (queries per chunk), the prefill backward table (both backends, the chosen defaults) and
# the forward with pre-sorted indices. Carry [".whl"].
set -uo pipefail
source tools/prof/device_sites.sh
cd /tmp
nvidia-smi --query-gpu=name --format=csv,noheader | tee $OUT/gpu.txt
V=$R/tools/prof/sparse_bwd_variants.py
for cfg in "cuda 256" "cuda 1024" "cuda 64" "triton 1024"; do
  set -- $cfg
  left 150 && SINKOPS_BWD_STAGE_MB=$2 PYTHONPATH=/tmp/site timeout 70 python3 $V "$1-stage$2" --backend $1 2>&1 | tail -1
done | tee $OUT/ab_stage.log
left 330 && PYTHONPATH=/tmp/site timeout 200 python3 $R/bench/bench_backward.py --only prefill --profile \
  > $OUT/bench_backward_prefill.log 2>&1
echo "bench_backward ($(el) s)"; grep -vE "^#" $OUT/bench_backward_prefill.log | head -40
left 500 && PYTHONPATH=/tmp/site timeout 60 python3 - <<'PY' 2>&1 | tee $OUT/fwd_sorted.log
import torch, triton.testing, sinkops
from sinkops.ops.prefill_backward import sorted_indices
torch.manual_seed(0)
for name, sq, skv, hq, dqk, topk in [("V4-Pro", 4096, 32768, 128, 512, 1152), ("V3.2", 2048, 32768, 128, 576, 2048),
                                     ("V4-Flash TP8", 4096, 32768, 8, 512, 640)]:
    q = torch.randn(sq, hq, dqk, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(skv, 1, dqk, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(0, skv, (sq, 1, topk), device="cuda", dtype=torch.int32)
    srt = sorted_indices(idx, None, skv)
    f = lambda i: sinkops.sparse_mla_prefill(q, kv, i, dqk ** -0.5)
    t = [triton.testing.do_bench(lambda: f(i), warmup=5, rep=40, return_mode="median") * 1e3 for i in (idx, srt, idx, srt)]
    ts = triton.testing.do_bench(lambda: sorted_indices(idx, None, skv), warmup=5, rep=40, return_mode="median") * 1e3
    print(f"fwd {name}: random {t[0]:.0f} / {t[2]:.0f} µs, sorted {t[1]:.0f} / {t[3]:.0f} µs; the sort alone {ts:.0f} µs", flush=True)
PY
gzip -f $OUT/*.log 2>/dev/null; echo "end ($(el) s)"
