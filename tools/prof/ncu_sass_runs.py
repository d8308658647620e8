"""Where a kernel's instructions go, from ncu's SASS source page (`ncu -i X.ncu-rep --page source
--csv --print-source sass > X.csv`): consecutive instructions with the same execution count form one
run (a straight-line region: a loop body, a per-step block, the prologue), printed with its count
per UNIT (e.g. per warp and step: executed / (warps x steps)), its share of the stall samples and
its most frequent opcodes. bench/NOTES.md "Window v12" reads a MiMo step this way.
    python3 tools/prof/ncu_sass_runs.py X.csv UNITS [MIN_TOTAL]     e.g. X.csv 32768 4"""
import csv
import re
import sys
from collections import Counter

from ncu_sass_regions import num  # (this folder: a script's own directory is on sys.path)


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    start = next(i for i, r in enumerate(rows) if "Address" in r and "Source" in r)
    hdr, data = rows[start], rows[start + 1:]
    ix = {h: i for i, h in enumerate(hdr)}
    units, min_total = float(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 4.0
    samples = [num(r[ix["Warp Stall Sampling (All Samples)"]]) for r in data]
    all_samples = sum(samples) or 1.0
    runs = []  # [address, count per unit, instructions, sample %, opcodes]
    for r, smp in zip(data, samples):
        ex = num(r[ix["Instructions Executed"]]) / units
        src = r[ix["Source"]].strip()
        op = re.sub(r"^@!?U?P\w+\s+", "", src).split()[0].split(".")[0] if src else ""
        if runs and abs(runs[-1][1] - ex) < 0.01:
            runs[-1][2] += 1
            runs[-1][3] += 100 * smp / all_samples
            runs[-1][4].append(op)
        else:
            runs.append([r[ix["Address"]][-5:], ex, 1, 100 * smp / all_samples, [op]])
    total = sum(ex * n for _, ex, n, _, _ in runs)
    print(f"{total:.1f} instructions per unit; runs of at least {min_total} per unit:")
    cum = 0.0
    for addr, ex, n, smp, ops in runs:
        cum += ex * n
        if ex * n >= min_total:
            top = " ".join(f"{k}:{v}" for k, v in Counter(ops).most_common(6))
            print(f"{addr} x{ex:6.2f} {n:4d} instr = {ex * n:7.1f} (cum {cum:7.1f}) samples {smp:5.2f} %  {top}")


if __name__ == "__main__":
    main()
