"""One sparse-prefill backward per backend on the V4-Pro shape (455 queries: one chunk of the
launcher, h 128, topk 1152), for ncu: `ncu -k regex:dkv python3 tools/prof/one_sparse_bwd.py
[triton,cuda]` profiles both dkv kernels on the same inputs (bench/NOTES.md "Sparse backward, sm90")."""
import sys

import torch

import sinkops

backends = sys.argv[1].split(",") if len(sys.argv) > 1 else ["triton", "cuda"]
sq, skv, hq, dqk, topk = 455, 32768, 128, 512, 1152
torch.manual_seed(0)
q = torch.randn(sq, hq, dqk, device="cuda", dtype=torch.bfloat16)
kv = torch.randn(skv, 1, dqk, device="cuda", dtype=torch.bfloat16)
idx = torch.randint(0, skv, (sq, 1, topk), device="cuda", dtype=torch.int32)
sink = torch.rand(hq, device="cuda")
g = torch.randn(sq, hq, 512, device="cuda", dtype=torch.bfloat16)
out, _, lse = sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, attn_sink=sink)
for backend in backends:
    torch.ops.sinkops.sparse_mla_prefill_backward(g, None, q, kv, idx, out, lse, dqk ** -0.5, 512, sink, None, False,
                                                  backend)
torch.cuda.synchronize()
