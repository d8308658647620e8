"""Compile csrc/cuda/*.cu with nvcc for setup.py (no torch needed at build time).

Env:
  SINKOPS_CUDA=0                 skip the CUDA build even when nvcc is found
  SINKOPS_CUDA_ARCHS="80;90a"    target archs (90a enables Hopper-only instructions)
  SINKOPS_CUDA_ONLY=a,b          compile only .cu files whose name starts with one of these prefixes
  MAX_JOBS=N                     parallel nvcc processes (default: cores)
  SINKOPS_NVCC_FLAGS="..."       extra nvcc flags (experiments: -DNAME=1 switches, -lineinfo)
  CUTLASS_INCLUDE=dir            CuTe/CUTLASS headers for the sm_90a kernels (csrc/cuda/sm90/);
                                 default: the nvidia-cutlass wheel's (a build requirement)

The sm_90a kernels (csrc/cuda/sm90/*.cu: wgmma, setmaxnreg) compile only for arch 90a and only
when 90a is among the archs and the CuTe headers are found; then every file gets -DSINKOPS_SM90=1,
so the portable launchers dispatch to them on Hopper GPUs.
"""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
from pathlib import Path


def find_nvcc() -> str | None:
    if os.environ.get("SINKOPS_CUDA", "1") == "0":
        return None
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return str(Path(home) / "bin" / "nvcc")
    return shutil.which("nvcc")


def cuda_lib_dirs(nvcc: str, scratch: Path) -> list[str]:
    """Library dirs holding libcudart_static.a. nvcc may be a wrapper script (it is on our
    machines), so ask nvcc itself: its -dryrun prints TOP=<toolkit root>."""
    scratch.mkdir(parents=True, exist_ok=True)
    probe = scratch / "probe.cu"
    probe.write_text("int main() { return 0; }\n")
    out = subprocess.run([nvcc, "-dryrun", str(probe)], capture_output=True, text=True).stderr
    tops = [line.split("TOP=", 1)[1].strip() for line in out.splitlines() if "TOP=" in line]
    roots = [Path(t) for t in tops] + [Path(nvcc).resolve().parent.parent, Path("/usr/local/cuda")]
    dirs = []
    for root in roots:
        for sub in ("targets/x86_64-linux/lib", "targets/sbsa-linux/lib", "lib64", "lib"):
            if (root / sub / "libcudart_static.a").exists():
                dirs.append(str((root / sub).resolve()))
    if not dirs:
        raise RuntimeError("sinkops: found nvcc but not libcudart_static.a; set CUDA_HOME")
    return dirs[:1]


def cutlass_include() -> str | None:
    """The CuTe/CUTLASS headers: $CUTLASS_INCLUDE, else the nvidia-cutlass wheel's copy (found
    without importing cutlass_library, whose import pulls in more than headers)."""
    env = os.environ.get("CUTLASS_INCLUDE")
    if env:
        return env if (Path(env) / "cute" / "tensor.hpp").exists() else None
    import importlib.util
    spec = importlib.util.find_spec("cutlass_library")
    for loc in (spec.submodule_search_locations or []) if spec else []:
        inc = Path(loc) / "source" / "include"
        if (inc / "cute" / "tensor.hpp").exists():
            return str(inc)
    return None


def sm90_sources(root: Path, archs: str) -> tuple[list[Path], str | None]:
    """The sm_90a kernels to build and the CuTe include dir ([] when 90a is not a target or the
    headers are missing; the portable kernels then serve Hopper too)."""
    if "90a" not in [a.strip() for a in archs.split(";")]:
        return [], None
    inc = cutlass_include()
    if inc is None:
        print("[sinkops] CuTe headers not found (pip install nvidia-cutlass or set CUTLASS_INCLUDE): "
              "building without the sm_90a kernels", flush=True)
        return [], None
    only = [p for p in os.environ.get("SINKOPS_CUDA_ONLY", "").split(",") if p]
    files = sorted((root / "csrc" / "cuda" / "sm90").glob("*.cu"))
    if only:
        files = [f for f in files if any(f.name.startswith(p) for p in only)]
    return files, inc


def gencode_flags(archs: str) -> list[str]:
    flags = []
    for arch in filter(None, (a.strip() for a in archs.split(";"))):
        flags.append(f"-gencode=arch=compute_{arch},code=sm_{arch}")
    return flags


OPS = ("window_attention", "sparse_mla_prefill", "sparse_mla_decode")


def cuda_sources(root: Path) -> list[Path]:
    """Every csrc/cuda/*.cu; with SINKOPS_CUDA_ONLY, only those ops' files (plus the shared ones,
    e.g. device.cu, whose names start with no op name)."""
    only = [p for p in os.environ.get("SINKOPS_CUDA_ONLY", "").split(",") if p]
    files = sorted((root / "csrc" / "cuda").glob("*.cu"))
    if only:
        files = [f for f in files if any(f.name.startswith(p) for p in only)
                 or not any(f.name.startswith(op) for op in OPS)]
    return files


def compile_cuda(root: Path, nvcc: str, build_dir: Path, debug: bool = False) -> list[str]:
    """Compile every selected .cu into an object file; returns the object paths."""
    archs = os.environ.get("SINKOPS_CUDA_ARCHS", "80;90a")
    build_dir.mkdir(parents=True, exist_ok=True)
    flags = [
        "-std=c++17", "-O3", "-Xcompiler", "-fPIC", "--expt-relaxed-constexpr",
        "-I" + str(root / "csrc" / "include"), "-I" + str(root / "csrc" / "cuda"),
        "-DNDEBUG", *gencode_flags(archs),
    ]
    if debug:
        flags += ["-lineinfo"]
    flags += os.environ.get("SINKOPS_NVCC_FLAGS", "").split()
    jobs = int(os.environ.get("MAX_JOBS", os.cpu_count() or 1))

    sm90, cute_inc = sm90_sources(root, archs)
    if sm90:
        flags.append("-DSINKOPS_SM90=1")
    sm90_flags = [f for f in flags if not f.startswith("-gencode")] + [
        "-I" + str(cute_inc), *gencode_flags("90a")] if sm90 else []

    def one(src: Path) -> str:
        obj = build_dir / (src.parent.name + "_" + src.stem + ".o" if src in sm90 else src.stem + ".o")
        cmd = [nvcc, *(sm90_flags if src in sm90 else flags), "-c", str(src), "-o", str(obj)]
        print("[sinkops] nvcc", src.name, flush=True)
        subprocess.run(cmd, check=True)
        return str(obj)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        # the sm90 files first: they take the longest
        return list(pool.map(one, sm90 + cuda_sources(root)))
