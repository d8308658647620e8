"""Where the host time of one eager call goes, on this machine (bench_dispatch.py gives the totals):
timeit of the building blocks (tensor attribute reads, allocations, the torch.ops dispatcher, a
pybind11 call, cudaLaunchKernel through torch) and a cProfile of the window_attention eager call."""
from __future__ import annotations

import cProfile
import os
import pstats
import sys
import timeit

import torch

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # a checkout, unless installed


def main():
    import sinkops
    import sinkops.cuda

    dev = torch.device("cuda")
    q = torch.randn(64, 32, 64, device=dev, dtype=torch.bfloat16)
    k = torch.randn(64, 8, 64, device=dev, dtype=torch.bfloat16)
    cu = torch.tensor([0, 64], dtype=torch.int32, device=dev)
    s = torch.rand(32, device=dev)
    f32 = torch.float32
    env = dict(globals(), q=q, k=k, cu=cu, s=s, f32=f32, dev=dev, torch=torch, sinkops=sinkops)
    n = 20000
    print("| building block | ns |\n|---|---|")
    for stmt in ["q.shape", "q.shape[1]", "q.stride()", "q.dtype", "q.device", "q.data_ptr()",
                 "torch.is_grad_enabled()", "torch.compiler.is_compiling()", "torch._C._len_torch_dispatch_stack()",
                 "torch._C._cuda_getCurrentRawStream(0)", "torch.cuda.current_device()",
                 "q.new_empty(64, 32, 64)", "torch.empty(32, 64, dtype=f32, device=dev)",
                 "torch.ops.aten.empty.memory_format([4], device=dev)", "q.add_(0)"]:
        t = min(timeit.repeat(stmt, globals=env, number=n, repeat=3)) / n * 1e9
        torch.cuda.synchronize()
        print(f"| `{stmt}` | {t:.0f} |")
    # Floors: a pybind11 call into sinkops._C that returns before launching (batch 0), the same
    # call launching the kernel, and torch.ops into a Python kernel that does nothing.
    from sinkops import _native
    from sinkops.ops import window as W
    sinkops.window_attention(q, k, k, cu, None, 64, window_size=(64, 64), sinks=s, sink_mode="key0", backend="cuda")
    captured = []
    for plan in W._PLANS.values():
        if plan.backend.name == "cuda":
            real = plan.launch
            plan.launch = lambda a, real=real: (captured.append(a), real(a))
    sinkops.window_attention(q, k, k, cu, None, 64, window_size=(64, 64), sinks=s, sink_mode="key0", backend="cuda")
    a = captured[0]
    mod = sinkops.cuda.backend.mod
    tmpl = _native.template_for(mod, a)
    call = _native.window_attention_call(a)
    call0 = call[:11] + (0,) + call[12:]  # batch 0: returns before launching
    stream = torch._C._cuda_getCurrentRawStream(0)
    lib = torch.library.Library("sinkops_profile", "DEF")
    lib.define("noop(Tensor q, Tensor k, Tensor v, Tensor cu_q, Tensor cu_k, int a, int b, int c, int d, float s, "
               "Tensor? sinks, str m, str backend) -> Tensor")
    lib.impl("noop", lambda *args: args[0], "CompositeExplicitAutograd")
    env.update(mod=mod, tmpl=tmpl, call=call, call0=call0, stream=stream, native=_native, a=a)
    for stmt in ["mod.window_attention_fwd(tmpl, call0, stream, 0)", "mod.window_attention_fwd(tmpl, call, stream, 0)",
                 "native.window_attention_call(a)",
                 "torch.ops.sinkops_profile.noop(q, k, k, cu, cu, 64, 64, 64, 64, 0.1, s, 'key0', 'cuda')"]:
        t = min(timeit.repeat(stmt, globals=env, number=n, repeat=3)) / n * 1e9
        torch.cuda.synchronize()
        print(f"| `{stmt}` | {t:.0f} |")
    backend = os.environ.get("PROFILE_BACKEND", "cuda")
    op = os.environ.get("PROFILE_OP", "window")
    if op == "window":
        fn = lambda: sinkops.window_attention(q, k, k, cu, None, 64, window_size=(64, 64), sinks=s,  # noqa: E731
                                              sink_mode="key0", backend=backend)
    elif op == "prefill":
        pq = torch.randn(16, 64, 512, device=dev, dtype=torch.bfloat16)
        pkv = torch.randn(1024, 1, 512, device=dev, dtype=torch.bfloat16)
        pidx = torch.randint(0, 1024, (16, 1, 128), device=dev, dtype=torch.int32)
        ps = torch.randn(64, device=dev)
        fn = lambda: sinkops.sparse_mla_prefill(pq, pkv, pidx, 0.05, attn_sink=ps, backend=backend)  # noqa: E731
    else:
        cache = sinkops.pack_kv_cache(torch.randn(4096, 512, device=dev, dtype=torch.bfloat16), "v4")
        dq = torch.randn(1, 1, 64, 512, device=dev, dtype=torch.bfloat16)
        didx = torch.randint(0, 4096, (1, 1, 640), device=dev, dtype=torch.int32)
        ps = torch.randn(64, device=dev)
        fn = lambda: sinkops.sparse_mla_decode(dq, cache, didx, 0.05, attn_sink=ps, layout="v4",  # noqa: E731
                                               backend=backend)
    for _ in range(100):
        fn()
    torch.cuda.synchronize()
    torch.cuda.synchronize()
    cprofile_host(fn, 500, 18, 2_000_000_000)


def cprofile_host(fn, calls, top, sleep_cycles):
    """cProfile of `calls` calls of fn issued behind a GPU sleep (the profile sees host time only),
    the `top` functions by own time."""
    torch.cuda._sleep(sleep_cycles)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn()
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    main()
