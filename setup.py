"""Build sinkops: a pure-Python package plus optional compiled cores.

* sinkops._C     CUDA kernels (csrc/cuda/*.cu, nvcc) + pybind11 bindings; built when nvcc is found.
* sinkops._sycl  SYCL host code + runtime-compiled kernels; built when the SYCL runtime is found
                 (tools/build_sycl.py says where it looks).
Neither build needs torch: the core takes raw pointers and strides (DESIGN.md §3).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
import build_cuda  # noqa: E402

try:
    import build_sycl  # noqa: E402
except ImportError:  # the SYCL build helper is optional
    build_sycl = None


_BUILDING = any(cmd in sys.argv for cmd in ("bdist_wheel", "build_ext", "build", "install",
                                             "develop", "editable_wheel"))


# core -> what the build did with it; written into the package as sinkops/_build_info.py, so that
# `python -m sinkops` (and the demo) can say which cores this install has and why one is missing:
# pip hides a build's output unless run with -v.
BUILD_INFO: dict[str, str] = {}


def _note(core: str, msg: str) -> None:
    BUILD_INFO[core] = msg
    # pip runs setup.py several times (metadata, then the wheel): say it once, when building.
    if _BUILDING:
        print(f"[sinkops] {core}: {msg}", file=sys.stderr, flush=True)


class BuildPy(build_py):
    """Also writes sinkops/_build_info.py into the build (never into the source tree)."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "sinkops" / "_build_info.py"
        target.write_text('"""Written by setup.py at build time: which compiled cores this install has."""\n'
                          f"CORES = {BUILD_INFO!r}\n")


class BuildExt(build_ext):
    """Compiles the .cu files with nvcc first, then links them into sinkops._C."""

    def build_extension(self, ext):
        if ext.name == "sinkops._C":
            nvcc = build_cuda.find_nvcc()
            tmp = Path(self.build_temp) / "cuda"
            ext.extra_objects = build_cuda.compile_cuda(ROOT, nvcc, tmp)
            ext.library_dirs = build_cuda.cuda_lib_dirs(nvcc, tmp)
            # setuptools relinks only when a listed source is newer than the built module; the
            # objects above are always fresh, so always link (a stale build/ once shipped an old _C).
            self.force = True
        super().build_extension(ext)


def extensions() -> list[Extension]:
    import pybind11

    exts = []
    nvcc = build_cuda.find_nvcc()
    if nvcc:
        archs = os.environ.get("SINKOPS_CUDA_ARCHS", "80;90a")
        sm90 = "with" if build_cuda.sm90_sources(ROOT, archs)[0] else "without"
        _note("cuda", f"built sinkops._C with {nvcc} for archs {archs}, {sm90} the sm_90a kernels"
              + (f" (only {os.environ['SINKOPS_CUDA_ONLY']})" if os.environ.get("SINKOPS_CUDA_ONLY") else ""))
        exts.append(Extension(
            "sinkops._C",
            sources=["csrc/bindings.cpp", "csrc/cuda_stubs.cpp"],
            include_dirs=[pybind11.get_include(), "csrc/include"],
            libraries=["cudart_static", "dl", "rt", "pthread"],
            extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden"],
            language="c++",
        ))
    else:
        why = "SINKOPS_CUDA=0" if os.environ.get("SINKOPS_CUDA") == "0" else "nvcc not found (PATH, CUDA_HOME)"
        _note("cuda", f"skipped: {why}; the Triton, SYCL and torch backends still work")

    spec = build_sycl.sycl_extension_spec() if build_sycl else None
    if spec:
        _note("sycl", f"built sinkops._sycl against the SYCL runtime in {build_sycl.sycl_root()}")
        spec.pop("generate")()  # embeds the kernel sources into a generated header
        spec.pop("generated_files", None)
        exts.append(Extension(**spec, language="c++"))
    else:
        reason = build_sycl.sycl_unavailable_reason() if build_sycl else "tools/build_sycl.py missing"
        _note("sycl", f"skipped: {reason}")
    return exts


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
