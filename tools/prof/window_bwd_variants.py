"""Timer for tools/prof/ab_variants.sh: the CUDA window backward op on MiMo video and image (µs, do_bench
medians) and the time of its two kernels on video (torch.profiler), one line per variant; --fwd adds
the forward op's time on the same inputs (the backward / forward ratio of issue 12); --triton times
the Triton backward instead, on MiMo video and full attention 1x4096 32/8 d 128 (the case `auto`
gives Triton on Hopper).
--more adds MiMo video at 64 x 1024.
    python3 tools/prof/window_bwd_variants.py LABEL [--fwd] [--triton] [--more]"""
import sys

import torch
import triton.testing
from torch.profiler import ProfilerActivity, profile

import sinkops

name = sys.argv[1] if len(sys.argv) > 1 else "?"
FORWARD = "--fwd" in sys.argv
BACKEND = "triton" if "--triton" in sys.argv else "cuda"
# label, segments, tokens per segment, head dim, window; 32/8 heads
CASES = [("video", 16, 1024, 64, (64, 64)), ("image", 1, 4096, 64, (64, 64))]
if "--more" in sys.argv:  # MiMo video at 64 x 1024
    CASES.append(("video64", 64, 1024, 64, (64, 64)))
if BACKEND == "triton":
    CASES = [CASES[0], ("full-d128", 1, 4096, 128, (-1, -1))]
res = []
for label, nseg, seqlen, d, (left, right) in CASES:
    hq, hk = 32, 8
    t = nseg * seqlen
    q, k, v = (torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16) for h in (hq, hk, hk))
    cu = torch.arange(0, t + 1, seqlen, device="cuda", dtype=torch.int32)
    s = torch.rand(hq, device="cuda")
    out, lse = sinkops.window_attention(q, k, v, cu, cu, seqlen, seqlen, window_size=(left, right), sinks=s,
                                        return_lse=True)
    g = torch.randn_like(out)
    fn = lambda: torch.ops.sinkops.window_attention_backward(  # noqa: E731
        g, None, q, k, v, out, lse, cu, cu, seqlen, seqlen, left, right, d ** -0.5, s, "key0", False, BACKEND)
    res.append(f"{label} {triton.testing.do_bench(fn, warmup=10, rep=60, return_mode='median') * 1e3:.1f}")
    if FORWARD:  # the forward op on the same inputs, for the backward / forward ratio
        fwd = lambda: sinkops.window_attention(q, k, v, cu, cu, seqlen, seqlen, window_size=(left, right),  # noqa: E731
                                               sinks=s, return_lse=True)
        res.append(f"fwd {triton.testing.do_bench(fwd, warmup=10, rep=60, return_mode='median') * 1e3:.1f}")
    if label == "video":
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
        for ev in prof.key_averages():
            for kernel in ("dq", "dkdv", "fused"):  # fused: the tried v9 (bench/results/2026-12-07-s36)
                if f"bwd_{kernel}" in ev.key:
                    res.append(f"{kernel} {ev.device_time_total / 10:.1f}")
print(f"{name}: " + ", ".join(res) + " µs")
