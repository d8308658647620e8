"""Graph-replay µs of the sm_90a window kernels on the bench's cases (plus causal ones), for A/B
runs of kernel variants (tools/prof/variant_so.sh, tools/prof/ab_variants.sh; bench/NOTES.md): run
once per variant with PYTHONPATH pointing at that build, then compare the printed rows.
    python3 tools/prof/window_variants.py LABEL [--backend cuda|triton] [--modes key0,null,none] [case substrings ...]
(--backend triton times the Triton kernel, checked against the CUDA one.)"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_window_attention import CASES, make_inputs, ours  # noqa: E402

CAUSAL = [
    ("causal 16x1024 d64", 16, 1024, 32, 8, 64, (-1, 0), None),
    ("causal 1x4096 d128", 1, 4096, 32, 8, 128, (-1, 0), None),
]
args = sys.argv[1:]
label = args.pop(0)
backend, other = "cuda", "triton"
if args and args[0] == "--backend":
    backend, args = args[1], args[2:]
    other = "cuda" if backend == "triton" else "triton"
modes = ["key0"]
if args and args[0] == "--modes":
    modes = args[1].split(",")
    args = args[2:]
row = []
for name, nseg, seqlen, hq, hk, d, window, _ in CASES + CAUSAL:
    if args and not any(w in name for w in args):
        continue
    torch.manual_seed(0)
    q, k, v, cu, sinks = make_inputs(nseg, seqlen, hq, hk, d)
    for mode in modes:
        f = ours(backend, q, k, v, cu, seqlen, window, sinks[mode], mode)
        err = (f().float() - ours(other, q, k, v, cu, seqlen, window, sinks[mode], mode)().float()).abs().max()
        tag = name if len(modes) == 1 else f"{name} {mode}"
        row.append(f"{tag}: {graph_us(f):.1f}" + ("" if err < 2e-2 else f" (ERR {err:.1e})"))
print(f"{label:10s} " + " | ".join(row), flush=True)
