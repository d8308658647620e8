"""Three sparse_mla_prefill calls on one of issue 10's shapes, for a profiler (ncu / nsys); with
`flashmla` as the last argument, FlashMLA's on the same inputs instead (the peer, same run):
    ncu -k regex:sparse_mla_prefill python3 tools/prof/one_prefill.py [s_q] [h_q] [d_qk] [topk] [flashmla]"""
import sys

import torch

import sinkops

sq, hq, dqk, topk = (int(x) for x in (sys.argv[1:5] if len(sys.argv) > 4 else (2048, 128, 512, 1152)))
peer = sys.argv[-1] == "flashmla"
skv = 32768
q = torch.randn(sq, hq, dqk, device="cuda", dtype=torch.bfloat16)
kv = torch.randn(skv, 1, dqk, device="cuda", dtype=torch.bfloat16)
idx = torch.randint(0, skv, (sq, 1, topk), device="cuda", dtype=torch.int32)
sink = torch.randn(hq, device="cuda")
for _ in range(3):
    if peer:
        import flash_mla

        flash_mla.flash_mla_sparse_fwd(q, kv, idx, dqk ** -0.5, 512, sink)
    else:
        sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, 512, sink, backend="cuda")
torch.cuda.synchronize()
