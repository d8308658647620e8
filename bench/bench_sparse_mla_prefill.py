"""Sparse MLA prefill side by side (GPU only): FlashMLA, sinkops CUDA on its sm_90a path and on its
sm80 path (SINKOPS_CUDA_SM80=1), and sinkops Triton, in one run, on issue 10's shapes (the sm90 column
at 8-32 heads is the few-heads kernel; bench/gather_ceiling.py gives those rows' ceiling).

Every row: CUDA-graph replay (kernel time) for each, TFLOP/s (useful FLOPs: FlashMLA pads 8 to 32
heads to 64, its rate is counted on the real heads), the compute floor at the bf16 matmul rate
measured in this run, eager calls (what a user pays) for sinkops sm90 and FlashMLA, and the
largest difference between sinkops and FlashMLA outputs.

    python bench/bench_sparse_mla_prefill.py [--quick] [--json out.json] [case substrings ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import Sm80Path, eager_us, graph_us  # noqa: E402
from bench_kernels import try_or_none as _try  # noqa: E402

D_V = 512
CASES = [  # name, h_q, d_qk, topk
    ("V4-Pro", 128, 512, 1152),
    ("V4-Flash", 64, 512, 640),
    ("V3.2", 128, 576, 2048),
    ("V4-Flash TP8", 8, 512, 640),
    ("V4-Pro TP8", 16, 512, 1152),
    ("V3.2 TP8", 16, 576, 2048),
    ("V4-Flash TP2", 32, 512, 640),
    ("V3.2 TP4", 32, 576, 2048),
]


def make_case(hq, dqk, topk, sq, skv, dev):
    """Random bf16 q [sq, hq, dqk] and kv [skv, 1, dqk], uniform top-k indices, a float32 sink per head."""
    torch.manual_seed(0)
    q = torch.randn(sq, hq, dqk, device=dev, dtype=torch.bfloat16)
    kv = torch.randn(skv, 1, dqk, device=dev, dtype=torch.bfloat16)
    idx = torch.randint(0, skv, (sq, 1, topk), device=dev, dtype=torch.int32)
    sink = torch.randn(hq, device=dev, dtype=torch.float32)
    return q, kv, idx, sink


def matmul_rate(device):
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    return 2 * n ** 3 / (graph_us(lambda: a @ b, replays=20) * 1e-6)


def main():
    import sinkops

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("cases", nargs="*", help="substrings of the case names to run (default: all)")
    args = ap.parse_args()
    dev = "cuda"
    sq, skv = (1024, 8192) if args.quick else (4096, 32768)
    try:
        import flash_mla
    except ImportError:
        flash_mla = None
    peak = matmul_rate(dev)
    print(f"\n### sparse MLA prefill, {sq} queries x {skv} keys, random top-k, attn_sink; "
          f"bf16 matmul {peak / 1e12:.0f} TFLOP/s; {torch.cuda.get_device_name()}\n")
    print("| case | compute floor µs | FlashMLA µs (TFLOP/s) | sm90 µs (TFLOP/s) | sm80 µs (TFLOP/s) | "
          "Triton µs (TFLOP/s) | sm90 / FlashMLA | eager sm90 / FlashMLA µs | max |Δ| vs FlashMLA |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []
    for name, hq, dqk, topk in CASES:
        if args.cases and not any(c in name for c in args.cases):
            continue
        q, kv, idx, sink = make_case(hq, dqk, topk, sq, skv, dev)
        scale = dqk ** -0.5
        out = torch.empty(sq, hq, D_V, device=dev, dtype=torch.bfloat16)
        flops = 2 * sq * hq * topk * (dqk + D_V)
        tf = lambda us: None if us is None else flops / (us * 1e-6) / 1e12  # noqa: E731

        def ours(backend="cuda"):
            return lambda: sinkops.sparse_mla_prefill(q, kv, idx, scale, D_V, sink, out=out, backend=backend)

        t90 = _try(lambda: graph_us(ours()), "sm90")
        with Sm80Path():
            t80 = _try(lambda: graph_us(ours()), "sm80")
        ttr = _try(lambda: graph_us(ours("triton")), "triton")
        e90 = _try(lambda: eager_us(ours()), "sm90 eager")
        tfm = efm = diff = None
        if flash_mla is not None:
            pad = max(64, hq)  # FlashMLA takes 64 or 128 heads: smaller counts run padded
            qf = torch.zeros(sq, pad, dqk, device=dev, dtype=torch.bfloat16)
            qf[:, :hq] = q
            sf = torch.full((pad,), -float("inf"), device=dev)
            sf[:hq] = sink
            fm = lambda: flash_mla.flash_mla_sparse_fwd(qf, kv, idx, scale, D_V, sf)  # noqa: E731
            tfm = _try(lambda: graph_us(fm), "FlashMLA")
            efm = _try(lambda: eager_us(fm), "FlashMLA eager")
            ref = _try(fm, "FlashMLA")
            if ref is not None:
                ours()()
                diff = (out.float() - ref[0][:, :hq].float()).abs().max().item()
        row = dict(case=name, hq=hq, dqk=dqk, topk=topk, sq=sq, skv=skv, flops=flops,
                   compute_floor_us=flops / peak * 1e6, flashmla_us=tfm, sm90_us=t90, sm80_us=t80,
                   triton_us=ttr, eager_sm90_us=e90, eager_flashmla_us=efm, max_abs_diff=diff)
        rows.append(row)
        f = lambda us: "n/a" if us is None else f"{us:.1f} ({tf(us):.0f})"  # noqa: E731
        ratio = "n/a" if (t90 is None or tfm is None) else f"{tfm / t90:.2f}x"
        eag = f"{'n/a' if e90 is None else f'{e90:.1f}'} / {'n/a' if efm is None else f'{efm:.1f}'}"
        print(f"| {name} h{hq} d{dqk} k{topk} | {row['compute_floor_us']:.1f} | {f(tfm)} | {f(t90)} | {f(t80)} "
              f"| {f(ttr)} | {ratio} | {eag} | {'n/a' if diff is None else f'{diff:.2e}'} |")
        del q, kv, idx, out
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
