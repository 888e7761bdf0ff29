#!/usr/bin/env python3
"""A preset's `gpu.kernels` block from gpu_components.py's measurements.

Each measured call becomes a point (bytes, bytes per second) of its kernel's curve, its bytes counted
as paradyse's tracer counts that call (strategies/tracing_backend.cpp), so that the cost model's
bytes / rate gives back the measured time; tests/costmodel/measured_gpus_test.cpp checks that through
the tracer itself.

Usage: python3 tools/measure/kernel_rates.py components.json SOURCE-TEXT > kernels.json
"""
import json
import sys


def activation_bytes(kernel, tokens, hidden):
    """The tracer's bytes for a bf16 [tokens, hidden] activation (norm stats: two fp32 per row)."""
    elements = tokens * hidden
    per_element = {"norm_forward": 4, "norm_backward": 6, "gelu": 4, "gelu_backward": 6,
                   "dropout": 5, "dropout_backward": 5, "add": 6}[kernel]
    stats = 8 * tokens if kernel.startswith("norm") else 0
    return per_element * elements + stats


def optimizer_bytes(kernel, parameters):
    """The tracer's bytes for the optimizer's calls on one tensor of fp32 main gradients."""
    return {"adam_step": 30 * parameters, "sum_of_squares": 4 * parameters + 4, "scale_": 8 * parameters,
            "add_": 10 * parameters, "zeros": 4 * parameters}[kernel]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        measured = json.load(f)
    points = {}
    for row in measured.get("memory_bound", []):
        size = activation_bytes(row["kernel"], row["tokens"], row["hidden"])
        points.setdefault(row["kernel"], []).append([size, size / row["seconds"]])
    for row in measured.get("optimizer", []):
        size = optimizer_bytes(row["kernel"], row["parameters"])
        points.setdefault(row["kernel"], []).append([size, size / row["seconds"]])
    kernels = {name: {"bytes_per_second_by_bytes": sorted(curve),
                      "source": {"bytes_per_second_by_bytes": sys.argv[2]}}
               for name, curve in sorted(points.items())}
    json.dump(kernels, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
