#!/usr/bin/env bash
# Tuning aid (bench/NOTES.md): builds a variant of sinkops._C for the device in ~2-4 minutes instead
# of a whole wheel: applies PATCH to a copy of csrc (or copies HEADER over one file), recompiles
# only the named translation units for sm_90a with the extra nvcc flags, and links them with the
# objects of the last wheel build (build/temp.*) into .whl/var_NAME/_C*.so. On the device,
# tools/prof/ab_variants.sh installs each variant beside the wheel and times them in one call.
#   bash tools/prof/variant_so.sh NAME PATCH|HEADER=DEST "sm90/window_attention_sm90*.cu" [nvcc flags]
# (PYTHON must see the nvidia-cutlass wheel: the CuTe headers.)
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1 change=$2 units=$3
shift 3
py=${PYTHON:-python3}
V=/tmp/sinkops_var_$name
rm -rf "$V"
mkdir -p "$V/obj"
cp -r csrc "$V/"
if [[ $change == *=* ]]; then
  cp "${change%%=*}" "$V/csrc/cuda/${change#*=}"
else
  (cd "$V" && patch -s -p1 < "$OLDPWD/$change")
fi
cute=$($py -c 'import cutlass_library, os
print(os.path.join(os.path.dirname(cutlass_library.__file__), "source", "include"))')
flags="-std=c++17 -O3 -Xcompiler -fPIC --expt-relaxed-constexpr -I$V/csrc/include -I$V/csrc/cuda -DNDEBUG"
flags+=" -DSINKOPS_SM90=1 -I$cute -gencode arch=compute_90a,code=sm_90a $*"
B=$(ls -d build/temp.*-312 | head -1)
# The other units come from that build: objects older than HEAD's last csrc commit would mix old
# kernels into the variant (bench/NOTES.md "Prefill v1.6": a decode A/B confounded this way).
# Rebuild the wheel first, or STALE_OK=1 when the commits since touched only the rebuilt units.
if [ "$(stat -c %Y "$B"/cuda/*.o | sort -n | head -1)" -lt "$(git log -1 --format=%ct -- csrc)" ] &&
   [ "${STALE_OK:-0}" != 1 ]; then
  echo "variant_so.sh: $B/cuda/*.o predate HEAD's last csrc commit: rebuild the wheel (or STALE_OK=1)" >&2
  exit 1
fi
object_of() { case $1 in sm90/*) echo "sm90_$(basename "$1" .cu).o" ;; *) echo "$(basename "$1" .cu).o" ;; esac; }
keep=$(ls "$B"/cuda/*.o)
for u in $(cd "$V/csrc/cuda" && ls $units); do
  keep=$(grep -v "/$(object_of "$u")\$" <<<"$keep" || true)
done
for u in $(cd "$V/csrc/cuda" && ls $units); do
  echo "nvcc $u"
  nvcc $flags -c "$V/csrc/cuda/$u" -o "$V/obj/$(object_of "$u")" &
  while [ "$(jobs -r | wc -l)" -ge "${MAX_JOBS:-2}" ]; do wait -n; done
done
wait
mkdir -p ".whl/var_$name"
so=".whl/var_$name/_C.cpython-312-x86_64-linux-gnu.so"
libdir=$($py -c 'import sys, pathlib; sys.path.insert(0, "tools"); import build_cuda
print(build_cuda.cuda_lib_dirs(build_cuda.find_nvcc(), pathlib.Path(sys.argv[1]))[0])' "$V/probe")
g++ -shared -o "$so" "$B/csrc/bindings.o" "$B/csrc/cuda_stubs.o" $keep "$V"/obj/*.o \
  -L"$libdir" -lcudart_static -ldl -lrt -lpthread  # as setup.py links sinkops._C
strip --strip-unneeded "$so"
ls -la ".whl/var_$name"
