"""Session 34: the deterministic sparse backward (V4-Pro, both backends), op do_bench median; run
once with SINKOPS_BWD_SORT_INDICES=1 and once with 0."""
import os
import torch, triton.testing, sinkops
torch.manual_seed(0)
sq, skv, hq, dqk, topk = 4096, 32768, 128, 512, 1152
q = torch.randn(sq, hq, dqk, device="cuda", dtype=torch.bfloat16); kv = torch.randn(skv, 1, dqk, device="cuda", dtype=torch.bfloat16)
idx = torch.randint(0, skv, (sq, 1, topk), device="cuda", dtype=torch.int32); sink = torch.rand(hq, device="cuda")
g = torch.randn(sq, hq, 512, device="cuda", dtype=torch.bfloat16)
out, _, lse = sinkops.sparse_mla_prefill(q, kv, idx, 0.04, attn_sink=sink)
r = []
for b in ("cuda", "triton"):
    f = lambda: torch.ops.sinkops.sparse_mla_prefill_backward(g, None, q, kv, idx, out, lse, 0.04, 512, sink, None, True, b)
    r.append(f"{b} {triton.testing.do_bench(f, warmup=3, rep=20, return_mode='median') * 1e3:.0f} µs")
print(f"deterministic V4-Pro, sort {os.environ.get('SINKOPS_BWD_SORT_INDICES', '1')}: " + ", ".join(r), flush=True)
