"""Warp-stall samples of one kernel per warpgroup role, from ncu's SASS source page
(`ncu -i X.ncu-rep --page source --csv --print-source sass > X.csv`): the code between two
`USETMAXREG` instructions is one role (our sm90 kernels set each warpgroup's registers first, so
the register count names the role), then the N instructions with the most samples and their
stall reasons. bench/NOTES.md "Decode v9" reads it.
    python3 tools/prof/ncu_sass_regions.py X.csv [N] [regs=name ...]   e.g. 0xa0=WG1 0xd8=WG0 0x80=producer"""
import csv
import sys


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    rows = list(csv.reader(open(sys.argv[1])))[1:]
    n_top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    names = dict(a.split("=", 1) for a in sys.argv[3:])
    hdr, data = rows[0], rows[1:]
    ix = {h: i for i, h in enumerate(hdr)}
    stalls = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    role, acc, top = "prologue", {}, []
    for r in data:
        src = r[ix["Source"]]
        if "USETMAXREG" in src:
            regs = src.split()[-1].rstrip(" ;")
            role = names.get(regs, f"regs {regs}")
        a = acc.setdefault(role, dict.fromkeys(stalls + ["samples", "inst"], 0.0))
        samples = num(r[ix["Warp Stall Sampling (All Samples)"]])
        a["samples"] += samples
        a["inst"] += num(r[ix["Instructions Executed"]])
        for s in stalls:
            a[s] += num(r[ix[s]])
        top.append((samples, r[ix["Address"]], role, src[:70],
                    {s[6:]: int(num(r[ix[s]])) for s in stalls if num(r[ix[s]]) > 0}))
    total = sum(a["samples"] for a in acc.values())
    for k, a in acc.items():
        big = ", ".join(f"{s[6:]} {100 * a[s] / max(1, a['samples']):.0f}%" for s in stalls if a[s] > 0.03 * a["samples"])
        print(f"{k:16s} samples {a['samples']:7.0f} ({100 * a['samples'] / total:4.1f}%) inst {a['inst']:10.0f}  {big}")
    top.sort(key=lambda t: -t[0])
    for t in top[:n_top]:
        print(f"{t[0]:6.0f} {t[1]} {t[2]:14s} {t[3]:70s} {t[4]}")


if __name__ == "__main__":
    main()
