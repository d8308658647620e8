"""Quick look at the CUDA window backward on the GPU: per gradient, its relative error against the
torch backend's backward of the same call (float32 compute), for a few shapes; then the backward op's
time for the CUDA and Triton kernels on MiMo video. A diagnostic for bring-up, not a test.

    python3 tools/prof/window_bwd_check.py
"""
import sys

import torch

import sinkops

dev, bf16 = "cuda", torch.bfloat16
torch.manual_seed(0)


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def grads(backend, q, k, v, s, cu_q, cu_k, mq, mk, window, mode, g_out, g_lse):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)] + ([s.clone().requires_grad_()] if s is not None else [])
    out, lse = sinkops.window_attention(*leaves[:3], cu_q, cu_k, mq, mk, window_size=window,
                                        sinks=leaves[3] if s is not None else None, sink_mode=mode,
                                        return_lse=True, backend="torch")
    dlse = torch.where(torch.isfinite(lse), g_lse, 0.0)
    return torch.ops.sinkops.window_attention_backward(
        g_out, dlse, q, k, v, out.detach(), lse.detach(), cu_q, cu_k, mq, mk, window[0], window[1], q.shape[-1] ** -0.5,
        s, mode if s is not None else "none", False, backend)


CASES = [  # lens_q, lens_k, hq, hk, d, dv, window, mode
    ([64], None, 1, 1, 64, 64, (-1, -1), "none"),
    ([64], None, 1, 1, 64, 64, (-1, -1), "key0"),
    ([100, 37], None, 4, 2, 64, 64, (16, 16), "key0"),
    ([300, 1, 0, 70], None, 32, 8, 64, 64, (64, 64), "key0"),
    ([200, 90], [150, 120], 8, 2, 128, 128, (-1, -1), "null"),
    ([257, 33], None, 4, 1, 96, 96, (-1, 0), "null"),
    ([400, 3], None, 16, 16, 80, 80, (64, 64), "null"),
    ([130], None, 128, 1, 64, 32, (5, 7), "key0"),
]
worst = 0.0
for lq, lk, hq, hk, d, dv, window, mode in CASES:
    lk = lq if lk is None else lk
    cu_q = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32, device=dev)
    cu_k = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32, device=dev)
    q = torch.randn(sum(lq), hq, d, device=dev, dtype=bf16)
    k = torch.randn(sum(lk), hk, d, device=dev, dtype=bf16)
    v = torch.randn(sum(lk), hk, dv, device=dev, dtype=bf16)
    s = None if mode == "none" else (torch.rand(hq, device=dev) * 2 - 0.5)
    g_out = torch.randn(sum(lq), hq, dv, device=dev, dtype=bf16)
    g_lse = torch.randn(hq, sum(lq), device=dev)
    args = (q, k, v, s, cu_q, cu_k, max(lq), max(lk), window, mode, g_out, g_lse)
    try:
        got = grads("cuda", *args)
    except Exception as e:
        print(f"{lq} h{hq}/{hk} d{d}/{dv} {window} {mode}: cuda raised {type(e).__name__}: {e}")
        worst = 1.0
        continue
    want = grads("torch", *args)
    errs = [rel(a, b) if b.numel() else 0.0 for a, b in zip(got, want)]
    nan = any(torch.isnan(a).any().item() for a in got)
    worst = max(worst, *errs, 1.0 if nan else 0.0)
    print(f"{lq} h{hq}/{hk} d{d}/{dv} w{window} {mode}: dq {errs[0]:.2e} dk {errs[1]:.2e} dv {errs[2]:.2e} "
          f"dsink {errs[3]:.2e}{' NaN!' if nan else ''}", flush=True)
print(f"worst relative error {worst:.2e}")

if "--time" in sys.argv or True:
    import triton.testing
    for name, nseg, seqlen, hq, hk, d, window in (("mimo-video 16x1024", 16, 1024, 32, 8, 64, (64, 64)),
                                                  ("mimo-image 1x4096", 1, 4096, 32, 8, 64, (64, 64))):
        t = nseg * seqlen
        q, k, v = (torch.randn(t, h, d, device=dev, dtype=bf16) for h in (hq, hk, hk))
        cu = torch.arange(0, t + 1, seqlen, device=dev, dtype=torch.int32)
        s = torch.rand(hq, device=dev)
        out, lse = sinkops.window_attention(q, k, v, cu, cu, seqlen, seqlen, window_size=window, sinks=s,
                                            return_lse=True, backend="auto")
        g = torch.randn_like(out)
        for backend in ("cuda", "triton"):
            fn = lambda: torch.ops.sinkops.window_attention_backward(  # noqa: E731
                g, None, q, k, v, out, lse, cu, cu, seqlen, seqlen, window[0], window[1], d ** -0.5, s, "key0",
                False, backend)
            us = triton.testing.do_bench(fn, warmup=10, rep=50, return_mode="median") * 1e3
            print(f"{name} backward {backend}: {us:.1f} µs", flush=True)
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                torch.ops.sinkops.window_attention_backward(g, None, q, k, v, out, lse, cu, cu, seqlen, seqlen,
                                                            window[0], window[1], d ** -0.5, s, "key0", False, "cuda")
            torch.cuda.synchronize()
        for ev in sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:6]:
            if ev.device_time_total > 0:
                print(f"   {ev.key[:60]:60s} {ev.device_time_total / 10:8.1f} µs")
