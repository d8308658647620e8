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

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "tools"))
import build_cuda  # noqa: E402

try:
    import build_sycl  # noqa: E402
except ImportError:  # the SYCL build helper is optional
    build_sycl = None


_BUILDING = any(cmd in sys.argv for cmd in ("bdist_wheel", "build_ext", "build", "install",
                                             "develop", "editable_wheel"))


def _note(msg: str) -> None:
    # pip runs setup.py several times (metadata, then the wheel): say it once, when building.
    if _BUILDING:
        print(f"[sinkops] {msg}", file=sys.stderr, flush=True)


class BuildExt(build_ext):
    """Compiles the .cu files with nvcc first, then links them into sinkops._C."""

    def build_extension(self, ext):
        if ext.name == "sinkops._C":
            nvcc = build_cuda.find_nvcc()
            tmp = Path(self.build_temp) / "cuda"
            ext.extra_objects = build_cuda.compile_cuda(ROOT, nvcc, tmp)
            ext.library_dirs = build_cuda.cuda_lib_dirs(nvcc, tmp)
        super().build_extension(ext)


def extensions() -> list[Extension]:
    import pybind11

    exts = []
    nvcc = build_cuda.find_nvcc()
    if nvcc:
        _note(f"building the CUDA core with {nvcc} for archs "
              f"{os.environ.get('SINKOPS_CUDA_ARCHS', '80;90a')}")
        exts.append(Extension(
            "sinkops._C",
            sources=["csrc/bindings.cpp", "csrc/cuda_stubs.cpp"],
            include_dirs=[pybind11.get_include(), "csrc/include"],
            libraries=["cudart_static", "dl", "rt", "pthread"],
            extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden"],
            language="c++",
        ))
    else:
        _note("nvcc not found (or SINKOPS_CUDA=0): installing without the CUDA backend; "
              "the Triton, SYCL and reference backends still work")

    spec = build_sycl.sycl_extension_spec() if build_sycl else None
    if spec:
        _note("building the SYCL core (sinkops._sycl)")
        spec.pop("generate")()  # embeds the kernel sources into a generated header
        spec.pop("generated_files", None)
        exts.append(Extension(**spec, language="c++"))
    else:
        reason = build_sycl.sycl_unavailable_reason() if build_sycl else "tools/build_sycl.py missing"
        _note(f"SYCL runtime not found ({reason}): installing without the SYCL backend")
    return exts


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt})
