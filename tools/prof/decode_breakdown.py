"""Where a split decode's time goes: per kernel (the main kernel's family, the combine) GPU µs from
torch.profiler, beside the graph replay of the whole call, on the decode bench's cases; the graph
time minus the kernels' is the launch gaps. Tells how much of a small-batch row is the combine.
    python3 tools/prof/decode_breakdown.py [case substrings ...]"""
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_sparse_mla_decode import CASES, make_case  # noqa: E402

import torch  # noqa: E402

import sinkops  # noqa: E402

wanted = sys.argv[1:]
print("| case | graph µs | kernels (avg µs per call) |\n|---|---|---|")
for name, layout, b, sq, hq, topk in CASES:
    if wanted and not any(w in name for w in wanted):
        continue
    q, cache, idx, sink, scale = make_case(layout, b, sq, hq, topk, "cuda")
    f = lambda: sinkops.sparse_mla_decode(q, cache, idx, scale, sink, layout=layout, backend="cuda")  # noqa: E731
    g = graph_us(f)
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    n = 50
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            f()
        torch.cuda.synchronize()
    per = defaultdict(float)
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            per[e.name[:60]] += e.time_range.elapsed_us()  # a kernel's own duration
    ks = "; ".join(f"{k}: {v / n:.1f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]))
    print(f"| {name} | {g:.1f} | {ks} |", flush=True)
