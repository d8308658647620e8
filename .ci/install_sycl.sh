#!/usr/bin/env bash
# Installs the SYCL runtime for the CPU device from PyPI into the active Python environment and
# sets (when sourced) or prints (when run) the variables that the build and the tests need:
#   SINKOPS_SYCL_ROOT   prefix holding include/sycl/sycl.hpp and lib/libsycl.so (tools/build_sycl.py;
#                       needed because `pip install .` builds in an isolated env without the wheel)
#   OCL_ICD_FILENAMES   Intel's OpenCL CPU driver (the wheel registers no ICD; 'opencl:*' device
#                       selectors hide it in 2026.2.0, so sinkops uses the cpu selector)
# Usage: `source .ci/install_sycl.sh`, or `eval "$(.ci/install_sycl.sh)"`.
# Also appended to $GITHUB_ENV when that is set.
_sinkops_install_sycl() {
  local py="${PYTHON:-python}" version=2026.2.0 prefix
  command -v "$py" > /dev/null || py=python3
  "$py" -m pip install --quiet "intel-sycl-rt==$version" "intel-cmplr-lib-ur==$version" \
    "intel-opencl-rt==$version" >&2 || return 1
  prefix="$("$py" -c 'import sys; print(sys.prefix)')" || return 1
  local f
  for f in include/sycl/sycl.hpp lib/libsycl.so lib/libintelocl.so; do
    [ -e "$prefix/$f" ] || { echo "install_sycl: $prefix/$f missing" >&2; return 1; }
  done
  SINKOPS_SYCL_ROOT="$prefix"
  OCL_ICD_FILENAMES="$prefix/lib/libintelocl.so"
  export SINKOPS_SYCL_ROOT OCL_ICD_FILENAMES
  if [ -n "${GITHUB_ENV:-}" ]; then
    printf 'SINKOPS_SYCL_ROOT=%s\nOCL_ICD_FILENAMES=%s\n' "$SINKOPS_SYCL_ROOT" "$OCL_ICD_FILENAMES" >> "$GITHUB_ENV"
  fi
  echo "export SINKOPS_SYCL_ROOT=$SINKOPS_SYCL_ROOT"
  echo "export OCL_ICD_FILENAMES=$OCL_ICD_FILENAMES"
}

if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  _sinkops_install_sycl >&2 || return 1   # sourced: never `exit` the caller's shell
else
  _sinkops_install_sycl || exit 1
fi
