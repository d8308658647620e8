"""Three sparse_mla_decode calls on one of issue 10's shapes, for a profiler (ncu / nsys):
    ncu -k regex:sparse_mla_decode python3 tools/prof/one_decode.py [b] [s_q] [h_q] [topk] [v4|v32]"""
import sys

import torch

import sinkops

b, sq, hq, topk = (int(x) for x in (sys.argv[1:5] if len(sys.argv) > 4 else (128, 1, 64, 640)))
layout = sys.argv[5] if len(sys.argv) > 5 else "v4"
dqk = 512 if layout == "v4" else 576
cache = sinkops.pack_kv_cache((torch.randn(65536, dqk, device="cuda") * 0.5).to(torch.bfloat16), layout, 64)
q = torch.randn(b, sq, hq, dqk, device="cuda", dtype=torch.bfloat16)
idx = torch.randint(0, 65536, (b, sq, topk), device="cuda", dtype=torch.int32)
sink = torch.randn(hq, device="cuda")
for _ in range(3):
    sinkops.sparse_mla_decode(q, cache, idx, dqk ** -0.5, sink, layout=layout, backend="cuda")
torch.cuda.synchronize()
