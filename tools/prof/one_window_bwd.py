"""One CUDA window backward on MiMo image (or video with `video`), for ncu / compute-sanitizer."""
import sys

import torch

import sinkops

nseg, seqlen = (16, 1024) if "video" in sys.argv else (1, 4096)
hq, hk, d, window = 32, 8, 64, (64, 64)
t = nseg * seqlen
q, k, v = (torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16) for h in (hq, hk, hk))
cu = torch.arange(0, t + 1, seqlen, device="cuda", dtype=torch.int32)
s = torch.rand(hq, device="cuda")
out, lse = sinkops.window_attention(q, k, v, cu, cu, seqlen, seqlen, window_size=window, sinks=s, return_lse=True)
g = torch.randn_like(out)
for _ in range(2):
    torch.ops.sinkops.window_attention_backward(g, None, q, k, v, out, lse, cu, cu, seqlen, seqlen, window[0],
                                                window[1], d ** -0.5, s, "key0", False, "cuda")
torch.cuda.synchronize()
