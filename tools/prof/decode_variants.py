"""Graph-replay µs of the sm_90a sparse MLA FP8 decode on the decode bench's cases, for A/B runs of
kernel variants (tools/prof/variant_so.sh; bench/NOTES.md): run once per variant with PYTHONPATH
pointing at that build, then compare the printed rows.
    python3 tools/prof/decode_variants.py LABEL [case substrings ...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_sparse_mla_decode import BLOCK, CASES, POOL_TOKENS  # noqa: E402

import sinkops  # noqa: E402

label, wanted = sys.argv[1], sys.argv[2:]
row = []
for name, layout, b, sq, hq, topk in CASES:
    if wanted and not any(w in name for w in wanted):
        continue
    torch.manual_seed(0)
    dqk = 512 if layout == "v4" else 576
    latent = (torch.randn(POOL_TOKENS, dqk, device="cuda") * 0.5).to(torch.bfloat16)
    cache = sinkops.pack_kv_cache(latent, layout, BLOCK)
    q = torch.randn(b, sq, hq, dqk, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(0, POOL_TOKENS, (b, sq, topk), device="cuda", dtype=torch.int32)
    sink = torch.randn(hq, device="cuda", dtype=torch.float32)
    f = lambda backend="cuda": sinkops.sparse_mla_decode(q, cache, idx, dqk ** -0.5, sink, layout=layout,  # noqa: E731
                                                         backend=backend)
    err = (f()[0].float() - f("triton")[0].float()).abs().max().item()
    row.append(f"{name}: {graph_us(f):.1f}" + ("" if err < 2e-2 else f" (ERR {err:.1e})"))
print(f"{label:10s} " + " | ".join(row), flush=True)
