"""sinkops.cp across real processes: gloo on CPU (2 and 4 ranks, float64, backend="torch")
and NCCL on 2 GPUs (bf16, backend="auto", marked gpu). Every CP op is compared with the
single-process op on the global sequence, rows mapped through the load-balanced layout; on gloo
the gradients too (q, k, v / kv through the halo exchange and the all-gather's reduce-scatter,
and the replicated sink's, summed over ranks).

Each world is launched ONCE (one subprocess per rank running every case, importing torch is
the slow part); the test ids below then report the cases one by one. A hang fails through the
process-group timeout and the launcher's wall-clock limit instead of blocking CI.
"""
from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCH_TIMEOUT_S = 150

# (left, right, causal) windows: two-sided, one-sided, causal, unbounded, wider than a chunk
WINDOWS = [(-1, -1, False), (3, 3, False), (5, 0, False), (-1, -1, True), (0, 0, False),
           (2, -1, False), (-1, 4, False), (40, 40, False), (9, 9, True)]
SINKS = ["none", "key0", "key0_inf", "null", "null_inf"]
WINDOW_CASES = [f"window_{left}_{right}_{'causal' if causal else 'nc'}_{sink}"
                for left, right, causal in WINDOWS for sink in SINKS]
CASES = ["all_gather_seq", "sparse_mla_prefill", "sparse_mla_prefill_sink_inf",
         "window_halo_bytes"] + WINDOW_CASES
GPU_CASES = ["all_gather_seq", "sparse_mla_prefill", "window_64_64_nc_key0",
             "window_64_64_nc_null_inf", "window_64_0_nc_key0_inf", "window_-1_-1_causal_key0"]


# ---------------------------------------------------------------------------------- launcher


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(world: int, dist_backend: str, cases) -> dict:
    """Run every case on `world` ranks; returns {case: [per-rank result]} ("ok" or an error)."""
    seed = random.randrange(1 << 30)  # fresh data every run; printed for replay
    print(f"cp world={world} {dist_backend} seed={seed}")
    port = _free_port()
    import sinkops  # the ranks import the same sinkops as this process (installed or in-tree)

    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(sinkops.__file__)))
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([pkg_root, HERE, os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), str(r), str(world), str(port),
             dist_backend, str(seed), tmp, ",".join(cases)],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for r in range(world)]
        deadline = time.monotonic() + LAUNCH_TIMEOUT_S
        logs = []
        for p in procs:
            try:
                logs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                pytest.fail(f"cp world={world} {dist_backend} hung (> {LAUNCH_TIMEOUT_S}s), "
                            f"seed={seed}")
        results = {}
        for r, (p, log) in enumerate(zip(procs, logs)):
            path = os.path.join(tmp, f"rank{r}.json")
            if p.returncode != 0 or not os.path.exists(path):
                pytest.fail(f"rank {r} exited with {p.returncode}, seed={seed}:\n{log[-4000:]}")
            with open(path) as f:
                for case, res in json.load(f).items():
                    results.setdefault(case, []).append(res)
    return {"seed": seed, "results": results}


_WORLDS: dict = {}


def _world_results(world, dist_backend, cases):
    key = (world, dist_backend)
    if key not in _WORLDS:
        _WORLDS[key] = _launch(world, dist_backend, cases)
    return _WORLDS[key]


def _check(run, case):
    res = run["results"].get(case)
    assert res is not None, f"{case}: no result (seed={run['seed']})"
    bad = [f"rank {r}: {m}" for r, m in enumerate(res) if m != "ok"]
    assert not bad, f"{case} (seed={run['seed']}):\n" + "\n".join(bad)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("world", [2, 4])
def test_cp_gloo(world, case):
    _check(_world_results(world, "gloo", CASES), case)


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES)
def test_cp_nccl_two_gpus(case):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA devices")
    _check(_world_results(2, "nccl", GPU_CASES), case)


# ---------------------------------------------------------------------------------- cases
# Run inside the rank processes. Every rank builds the same GLOBAL data from the case seed,
# takes its shard, runs the CP op, and compares with the single-process op's rows for it.


def _gen(seed):
    import torch

    return torch.Generator().manual_seed(seed)


def _compare(actual, single, oracle64, gpu, name, rtol=1e-9):
    """CPU: float64 reference both ways, equal up to summation order (rtol: float32 sink gradients
    use 1e-5). GPU: DESIGN.md §4 rule against the float64 oracle with the single-GPU op as the
    baseline."""
    import torch

    if gpu:
        from helpers import check_close

        check_close(actual, oracle64, single, name=name)
        return
    actual, single = actual.cpu(), single.cpu()
    assert not torch.isnan(actual).any(), f"{name}: NaN (unwritten row?)"
    fin = torch.isfinite(single)
    assert torch.equal(actual[~fin], single[~fin]), f"{name}: non-finite entries differ"
    # float32 sink gradients (rtol > 1e-9): the sum over ranks differs from the single sum by a few
    # ulps of the terms, which an entry near zero (cancelling terms) does not scale with: atol
    # 0.1 rtol x the largest entry (at least 1; seed 8953884 missed 1e-7 by 6e-7 at an entry 0.034).
    f32 = rtol > 1e-9
    scale = max(single[fin].abs().max().item(), 1.0) if f32 and fin.any() else 1.0
    torch.testing.assert_close(actual[fin], single[fin], rtol=rtol, atol=rtol * (0.1 if f32 else 0.01) * scale,
                               msg=lambda m: f"{name}: {m}")


def case_all_gather_seq(seed, gpu):
    import torch
    import torch.distributed as dist
    from sinkops import cp

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = f"cuda:{rank}" if gpu else "cpu"
    n = 3
    xs = [torch.randn(2, n, 4, generator=_gen(seed + r), dtype=torch.float64) for r in range(world)]
    ws = [torch.randn(2, world * n, 4, generator=_gen(seed + 1000 + r), dtype=torch.float64)
          for r in range(world)]
    x = xs[rank].to(dev, copy=True).requires_grad_()
    y = cp.all_gather_seq(x, dim=1)
    assert torch.equal(y.detach().cpu(), torch.cat(xs, dim=1)), "forward is not a rank-major concat"
    (y * ws[rank].to(dev)).sum().backward()
    # each rank's loss reads every rank's x through its own copy of y: d/dx_r = sum_r' w_r'[r]
    expected = sum(ws)[:, rank * n:(rank + 1) * n]
    torch.testing.assert_close(x.grad.cpu(), expected, rtol=1e-12, atol=1e-12)
    # and the same through dim=-1 on a 2-D tensor (negative dim, different layout)
    x2 = xs[rank][0].t().contiguous().to(dev, copy=True).requires_grad_()        # [4, n]
    y2 = cp.all_gather_seq(x2, dim=-1)
    (y2 * ws[rank][0].t().to(dev)).sum().backward()
    torch.testing.assert_close(x2.grad.cpu(), expected[0].t(), rtol=1e-12, atol=1e-12)


def case_sparse_mla_prefill(seed, gpu, sink_inf=False):
    import torch
    import torch.distributed as dist
    from sinkops import cp, ops

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = f"cuda:{rank}" if gpu else "cpu"
    dtype, backend = (torch.bfloat16, "auto") if gpu else (torch.float64, "torch")
    g = _gen(seed)
    t_local, hq, dqk, topk = (64, 16, 576, 32) if gpu else (6, 3, 512, 12)
    total = world * t_local
    q = torch.randn(total, hq, dqk, generator=g, dtype=torch.float64)
    kv = torch.randn(total, 1, dqk, generator=g, dtype=torch.float64)
    idx = torch.randint(-2, total + 3, (total, 1, topk), generator=g, dtype=torch.int32)
    idx[:, :, 1] = idx[:, :, 0]  # duplicates count twice
    idx[0] = -1                   # a row with no valid key
    topk_length = torch.randint(0, topk + 1, (total,), generator=g, dtype=torch.int32)
    sink = torch.empty(hq, dtype=torch.float32).uniform_(-2.2, 2.5, generator=g)
    if sink_inf:
        sink[0], sink[-1] = float("inf"), float("-inf")
    scale = dqk ** -0.5
    qd, kvd, idxd, tld, sd = (t.to(dev) for t in (q.to(dtype), kv.to(dtype), idx, topk_length,
                                                   sink))
    single = ops.sparse_mla_prefill(qd, kvd, idxd, scale, attn_sink=sd, topk_length=tld,
                                    backend=backend)
    oracle = ops.sparse_mla_prefill(q.to(dtype).double(), kv.to(dtype).double(), idx, scale,
                                    attn_sink=sink, topk_length=topk_length, backend="torch")
    shard = lambda t: cp.shard_sequence(t, world, rank)  # noqa: E731
    stats = {}
    leaves = [shard(qd).requires_grad_(), shard(kvd).requires_grad_()]
    s_local = sd.clone().requires_grad_()
    got = cp.sparse_mla_prefill(*leaves, shard(idxd), scale, attn_sink=s_local,
                                topk_length=shard(tld), backend=backend, stats=stats)
    for name, a, s, o in zip(("out", "max_logits", "lse"), got, single, oracle):
        _compare(a.detach(), shard(s), shard(o.to(s.dtype if gpu else o.dtype)), gpu, name)
    if not gpu:  # the backward: the all-gather's reduce-scatter returns each rank's dkv
        lse_t = got[2].t()  # [Hq, t_local]: sharded along dim 1 like window lse
        local = _local_grads(got[0], lse_t, leaves, s_local, seed, world, rank)
        full = [qd.clone().requires_grad_(), kvd.clone().requires_grad_()]
        s_all = sd.clone().requires_grad_()
        o, _, l = ops.sparse_mla_prefill(*full, idxd, scale, attn_sink=s_all, topk_length=tld, backend=backend)
        want = _global_grads(o, l.t(), full, s_all, seed, world)
        for name, a, w in zip(("dq", "dkv"), local, want):
            _compare(a, shard(w), None, False, name)
        _compare(local[2], want[2], None, False, "d_attn_sink", rtol=1e-5)  # float32 sinks
    row = dqk * kvd.element_size()
    assert stats["recv_bytes"] == (world - 1) * t_local * row, stats


def _segments(total, rng):
    """Uneven segments crossing chunk and rank boundaries (incl. empty and length-1 ones);
    sometimes ending early so the global tail is CP padding."""
    cu, pos = [0], 0
    end = total - rng.choice([0, 0, 1, 3])
    while pos < end:
        pos = min(end, pos + rng.choice([0, 1, 2, 7, 13, 29, 61]))
        cu.append(pos)
    return cu


def _window_case(seed, gpu, left, right, causal, sink_kind, t_local=None, check_bytes=False):
    import torch
    import torch.distributed as dist
    from sinkops import cp, ops
    from sinkops.cp import comm

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = f"cuda:{rank}" if gpu else "cpu"
    dtype, backend = (torch.bfloat16, "auto") if gpu else (torch.float64, "torch")
    g, rng = _gen(seed), random.Random(seed)
    if t_local is None:
        t_local = 256 if gpu else 10  # CPU: chunks of 5 tokens (odd), windows up to 40
    hq, hk, d, dv = (8, 2, 64, 64) if gpu else (4, 2, 8, 6)
    total = world * t_local
    cu = _segments(total, rng)
    q = torch.randn(total, hq, d, generator=g, dtype=torch.float64).to(dtype)
    k = torch.randn(total, hk, d, generator=g, dtype=torch.float64).to(dtype)
    v = torch.randn(total, hk, dv, generator=g, dtype=torch.float64).to(dtype)
    lo, hi = (-0.1, 0.6) if sink_kind.startswith("key0") else (-2.2, 2.5)
    sinks = torch.empty(hq, dtype=torch.float32).uniform_(lo, hi, generator=g)
    if sink_kind.endswith("_inf"):
        sinks[0], sinks[1] = float("inf"), float("-inf")
    mode = "key0" if sink_kind == "none" else sink_kind.split("_")[0]
    if sink_kind == "none":
        sinks = None
    cu_full = torch.tensor(cu + [total], dtype=torch.int32)  # CP padding = one more segment
    kw = dict(window_size=(left, right), causal=causal, softmax_scale=d ** -0.5, sink_mode=mode,
              return_lse=True)
    sd = None if sinks is None else sinks.to(dev)
    single = ops.window_attention(q.to(dev), k.to(dev), v.to(dev), cu_full.to(dev),
                                  cu_full.to(dev), total, total, sinks=sd, backend=backend, **kw)
    oracle = ops.window_attention(q.double(), k.double(), v.double(), cu_full, cu_full, total,
                                  total, sinks=sinks, backend="torch", **kw)
    shard = lambda t, dim=0: cp.shard_sequence(t, world, rank, dim)  # noqa: E731

    def no_all_gather(*a, **k):
        raise AssertionError("cp.window_attention must move a halo, not all-gather")

    saved = {n: getattr(dist, n, None) for n in ("all_gather", "all_gather_into_tensor",
                                                   "all_gather_single")}
    saved_comm = comm._ALL_GATHER
    for n in saved:
        setattr(dist, n, no_all_gather)
    comm._ALL_GATHER = no_all_gather
    stats = {}
    grad_inputs = [shard(t).to(dev).requires_grad_() for t in (q, k, v)]
    s_local = None if sd is None else sd.clone().requires_grad_()
    try:
        out, lse = cp.window_attention(
            *grad_inputs, torch.tensor(cu, dtype=torch.int32, device=dev), group=None, sinks=s_local,
            backend=backend, stats=stats, **kw)
        local_grads = None if gpu else _local_grads(out, lse, grad_inputs, s_local, seed, world, rank)
    finally:
        for n, f in saved.items():
            if f is not None:
                setattr(dist, n, f)
        comm._ALL_GATHER = saved_comm
    out, lse = out.detach(), lse.detach()
    _compare(out, shard(single[0]), shard(oracle[0]).to(out.dtype) if gpu else None, gpu, "out")
    _compare(lse, shard(single[1], 1), shard(oracle[1], 1).float() if gpu else None, gpu, "lse")
    if local_grads is not None:  # the backward through the halo exchange vs the single-process one
        leaves = [t.clone().requires_grad_() for t in (q, k, v)]
        s_all = None if sinks is None else sinks.clone().requires_grad_()
        o, l = ops.window_attention(*leaves, cu_full, cu_full, total, total, sinks=s_all, backend=backend, **kw)
        want = _global_grads(o, l, leaves, s_all, seed, world)
        for name, a, w in zip(("dq", "dk", "dv"), local_grads, want):
            _compare(a, shard(w), None, False, name)
        if s_all is not None:
            _compare(local_grads[3], want[3], None, False, "dsinks", rtol=1e-5)  # float32 sinks
    if check_bytes:
        l, r = left, (0 if causal else right)
        plan = cp.window_halo_plan(world, t_local, rank, l, r)
        row = hk * (d + dv) * q.element_size()
        remote = sum(b - a for a, b, owner in plan.pieces() if owner != rank)
        assert stats["recv_bytes"] == remote * row, (stats, remote)
        totals = torch.tensor([stats["send_bytes"], stats["recv_bytes"]], dtype=torch.int64,
                              device=dev)
        dist.all_reduce(totals)
        assert totals[0] == totals[1], f"sent {totals[0]} B != received {totals[1]} B"
        if world >= 4:
            assert stats["recv_bytes"] < stats["all_gather_recv_bytes"], stats


def _loss_weights(seed, world, out_shape, lse_shape):
    """The same random loss weights on every rank: global G [T, Hq, Dv] (out) and GL (lse)."""
    import torch

    g = _gen(seed + 17)
    return (torch.randn((world * out_shape[0],) + tuple(out_shape[1:]), generator=g, dtype=torch.float64),
            torch.randn(lse_shape, generator=g, dtype=torch.float64))


def _weighted_loss(out, lse, g_out, g_lse):
    import torch

    return (out * g_out).sum() + (torch.where(torch.isfinite(lse), lse, 0.0) * g_lse).sum()


def _local_grads(out, lse, leaves, sinks, seed, world, rank):
    """Gradients of this rank's share of the loss; a replicated sink's gradient summed over ranks."""
    import torch
    import torch.distributed as dist
    from sinkops import cp

    g_out, g_lse = _loss_weights(seed, world, out.shape, (lse.shape[0], world * lse.shape[1]))
    loss = _weighted_loss(out, lse, cp.shard_sequence(g_out, world, rank),
                          cp.shard_sequence(g_lse, world, rank, 1))
    grads = list(torch.autograd.grad(loss, leaves + ([sinks] if sinks is not None else [])))
    if sinks is not None:
        dist.all_reduce(grads[-1])
    return grads


def _global_grads(out, lse, leaves, sinks, seed, world):
    import torch

    t_local = out.shape[0] // world
    g_out, g_lse = _loss_weights(seed, world, (t_local,) + tuple(out.shape[1:]), tuple(lse.shape))
    return list(torch.autograd.grad(_weighted_loss(out, lse, g_out, g_lse),
                                    leaves + ([sinks] if sinks is not None else [])))


def run_case(case, seed, gpu):
    if case == "all_gather_seq":
        return case_all_gather_seq(seed, gpu)
    if case.startswith("sparse_mla_prefill"):
        return case_sparse_mla_prefill(seed, gpu, sink_inf=case.endswith("sink_inf"))
    if case == "window_halo_bytes":
        return _window_case(seed, gpu, 3, 3, False, "key0", t_local=16, check_bytes=True)
    _, left, right, causal, sink_kind = case.split("_", 4)
    return _window_case(seed, gpu, int(left), int(right), causal == "causal", sink_kind)


# ---------------------------------------------------------------------------------- worker


def _worker(rank, world, port, dist_backend, seed, out_dir, cases):
    import traceback
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    gpu = dist_backend == "nccl"
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group(dist_backend, rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    results = {}
    for i, case in enumerate(cases):
        try:
            run_case(case, seed + 7919 * i, gpu)
            results[case] = "ok"
        except Exception:  # record and go on: every rank runs the same collectives in order
            results[case] = traceback.format_exc(limit=4)[-3000:]
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    r, w, port, backend, seed, out_dir, names = sys.argv[1:8]
    _worker(int(r), int(w), int(port), backend, int(seed), out_dir, names.split(","))
