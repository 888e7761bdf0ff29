#!/usr/bin/env python3
"""A preset's `host.kernel_dispatch_seconds_by_call` table from gpu_components.py's host_by_call runs.

Each figure is the mean over the given runs (one host, measured before and after the steps it is
compared with: a host's speed moves within minutes). A chain of one call repeated costs the host less
per call than the same calls issued as a layer issues them: the layer's module calls, its views and
their autograd nodes, the dispatcher's caches shared by different ops. So the layer calls are priced
in a layer: each call's own cost times its direction's ratio of a whole layer (gpu_training_step.py's
Block, tiny, in a chain) to the sum of the chains of the layer's calls. Forward calls take the
forward ratio; a linear's backward node, split over the tracer's matmul and weight_grad, and the other
backward nodes take the backward ratio. The optimizer's calls run outside a layer and outside autograd:
their own costs.

Usage: python3 tools/measure/host_table.py host-by-call.json [more runs of the same host ...] > table.json
"""
import json
import statistics
import sys

# The calls of gpu_training_step.py's Block, by the chain that measured each, and how many of each.
LAYER_CALLS = {"norm": 2, "linear": 4, "attention": 1, "gelu": 1, "dropout": 2, "add": 2}
FORWARD = {"linear": "linear", "norm_forward": "norm", "gelu": "gelu", "dropout": "dropout", "add": "add",
           "attention_forward": "attention"}
BACKWARD = {"norm_backward": "norm", "gelu_backward": "gelu", "dropout_backward": "dropout",
            "attention_backward": "attention"}
OUTSIDE_LAYERS = ["sum_of_squares", "scale_", "add_", "zeros", "cast", "adam_step"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    runs = []
    for path in sys.argv[1:]:
        with open(path) as f:
            runs.append(json.load(f)["host_by_call"])

    def mean(call, key):
        return statistics.fmean(run[call][key] for run in runs)

    ratios = {}
    for key in ("forward_seconds", "backward_node_seconds"):
        calls = sum(count * mean(call, key) for call, count in LAYER_CALLS.items())
        ratios[key] = mean("layer", key) / calls
    forward, backward = ratios["forward_seconds"], ratios["backward_node_seconds"]
    table = {name: forward * mean(call, "forward_seconds") for name, call in FORWARD.items()}
    table.update({name: backward * mean(call, "backward_node_seconds") for name, call in BACKWARD.items()})
    table["matmul"] = table["weight_grad"] = backward * mean("linear", "backward_node_seconds") / 2
    table.update({name: mean(name, "call_seconds") for name in OUTSIDE_LAYERS})
    print(f"in-layer ratio: forward {forward:.3f}, backward {backward:.3f} ({len(runs)} runs)", file=sys.stderr)
    json.dump({name: float(f"{seconds:.3g}") for name, seconds in table.items()}, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
