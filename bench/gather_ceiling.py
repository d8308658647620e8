"""The gather ceiling of sparse MLA (GPU only): how fast any kernel can bring each query's top-k KV
rows into the SMs when the indices are uniform random, measured with a kernel that does nothing
else (load the rows, xor them together, store one word per program; the best of a small sweep of
tile shapes). Issue 10's small-head targets are checked against it: a prefill that reads every
query's rows (no reuse across queries, which random indices do not offer) cannot be faster than
this kernel, so its useful TFLOP/s is at most FLOPs / gather time.

Rows: the issue's 8- and 16-head prefill shapes (bf16 rows, 4096 queries x 32768 keys, as
bench_sparse_mla_prefill.py) and the small-batch decode rows (V4 FP8 tokens from a 65536-token
pool, as bench_sparse_mla_decode.py: their 576 contiguous bytes; the 8 scale bytes each token also
reads from its block's tail are left out, so the decode ceiling is a lower bound); each also with contiguous rows (query q reads
rows q*topk ...: the same bytes, no randomness) and the device-to-device copy rate of the same
byte count, all in this run. sinkops' own time on the row (CUDA-graph replay, its `auto` backend)
is printed beside the ceiling.

    python bench/gather_ceiling.py [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import graph_us  # noqa: E402

D_V = 512


@triton.jit
def _gather_rows(rows_ptr, idx_ptr, out_ptr, topk, ROW_WORDS: tl.constexpr, BLOCK_K: tl.constexpr,
                 CW: tl.constexpr):
    # rows_ptr: [pool, ROW_WORDS] int32 (the KV rows as words); idx_ptr: [queries, topk] int32;
    # out_ptr: [queries, programs per query] int32 (the xor of the program's words: keeps the loads live)
    q = tl.program_id(0)
    c = tl.program_id(1)
    ks = c * BLOCK_K + tl.arange(0, BLOCK_K)
    kmask = ks < topk
    rows = tl.load(idx_ptr + q.to(tl.int64) * topk + ks, mask=kmask, other=0).to(tl.int64)
    acc = tl.zeros([BLOCK_K, CW], dtype=tl.int32)
    for w0 in tl.static_range(0, ROW_WORDS, CW):
        cols = w0 + tl.arange(0, CW)
        m = kmask[:, None] & (cols[None, :] < ROW_WORDS)
        acc ^= tl.load(rows_ptr + rows[:, None] * ROW_WORDS + cols[None, :], mask=m, other=0)
    tl.store(out_ptr + q * tl.num_programs(1) + c, tl.xor_sum(tl.xor_sum(acc, 1), 0))


def gather_us(pool_words, idx, row_words):
    """Best graph-replay µs of the pure gather over a small sweep of (BLOCK_K, CW, num_warps)."""
    nq, topk = idx.shape
    best = None
    for block_k in (16, 32, 64):
        for cw in (64, 128):
            for warps in (4, 8):
                progs = triton.cdiv(topk, block_k)
                out = torch.empty(nq, progs, dtype=torch.int32, device=idx.device)
                f = lambda: _gather_rows[(nq, progs)](pool_words, idx, out, topk, ROW_WORDS=row_words,  # noqa: E731
                                                      BLOCK_K=block_k, CW=cw, num_warps=warps)
                t = graph_us(f)
                if best is None or t < best[0]:
                    best = (t, (block_k, cw, warps))
    return best


def copy_us(nbytes, dev):
    a = torch.empty(nbytes // 4, dtype=torch.int32, device=dev)
    b = torch.empty_like(a)
    return graph_us(lambda: b.copy_(a))


# name, kind, queries (rows of the decode batch), heads, row bytes, topk, pool tokens, d_qk, target
CASES = [
    ("prefill V4-Flash TP8 h8 k640", "prefill", 4096, 8, 1024, 640, 32768, 512, "265 TFLOP/s"),
    ("prefill V4-Pro TP8 h16 k1152", "prefill", 4096, 16, 1024, 1152, 32768, 512, "286 TFLOP/s"),
    ("decode V4 b64 h8 k640 (TP8)", "decode", 64, 8, 576, 640, 65536, 512, "12 µs"),
    ("decode V4 b16 h64 k640", "decode", 16, 64, 576, 640, 65536, 512, "15 µs"),
]


def ours_us(kind, nq, hq, topk, dev):
    """sinkops on the same shape (auto backend, graph replay), with the benches' own case builders."""
    import sinkops

    if kind == "prefill":
        from bench_sparse_mla_prefill import make_case
        q, kv, idx, sink = make_case(hq, 512, topk, nq, 32768, dev)
        out = torch.empty(nq, hq, D_V, device=dev, dtype=torch.bfloat16)
        return graph_us(lambda: sinkops.sparse_mla_prefill(q, kv, idx, 512 ** -0.5, D_V, sink, out=out))
    from bench_sparse_mla_decode import make_case
    q, cache, idx, sink, scale = make_case("v4", nq, 1, hq, topk, dev)
    return graph_us(lambda: sinkops.sparse_mla_decode(q, cache, idx, scale, sink, layout="v4"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    ap.add_argument("--no-ours", action="store_true", help="skip sinkops' own column")
    args = ap.parse_args()
    dev = "cuda"
    print(f"\n### gather ceiling, {torch.cuda.get_device_name()}: uniform random top-k rows, pure gather "
          "(graph replay, best of 12 tile shapes)\n")
    print("| case | bytes gathered | random rows µs (TB/s) [tile] | contiguous rows µs (TB/s) | copy µs (TB/s) | "
          "ceiling | sinkops µs | target |")
    # copy: b.copy_(a) of the same byte count (it reads and writes them: TB/s counts the bytes read)
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for name, kind, nq, hq, row_bytes, topk, pool, dqk, target in CASES:
        torch.manual_seed(0)
        row_words = row_bytes // 4
        words = torch.randint(-2 ** 31, 2 ** 31 - 1, (pool, row_words), dtype=torch.int32, device=dev)
        idx = torch.randint(0, pool, (nq, topk), dtype=torch.int32, device=dev)
        seq = (torch.arange(nq * topk, device=dev, dtype=torch.int32) % pool).view(nq, topk)
        nbytes = nq * topk * row_bytes
        t_rand, tile = gather_us(words, idx, row_words)
        t_seq, _ = gather_us(words, seq, row_words)
        t_copy = copy_us(nbytes, dev)
        tb = lambda us: nbytes / (us * 1e-6) / 1e12  # noqa: E731
        if kind == "prefill":
            flops = 2 * nq * hq * topk * (dqk + D_V)
            ceiling = f"<= {flops / (t_rand * 1e-6) / 1e12:.0f} TFLOP/s useful"
        else:
            ceiling = f">= {t_rand:.1f} µs"
        t_ours = None if args.no_ours else ours_us(kind, nq, hq, topk, dev)
        ours = "n/a" if t_ours is None else (
            f"{t_ours:.1f}" + (f" ({flops / (t_ours * 1e-6) / 1e12:.0f} TFLOP/s)" if kind == "prefill" else ""))
        print(f"| {name} | {nbytes / 1e6:.1f} MB | {t_rand:.1f} ({tb(t_rand):.2f}) {list(tile)} | {t_seq:.1f} "
              f"({tb(t_seq):.2f}) | {t_copy:.1f} ({tb(t_copy):.2f}) | {ceiling} | {ours} | {target} |", flush=True)
        rows.append(dict(case=name, bytes=nbytes, random_us=t_rand, tile=tile, contiguous_us=t_seq,
                         copy_us=t_copy, sinkops_us=t_ours))
        del words, idx, seq
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
