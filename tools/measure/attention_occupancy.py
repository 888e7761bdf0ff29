#!/usr/bin/env python3
"""A preset's attention_time_factor_by_blocks_per_sm curves, from gpu_components.py's attention_occupancy.

FlashAttention-2 runs one thread block per 128 rows of a head (forward: query rows; backward: key
rows), so a kernel on one short sequence with few heads leaves SMs idle, and under a causal mask its
blocks' work differs by row, which fewer blocks balance worse. The preset's efficiency curves are
measured at 16K tokens a batch of 16 heads (Dao-AILab's benchmark: 15.5 blocks per SM on 132 SMs).
Each measured sequence of one batch is timed against that configuration at its length; the factor at
a number of blocks per SM is the median over the lengths and head counts that give it, for the
forward and the backward (forward+backward less forward), causal or not.

Usage: python3 tools/measure/attention_occupancy.py attention-occupancy.json > factors.json
(add each curve's source)
"""
import json
import math
import statistics
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        measured = json.load(f)
    rows = measured["attention_occupancy"]
    sms = measured["streaming_multiprocessors"]
    # Each length's first row is the benchmark's configuration (at 16K, one sequence of 16 heads too).
    reference = {}
    for r in rows:
        reference.setdefault((r["seq"], r["causal"]), r)
    factors = {}
    for r in rows:
        bench = reference[(r["seq"], r["causal"])]
        if r is bench:
            continue
        per_head = lambda row, key: row[key] / (row["batch"] * row["heads"])  # noqa: E731
        forward = per_head(r, "forward_seconds") / per_head(bench, "forward_seconds")
        backward = ((per_head(r, "forward_backward_seconds") - per_head(r, "forward_seconds")) /
                    (per_head(bench, "forward_backward_seconds") - per_head(bench, "forward_seconds")))
        blocks_per_sm = round(math.ceil(r["seq"] / 128) * r["heads"] / sms, 4)
        prefix = "causal_" if r["causal"] else ""
        for direction, factor in (("forward", forward), ("backward", backward)):
            factors.setdefault(prefix + direction, {}).setdefault(blocks_per_sm, []).append(factor)
    curves = {key: [[x, round(statistics.median(ys), 3)] for x, ys in sorted(by_x.items())]
              for key, by_x in sorted(factors.items())}
    json.dump(curves, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
