"""Per-CTA timeline of the sm90 sparse MLA prefill, from a diagnostic build with
tools/prof/prefill_trace.patch applied (its kernel writes clock64 stamps into each CTA's max_logits
row; that build's max_logits are not valid). Prints, per shape, the median CTA's phases in µs:
prologue (start -> indices in -> block 0 L issued -> Q seen -> first S), the steps, the epilogue,
and the gap between consecutive CTAs on one SM (how long an SM holds no CTA of this kernel).
    bash tools/prof/variant_so.sh trace tools/prof/prefill_trace.patch \
        "sparse_mla_prefill.cu sm90/sparse_mla_prefill_sm90.cu"
    PYTHONPATH=<site with var_trace's _C> python3 tools/prof/prefill_trace.py"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from bench_sparse_mla_prefill import make_case  # noqa: E402

import sinkops  # noqa: E402

SLOTS = {3: "indices in", 4: "block 0 L issued", 6: "WG0 Q seen", 7: "WG0 first S", 9: "WG1 Q seen",
         10: "WG1 first S", 8: "WG0 steps done", 11: "WG1 steps done", 5: "producer done", 12: "WG0 done",
         14: "WG1 done"}


def med(x):
    return float(x.float().median())


def trace(name, hq, dqk, topk, sq=4096):
    q, kv, idx, sink = make_case(hq, dqk, topk, sq, 32768, "cuda")
    for _ in range(3):
        _, ml, _ = sinkops.sparse_mla_prefill(q, kv, idx, dqk ** -0.5, 512, sink, backend="cuda")
    torch.cuda.synchronize()
    t = ml.view(torch.int64).view(sq, hq // 64, 32)[:, :, :16].reshape(-1, 16).cpu()  # [CTAs, slots]
    gt0, gt1, smid, steps = t[:, 0], t[:, 13], t[:, 2], t[:, 15]
    ghz = med(t[:, 12].double() / (gt1 - gt0).double())  # clock64 cycles per ns
    us = lambda c: c / ghz / 1e3  # noqa: E731
    print(f"\n## {name}: {t.shape[0]} CTAs, {med(steps):.0f} steps, clock {ghz:.2f} GHz, "
          f"kernel {(gt1.max() - gt0.min()) / 1e3:.1f} µs (first start -> last WG0 end)")
    print("| phase (median CTA) | µs from CTA start |\n|---|---|")
    for k in sorted(SLOTS, key=lambda k: med(t[:, k])):
        print(f"| {SLOTS[k]} | {us(med(t[:, k])):.2f} |")
    per_step = (t[:, 8] - t[:, 7]).double() / (steps - 1).clamp(min=1).double()
    print(f"| (per step after the first, WG0) | {us(med(per_step)):.2f} |")
    print(f"| (epilogue: WG0 steps done -> done) | {us(med(t[:, 12] - t[:, 8])):.2f} |")
    # gaps between consecutive CTAs on one SM (globaltimer ns: end of one's WG0 -> start of the next)
    gaps = []
    for s in smid.unique():
        rows = (smid == s).nonzero().flatten()
        order = rows[gt0[rows].argsort()]
        wg1_end = gt0[order] + (t[order, 14].double() / ghz).long()
        end = torch.maximum(gt1[order], wg1_end)
        gaps.append((gt0[order][1:] - end[:-1]).double())
    g = torch.cat(gaps)
    print(f"| gap between CTAs on one SM (median / p90, µs) | {med(g) / 1e3:.2f} / {float(g.quantile(0.9)) / 1e3:.2f} |")


if __name__ == "__main__":
    torch.manual_seed(0)
    trace("V4-Flash h64 k640", 64, 512, 640)
    trace("V4-Pro h128 k1152", 128, 512, 1152)
    trace("V3.2 h128 d576 k2048", 128, 576, 2048)
