"""Launches of every GPU kernel for compute-sanitizer (memcheck, racecheck), on the CUDA and
Triton backends: ragged shapes (empty segments, windows at edges, odd topk, every CUDA head-dim
instantiation, split and single-pass decode) and the device-side values no kernel may let out
of bounds (docs/DESIGN.md §2): cu_seqlens negative / decreasing / past the end / INT32_MIN..MAX,
indices INT32_MIN / INT32_MAX / -1 / past the pool, topk_length below 0 and above topk; the
backward kernels (Triton's, the CUDA window and sparse backwards) under the same values.

    compute-sanitizer --tool memcheck python3 tools/sanitize_cases.py [cuda,triton] [backward,sparse_backward,window,prefill,decode]
Prints one line per group; the sanitizer's own summary says whether anything was caught.
"""
import os
import sys

import torch

import sinkops

dev = "cuda"
torch.manual_seed(0)
I32_MIN, I32_MAX = -2**31, 2**31 - 1
BACKENDS = sys.argv[1].split(",") if len(sys.argv) > 1 else ["cuda", "triton"]
GROUPS = sys.argv[2].split(",") if len(sys.argv) > 2 else ["backward", "sparse_backward", "window", "prefill", "decode"]
failures = 0


def run(name, fn):
    global failures
    try:
        fn()
        torch.cuda.synchronize()
        print(f"{name}: ok", flush=True)
    except Exception as e:  # keep going: the sanitizer report is what matters
        failures += 1
        print(f"{name}: {type(e).__name__}: {e}", flush=True)


def cu(values):
    return torch.tensor(values, dtype=torch.int32, device=dev)


def window(backend):
    if backend == "cuda":  # both kernel families: the sm_90a one (default on Hopper) and mma.sync
        os.environ["SINKOPS_CUDA_SM80"] = "1"
        window_cases(backend)
        os.environ.pop("SINKOPS_CUDA_SM80")
        for steps in ("3", "1000"):  # sm_90a: several blocks of positions per CTA (tiles kept / reloaded)
            os.environ["SINKOPS_WA90_STEPS"] = steps
            window_cases(backend)
            os.environ.pop("SINKOPS_WA90_STEPS")
        for kernel in ("1", "0"):  # sm_90a: the wide-window kernel / the narrow one for every window
            os.environ["SINKOPS_WA90_WIDE"] = kernel
            window_cases(backend)
            os.environ.pop("SINKOPS_WA90_WIDE")
    window_cases(backend)
    # a long segment: more K/V tiles than pipeline stages (the ring wraps), every sink value
    for d in (64, 128):
        q, k, v = (torch.randn(700, h, d, device=dev, dtype=torch.bfloat16) for h in (32, 8, 8))
        s = torch.tensor([float("inf"), float("-inf"), 0.5, -1.0] * 8, device=dev)
        for mode in ("key0", "null"):
            sinkops.window_attention(q, k, v, cu([0, 650, 700]), None, 650, window_size=(-1, -1), sinks=s,
                                     sink_mode=mode, return_lse=True, backend=backend)


def window_cases(backend):
    for d, dv, (hq, hk) in ((64, 64, (8, 2)), (80, 80, (4, 4)), (96, 96, (6, 2)), (128, 128, (4, 1)),
                            (192, 128, (4, 4)), (256, 256, (2, 1)), (33, 33, (2, 1))):
        lens = [70, 0, 1, 130]
        t = sum(lens)
        q = torch.randn(t, hq, d, device=dev, dtype=torch.bfloat16)
        k = torch.randn(t, hk, d, device=dev, dtype=torch.bfloat16)
        v = torch.randn(t, hk, dv, device=dev, dtype=torch.bfloat16)
        good = cu([0, 70, 70, 71, 201])
        s = torch.randn(hq, device=dev)
        for mode in ("key0", "null"):
            sinkops.window_attention(q, k, v, good, None, 130, window_size=(16, 16), sinks=s, sink_mode=mode,
                                     return_lse=True, backend=backend)
        sinkops.window_attention(q, k, v, good, None, 130, causal=True, backend=backend)
        sinkops.window_attention(q, k, v, good, None, 130, sinks=s, sink_mode="key0", backend=backend)
        # Bad cu_seqlens: every value is clamped into [0, T]; max_seqlen as the caller promised.
        for bad in ([-5, 70, 40, 300, I32_MAX], [I32_MIN, I32_MAX], [200, 10, 201, -1, 5], [0, 201, 201, 500, 0]):
            sinkops.window_attention(q, k, v, cu(bad), None, 201, window_size=(16, 16), sinks=s, sink_mode="key0",
                                     return_lse=True, backend=backend)


def prefill(backend):
    for dqk, hq, topk in ((512, 8, 17), (576, 64, 70), (512, 128, 64), (576, 24, 130), (512, 100, 300),
                         (576, 13, 200), (512, 16, 640), (512, 32, 200)):  # <= 32 heads: the few-heads kernel
        q = torch.randn(5, hq, dqk, device=dev, dtype=torch.bfloat16)
        kv = torch.randn(100, 1, dqk, device=dev, dtype=torch.bfloat16)
        idx = torch.randint(-5, 110, (5, 1, topk), device=dev, dtype=torch.int32)
        idx[0, 0, :3] = torch.tensor([I32_MIN, I32_MAX, 100], dtype=torch.int32)
        idx[1] = I32_MAX
        tl = cu([topk, I32_MAX, -3, I32_MIN, 0])
        s = torch.randn(hq, device=dev)
        sinkops.sparse_mla_prefill(q, kv, idx, 0.05, attn_sink=s, backend=backend)
        sinkops.sparse_mla_prefill(q, kv, idx, 0.05, attn_sink=s, topk_length=tl, backend=backend)
    # more (row, head block) items than SMs (many waves of CTAs): rows of 0, 1 and 2 steps
    q = torch.randn(300, 128, 576, device=dev, dtype=torch.bfloat16)
    kv = torch.randn(400, 1, 576, device=dev, dtype=torch.bfloat16)
    idx = torch.randint(-5, 410, (300, 1, 140), device=dev, dtype=torch.int32)
    tl = torch.randint(0, 141, (300,), device=dev, dtype=torch.int32)
    tl[::4] = 0
    sinkops.sparse_mla_prefill(q, kv, idx, 0.05, attn_sink=torch.randn(128, device=dev), topk_length=tl,
                               backend=backend)


def decode(backend):
    for layout, dqk in (("v4", 512), ("v32", 576)):
        cache = sinkops.pack_kv_cache(torch.randn(300, dqk, device=dev, dtype=torch.bfloat16), layout, block_size=64)
        # split-k + combine, split, single pass; 150 + 9 keys: three 64-key blocks (both buffers
        # reused); 128 heads: two head blocks per row; <= 32 heads: the sm90 few-heads kernel
        # (N = 8 and 16: split, and single pass at 400 / 300 rows; batch 1 at 64 heads: 8-head blocks);
        # 480 single-pass items at 128 heads: persistent CTAs run several; 50 heads: a head count no
        # kernel's head block divides, split
        for b, topk, hq in ((1, 37, 16), (3, 150, 128), (80, 37, 16), (2, 150, 8), (200, 150, 8), (150, 150, 16),
                            (1, 150, 64), (120, 150, 128), (5, 150, 50)):
            q = torch.randn(b, 2, hq, dqk, device=dev, dtype=torch.bfloat16)
            idx = torch.randint(-5, 330, (b, 2, topk), device=dev, dtype=torch.int32)
            idx[0, 0, :3] = torch.tensor([I32_MIN, I32_MAX, 320], dtype=torch.int32)
            tl = torch.full((b,), I32_MAX, dtype=torch.int32, device=dev)
            tl[0] = -7
            xtl = torch.full((b,), I32_MIN, dtype=torch.int32, device=dev)
            s = torch.randn(hq, device=dev)
            sinkops.sparse_mla_decode(q, cache, idx, 0.05, attn_sink=s, layout=layout, extra_kv_cache=cache,
                                      extra_indices=idx[..., :9], backend=backend)
            sinkops.sparse_mla_decode(q, cache, idx, 0.05, attn_sink=s, topk_length=tl, layout=layout,
                                      extra_kv_cache=cache, extra_indices=idx[..., :9].contiguous(),
                                      extra_topk_length=xtl, backend=backend)
            if hq > 16 and backend == "cuda":  # the few-heads kernel forced, in 8-head blocks
                from sinkops.ops import decode as decode_op
                os.environ["SINKOPS_DECODE_FEW_HEADS"] = "1"
                decode_op._PLANS.clear()
                sinkops.sparse_mla_decode(q, cache, idx, 0.05, attn_sink=s, topk_length=tl, layout=layout,
                                          extra_kv_cache=cache, extra_indices=idx[..., :9].contiguous(),
                                          extra_topk_length=xtl, backend=backend)
                os.environ.pop("SINKOPS_DECODE_FEW_HEADS")
                decode_op._PLANS.clear()


def backward(backend):
    """The backward kernels under the same bad values: Triton's, and the CUDA window backward
    (sm_90a, head dims 64..128; called by name, since auto keeps unbounded windows for Triton)."""
    # (d 64 +-16 and +-64 (MiMo's window, 4 query heads per kv head): the streaming dq kernel,
    # SINKOPS_WA90_STEPS=3 in the environment gives it runs of steps; d 64 causal: its one-step twin)
    for d, (hq, hk), window_size in ((64, (8, 2), (16, 16)), (64, (4, 1), (64, 64)), (64, (4, 2), (-1, 0)),
                                     (128, (4, 4), (-1, -1)), (80, (4, 1), (5, 0)), (96, (16, 1), (70, 3)),
                                     (33, (2, 1), (-1, 3))):
        if backend == "cuda" and d % 8:
            continue  # the Triton backward's case
        t = 201
        q, k, v = (torch.randn(t, h, d, device=dev, dtype=torch.bfloat16, requires_grad=True) for h in (hq, hk, hk))
        for mode, sinks in (("key0", [1.0, float("inf"), float("-inf"), 0.2]), ("null", [float("inf"), -1.0, 0.5, 2.0])):
            s = torch.tensor((sinks * 4)[:hq], device=dev, requires_grad=True)
            for c in ([0, 70, 70, 71, 201], [-5, 70, 40, 300, I32_MAX], [I32_MIN, I32_MAX], [200, 10, 201, -1, 5]):
                out, lse = sinkops.window_attention(q, k, v, cu(c), None, 201, window_size=window_size, sinks=s,
                                                    sink_mode=mode, return_lse=True, backend=backend)
                if backend == "cuda":
                    torch.ops.sinkops.window_attention_backward(
                        torch.ones_like(out), None, *(x.detach() for x in (q, k, v, out, lse)), cu(c), cu(c), 201, 201,
                        *window_size, d ** -0.5, s.detach(), mode, False, "cuda")
                else:
                    torch.autograd.grad((out.float().sum() + lse.nan_to_num(posinf=0).sum()), [q, k, v, s])


def sparse_backward(backend):
    """The sparse prefill backward under bad indices / topk_length, both dkv modes: Triton's through
    autograd, the CUDA one (sm_90a) by name (so the case runs it whatever auto would choose)."""
    for dqk, hq, topk in ((512, 8, 17), (576, 64, 70), (512, 128, 64), (576, 100, 130)):
        q = torch.randn(5, hq, dqk, device=dev, dtype=torch.bfloat16, requires_grad=True)
        kv = torch.randn(100, 1, dqk, device=dev, dtype=torch.bfloat16, requires_grad=True)
        idx = torch.randint(-5, 110, (5, 1, topk), device=dev, dtype=torch.int32)
        idx[0, 0, :3] = torch.tensor([I32_MIN, I32_MAX, 100], dtype=torch.int32)
        idx[1] = I32_MAX
        tl = cu([topk, I32_MAX, -3, I32_MIN, 0])
        s = torch.randn(hq, device=dev, requires_grad=True)
        for deterministic in (False, True):
            torch.use_deterministic_algorithms(deterministic)
            out, _, lse = sinkops.sparse_mla_prefill(q, kv, idx, 0.05, attn_sink=s, topk_length=tl, backend=backend)
            if backend == "cuda":
                torch.ops.sinkops.sparse_mla_prefill_backward(
                    torch.ones_like(out), torch.ones_like(lse), q.detach(), kv.detach(), idx, out, lse, 0.05, 512,
                    s.detach(), tl, deterministic, "cuda")
            else:
                torch.autograd.grad(out.float().sum() + lse.nan_to_num(posinf=0).sum(), [q, kv, s])
        torch.use_deterministic_algorithms(False)


for backend in BACKENDS:
    for group, fn in (("backward", backward), ("sparse_backward", sparse_backward), ("window", window),
                      ("prefill", prefill), ("decode", decode)):
        if group in GROUPS:
            run(f"{backend} {group}", lambda: fn(backend))
print(f"sanitize cases: {failures} raised")
sys.exit(1 if failures else 0)
