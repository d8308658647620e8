"""Times the sm_90a window kernel per forced SINKOPS_WA90_STEPS (steps per CTA) on MiMo shapes
(tuning aid, bench/NOTES.md "Window attention, sm90"):  python3 tools/prof/window_steps.py"""
import os

import torch
import triton.testing

import sinkops

CASES = [("image 1x4096", 1, 4096, 32, 8, 64), ("video 16x1024", 16, 1024, 32, 8, 64),
         ("2x2048 d80 16/16", 2, 2048, 16, 16, 80), ("16x1024 d80", 16, 1024, 32, 8, 80),
         ("16x1024 d128", 16, 1024, 32, 8, 128)]
for name, nseg, L, hq, hk, d in CASES:
    t = nseg * L
    q = torch.randn(t, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(t, hk, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(t, hk, d, device="cuda", dtype=torch.bfloat16)
    cu = torch.arange(0, t + 1, L, device="cuda", dtype=torch.int32)
    s = torch.rand(hq, device="cuda")
    row = []
    for steps in ("", "1", "2", "4", "6", "11", "22", "43"):
        if steps:
            os.environ["SINKOPS_WA90_STEPS"] = steps
        else:
            os.environ.pop("SINKOPS_WA90_STEPS", None)
        f = lambda: sinkops.window_attention(q, k, v, cu, None, L, window_size=(64, 64), sinks=s, sink_mode="key0",
                                             backend="cuda")
        us = triton.testing.do_bench(f, warmup=20, rep=100, return_mode="median") * 1e3
        row.append(f"{steps or 'auto'}: {us:.1f}")
    os.environ.pop("SINKOPS_WA90_STEPS", None)
    print(f"{name:18s} " + "  ".join(row), flush=True)
