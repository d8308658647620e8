#!/usr/bin/env bash
# FlashAttention-4 (the window benchmarks' peer, issue 11) for the device, which has no network:
# downloads the wheels here, unpacks them into one folder and packs it into two parts under .fa4/
# (git-ignored), each under one call's 64 MiB carry.
#   bash tools/prof/fa4_bundle.sh            # here (~6 min: xz of a 193 MB library)
# On the device, two calls back to back (a machine stays warm ~30 s between calls):
#   call 1, carry [".fa4/part1.tar"]:  mkdir -p /tmp/fa4 && tar -C /tmp/fa4 -xf .fa4/part1.tar
#   call 2, carry [".fa4/part2.tar"]:  tar -C /tmp/fa4 -xf .fa4/part2.tar && bash /tmp/fa4/unpack.sh
#   then PYTHONPATH=/tmp/fa4/site:/tmp/fa4/site/nvidia_cutlass_dsl/dsl_packages:$PYTHONPATH
#   (PYTHONPATH folders do not run the .pth file that adds dsl_packages, hence the second entry).
# Why these wheels: flash-attn-4 4.0.0b36 needs nvidia-cutlass-dsl, whose Python front end
# (cutlass/cute) is in nvidia-cutlass-dsl-libs-core since 4.8 (a dependency of libs-base; the
# 2026-12-01 attempt carried only base + cu13 and found no cutlass.cute), plus cuda-bindings,
# protobuf, typing-extensions, quack-kernels, apache-tvm-ffi, torch-c-dlpack-ext, einops.
# `import cutlass.cute` was checked here with python3.12 and this folder on PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
v=4.8.1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 \
  -d "$work/whl" "flash-attn-4==4.0.0b36" "nvidia-cutlass-dsl==$v" "nvidia-cutlass-dsl-libs-base==$v" \
  "nvidia-cutlass-dsl-libs-core==$v" "nvidia-cutlass-dsl-libs-cu13==$v" "quack-kernels==0.6.5" \
  "apache-tvm-ffi>=0.1.11,<0.2" "torch-c-dlpack-ext" "einops" "cuda-bindings>=13,<14" "cuda-pathfinder" \
  "protobuf>=4.21.12" "typing-extensions>=4.13"
mkdir -p "$work/site"
for w in "$work"/whl/*.whl; do unzip -q -o "$w" -d "$work/site"; done
ir=nvidia_cutlass_dsl/dsl_packages/cutlass/_mlir/_mlir_libs/_cutlass_ir.cu13.cpython-312-x86_64-linux-gnu.so
mkdir -p .fa4 "$work/p1"
xz -T2 -9 -c "$work/site/$ir" > "$work/p1/ir.so.xz"   # ~50 MB of the 193 MB library
rm "$work/site/$ir"
tar -C "$work/p1" -cf .fa4/part1.tar ir.so.xz
cat > "$work/unpack.sh" <<EOF
set -e
cd /tmp/fa4
tar -xJf site.tar.xz
xz -dc ir.so.xz > site/$ir
chmod +x site/$ir
echo "FA4 unpacked in /tmp/fa4/site"
EOF
tar -C "$work" -cJf "$work/site.tar.xz" site
tar -C "$work" -cf .fa4/part2.tar site.tar.xz unpack.sh
ls -la .fa4
