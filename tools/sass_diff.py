"""Per-kernel comparison of two SASS dumps (`cuobjdump -sass` of an object or of a built _C .so):
for every kernel in both, SAME or DIFF and the instruction counts, addresses stripped. Shows that a
knob's default build is instruction for instruction the build that was tested on the device
(docs/DECISIONS.md), e.g. the tested variant's .whl/var_NAME/_C*.so against a unit compiled now.
    python3 tools/sass_diff.py tested.sass fresh.sass"""
import hashlib
import re
import sys


def kernels(path):
    """{mangled name: [instructions without their /*address*/ comments]}"""
    out, name, ins = {}, None, []
    for line in open(path, errors="replace"):
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                out[name] = ins
            name, ins = m.group(1), []
        elif re.match(r"^\s+/\*[0-9a-f]{4,}\*/", line):  # 5-digit addresses past 64 KB of code
            ins.append(re.sub(r"/\*[0-9a-f]*\*/", "", line).strip())
    if name:
        out[name] = ins
    return out


def main():
    a, b = kernels(sys.argv[1]), kernels(sys.argv[2])
    for n in sorted(set(a) & set(b)):
        same = hashlib.md5("\n".join(a[n]).encode()).digest() == hashlib.md5("\n".join(b[n]).encode()).digest()
        print(f"{'SAME' if same else 'DIFF'} {len(a[n])} {len(b[n])} {n}")
    print(f"{len(set(a) & set(b))} kernels in both; only in the first {len(set(a) - set(b))}, "
          f"only in the second {len(set(b) - set(a))}")


if __name__ == "__main__":
    main()
