"""Graph-replay µs of the sm_90a window kernel (key0) on the bench's cases, for A/B runs of kernel
variants built side by side (tuning aid, bench/NOTES.md): run once per variant with PYTHONPATH
pointing at that build, then compare the printed rows.
    python3 tools/prof/window_variants.py LABEL [case substrings ...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_window_attention import CASES  # noqa: E402

import sinkops  # noqa: E402

label, wanted = sys.argv[1], sys.argv[2:]
row = []
for name, nseg, seqlen, hq, hk, d, window, _ in CASES:
    if wanted and not any(w in name for w in wanted):
        continue
    t = nseg * seqlen
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(t, h, d, device="cuda", dtype=torch.bfloat16, generator=g) for h in (hq, hk, hk))
    cu = torch.arange(0, t + 1, seqlen, device="cuda", dtype=torch.int32)
    s = torch.rand(hq, device="cuda", generator=g)
    f = lambda: sinkops.window_attention(q, k, v, cu, None, seqlen, window_size=window, sinks=s, sink_mode="key0",
                                         backend="cuda")
    out = f()
    ref = sinkops.window_attention(q, k, v, cu, None, seqlen, window_size=window, sinks=s, sink_mode="key0",
                                   backend="triton")
    err = (out.float() - ref.float()).abs().max().item()
    row.append(f"{name}: {graph_us(f):.1f}" + ("" if err < 2e-2 else f" (ERR {err:.1e})"))
print(f"{label:10s} " + " | ".join(row), flush=True)
