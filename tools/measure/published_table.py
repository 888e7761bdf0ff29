#!/usr/bin/env python3
"""A table for `paradyse published --table` from gpu_training_step.py's measured steps.

Each measured length of each step file becomes one run: the step's model file, the cluster preset the
GPU's figures are in, megatron_tp at degree 1, one sequence, the unfused loss kernel (the step runs
Megatron's), whether its steps clipped their gradients, measure "iteration", the median step time.

Usage: python3 tools/measure/published_table.py --cluster dgx-h200 --source "measured on ..." \
           [--model-dir tools/measure/models] steps.json...
"""
import argparse
import json
import sys

SETUP = ("one GPU, eager PyTorch in bf16: GPT-2 style pre-LN blocks with biases, FlashAttention-2 (PyTorch's "
         "flash SDPA backend) with the model file's attention dropout, its hidden dropout, tanh GELU, the output head on the "
         "tied embedding table (the model file's vocabulary: pad it as Megatron-LM does, to a multiple of 128), "
         "Megatron's unfused vocabulary-parallel cross entropy on fp32 logits; bf16 gradients added into fp32 main gradients (one buffer, one fill zeroes it), the "
         "gradient norm read on the host and the gradients scaled when it exceeds 1.0 (in {clipped} of {all} steps), "
         "fused Adam on fp32 masters, the copy back to bf16, the loss read on the host; one sequence per step, "
         "the median of {steps} steps after {warmup} warm-up")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", required=True, help="the cluster preset (or file) the GPU's figures are in")
    parser.add_argument("--source", required=True, help="where and when the steps were measured")
    parser.add_argument("--model-dir", help="the folder of the model files, where the steps were measured "
                                            "elsewhere (default: the path each step file records)")
    parser.add_argument("steps", nargs="+", help="gpu_training_step.py output files")
    args = parser.parse_args()
    runs, counts, clipped, all_steps = [], set(), 0, 0
    for path in args.steps:
        with open(path) as f:
            measured = json.load(f)
        counts.add((measured["steps"], measured["warmup"]))
        name = measured["model"].rsplit("/", 1)[-1].removesuffix(".json")
        model = f"{args.model_dir.rstrip('/')}/{name}.json" if args.model_dir else measured["model"]
        for run in measured["runs"]:
            if "error" in run:
                continue  # out of memory: nothing to time
            seq = run["seq"]
            clipped += run["clipped_steps"]
            all_steps += run["all_steps"]
            if 0 < run["clipped_steps"] < run["all_steps"]:
                sys.exit(f"published_table.py: {path}, seq {seq}: some steps clipped their gradients and "
                         "some did not; a traced step takes one branch")
            runs.append({"name": f"{name} iteration, {seq} tokens", "table": f"{path}, seq {seq}",
                         "cluster": args.cluster, "model": model, "strategy": "megatron_tp", "degree": 1,
                         "seq": seq, "batch": 1, "loss_kernel": "unfused",
                         "gradients_clipped": run["clipped_steps"] > 0,
                         "measure": "iteration",
                         "measured_s": round(run["step_seconds"], 6)})
    if not runs:
        sys.exit("published_table.py: no measured step in " + ", ".join(args.steps))
    if len(counts) > 1:
        sys.exit("published_table.py: the step files were timed over different numbers of steps")
    steps, warmup = counts.pop()
    setup = SETUP.format(steps=steps, warmup=warmup, clipped=clipped, all=all_steps)
    print(json.dumps({"source": args.source, "setup": setup, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
