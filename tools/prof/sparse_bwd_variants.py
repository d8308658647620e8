"""One line per build for A/B calls (tools/prof/device_sites.sh): the CUDA sparse-prefill backward
(backend="cuda", called by name) on V4-Pro and V4-Flash: the op's do_bench median and its dq / dkv
kernels by torch.profiler (bench/NOTES.md "Sparse backward, sm90").

    PYTHONPATH=/tmp/site_V python3 tools/prof/sparse_bwd_variants.py LABEL [--backend cuda|triton]
"""
import os
import sys

import torch
import triton.testing

import sinkops

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_backward import kernel_times  # noqa: E402

CASES = [("V4-Pro", 4096, 32768, 128, 512, 1152), ("V4-Flash", 4096, 32768, 64, 512, 640)]


def kernels(fn, calls=3):
    """GPU µs per call of the dq and the dkv kernels (either backend's names)."""
    out = {}
    for key, us in kernel_times(fn, calls).items():
        for part in ("dq", "dkv"):
            if f"bwd_{part}_" in key:
                out[part] = out.get(part, 0.0) + us
    return out


def main():
    label = sys.argv[1]
    backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "cuda"
    torch.manual_seed(0)
    parts = []
    for name, sq, skv, hq, dqk, topk in CASES:
        dev, bf16 = "cuda", torch.bfloat16
        q = torch.randn(sq, hq, dqk, device=dev, dtype=bf16)
        kv = torch.randn(skv, 1, dqk, device=dev, dtype=bf16)
        idx = torch.randint(0, skv, (sq, 1, topk), device=dev, dtype=torch.int32)
        sink = -2.2 + 4.7 * torch.rand(hq, device=dev)
        g_out = torch.randn(sq, hq, 512, device=dev, dtype=bf16)
        scale = dqk ** -0.5
        out, _, lse = sinkops.sparse_mla_prefill(q, kv, idx, scale, attn_sink=sink)  # auto: no Triton compile

        def bwd():
            return torch.ops.sinkops.sparse_mla_prefill_backward(g_out, None, q, kv, idx, out, lse, scale, 512, sink,
                                                                 None, False, backend)
        us = triton.testing.do_bench(bwd, warmup=5, rep=30, return_mode="median") * 1e3
        tf = 2.5 * 2 * sq * hq * topk * (dqk + 512) / (us * 1e-6) / 1e12
        k = kernels(bwd)
        parts.append(f"{name}: {us:.0f} µs {tf:.0f} TF/s (dq {k.get('dq', 0):.0f}, dkv {k.get('dkv', 0):.0f})")
    print(f"{label:10s} " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
