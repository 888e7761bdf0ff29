#!/usr/bin/env python3
"""The results table of check.sh, from the files it wrote into one folder: the numerics tests'
summary; per model, each strategy's degree-1 steps as validate measured and simulated them on the
device's own calibration (time error, and the simulated peak against the backend's held bytes and
the allocator's peak); and, where eager PyTorch ran, its step time and the C++ step's speed against
it (eager time / C++ time, megatron_ts: above 1, C++ is faster). Ends with the mean and worst time
error over every row, and the sustained GEMM's throughput against its burst figure where it ran.

usage: table.py OUT_DIR [--numerics-status N]
"""
import argparse
import glob
import json
import os
import re
import statistics


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def numerics_line(out, status):
    path = os.path.join(out, "numerics.txt")
    text = open(path).read() if os.path.exists(path) else ""
    summary = re.findall(r"(All tests passed.*|test cases:.*)", text)
    return f"numerics against the one-device reference: exit {status}; {summary[-1] if summary else 'no summary'}"


def pct(x):
    return f"{100 * x:+.1f}%"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--numerics-status", default="?")
    args = parser.parse_args()
    print("# paradyse gpu-check\n")
    print(numerics_line(args.out, args.numerics_status) + "\n")
    errors = []
    for path in sorted(glob.glob(os.path.join(args.out, "validate-*.json"))):
        model = os.path.basename(path)[len("validate-"):-len(".json")]
        rows = load(path)
        eager = load(os.path.join(args.out, f"eager-{model}.json"))
        eager_by_seq = {r["seq"]: r for r in eager["runs"]} if eager else {}
        print(f"## {model}, one rank\n")
        if not rows:
            print("validate wrote nothing (see log.txt)\n")
            continue
        header = ["plan", "seq", "measured ms", "simulated ms", "time error", "held / simulated MiB",
                  "memory error", "allocator peak MiB", "vs allocator"]
        if eager:
            header += ["eager PyTorch ms", "eager / C++"]
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for r in rows:
            errors.append(r["time_error"])
            row = [r["plan"], str(r["seq"]), f"{1e3 * r['measured_s']:.1f}", f"{1e3 * r['simulated_s']:.1f}",
                   pct(r["time_error"]),
                   f"{r['measured_peak_bytes'] / 2**20:.0f} / {r['simulated_peak_bytes'] / 2**20:.0f}",
                   pct(r["memory_error"]), f"{r['allocator_peak_bytes'] / 2**20:.0f}",
                   pct(r["allocator_memory_error"])]
            if eager:
                e = eager_by_seq.get(r["seq"], {})
                if "step_seconds" in e and r["plan"] == "megatron_ts":
                    row += [f"{1e3 * e['step_seconds']:.1f}", f"{e['step_seconds'] / r['measured_s']:.3f}"]
                else:
                    row += [e.get("error", "-") if r["plan"] == "megatron_ts" else "", ""]
            print("| " + " | ".join(row) + " |")
        print()
    if errors:
        print(f"mean |time error| {100 * statistics.mean(abs(e) for e in errors):.1f}%, "
              f"worst {pct(max(errors, key=abs))}, over {len(errors)} rows")
    sustained = (load(os.path.join(args.out, "gemm-sustained.json")) or {}).get("gemm_sustained")
    if sustained:
        last = sustained["windows"][-1]
        print(f"\nGEMM {sustained['m']}^3 sustained {sustained['steady_tflops']:.0f} TFLOP/s against "
              f"{sustained['burst_tflops']:.0f} in bursts ({sustained['steady_over_burst']:.3f}x); last window: "
              + ", ".join(f"{k} {v}" for k, v in last.items() if k != "tflops"))


if __name__ == "__main__":
    main()
