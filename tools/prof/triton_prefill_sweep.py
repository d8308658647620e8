"""Tile sweep of the Triton sparse MLA prefill at few heads (GPU only): graph-replay µs of each
(BLOCK_K, num_warps, num_stages) tile on the 8-, 16- and 32-head TP shapes (4096 queries x 32768 keys,
as bench_sparse_mla_prefill.py), each checked against the default tile's output; the default is
sinkops.triton.sparse_mla.prefill_config (bench/NOTES.md "Triton sparse MLA": the earlier sweep
covered 32- and 64-head tiles only). Tiles that do not fit (shared memory) print "n/a".

    python3 tools/prof/triton_prefill_sweep.py [h8] [h16 ...]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_kernels import graph_us  # noqa: E402
from bench_sparse_mla_prefill import make_case  # noqa: E402

import sinkops  # noqa: E402
import sinkops.triton.sparse_mla as SF  # noqa: E402
from sinkops.ops._common import PlanCache  # noqa: E402

CASES = [("h8 k640 (V4-Flash TP8)", 8, 512, 640), ("h16 k1152 (V4-Pro TP8)", 16, 512, 1152),
         ("h16 d576 k2048 (V3.2 TP8)", 16, 576, 2048), ("h32 k640 (V4-Flash TP2)", 32, 512, 640)]
# (BLOCK_K, warps, stages); session 33's calls 2 and 3 (bench/results/2026-12-07-s33/) found the
# default 64:4:2 best at 8-32 heads, also against a gather one block ahead (tried_triton_prefill_prefetch.patch).
TILES = [(bk, w, st) for bk in (16, 32, 64, 128) for w in (4, 8) for st in (1, 2, 3)]
D_V, SQ, SKV = 512, 4096, 32768
DEFAULT = SF.prefill_config


def use_tile(tile):
    """prefill_config answers `tile` (None: the default) for the next prepared call."""
    if tile is None:
        SF.prefill_config = DEFAULT
    else:
        bk, w, st = tile
        SF.prefill_config = lambda h: dict(BLOCK_H=DEFAULT(h)["BLOCK_H"], BLOCK_K=bk, num_warps=w, num_stages=st)
    for cache in PlanCache.ALL:
        cache.clear()


wanted = sys.argv[1:]
for name, hq, dqk, topk in CASES:
    if wanted and not any(w in name for w in wanted):
        continue
    q, kv, idx, sink = make_case(hq, dqk, topk, SQ, SKV, "cuda")
    out = torch.empty(SQ, hq, D_V, device="cuda", dtype=torch.bfloat16)
    f = lambda: sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, D_V, sink, out=out, backend="triton")  # noqa: E731
    flops = 2 * SQ * hq * topk * (dqk + D_V)
    use_tile(None)
    ref = f()[0].clone()
    t0 = graph_us(f)
    d = DEFAULT(hq)
    print(f"{name}: default {d['BLOCK_K']}:{d['num_warps']}:{d['num_stages']} {t0:.1f} µs "
          f"({flops / t0 / 1e6:.0f} TFLOP/s)", flush=True)
    row = []
    for tile in TILES:
        label = ":".join(map(str, tile))
        use_tile(tile)
        try:
            err = (f()[0].float() - ref.float()).abs().max().item()
            t = graph_us(f)
            row.append(f"{label} {t:.1f} ({flops / t / 1e6:.0f})" + ("" if err < 2e-2 else f" ERR {err:.1e}"))
        except Exception as e:  # noqa: BLE001 (out of shared memory / registers: not a tile)
            row.append(f"{label} n/a ({type(e).__name__})")
        print("  " + row[-1], flush=True)
    use_tile(None)
    del q, kv, idx, out
    torch.cuda.empty_cache()
