"""Three sparse_mla_prefill calls on one of issue 10's shapes, for a profiler (ncu / nsys); with
`flashmla` as the last argument, FlashMLA's on the same inputs instead (the peer, same run):
    ncu -k regex:sparse_mla_prefill python3 tools/prof/one_prefill.py [s_q] [h_q] [d_qk] [topk] [flashmla]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_sparse_mla_prefill import make_case  # noqa: E402

import sinkops  # noqa: E402

sq, hq, dqk, topk = (int(x) for x in (sys.argv[1:5] if len(sys.argv) > 4 else (2048, 128, 512, 1152)))
peer = sys.argv[-1] == "flashmla"
q, kv, idx, sink = make_case(hq, dqk, topk, sq, 32768, "cuda")
for _ in range(3):
    if peer:
        import flash_mla

        flash_mla.flash_mla_sparse_fwd(q, kv, idx, dqk ** -0.5, 512, sink)
    else:
        sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, 512, sink, backend="cuda")
torch.cuda.synchronize()
