"""Graph-replay µs (TFLOP/s) of the sm_90a sparse MLA prefill on the prefill bench's large cases, for
A/B runs of kernel variants (tools/prof/variant_so.sh; bench/NOTES.md): run once per variant with
PYTHONPATH pointing at that build, then compare the printed rows. FLASHMLA=1 adds FlashMLA's row
(the peer, same shapes) and each case's max |Δ| against it; RAGGED=1 also times every case with a
ragged topk_length (each row a random count in [topk / 4, topk], seeded: rows whose last block is
partly masked, and the load balance of a grid whose CTAs differ in length).
    python3 tools/prof/prefill_variants.py LABEL [case substrings ...]"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_sparse_mla_prefill import CASES, D_V, make_case  # noqa: E402

import sinkops  # noqa: E402

label, wanted = sys.argv[1], sys.argv[2:]
peer = os.environ.get("FLASHMLA") == "1"
sq, skv = 4096, 32768
ours, theirs = [], []
for name, hq, dqk, topk in CASES:
    if hq < 64 or (wanted and not any(w in name for w in wanted)):
        continue
    q, kv, idx, sink = make_case(hq, dqk, topk, sq, skv, "cuda")
    out = torch.empty(sq, hq, D_V, device="cuda", dtype=torch.bfloat16)
    flops = 2 * sq * hq * topk * (dqk + D_V)
    f = lambda: sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, D_V, sink, out=out, backend="cuda")  # noqa: E731
    us = graph_us(f)
    ours.append(f"{name}: {us:.1f} ({flops / us / 1e6:.0f})")
    if os.environ.get("RAGGED") == "1":
        g = torch.Generator().manual_seed(7)
        tl = torch.randint(topk // 4, topk + 1, (sq,), generator=g, dtype=torch.int32).cuda()
        fr = lambda: sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, D_V, sink, topk_length=tl, out=out,  # noqa: E731
                                                backend="cuda")
        ours.append(f"{name} ragged: {graph_us(fr):.1f}")
    if peer:
        import flash_mla
        fm = lambda: flash_mla.flash_mla_sparse_fwd(q, kv, idx, dqk ** -0.5, D_V, sink)  # noqa: E731
        ref = fm()[0]
        f()
        err = (out.float() - ref.float()).abs().max().item()
        ut = graph_us(fm)
        theirs.append(f"{name}: {ut:.1f} ({flops / ut / 1e6:.0f}) |d| {err:.1e}")
print(f"{label:10s} " + " | ".join(ours), flush=True)
if peer:
    print(f"{'FlashMLA':10s} " + " | ".join(theirs), flush=True)
