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

With --framework NAME (runs of `--only host,host_by_call`), a whole framework file instead: the by-call
table, an op's dispatch (the mean of one autograd records and one of its backward) and a collective's
(the mean of a one-rank NCCL all-reduce, all-gather and reduce-scatter), each with its source.

Usage: python3 tools/measure/host_table.py host-by-call.json [more runs of the same host ...] > table.json
       python3 tools/measure/host_table.py --framework my-host --host-machine "CPU, PyTorch version, date" \
           host-by-call.json [more runs] > my-host.json
"""
import argparse
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


def by_call_table(runs):
    """The per-call table and the two in-layer ratios, from the host_by_call parts of `runs`."""
    def mean(call, key):
        return statistics.fmean(run["host_by_call"][call][key] for run in runs)

    ratios = {}
    for key in ("forward_seconds", "backward_node_seconds"):
        calls = sum(count * mean(call, key) for call, count in LAYER_CALLS.items())
        ratios[key] = mean("layer", key) / calls
    forward, backward = ratios["forward_seconds"], ratios["backward_node_seconds"]
    table = {name: forward * mean(call, "forward_seconds") for name, call in FORWARD.items()}
    table.update({name: backward * mean(call, "backward_node_seconds") for name, call in BACKWARD.items()})
    table["matmul"] = table["weight_grad"] = backward * mean("linear", "backward_node_seconds") / 2
    table.update({name: mean(name, "call_seconds") for name in OUTSIDE_LAYERS})
    return {name: float(f"{seconds:.3g}") for name, seconds in table.items()}, forward, backward


def framework_file(name, host_machine, paths, runs, table, forward, backward):
    """A framework file (hw_models/frameworks/) of one host's runs, each figure with its source."""
    def mean(keys):
        return float(f"{statistics.fmean(run['host'][key] for run in runs for key in keys):.3g}")

    measured = f"measured on {host_machine} by tools/measure/gpu_components.py --only host,host_by_call ({', '.join(paths)})"
    return {
        "name": name,
        "description": "eager PyTorch driven from Python, each call as a transformer layer issues it",
        "host_machine": host_machine,
        "host": {
            "kernel_dispatch_seconds": mean(["autograd_forward_op", "autograd_backward_op"]),
            "communication_dispatch_seconds": mean(["nccl_all_reduce", "nccl_all_gather", "nccl_reduce_scatter"]),
            "synchronous": False,
            "kernel_dispatch_seconds_by_call": table,
            "source": {
                "kernel_dispatch_seconds": measured + ": the mean of an op autograd records and an op of its backward",
                "communication_dispatch_seconds": measured + ": the mean of a one-rank NCCL all-reduce, all-gather "
                                                  "and reduce-scatter through torch.distributed",
                "synchronous": "a GPU runs kernels asynchronously from the host: the host waits only at a read of a value",
                "kernel_dispatch_seconds_by_call": measured + f", turned into this table by tools/measure/host_table.py: "
                                                   f"each layer call at its chain's cost times {forward:.3f} forward or "
                                                   f"{backward:.3f} backward, the optimizer's calls at their own cost",
            },
        },
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="gpu_components.py outputs of one host")
    parser.add_argument("--framework", help="write a whole framework file of this name")
    parser.add_argument("--host-machine", help="with --framework: the CPU, software and date measured")
    args = parser.parse_args()
    if args.framework and not args.host_machine:
        parser.error("--framework needs --host-machine")
    runs = []
    for path in args.runs:
        with open(path) as f:
            runs.append(json.load(f))
    if args.framework:
        for path, run in zip(args.runs, runs):
            if "host" not in run:
                sys.exit(f"{path}: no 'host' part: measure with gpu_components.py --only host,host_by_call")
    table, forward, backward = by_call_table(runs)
    print(f"in-layer ratio: forward {forward:.3f}, backward {backward:.3f} ({len(runs)} runs)", file=sys.stderr)
    output = table
    if args.framework:
        output = framework_file(args.framework, args.host_machine, args.runs, runs, table, forward, backward)
    json.dump(output, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
