"""Small launches of every CUDA kernel, for compute-sanitizer (memcheck, racecheck).
Ragged shapes on purpose: empty segments, windows at edges, invalid indices, odd topk."""
import torch

import sinkops

dev = "cuda"
torch.manual_seed(0)


def run(name, fn):
    try:
        fn()
        torch.cuda.synchronize()
        print(f"{name}: ok")
    except Exception as e:  # keep going: the sanitizer report is what matters
        print(f"{name}: {type(e).__name__}: {e}")


def window():
    for d, (hq, hk) in ((64, (8, 2)), (80, (4, 4)), (128, (4, 1))):
        lens = [70, 0, 1, 130]
        cu = torch.tensor([0] + torch.tensor(lens).cumsum(0).tolist(), dtype=torch.int32, device=dev)
        t = sum(lens)
        q = torch.randn(t, hq, d, device=dev, dtype=torch.bfloat16)
        k = torch.randn(t, hk, d, device=dev, dtype=torch.bfloat16)
        v = torch.randn(t, hk, d, device=dev, dtype=torch.bfloat16)
        for mode in ("key0", "null"):
            sinkops.window_attention(q, k, v, cu, None, 130, window_size=(16, 16),
                                     sinks=torch.randn(hq, device=dev), sink_mode=mode,
                                     backend="cuda")
        sinkops.window_attention(q, k, v, cu, None, 130, causal=True, backend="cuda")


def prefill():
    for dqk, hq, topk in ((512, 8, 17), (576, 64, 70), (512, 128, 64)):
        q = torch.randn(5, hq, dqk, device=dev, dtype=torch.bfloat16)
        kv = torch.randn(100, 1, dqk, device=dev, dtype=torch.bfloat16)
        idx = torch.randint(-5, 110, (5, 1, topk), device=dev, dtype=torch.int32)
        sinkops.sparse_mla_prefill(q, kv, idx, 0.05, attn_sink=torch.randn(hq, device=dev),
                                   backend="cuda")


def decode():
    for layout, dqk in (("v4", 512), ("v32", 576)):
        cache = sinkops.pack_kv_cache(torch.randn(300, dqk, device=dev, dtype=torch.bfloat16),
                                      layout, block_size=64)
        q = torch.randn(3, 2, 16, dqk, device=dev, dtype=torch.bfloat16)
        idx = torch.randint(-5, 330, (3, 2, 37), device=dev, dtype=torch.int32)
        sinkops.sparse_mla_decode(q, cache, idx, 0.05, attn_sink=torch.randn(16, device=dev),
                                  layout=layout, extra_kv_cache=cache, extra_indices=idx[..., :9],
                                  backend="cuda")


run("window_attention", window)
run("sparse_mla_prefill", prefill)
run("sparse_mla_decode", decode)
