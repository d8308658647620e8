"""One quick case per op and GPU backend against the float64 oracle (seconds, not the suite):
the first thing a device call runs after installing, so a broken build fails fast."""
import sys

import torch

import sinkops
from sinkops import reference


def rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    finite = torch.isfinite(b)
    if not torch.equal(a[~finite], b[~finite]):
        return float("inf")
    return float((a[finite] - b[finite]).norm() / b[finite].norm().clamp_min(1e-30))


def main():
    dev = "cuda"
    torch.manual_seed(0)
    fails = 0
    lens = [300, 0, 1, 77, 1024]
    cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=dev)
    t = sum(lens)
    for d in (64, 80, 128):
        q = torch.randn(t, 32, d, device=dev, dtype=torch.bfloat16)
        k = torch.randn(t, 8, d, device=dev, dtype=torch.bfloat16)
        v = torch.randn(t, 8, d, device=dev, dtype=torch.bfloat16)
        for mode in ("key0", "null"):
            s = torch.rand(32, device=dev) - 0.2
            ro, rl = reference.window_attention(q.double(), k.double(), v.double(), cu, window_size=(64, 64),
                                                sinks=s, sink_mode=mode)
            for b in ("cuda", "triton"):
                o, l = sinkops.window_attention(q, k, v, cu, None, 1024, window_size=(64, 64), sinks=s,
                                                sink_mode=mode, return_lse=True, backend=b)
                e, el = rel(o, ro), rel(l, rl)
                ok = e < 3e-3 and el < 1e-5
                fails += not ok
                print(f"window d{d} {mode} {b}: out {e:.2e} lse {el:.2e} {'ok' if ok else 'FAIL'}")
    for dqk, hq in ((512, 8), (576, 64), (512, 128)):
        q = torch.randn(40, hq, dqk, device=dev, dtype=torch.bfloat16)
        kv = torch.randn(3000, 1, dqk, device=dev, dtype=torch.bfloat16)
        idx = torch.randint(-10, 3100, (40, 1, 640), device=dev, dtype=torch.int32)
        s = torch.randn(hq, device=dev)
        ro, rm, rl = reference.sparse_mla_prefill(q.double(), kv.double(), idx, 0.04, attn_sink=s)
        for b in ("cuda", "triton"):
            o, m, l = sinkops.sparse_mla_prefill(q, kv, idx, 0.04, attn_sink=s, backend=b)
            e, el, em = rel(o, ro), rel(l, rl), rel(m, rm)
            ok = e < 3e-3 and el < 1e-5 and em < 1e-5
            fails += not ok
            print(f"prefill d{dqk} h{hq} {b}: out {e:.2e} lse {el:.2e} max {em:.2e} {'ok' if ok else 'FAIL'}")
    for layout, dqk in (("v4", 512), ("v32", 576)):
        for batch, hq in ((1, 64), (64, 64), (2, 128)):  # 128 heads: two head blocks per row
            cache = sinkops.pack_kv_cache(torch.randn(5000, dqk, device=dev, dtype=torch.bfloat16), layout)
            q = torch.randn(batch, 2, hq, dqk, device=dev, dtype=torch.bfloat16)
            idx = torch.randint(-5, 5100, (batch, 2, 640), device=dev, dtype=torch.int32)
            s = torch.randn(hq, device=dev)
            ro, rl = reference.sparse_mla_decode(q.double(), cache, idx, 0.04, attn_sink=s, layout=layout)
            for b in ("cuda", "triton"):
                o, l = sinkops.sparse_mla_decode(q, cache, idx, 0.04, attn_sink=s, layout=layout, backend=b)
                e, el = rel(o, ro), rel(l, rl)
                ok = e < 3e-3 and el < 1e-5
                fails += not ok
                print(f"decode {layout} b{batch} h{hq} {b}: out {e:.2e} lse {el:.2e} {'ok' if ok else 'FAIL'}")
    print(f"smoke: {fails} failures")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
