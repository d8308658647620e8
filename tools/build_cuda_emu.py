"""Build csrc/cuda/ for the CPU emulator (tools/cuda_emu/README.md) as the Python module
``sinkops_cuda_emu``: the same kernel C++, host launchers and pybind11 bindings as
``sinkops._C``, compiled by g++ with the PTX wrappers executed on the CPU.

    python tools/build_cuda_emu.py        # prints the directory holding the module

The result is cached under build/cuda_emu/<hash of every source and flag>/.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "sinkops_cuda_emu"


def _sources() -> list[Path]:
    return sorted((ROOT / "csrc" / "cuda").glob("*.cu")) + [ROOT / "csrc" / "bindings.cpp",
                                                            ROOT / "tools" / "cuda_emu" / "runtime.cpp"]


def _inputs() -> list[Path]:
    headers = [p for d in ("csrc/include", "csrc/cuda", "tools/cuda_emu/include")
               for p in (ROOT / d).rglob("*") if p.is_file()]
    return sorted(set(_sources() + headers))


def _flags() -> list[str]:
    import pybind11

    return ["-std=c++20", "-O2", "-fPIC", "-fvisibility=hidden", "-DSINKOPS_CUDA_EMU",
            f"-DSINKOPS_MODULE_NAME={MODULE}",
            "-I" + str(ROOT / "tools" / "cuda_emu" / "include"),  # before any real CUDA headers
            "-I" + str(ROOT / "csrc" / "include"), "-I" + str(ROOT / "csrc" / "cuda"),
            "-I" + pybind11.get_include(), "-I" + sysconfig.get_paths()["include"]]


def build(verbose: bool = False) -> Path:
    """Compile (if not cached) and return the directory that holds the module."""
    flags = _flags()
    h = hashlib.sha256(" ".join(flags + [sys.version]).encode())
    for p in _inputs():
        h.update(str(p.relative_to(ROOT)).encode())
        h.update(p.read_bytes())
    out_dir = ROOT / "build" / "cuda_emu" / h.hexdigest()[:16]
    target = out_dir / (MODULE + sysconfig.get_config_var("EXT_SUFFIX"))
    if target.exists():
        return out_dir
    obj_dir = out_dir / "obj"
    obj_dir.mkdir(parents=True, exist_ok=True)

    def compile_one(src: Path) -> str:
        obj = obj_dir / (src.name + ".o")
        cmd = ["g++", *flags, "-x", "c++", "-c", str(src), "-o", str(obj)]
        if verbose:
            print("[cuda_emu] g++", src.name, flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"emulator build of {src.name} failed:\n{r.stderr[-6000:]}")
        return str(obj)

    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        objs = list(pool.map(compile_one, _sources()))
    tmp = target.with_suffix(".tmp")
    subprocess.run(["g++", "-shared", *objs, "-o", str(tmp)], check=True)
    tmp.rename(target)  # atomic: a concurrent build never sees a half-written module
    return out_dir


if __name__ == "__main__":
    print(build(verbose=True))
