"""Context-parallel communication: halo bytes of cp.window_attention vs an all-gather of the
sequence, for MiMo-V2.5-vision-like shapes (32 q / 8 kv heads, d 64, window (64, 64), bf16),
plus the KV all-gather of cp.sparse_mla_prefill (DeepSeek-V4 latent, 512 x bf16 per token).

    python bench/bench_cp.py                 # byte table from the layout (no processes)
    python bench/bench_cp.py --measure       # + gloo on CPU: bytes and time of the real exchange
    python bench/bench_cp.py --measure --nccl   # + NCCL timing when cp GPUs are present

The "model" bytes come from `window_halo_plan` (what every rank can compute); --measure runs
`exchange_halo` / `all_gather_seq` for real and reports the bytes they account in `stats`
(they must agree). Floor = the worst rank's received bytes / LINK_GBPS (an assumed NVLink
per-GPU receive bandwidth for H200; gloo on CPU is far slower and is timed only as a check).
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from sinkops import cp  # noqa: E402

LINK_GBPS = 450.0  # assumption: H200 NVLink, one direction, per GPU
HQ, HK, D, DV, ELEM = 32, 8, 64, 64, 2  # MiMo-V2.5 vision, bf16
ROW_BYTES = HK * (D + DV) * ELEM        # one token's K|V message row
MLA_ROW_BYTES = 512 * 2                 # DeepSeek-V4 latent, bf16
CASES = [  # (name, total tokens, window)
    ("image 1x4096", 4096, (64, 64)),
    ("video 16x1024", 16 * 1024, (64, 64)),
    ("video 64x1024", 64 * 1024, (64, 64)),
    ("video 64x1024 causal", 64 * 1024, (64, 0)),
]


def halo_recv_tokens(cp_size, t_local, window):
    worst = 0
    for r in range(cp_size):
        plan = cp.window_halo_plan(cp_size, t_local, r, *window)
        worst = max(worst, sum(b - a for a, b, o in plan.pieces() if o != r))
    return worst


def byte_table():
    print(f"{'case':24} {'cp':>3} {'halo recv/rank':>15} {'all-gather recv':>16} {'ratio':>7} "
          f"{'halo floor us':>14} {'AG floor us':>12}")
    for name, total, window in CASES:
        for cp_size in (2, 4, 8):
            t_local = total // cp_size
            halo = halo_recv_tokens(cp_size, t_local, window) * ROW_BYTES
            ag = (cp_size - 1) * t_local * ROW_BYTES
            print(f"{name:24} {cp_size:3d} {halo / 1e6:12.3f} MB {ag / 1e6:13.3f} MB "
                  f"{ag / max(halo, 1):6.1f}x {halo / LINK_GBPS / 1e3:14.2f} "
                  f"{ag / LINK_GBPS / 1e3:12.2f}")
    print("\nsparse MLA prefill (KV all-gather is required: indices reach any token)")
    for total in (32768, 131072):
        for cp_size in (2, 4, 8):
            ag = (cp_size - 1) * (total // cp_size) * MLA_ROW_BYTES
            print(f"  {total:7d} tokens cp={cp_size}: {ag / 1e6:8.2f} MB per rank, "
                  f"floor {ag / LINK_GBPS / 1e3:7.2f} us")


def _median_time(fn, sync, reps):
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def _measure_worker(rank, world, port, dist_backend, total, window, out_q):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    gpu = dist_backend == "nccl"
    if gpu:
        torch.cuda.set_device(rank)
    dist.init_process_group(dist_backend, rank=rank, world_size=world)
    dev = f"cuda:{rank}" if gpu else "cpu"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    t_local = total // world
    k = torch.randn(t_local, HK, D, dtype=torch.bfloat16, device=dev)
    v = torch.randn(t_local, HK, DV, dtype=torch.bfloat16, device=dev)
    tokens = torch.cat([k.reshape(t_local, -1), v.reshape(t_local, -1)], dim=1)
    plan = cp.window_halo_plan(world, t_local, rank, *window)
    stats = {}
    cp.exchange_halo(tokens, plan, *window, stats=stats)
    reps = 20 if gpu else 5
    t_halo = _median_time(lambda: cp.exchange_halo(tokens, plan, *window), sync, reps)
    t_ag = _median_time(lambda: cp.all_gather_seq(tokens), sync, reps)
    res = [stats["recv_bytes"], t_halo, t_ag]
    if gpu:  # the whole CP op (halo + local compute) vs the single-device op on all T tokens
        from sinkops import ops

        q = torch.randn(t_local, HQ, D, dtype=torch.bfloat16, device=dev)
        seg = 1024 if total >= 1024 else total
        cu = torch.arange(0, total + 1, seg, dtype=torch.int32, device=dev)
        res.append(_median_time(lambda: cp.window_attention(q, k, v, cu, window), sync, reps))

        # what CP splits: the single-device op over the whole sequence on one GPU
        qg = torch.randn(total, HQ, D, dtype=torch.bfloat16, device=dev)
        kg = torch.randn(total, HK, D, dtype=torch.bfloat16, device=dev)
        vg = torch.randn(total, HK, DV, dtype=torch.bfloat16, device=dev)

        def single():
            return ops.window_attention(qg, kg, vg, cu, cu, seg, seg, window_size=window)

        res.append(_median_time(single, sync, reps))
    out_q.put((rank, res))
    dist.barrier()
    dist.destroy_process_group()


def measure(dist_backend, worlds):
    import torch.multiprocessing as mp

    print(f"\nmeasured with {dist_backend} (median; CPU gloo times are not NVLink-like)")
    print(f"{'case':24} {'cp':>3} {'halo recv (stats)':>18} {'model':>10} {'halo ms':>9} "
          f"{'all-gather ms':>14}" + (f" {'cp.window_attention ms':>23} {'1-GPU op ms':>11}"
                                      if dist_backend == "nccl" else ""))
    ctx = mp.get_context("spawn")
    for name, total, window in CASES[:2] if dist_backend == "gloo" else CASES:
        for world in worlds:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            q = ctx.Queue()
            procs = [ctx.Process(target=_measure_worker,
                                 args=(r, world, port, dist_backend, total, window, q))
                     for r in range(world)]
            for p in procs:
                p.start()
            res = dict(q.get(timeout=300) for _ in procs)
            for p in procs:
                p.join(timeout=60)
            worst = max(res.values(), key=lambda x: x[0])
            model = halo_recv_tokens(world, total // world, window) * ROW_BYTES
            line = (f"{name:24} {world:3d} {worst[0] / 1e6:15.3f} MB {model / 1e6:7.3f} MB "
                    f"{worst[1] * 1e3:9.3f} {worst[2] * 1e3:14.3f}")
            if dist_backend == "nccl":
                line += f" {worst[3] * 1e3:23.3f} {worst[4] * 1e3:11.3f}"
            print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measure", action="store_true", help="run the exchange with gloo on CPU")
    ap.add_argument("--nccl", action="store_true", help="also time with NCCL on local GPUs")
    args = ap.parse_args()
    byte_table()
    if args.measure:
        measure("gloo", (2, 4))
    if args.nccl:
        n = torch.cuda.device_count()
        worlds = tuple(w for w in (2, 4, 8) if w <= n)
        if worlds:
            measure("nccl", worlds)
        else:
            print("\nNCCL timing skipped: fewer than 2 CUDA devices")


if __name__ == "__main__":
    main()
