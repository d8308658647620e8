#!/usr/bin/env bash
# On the device: A/B of kernel variants built here with tools/prof/variant_so.sh (bench/NOTES.md).
# Installs the carried wheel as the baseline "base", one package copy per variant with its _C, then
# per variant the GPU tests named by TESTS (pytest args without spaces inside an argument, e.g.
# "tests/test_window_attention.py -k cuda")
# and TIMER (window_variants.py / decode_variants.py), each timer pass over all variants twice.
#   TESTS=... TIMER=tools/prof/window_variants.py [TIMER_ARGS="--modes key0,none unbounded"] bash tools/prof/ab_variants.sh I Q
set -uo pipefail
cd "$(dirname "$0")/../.."
R=$PWD
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/sinkops-*.whl || exit 1
(cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site/sinkops/ \;)  # this tree's Python over the wheel's
names=(base "$@")
for v in "$@"; do rm -rf /tmp/site_$v; cp -r /tmp/site /tmp/site_$v; cp .whl/var_$v/_C*.so /tmp/site_$v/sinkops/; done
site() { [ "$1" = base ] && echo /tmp/site || echo /tmp/site_$1; }
cd /tmp
if [ -n "${TESTS:-}" ]; then
  for v in "$@"; do
    args=$(sed "s|tests/|$R/tests/|g" <<<"$TESTS")
    result=$(PYTHONPATH=$(site $v) timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu $args 2>&1 | tail -1)
    echo "== tests $v: $result"
  done
fi
for rep in 1 2; do
  for v in "${names[@]}"; do PYTHONPATH=$(site $v) timeout 200 python3 "$R/$TIMER" "$v" ${TIMER_ARGS:-} 2>&1 | tail -1; done
done
