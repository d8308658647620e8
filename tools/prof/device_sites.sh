# Sourced by the device-call scripts (bench/results/*/device_call*.sh, run on the device from the
# repository root with .whl carried): installs .whl/sinkops-*.whl into /tmp/site with the tree's
# Python over it and one copy /tmp/site_V per variant V named in the arguments (`wheel`: the wheel's
# own _C; else .whl/var_V/_C*.so, from tools/prof/variant_so.sh); R = the repository root; the step
# timer: `el` (seconds since sourcing), `left N` (true while fewer than N seconds have passed).
#   source tools/prof/device_sites.sh wheel comb2
R=$PWD
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { [ "$(el)" -lt "$1" ]; }
rm -rf /tmp/site && python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/sinkops-*.whl || exit 1
(cd sinkops && find . -name '*.py' -exec cp --parents {} /tmp/site/sinkops/ \;)
for v in "$@"; do
  rm -rf "/tmp/site_$v" && cp -r /tmp/site "/tmp/site_$v"
  [ "$v" = wheel ] || cp .whl/var_"$v"/_C*.so "/tmp/site_$v/sinkops/" || exit 1
done
