# TP8 row at several query groups (session 34)
source tools/prof/device_sites.sh; cd /tmp
PYTHONPATH=/tmp/site timeout 60 python3 $R/bench/results/2026-12-07-s34/fwd_sorted.py 2>&1 | tee $OUT/fwd_sorted.log
for g in 64 256 1024; do SINKOPS_BWD_DKV_QUERY_GROUP=$g PYTHONPATH=/tmp/site timeout 60 python3 - $g <<'PY' 2>&1 | tail -1; done | tee $OUT/tp8_groups.log
import sys, torch, triton.testing, sinkops
torch.manual_seed(0)
sq, skv, hq, dqk, topk = 4096, 32768, 8, 512, 640
q = torch.randn(sq, hq, dqk, device="cuda", dtype=torch.bfloat16); kv = torch.randn(skv, 1, dqk, device="cuda", dtype=torch.bfloat16)
idx = torch.randint(0, skv, (sq, 1, topk), device="cuda", dtype=torch.int32); sink = torch.rand(hq, device="cuda")
g = torch.randn(sq, hq, 512, device="cuda", dtype=torch.bfloat16)
out, _, lse = sinkops.sparse_mla_prefill(q, kv, idx, 0.04, attn_sink=sink)
r = []
for b in ("cuda", "triton"):
    f = lambda: torch.ops.sinkops.sparse_mla_prefill_backward(g, None, q, kv, idx, out, lse, 0.04, 512, sink, None, False, b)
    r.append(f"{b} {triton.testing.do_bench(f, warmup=5, rep=30, return_mode='median') * 1e3:.0f} µs")
print(f"TP8 h8 g{sys.argv[1]}: " + ", ".join(r))
PY
