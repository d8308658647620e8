"""Session 34: the sparse prefill forward with each query's indices pre-sorted against random
order (graph-free do_bench medians), and the sort alone."""
import torch, triton.testing, sinkops
from sinkops.ops.prefill_backward import sorted_indices
torch.manual_seed(0)
for name, sq, skv, hq, dqk, topk in [("V4-Pro", 4096, 32768, 128, 512, 1152), ("V3.2", 2048, 32768, 128, 576, 2048),
                                     ("V4-Flash TP8", 4096, 32768, 8, 512, 640)]:
    q = torch.randn(sq, hq, dqk, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(skv, 1, dqk, device="cuda", dtype=torch.bfloat16)
    idx = torch.randint(0, skv, (sq, 1, topk), device="cuda", dtype=torch.int32)
    srt = sorted_indices(idx, None, skv)
    f = lambda i: sinkops.sparse_mla_prefill(q, kv, i, dqk ** -0.5)
    t = [triton.testing.do_bench(lambda: f(i), warmup=5, rep=40, return_mode="median") * 1e3 for i in (idx, srt, idx, srt)]
    ts = triton.testing.do_bench(lambda: sorted_indices(idx, None, skv), warmup=5, rep=40, return_mode="median") * 1e3
    print(f"fwd {name}: random {t[0]:.0f} / {t[2]:.0f} µs, sorted {t[1]:.0f} / {t[3]:.0f} µs; the sort alone {ts:.0f} µs", flush=True)
