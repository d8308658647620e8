"""Graph-replay µs of the sm_90a sparse MLA FP8 decode on the decode bench's cases, for A/B runs of
kernel variants (tools/prof/variant_so.sh, tools/prof/ab_variants.sh; bench/NOTES.md): run once
per variant with PYTHONPATH pointing at that build, then compare the printed rows.
FLASHMLA=1 adds FlashMLA's row (the peer, same cases) and each case's max |Δ| against it.
    python3 tools/prof/decode_variants.py LABEL [case substrings ...]"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_sparse_mla_decode import CASES, flashmla_call, make_case  # noqa: E402

import sinkops  # noqa: E402

label, wanted = sys.argv[1], sys.argv[2:]
peer = os.environ.get("FLASHMLA") == "1"
if peer:
    import flash_mla  # noqa: E402 (fails here, before any timing, when FlashMLA is not built)
row, theirs = [], []
for name, layout, b, sq, hq, topk in CASES:
    if wanted and not any(w in name for w in wanted):
        continue
    q, cache, idx, sink, scale = make_case(layout, b, sq, hq, topk, "cuda")
    f = lambda backend="cuda": sinkops.sparse_mla_decode(q, cache, idx, scale, sink, layout=layout,  # noqa: E731
                                                         backend=backend)
    err = (f()[0].float() - f("triton")[0].float()).abs().max().item()
    row.append(f"{name}: {graph_us(f):.1f}" + ("" if err < 2e-2 else f" (ERR {err:.1e})"))
    if peer:
        fm = flashmla_call(flash_mla, q, cache, idx, sink, scale)
        d = (f()[0].float() - fm()[0][:, :, :hq].float()).abs().max().item()
        theirs.append(f"{name}: {graph_us(fm):.1f} |d| {d:.1e}")
print(f"{label:10s} " + " | ".join(row), flush=True)
if peer:
    print(f"{'FlashMLA':10s} " + " | ".join(theirs), flush=True)
