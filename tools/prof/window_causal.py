"""Causal attention (window (-1, 0)) at d 64 and d 128, every sink mode: CUDA (the sm90 wide kernel) vs
Triton, graph replay µs (auto's choice, bench/NOTES.md "Window v9"), on the device:
    python3 tools/prof/window_causal.py <repository root>"""
import os, sys
import torch
sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
from bench_kernels import graph_us
from bench_window_attention import make_inputs, ours
for name, nseg, seqlen, hq, hk, d in [("16x1024 causal d64", 16, 1024, 32, 8, 64), ("1x4096 causal d128", 1, 4096, 32, 8, 128)]:
    torch.manual_seed(0)
    q, k, v, cu, sinks = make_inputs(nseg, seqlen, hq, hk, d)
    row = []
    for mode in ("key0", "null", "none"):
        for b in ("cuda", "triton"):
            row.append(f"{b} {mode} {graph_us(ours(b, q, k, v, cu, seqlen, (-1, 0), sinks[mode], mode)):.1f}")
    print(name + ": " + " | ".join(row), flush=True)
