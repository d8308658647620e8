"""Registers and spills of our Triton kernels compiled for sm_90 on this machine (no GPU): Triton
compiles a kernel to a cubin for a named target, cuobjdump (shipped in the triton wheel) reads its
resource usage. For choosing the variants worth a device call (bench/NOTES.md "Triton window
registers read on the CPU": the d 80-128 window tile spills at 4 warps and 64 keys).

    python tools/prof/triton_regs.py [--d 64,80,128] [--window 64,-1] [--tile WARPS:STAGES:BLOCK_N ...]
    python tools/prof/triton_regs.py --sparse   (sparse MLA prefill forward and the backward's two kernels)

The window table: per head dim, window (left = right) and tile, for 32/8 heads (group 4), REG /
STACK bytes for each sink mode (none, null, key0); a tile is
window_attention_tile's choice, or overridden per --tile entry ("" keeps the choice: `--tile ""
8:3:32` prints both). The int arguments
that a launch passes are typed i32 here and not specialized (the device's own compile may
specialize some strides on divisibility by 16: small differences in registers are possible).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import sinkops.triton.sparse_mla as SF  # noqa: E402
import sinkops.triton.sparse_mla_backward as SB  # noqa: E402
import sinkops.triton.window_attention as W  # noqa: E402

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
POINTERS = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "out_ptr": "*bf16", "lse_ptr": "*fp32",
            "sinks_ptr": "*fp32", "cu_q_ptr": "*i32", "cu_k_ptr": "*i32"}
SCALARS = {"total_q": "i64", "total_k": "i64", "stride_lh": "i64", "n_tiles": "i32", "qk_scale": "fp32"}
MODES = (("none", 0), ("null", 2), ("key0", 1))


def resources(fn, types: dict, constexprs: dict, num_warps: int, num_stages: int) -> str:
    """fn compiled for sm_90 -> "REG/STACK" (registers per thread / bytes spilled to the stack).
    types: the non-constexpr parameters' Triton types (unnamed ones are i32)."""
    names = list(fn.arg_names)
    signature = {n: "constexpr" if n in constexprs else types.get(n, "i32") for n in names}
    src = ASTSource(fn=fn, signature=signature, constexprs={(names.index(k),): v for k, v in constexprs.items()})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                            options=dict(num_warps=num_warps, num_stages=num_stages))
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        res = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", res)
    return f"{m.group(1)}/{m.group(2)}" if m else "?"


def usage(d: int, left: int, right: int, mode: int, tile) -> str:
    constexprs = dict(BLOCK_Q=tile.block_q, HEADS=tile.heads, BLOCK_N=tile.block_n, BLOCK_D=tile.block_d,
                      BLOCK_DV=tile.block_dv, HAS_LEFT=left >= 0, HAS_RIGHT=right >= 0, SINK_MODE=mode,
                      WRITE_LSE=False, INPUT_PRECISION="tf32", INTERPRET=False)
    return resources(W.window_attention_fwd_kernel, {**POINTERS, **SCALARS}, constexprs, tile.num_warps,
                     tile.num_stages)


def sparse_table() -> None:
    """V4 shapes (d_qk 576 with the RoPE tail, attn_sink): each kernel at the tiles its launcher picks."""
    bf16, f32, i32 = "*bf16", "*fp32", "*i32"
    fwd = dict(q_ptr=bf16, kv_ptr=bf16, idx_ptr=i32, sink_ptr=f32, topk_len_ptr=i32, out_ptr=bf16,
               max_logits_ptr=f32, lse_ptr=f32, Skv="i64", qk_scale="fp32")
    dq = dict(q_ptr=bf16, kv_ptr=bf16, idx_ptr=i32, sink_ptr=f32, topk_len_ptr=i32, out_ptr=bf16, dout_ptr=bf16,
              lse_ptr=f32, dlse_ptr=f32, dq_ptr=bf16, dsink_rows_ptr=f32, p_stage_ptr=bf16, dx_stage_ptr=bf16,
              Skv="i64", s0="i64", qk_scale="fp32", scale="fp32")
    dkv = dict(q_ptr=bf16, idx_ptr=i32, topk_len_ptr=i32, dout_ptr=bf16, p_stage_ptr=bf16, dx_stage_ptr=bf16,
               dkv_acc_ptr=f32, det_stage_ptr=f32, Skv="i64", s0="i64")
    print("| kernel | heads | tile | REG / STACK bytes |\n|---|---|---|---|")
    for heads in (64, 128):
        cfg = SF.prefill_config(heads)
        warps, stages = cfg.pop("num_warps"), cfg.pop("num_stages")
        r = resources(SF.sparse_mla_prefill_kernel, fwd, dict(HAS_SINK=True, HAS_TOPK_LEN=False, HAS_ROPE=True,
                                                              INTERP=False, TOPK_STATIC=0, **cfg), warps, stages)
        print(f"| prefill forward | {heads} | {cfg}, {warps} warps, {stages} stages | {r} |")
        bh, bk, warps, stages = SB._dq_tiles(heads, False)
        r = resources(SB.sparse_mla_bwd_dq_kernel, dq, dict(HAS_SINK=True, HAS_TOPK_LEN=False, HAS_ROPE=True,
                                                            HAS_DLSE=False, BLOCK_H=bh, BLOCK_K=bk, INTERP=False,
                                                            TOPK_STATIC=0), warps, stages)
        print(f"| backward dq | {heads} | {bh} heads x {bk} keys, {warps} warps, {stages} stages | {r} |")
        bhq, bk, bc, warps, stages = SB._dkv_tiles(heads, False)
        r = resources(SB.sparse_mla_bwd_dkv_kernel, dkv, dict(HAS_TOPK_LEN=False, HAS_ROPE=True, DETERMINISTIC=False,
                                                              BLOCK_HQ=bhq, BLOCK_K=bk, BLOCK_C=bc, INTERP=False),
                      warps, stages)
        print(f"| backward dkv | {heads} | {bk} positions x {bc} channels, {warps} warps, {stages} stages | {r} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", default="64,80,128")
    ap.add_argument("--window", default="64,-1", help="left = right values; -1 = unbounded")
    ap.add_argument("--tile", nargs="*", default=[None], help="WARPS:STAGES:BLOCK_N overrides (default: the chooser's)")
    ap.add_argument("--sparse", action="store_true", help="the sparse MLA kernels instead of the window kernel")
    args = ap.parse_args()
    if args.sparse:
        sparse_table()
        return
    print("| d | window | warps / stages / block_n | " + " | ".join(m[0] for m in MODES) + " |  (REG / STACK bytes)")
    print("|---|---|---|" + "---|" * len(MODES))
    for d in map(int, args.d.split(",")):
        for w in map(int, args.window.split(",")):
            for spec in args.tile:
                tile = W.window_attention_tile(d, d, 4, w, w, True)
                if spec:
                    warps, stages, block_n = map(int, spec.split(":"))
                    tile = dataclasses.replace(tile, num_warps=warps, num_stages=stages, block_n=block_n)
                cells = [usage(d, w, w, mode, tile) for _, mode in MODES]
                print(f"| {d} | {w} | {tile.num_warps} / {tile.num_stages} / {tile.block_n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
