"""Sparse MLA prefill + FP8 paged decode benchmark (GPU only): CUDA vs Triton vs torch reference.

Every row prints the time of each backend, TFLOP/s and GB/s of the fastest, the compute floor (at a
bf16 matmul rate measured in this run) and the memory floor (at a copy bandwidth measured in this
run), and the published peers of DESIGN.md §5. A backend that is missing or fails prints n/a.

    python bench/bench_sparse_mla.py [--only prefill|decode] [--quick] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # a checkout, unless installed

D_V = 512
PREFILL_CASES = [  # (name, hq, dqk, topk, published vLLM Triton TFLOP/s, FlashMLA TFLOP/s)
    ("V4-Flash", 64, 512, 640, 71, 530),
    ("V4-Pro", 128, 512, 1152, 73, 537),
    ("V3.2", 128, 576, 2048, 65, 568),
    ("V4-Flash TP8 h8", 8, 512, 640, None, 66),   # FlashMLA padded to 64 heads: 530/8 (derived)
    ("V4-Flash TP8 h16", 16, 512, 640, None, None),
]
DECODE_PUBLISHED_US = {  # (batch, s_q, hq, topk) -> FlashMLA µs on H200, V4 layout
    (128, 2, 128, 1152): 194.0, (128, 1, 64, 640): 47.5, (16, 1, 64, 640): 22.3, (1, 1, 64, 640): 16.9,
}
BYTES_PER_TOKEN = {"v4": 584, "v32": 656}


def _bench_ms(fn) -> float:
    from triton.testing import do_bench
    return float(do_bench(fn, warmup=25, rep=100))


def measure_peaks(device) -> tuple[float, float]:
    """(bf16 dense matmul FLOP/s, device copy bytes/s) measured now, on this GPU."""
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    flops = 2 * n ** 3 / (_bench_ms(lambda: a @ b) * 1e-3)
    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    bw = 2 * src.numel() / (_bench_ms(lambda: dst.copy_(src)) * 1e-3)  # read + write
    return flops, bw


def _try_time(fn):
    try:
        fn()  # compile / first-call errors surface here, not inside do_bench
        torch.cuda.synchronize()
        return _bench_ms(fn)
    except Exception as e:  # a failing backend is a column of n/a, not a failed run
        print(f"    ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})", file=sys.stderr)
        return None


def _fmt(x, spec="{:.1f}"):
    return "n/a" if x is None else spec.format(x)


def _random_indices(rows, topk, n_valid, device):
    return torch.randint(0, n_valid, (*rows, topk), device=device, dtype=torch.int32)


def bench_prefill(device, peaks, quick, results):
    from sinkops import ops
    sq, skv = (1024, 8192) if quick else (4096, 32768)
    matmul_rate, copy_bw = peaks
    print(f"\n### sparse MLA prefill, {sq} queries x {skv} keys, random indices, with sink\n")
    print("| case | CUDA µs | Triton µs | torch ref µs | best TFLOP/s | best GB/s | compute floor µs | "
          "memory floor µs | Triton TFLOP/s | published vLLM Triton / FlashMLA TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, hq, dqk, topk, vllm, flashmla in PREFILL_CASES:
        q = torch.randn(sq, hq, dqk, device=device, dtype=torch.bfloat16)
        kv = torch.randn(skv, 1, dqk, device=device, dtype=torch.bfloat16)
        idx = _random_indices((sq, 1), topk, skv, device)
        sink = torch.randn(hq, device=device, dtype=torch.float32)
        scale = dqk ** -0.5
        out = torch.empty(sq, hq, D_V, device=device, dtype=torch.bfloat16)
        t_cuda = _try_time(lambda: ops.sparse_mla_prefill(q, kv, idx, scale, D_V, sink, out=out, backend="cuda"))
        t_triton = _try_time(lambda: ops.sparse_mla_prefill(q, kv, idx, scale, D_V, sink, out=out,
                                                            backend="triton"))
        t_ref = None  # the reference materialises [rows, topk, Dqk]: too slow at this size
        flops = 2 * sq * hq * topk * (dqk + D_V)
        nbytes = q.numel() * 2 + sq * topk * dqk * 2 + out.numel() * 2 + idx.numel() * 4
        best = min((t for t in (t_cuda, t_triton) if t is not None), default=None)
        tf = lambda t: None if t is None else flops / (t * 1e-3) / 1e12  # noqa: E731
        row = dict(op="prefill", case=name, hq=hq, dqk=dqk, topk=topk, cuda_ms=t_cuda, triton_ms=t_triton,
                   ref_ms=t_ref, flops=flops, bytes=nbytes, compute_floor_us=flops / matmul_rate * 1e6,
                   memory_floor_us=nbytes / copy_bw * 1e6, published_vllm_tflops=vllm,
                   published_flashmla_tflops=flashmla)
        results.append(row)
        print(f"| {name} h{hq} d{dqk} k{topk} | {_fmt(t_cuda and t_cuda * 1e3)} | {_fmt(t_triton and t_triton * 1e3)} "
              f"| {_fmt(t_ref)} | {_fmt(tf(best))} | {_fmt(best and nbytes / (best * 1e-3) / 1e9, '{:.0f}')} "
              f"| {row['compute_floor_us']:.1f} | {row['memory_floor_us']:.1f} | {_fmt(tf(t_triton))} "
              f"| {_fmt(vllm, '{}')} / {_fmt(flashmla, '{}')} |")
        del q, kv, idx, out
        torch.cuda.empty_cache()


def bench_decode(device, peaks, quick, results):
    from sinkops import kv_cache as kvc
    from sinkops import ops, reference
    matmul_rate, copy_bw = peaks
    block_size, num_tokens = 64, 65536
    batches = (1, 16) if quick else (1, 16, 128, 256)
    print(f"\n### sparse MLA FP8 decode, block size {block_size}, {num_tokens}-token pool, random indices, with sink\n")
    print("| layout | batch | s_q | heads | topk | CUDA µs | Triton µs | torch ref µs | best TFLOP/s | best GB/s | "
          "compute floor µs | memory floor µs | published FlashMLA µs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for layout in ("v4", "v32"):
        dqk = kvc.token_dim(layout)
        latent = torch.randn(num_tokens, dqk, device=device).to(torch.bfloat16)
        cache = kvc.pack_kv_cache(latent, layout, block_size)
        del latent
        for hq, topk in ((64, 640), (128, 1152)):
            sink = torch.randn(hq, device=device, dtype=torch.float32)
            for b in batches:
                for s_q in (1, 2):
                    q = torch.randn(b, s_q, hq, dqk, device=device, dtype=torch.bfloat16)
                    idx = _random_indices((b, s_q), topk, num_tokens, device)
                    out = torch.empty(b, s_q, hq, D_V, device=device, dtype=torch.bfloat16)
                    scale = dqk ** -0.5
                    t_cuda = _try_time(lambda: ops.sparse_mla_decode(q, cache, idx, scale, sink, layout=layout,
                                                                     backend="cuda"))
                    t_triton = _try_time(lambda: ops.sparse_mla_decode(q, cache, idx, scale, sink, layout=layout,
                                                                       out=out, backend="triton"))
                    t_ref = None
                    if b <= 16 and not quick:
                        t_ref = _try_time(lambda: reference.sparse_mla_decode(q, cache, idx, scale, sink,
                                                                              layout=layout))
                    rows = b * s_q
                    flops = 2 * rows * hq * topk * (dqk + D_V)
                    nbytes = q.numel() * 2 + rows * topk * BYTES_PER_TOKEN[layout] + out.numel() * 2 + idx.numel() * 4
                    best = min((t for t in (t_cuda, t_triton) if t is not None), default=None)
                    published = DECODE_PUBLISHED_US.get((b, s_q, hq, topk)) if layout == "v4" else None
                    row = dict(op="decode", layout=layout, batch=b, s_q=s_q, hq=hq, topk=topk, cuda_ms=t_cuda,
                               triton_ms=t_triton, ref_ms=t_ref, flops=flops, bytes=nbytes,
                               compute_floor_us=flops / matmul_rate * 1e6, memory_floor_us=nbytes / copy_bw * 1e6,
                               published_flashmla_us=published)
                    results.append(row)
                    us = lambda t: None if t is None else t * 1e3  # noqa: E731
                    print(f"| {layout} | {b} | {s_q} | {hq} | {topk} | {_fmt(us(t_cuda))} | {_fmt(us(t_triton))} "
                          f"| {_fmt(us(t_ref))} | {_fmt(best and flops / (best * 1e-3) / 1e12)} "
                          f"| {_fmt(best and nbytes / (best * 1e-3) / 1e9, '{:.0f}')} "
                          f"| {row['compute_floor_us']:.1f} | {row['memory_floor_us']:.1f} | {_fmt(published)} |")
                    del q, idx, out, lse
        del cache
        torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=("prefill", "decode"))
    parser.add_argument("--quick", action="store_true", help="smaller shapes (smoke run)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("bench_sparse_mla: needs a CUDA GPU", file=sys.stderr)
        return 1
    device = torch.device("cuda")
    torch.manual_seed(0)
    matmul_rate, copy_bw = measure_peaks(device)
    print(f"# {torch.cuda.get_device_name(device)}: measured bf16 matmul {matmul_rate / 1e12:.0f} TFLOP/s, "
          f"copy {copy_bw / 1e9:.0f} GB/s (floors below use these)")
    results = []
    if args.only in (None, "prefill"):
        bench_prefill(device, (matmul_rate, copy_bw), args.quick, results)
    if args.only in (None, "decode"):
        bench_decode(device, (matmul_rate, copy_bw), args.quick, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(device), matmul_flops=matmul_rate,
                           copy_bytes_per_s=copy_bw, rows=results), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
