"""Sparse MLA decode over the FP8 paged caches side by side (GPU only): FlashMLA, sinkops CUDA on
its sm_90a path (at <= 32 heads the few-heads kernel, and the 64-head kernel beside it with
SINKOPS_DECODE_FEW_HEADS=0) and on its sm80 path (SINKOPS_CUDA_SM80=1), and sinkops Triton, in one
run, on issue 10's shapes (random valid top-k slots in a 65536-token pool of 64-token pages, sinks).

Every row: CUDA-graph replay (kernel time, split + combine included) for each, TFLOP/s (useful
FLOPs: FlashMLA pads 8 heads to 64, its rate is counted on the real heads), the floors (gathered
token bytes over the copy bandwidth, FLOPs over the bf16 matmul rate, both measured in this run),
eager calls (what a user pays) for sinkops sm90 and FlashMLA, and the largest difference between
sinkops and FlashMLA outputs.

    python bench/bench_sparse_mla_decode.py [--quick] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import Sm80Path, Sm90WideHeadsPath, eager_us, graph_us  # noqa: E402
from bench_kernels import try_or_none as _try  # noqa: E402
from bench_sparse_mla_prefill import matmul_rate  # noqa: E402

D_V = 512
POOL_TOKENS, BLOCK = 65536, 64
CASES = [  # name, layout, b, s_q, h_q, topk
    ("V4 b128 s2 h128 k1152", "v4", 128, 2, 128, 1152),
    ("V3.2 b128 s2 h128 k2048", "v32", 128, 2, 128, 2048),
    ("V4 b128 h64 k640", "v4", 128, 1, 64, 640),
    ("V4 b16 h64 k640", "v4", 16, 1, 64, 640),
    ("V4 b1 h64 k640", "v4", 1, 1, 64, 640),
    ("V4 b64 h8 k640 (TP8)", "v4", 64, 1, 8, 640),
    ("V3.2 b1 h128 k2048", "v32", 1, 1, 128, 2048),
    ("V4 b1 h8 k640 (TP8)", "v4", 1, 1, 8, 640),
    ("V4 b128 s2 h16 k1152 (Pro TP8)", "v4", 128, 2, 16, 1152),
    ("V3.2 b64 h16 k2048 (TP8)", "v32", 64, 1, 16, 2048),
    ("V4 b64 h32 k640 (TP2)", "v4", 64, 1, 32, 640),
]


def copy_bandwidth(device):
    x = torch.empty(1 << 28, device=device, dtype=torch.uint8)
    y = torch.empty_like(x)
    return 2 * x.numel() / (graph_us(lambda: y.copy_(x), replays=20) * 1e-6)


def make_case(layout, b, sq, hq, topk, dev):
    """One case's inputs (seed 0): q, the packed FP8 cache of a random latent pool, random valid
    top-k slots, sinks, the softmax scale."""
    import sinkops

    torch.manual_seed(0)
    dqk = 512 if layout == "v4" else 576
    latent = (torch.randn(POOL_TOKENS, dqk, device=dev) * 0.5).to(torch.bfloat16)
    cache = sinkops.pack_kv_cache(latent, layout, BLOCK)
    del latent
    q = torch.randn(b, sq, hq, dqk, device=dev, dtype=torch.bfloat16)
    idx = torch.randint(0, POOL_TOKENS, (b, sq, topk), device=dev, dtype=torch.int32)
    sink = torch.randn(hq, device=dev, dtype=torch.float32)
    return q, cache, idx, sink, dqk ** -0.5


def flashmla_call(flash_mla, q, cache, idx, sink, scale):
    """FlashMLA's sparse FP8 decode on one case as a callable (out is [..., :h_q] of its first
    result): it takes 64 or 128 heads, so other counts run padded with -inf sinks."""
    b, sq, hq, dqk = q.shape
    if hq > 128:
        raise ValueError(f"FlashMLA takes at most 128 heads, got {hq}")
    pad = 64 if hq <= 64 else 128
    qf = torch.zeros(b, sq, pad, dqk, device=q.device, dtype=torch.bfloat16)
    qf[:, :, :hq] = q
    sf = torch.full((pad,), -float("inf"), device=q.device)
    sf[:hq] = sink
    meta = flash_mla.get_mla_metadata()[0]
    cf = cache.view(torch.float8_e4m3fn)
    return lambda: flash_mla.flash_mla_with_kvcache(qf, cf, None, None, D_V, meta, None, scale, False, True, idx, sf)


def main():
    import sinkops

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = "cuda"
    try:
        import flash_mla
    except ImportError:
        flash_mla = None
    peak, bw = matmul_rate(dev), copy_bandwidth(dev)
    print(f"\n### sparse MLA FP8 decode, {POOL_TOKENS}-token pool, page {BLOCK}, random valid top-k, attn_sink; "
          f"bf16 matmul {peak / 1e12:.0f} TFLOP/s, copy {bw / 1e12:.2f} TB/s; {torch.cuda.get_device_name()}\n")
    print("| case | floor µs (bytes / FLOPs) | FlashMLA µs (TFLOP/s) | sm90 µs (TFLOP/s) | sm90 64-head kernel µs "
          "| sm80 µs (TFLOP/s) | Triton µs (TFLOP/s) | FlashMLA / sm90 | eager sm90 / FlashMLA µs | max |Δ| vs FlashMLA |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name, layout, b, sq, hq, topk in (CASES[:1] + CASES[3:5] if args.quick else CASES):
        q, cache, idx, sink, scale = make_case(layout, b, sq, hq, topk, dev)
        dqk = q.shape[-1]
        flops = 2 * b * sq * hq * topk * (dqk + D_V)
        floor_bytes = b * sq * topk * cache.shape[-1] / bw * 1e6
        floor_flops = flops / peak * 1e6
        tf = lambda us: None if us is None else flops / (us * 1e-6) / 1e12  # noqa: E731

        def ours(backend="cuda"):
            return lambda: sinkops.sparse_mla_decode(q, cache, idx, scale, sink, layout=layout, backend=backend)

        t90 = _try(lambda: graph_us(ours()), "sm90")
        t90w = None
        if hq <= 32:  # the few-heads kernel took it: the 64-head kernel beside it
            with Sm90WideHeadsPath():
                t90w = _try(lambda: graph_us(ours()), "sm90 64-head kernel")
        with Sm80Path():
            t80 = _try(lambda: graph_us(ours()), "sm80")
        ttr = _try(lambda: graph_us(ours("triton")), "triton")
        e90 = _try(lambda: eager_us(ours()), "sm90 eager")
        tfm = efm = diff = None
        if flash_mla is not None:
            fm = _try(lambda: flashmla_call(flash_mla, q, cache, idx, sink, scale), "FlashMLA metadata")
            ref = None if fm is None else _try(fm, "FlashMLA")
            if ref is not None:
                tfm = _try(lambda: graph_us(fm), "FlashMLA")
                efm = _try(lambda: eager_us(fm), "FlashMLA eager")
                mine = ours()()[0]
                diff = (mine.float() - ref[0][:, :, :hq].float()).abs().max().item()
        row = dict(case=name, layout=layout, b=b, s_q=sq, hq=hq, topk=topk, flops=flops,
                   floor_bytes_us=floor_bytes, floor_flops_us=floor_flops, flashmla_us=tfm, sm90_us=t90,
                   sm90_64_head_kernel_us=t90w, sm80_us=t80, triton_us=ttr, eager_sm90_us=e90, eager_flashmla_us=efm, max_abs_diff=diff)
        rows.append(row)
        f = lambda us: "n/a" if us is None else f"{us:.1f} ({tf(us):.0f})"  # noqa: E731
        ratio = "n/a" if (t90 is None or tfm is None) else f"{tfm / t90:.2f}x"
        eag = f"{'n/a' if e90 is None else f'{e90:.1f}'} / {'n/a' if efm is None else f'{efm:.1f}'}"
        w = "—" if t90w is None else f"{t90w:.1f}"
        print(f"| {name} | {floor_bytes:.1f} / {floor_flops:.1f} | {f(tfm)} | {f(t90)} | {w} | {f(t80)} | {f(ttr)} "
              f"| {ratio} | {eag} | {'n/a' if diff is None else f'{diff:.2e}'} |", flush=True)
        del q, idx, cache
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
