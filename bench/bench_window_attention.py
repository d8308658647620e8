"""Window attention with sinks side by side (H200, bf16): sinkops CUDA on its sm_90a path (and with
its narrow-window kernel forced, SINKOPS_WA90_WIDE=0) and on its sm80 path (SINKOPS_CUDA_SM80=1),
sinkops Triton, FlashAttention-4 (no sink / its null sink, when `flash_attn.cute` imports) and FlexAttention (key0 as a score_mod, with --flex), against the memory
floor (q, k, v read once, out written once, at the copy bandwidth measured in this run).

Kernel columns are CUDA-graph replay (the kernel alone); the eager column is what a user pays per
call (host + kernel) on the default path; Flex is eager (compiled). The "published peer" column is
the vLLM Triton key0 kernel from DESIGN.md §5. A backend that is missing or fails prints 'n/a'.

    python bench/bench_window_attention.py [--json PATH] [--plot PATH] [--cases NAME ...] [--flex]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_kernels import Sm80Path, eager_us, graph_us  # noqa: E402

# name, segments, tokens per segment, Hq, Hk, head dim, window, vLLM Triton key0 kernel (µs)
CASES = [
    ("mimo-image 1x4096", 1, 4096, 32, 8, 64, (64, 64), 127.0),
    ("mimo-video 16x1024", 16, 1024, 32, 8, 64, (64, 64), 449.0),
    ("mimo-video 64x1024", 64, 1024, 32, 8, 64, (64, 64), 1769.0),
    ("2x2048 16/16 d80", 2, 2048, 16, 16, 80, (64, 64), 86.0),
    ("16x1024 w128", 16, 1024, 32, 8, 64, (128, 128), None),
    ("16x1024 w256", 16, 1024, 32, 8, 64, (256, 256), None),
    ("16x1024 unbounded", 16, 1024, 32, 8, 64, (-1, -1), None),
    ("16x1024 d80", 16, 1024, 32, 8, 80, (64, 64), None),
    ("16x1024 d128", 16, 1024, 32, 8, 128, (64, 64), None),
    ("unbounded 1x4096 d128", 1, 4096, 32, 8, 128, (-1, -1), None),
]
MODES = ("key0", "null", "none")
# issue 11's targets, graph replay of the key0 kernel, µs
TARGETS = {"mimo-image 1x4096": 25, "mimo-video 16x1024": 80, "mimo-video 64x1024": 320, "2x2048 16/16 d80": 20}


class NarrowKernel:
    """SINKOPS_WA90_WIDE=0 inside the block: the sm_90a launcher keeps the narrow-window kernel for
    every window (it takes the wide-window one for full / causal / wide windows by default)."""

    def __enter__(self):
        self.old = os.environ.get("SINKOPS_WA90_WIDE")
        os.environ["SINKOPS_WA90_WIDE"] = "0"

    def __exit__(self, *exc):
        if self.old is None:
            os.environ.pop("SINKOPS_WA90_WIDE")
        else:
            os.environ["SINKOPS_WA90_WIDE"] = self.old


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s (read + write), measured now on a 2 GiB tensor."""
    src = torch.empty(1 << 30, dtype=torch.int16, device="cuda")
    dst = torch.empty_like(src)
    import triton.testing

    us = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=100, return_mode="median") * 1e3
    return 2 * src.numel() * src.element_size() / (us * 1e-6)


def make_inputs(nseg, seqlen, hq, hk, d):
    t = nseg * seqlen
    q = torch.randn(t, hq, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(t, hk, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(t, hk, d, device="cuda", dtype=torch.bfloat16)
    cu = torch.arange(0, t + 1, seqlen, device="cuda", dtype=torch.int32)
    # sinks in the checkpoint ranges: MiMo (key0) U(-0.1, 0.6), DeepSeek-V4 (null) U(-2.2, 2.5)
    sinks = {"key0": -0.1 + 0.7 * torch.rand(hq, device="cuda"),
             "null": -2.2 + 4.7 * torch.rand(hq, device="cuda"), "none": None}
    return q, k, v, cu, sinks


def ours(backend, q, k, v, cu, seqlen, window, sinks, mode):
    import sinkops

    out = torch.empty_like(q[..., : v.shape[2]])
    kw = dict(window_size=window, sinks=sinks, sink_mode="key0" if mode == "none" else mode,
              out=out, backend=backend)
    return lambda: sinkops.window_attention(q, k, v, cu, cu, seqlen, seqlen, **kw)


def fa4(q, k, v, cu, seqlen, window, sinks):
    """FlashAttention-4 (flash_attn.cute): no sink, or its learnable_sink (the null mode)."""
    from flash_attn.cute import flash_attn_varlen_func

    left, right = window
    ws = (None if left < 0 else left, None if right < 0 else right)
    return lambda: flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=seqlen,
                                          max_seqlen_k=seqlen, window_size=ws, learnable_sink=sinks)


def flex_key0(q, cu, window, sinks):
    """FlexAttention's (block mask for window + segments, score_mod adding the key0 bias) for packed
    tokens with cu_seqlens `cu`; also what bench_backward.py times."""
    from torch.nn.attention.flex_attention import create_block_mask

    t = q.shape[0]
    pos = torch.arange(t, device=q.device)
    doc = torch.searchsorted(cu[1:], pos, right=True)          # segment of each token
    seg_pos = pos - cu.long()[doc]                             # position inside its segment
    left, right = window

    def mask_mod(b, h, qi, ki):
        m = doc[qi] == doc[ki]
        if left >= 0:
            m = m & (seg_pos[ki] >= seg_pos[qi] - left)
        if right >= 0:
            m = m & (seg_pos[ki] <= seg_pos[qi] + right)
        return m

    def key0_bias(score, b, h, qi, ki):
        return score + torch.where(seg_pos[ki] == 0, sinks[h], 0.0)

    return create_block_mask(mask_mod, 1, None, t, t, device=q.device), key0_bias


def bench_flex(q, k, v, cu, seqlen, window, sinks):
    from torch.nn.attention.flex_attention import flex_attention

    block_mask, key0_bias = flex_key0(q, cu, window, sinks)
    qf, kf, vf = (x.transpose(0, 1).unsqueeze(0).contiguous() for x in (q, k, v))  # [1, H, T, D]
    flex = torch.compile(flex_attention, dynamic=False)
    run = lambda: flex(qf, kf, vf, score_mod=key0_bias, block_mask=block_mask, enable_gqa=True)  # noqa: E731
    run()
    return eager_us(run, calls=50, warmup=3)


def _try(what, fn):
    try:
        return fn()
    except Exception as e:  # one failing backend must not stop the table
        print(f"# {what}: n/a ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
              file=sys.stderr)
        if "--verbose" in sys.argv:
            traceback.print_exc()
        return None


def run_case(case, bandwidth, flex):
    name, nseg, seqlen, hq, hk, d, window, peer = case
    q, k, v, cu, sinks = make_inputs(nseg, seqlen, hq, hk, d)
    row = dict(case=name, tokens=nseg * seqlen, hq=hq, hk=hk, d=d, window=list(window), peer_us=peer,
               target_us=TARGETS.get(name))
    nbytes = sum(x.numel() * x.element_size() for x in (q, k, v)) + q.numel() * q.element_size()
    row["floor_us"] = nbytes / bandwidth * 1e6 if bandwidth else None
    args_key0 = (q, k, v, cu, seqlen, window, sinks["key0"], "key0")
    for mode in MODES:
        args = (q, k, v, cu, seqlen, window, sinks[mode], mode)
        row[f"sm90_{mode}_us"] = _try(f"{name} sm90 {mode}", lambda: graph_us(ours("cuda", *args)))
        row[f"triton_{mode}_us"] = _try(f"{name} triton {mode}", lambda: graph_us(ours("triton", *args)))
    with NarrowKernel():  # the sm90 narrow kernel where the launcher takes the wide one (same otherwise)
        row["sm90_narrow_key0_us"] = _try(f"{name} sm90 narrow", lambda: graph_us(ours("cuda", *args_key0)))
    with Sm80Path():
        row["sm80_key0_us"] = _try(f"{name} sm80", lambda: graph_us(ours("cuda", q, k, v, cu, seqlen, window,
                                                                         sinks["key0"], "key0")))
    key0 = (q, k, v, cu, seqlen, window, sinks["key0"], "key0")
    row["eager_sm90_key0_us"] = _try(f"{name} sm90 eager", lambda: eager_us(ours("cuda", *key0)))
    row["eager_triton_key0_us"] = _try(f"{name} triton eager", lambda: eager_us(ours("triton", *key0)))
    row["fa4_none_us"] = _try(f"{name} fa4", lambda: graph_us(fa4(q, k, v, cu, seqlen, window, None)))
    row["fa4_null_us"] = _try(f"{name} fa4 null", lambda: graph_us(fa4(q, k, v, cu, seqlen, window, sinks["null"])))
    row["flex_key0_us"] = _try(f"{name} flex", lambda: bench_flex(q, k, v, cu, seqlen, window, sinks["key0"])) \
        if flex else None
    # the sm90 and Triton outputs must agree (both are checked against the oracle in tests/)
    a, b = ours("cuda", *key0), ours("triton", *key0)
    row["max_abs_diff_sm90_triton"] = _try(f"{name} diff", lambda: (a().float() - b().float()).abs().max().item())
    flops = 4 * nseg * hq * d * sum(_keys_seen(i, seqlen, window) for i in range(seqlen))
    row["gflop"] = flops / 1e9
    return row


def _keys_seen(i, n, window):
    left, right = window
    lo = 0 if left < 0 else max(0, i - left)
    hi = n - 1 if right < 0 else min(n - 1, i + right)
    return hi - lo + 1


COLUMNS = [("sm90 key0", "sm90_key0_us"), ("sm90 null", "sm90_null_us"), ("sm90 no-sink", "sm90_none_us"),
           ("sm90 narrow kernel key0", "sm90_narrow_key0_us"), ("sm80 key0", "sm80_key0_us"), ("Triton key0", "triton_key0_us"), ("Triton no-sink", "triton_none_us"),
           ("FA4 no-sink", "fa4_none_us"), ("FA4 null", "fa4_null_us"),
           ("eager sm90 key0", "eager_sm90_key0_us"), ("eager Triton key0", "eager_triton_key0_us"),
           ("Flex key0 (eager)", "flex_key0_us")]


def _fmt(us, floor=None):
    if us is None:
        return "n/a"
    if floor:
        return f"{us:.1f} ({us / floor:.1f}x)"
    return f"{us:.1f}"


def print_table(rows, bandwidth):
    bw = f"{bandwidth / 1e12:.2f} TB/s" if bandwidth else "n/a"
    print(f"\nWindow attention, bf16, µs (x memory floor); graph replay unless marked; copy bandwidth {bw}\n")
    head = ["case", "floor", "target"] + [c for c, _ in COLUMNS] + ["sm90 key0 TFLOP/s", "key0 cost over no-sink",
                                                                    "max |Δ| sm90 vs Triton"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        floor = r["floor_us"]
        cells = [r["case"], _fmt(floor), _fmt(r["target_us"])] + [_fmt(r[key], floor) for _, key in COLUMNS]
        k0, none = r["sm90_key0_us"], r["sm90_none_us"]
        cells += [f"{r['gflop'] / k0 * 1e3:.0f}" if k0 else "n/a",
                  f"{(k0 / none - 1) * 100:+.1f} %" if k0 and none else "n/a",
                  "n/a" if r["max_abs_diff_sm90_triton"] is None else f"{r['max_abs_diff_sm90_triton']:.1e}"]
        print("| " + " | ".join(cells) + " |")


def save_plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mimo = [r for r in rows if r["case"].startswith("mimo")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, key in COLUMNS + [("memory floor", "floor_us"), ("vLLM Triton (published)", "peer_us")]:
        pts = [(r["tokens"], r[key]) for r in mimo if r.get(key)]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="tokens", ylabel="µs",
           title="MiMo vision window attention (32/8 heads, d 64, window ±64), H200 bf16")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--plot", help="save a png of time vs tokens (needs matplotlib)")
    ap.add_argument("--cases", nargs="*", help="substrings of case names to run (default: all)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of failing columns")
    ap.add_argument("--flex", action="store_true", help="also time FlexAttention (compiles per case: slow)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_window_attention needs a CUDA device")
    torch.manual_seed(0)
    bandwidth = _try("copy bandwidth", copy_bandwidth)
    cases = [c for c in CASES if not args.cases or any(s in c[0] for s in args.cases)]
    rows = []
    for case in cases:
        rows.append(run_case(case, bandwidth, args.flex))
        torch.cuda.empty_cache()
    print_table(rows, bandwidth)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(bandwidth_bytes_per_s=bandwidth, rows=rows), f, indent=1)
    if args.plot:
        _try("plot", lambda: save_plot(rows, args.plot))
    return 0 if all(math.isfinite(r["sm90_key0_us"] or math.nan) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
