"""Graph-replay µs of the sm_90a window kernel (key0) on the bench's cases, for A/B runs of kernel
variants (tools/prof/variant_so.sh, tools/prof/ab_variants.sh; bench/NOTES.md): run once per
variant with PYTHONPATH pointing at that build, then compare the printed rows.
    python3 tools/prof/window_variants.py LABEL [case substrings ...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_window_attention import CASES, make_inputs, ours  # noqa: E402

label, wanted = sys.argv[1], sys.argv[2:]
row = []
for name, nseg, seqlen, hq, hk, d, window, _ in CASES:
    if wanted and not any(w in name for w in wanted):
        continue
    torch.manual_seed(0)
    q, k, v, cu, sinks = make_inputs(nseg, seqlen, hq, hk, d)
    f = ours("cuda", q, k, v, cu, seqlen, window, sinks["key0"], "key0")
    err = (f().float() - ours("triton", q, k, v, cu, seqlen, window, sinks["key0"], "key0")().float()).abs().max()
    row.append(f"{name}: {graph_us(f):.1f}" + ("" if err < 2e-2 else f" (ERR {err:.1e})"))
print(f"{label:10s} " + " | ".join(row), flush=True)
