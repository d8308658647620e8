"""Registers and spills of the Triton window kernel compiled for sm_90 on this machine (no GPU):
Triton compiles the kernel to a cubin for a named target, cuobjdump (shipped in the triton wheel)
reads its resource usage. For choosing the variants worth a device call (bench/NOTES.md "Triton
window attention": the d 80-128 tile spills at 4 warps and 64 keys).

    python tools/prof/triton_regs.py [--d 64,80,128] [--window 64,-1] [--tile WARPS:STAGES:BLOCK_N ...]

Prints, per head dim, window and tile (default: window_attention_tile's choice), REG / STACK bytes
for each sink mode (none, null, key0 peeled, key0 in every block). The int arguments that the
launch passes are typed i32 here and not specialized (the device's own compile may specialize some
strides on divisibility by 16: small differences in registers are possible, spills rarely).
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

import sinkops.triton.window_attention as W  # noqa: E402

CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
POINTERS = {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", "out_ptr": "*bf16", "lse_ptr": "*fp32",
            "sinks_ptr": "*fp32", "cu_q_ptr": "*i32", "cu_k_ptr": "*i32"}
SCALARS = {"total_q": "i64", "total_k": "i64", "stride_lh": "i64", "n_tiles": "i32", "qk_scale": "fp32"}
MODES = (("none", 0, False), ("null", 2, False), ("key0 peel", 1, False), ("key0 in-loop", 1, True))


def usage(d: int, left: int, right: int, mode: int, in_loop: bool, tile, group: int = 4) -> str:
    fn = W.window_attention_fwd_kernel
    constexprs = dict(BLOCK_Q=tile.block_q, HEADS=tile.heads, BLOCK_N=tile.block_n, BLOCK_D=tile.block_d,
                      BLOCK_DV=tile.block_dv, HAS_LEFT=left >= 0, HAS_RIGHT=right >= 0, SINK_MODE=mode,
                      WRITE_LSE=False, KEY0_IN_LOOP=in_loop, INPUT_PRECISION="tf32", INTERPRET=False)
    names = list(fn.arg_names)
    signature = {n: "constexpr" if n in constexprs else POINTERS.get(n) or SCALARS.get(n, "i32") for n in names}
    src = ASTSource(fn=fn, signature=signature, constexprs={(names.index(k),): v for k, v in constexprs.items()})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                            options=dict(num_warps=tile.num_warps, num_stages=tile.num_stages))
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        res = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", res)
    return f"{m.group(1)}/{m.group(2)}" if m else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", default="64,80,128")
    ap.add_argument("--window", default="64,-1", help="left = right values; -1 = unbounded")
    ap.add_argument("--tile", nargs="*", default=[None], help="WARPS:STAGES:BLOCK_N overrides (default: the chooser's)")
    args = ap.parse_args()
    print("| d | window | warps / stages / block_n | " + " | ".join(m[0] for m in MODES) + " |  (REG / STACK bytes)")
    print("|---|---|---|" + "---|" * len(MODES))
    for d in map(int, args.d.split(",")):
        for w in map(int, args.window.split(",")):
            for spec in args.tile:
                tile = W.window_attention_tile(d, d, 4, w, w, True)
                if spec:
                    warps, stages, block_n = map(int, spec.split(":"))
                    tile = dataclasses.replace(tile, num_warps=warps, num_stages=stages, block_n=block_n)
                cells = [usage(d, w, w, mode, in_loop, tile) for _, mode, in_loop in MODES]
                print(f"| {d} | {w} | {tile.num_warps} / {tile.num_stages} / {tile.block_n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
