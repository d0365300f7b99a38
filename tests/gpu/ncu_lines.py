#!/usr/bin/env python3
"""ncu_lines.py: the share of warp samples per kernel.cu line in Nsight Compute's source page
(ncu --page source --csv --print-source cuda), beside kg-bench's lines.json, for
tests/gpu/33-kg-bench-lines.bats. Prints one JSON object: {"columns", "lines": {LINE: share_pct}}.
Usage: ncu_lines.py SOURCE.csv"""
import csv
import json
import sys


def main():
    with open(sys.argv[1], newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    # the header is the first row naming a line column; ncu may print notes before it
    head = next(i for i, r in enumerate(rows) if "# Line" in r or "Line" in r)
    cols = rows[head]
    line_col = cols.index("# Line") if "# Line" in cols else cols.index("Line")
    sample_col = next(i for i, c in enumerate(cols) if c.startswith("Warp Stall Sampling (All"))
    counts = {}
    for r in rows[head + 1:]:
        try:
            line, n = int(r[line_col]), float(r[sample_col].replace(",", "") or 0)
        except (ValueError, IndexError):
            continue
        counts[line] = counts.get(line, 0) + n
    total = sum(counts.values()) or 1
    print(json.dumps({"columns": cols, "lines": {str(k): round(100 * v / total, 1) for k, v in counts.items() if v}}))


main()
