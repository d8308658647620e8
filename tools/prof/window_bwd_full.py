"""CUDA vs Triton window backward on full and causal windows at 1 x 4096 tokens, 32/8 heads, key0
sinks (do_bench medians, twice each): the measurement behind `CudaBackend.prefers` for the
backward (bench/NOTES.md "Window backward v5").

    python3 tools/prof/window_bwd_full.py
"""
import torch
import triton.testing

import sinkops

res = []
for label, (left, right), d in (("full d128", (-1, -1), 128), ("causal d128", (-1, 0), 128),
                                ("full d64", (-1, -1), 64)):
    hq, hk, t = 32, 8, 4096
    q, k, v = (torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16) for h in (hq, hk, hk))
    cu = torch.tensor([0, t], device="cuda", dtype=torch.int32)
    s = torch.rand(hq, device="cuda")
    out, lse = sinkops.window_attention(q, k, v, cu, cu, t, t, window_size=(left, right), sinks=s, return_lse=True)
    g = torch.randn_like(out)
    for rep in range(2):
        for backend in ("cuda", "triton"):
            def fn():
                torch.ops.sinkops.window_attention_backward(g, None, q, k, v, out, lse, cu, cu, t, t, left, right,
                                                            d ** -0.5, s, "key0", False, backend)
            us = triton.testing.do_bench(fn, warmup=5, rep=100, return_mode="median") * 1e3
            res.append(f"{label} {backend} rep{rep}: {us:.1f} us")
print("\n".join(res))
