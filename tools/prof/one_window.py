"""One window_attention call per backend on a MiMo shape, for a profiler (ncu / nsys):
    ncu -k regex:window python3 tools/prof/one_window.py [segments] [d] [window] [cuda|triton] [key0|null|none]"""
import sys

import torch

import sinkops

nseg = int(sys.argv[1]) if len(sys.argv) > 1 else 16
d = int(sys.argv[2]) if len(sys.argv) > 2 else 64
w = int(sys.argv[3]) if len(sys.argv) > 3 else 64
backend = sys.argv[4] if len(sys.argv) > 4 else "cuda"
mode = sys.argv[5] if len(sys.argv) > 5 else "key0"
t = nseg * 1024
q = torch.randn(t, 32, d, device="cuda", dtype=torch.bfloat16)
k = torch.randn(t, 8, d, device="cuda", dtype=torch.bfloat16)
v = torch.randn(t, 8, d, device="cuda", dtype=torch.bfloat16)
cu = torch.arange(0, t + 1, 1024, device="cuda", dtype=torch.int32)
s = None if mode == "none" else torch.rand(32, device="cuda")
for _ in range(3):
    sinkops.window_attention(q, k, v, cu, None, 1024, window_size=(w, w), sinks=s, sink_mode="key0" if mode == "none" else mode, backend=backend)
torch.cuda.synchronize()
