#!/usr/bin/env python3
"""A GPU preset's single figures from one gpu_components.py run, as the presets' sources describe them.

- attention_efficiency_by_seq, causal_attention_efficiency_by_seq: FlashAttention-2 forward+backward,
  no dropout, TFLOP/s as the benchmark counts them over the datasheet's dense bf16 peak;
- attention_forward_efficiency_by_seq, causal_attention_forward_efficiency_by_seq: the same kernel's
  forward alone, TFLOP/s as the benchmark counts the forward;
- attention_dropout_time_factor_by_seq: forward+backward under the causal mask with dropout over
  without;
- hbm_bytes_per_second: a 1 GiB device-to-device copy, bytes read and written;
- kernel_launch_seconds: the device time of the smallest call measured (a 16 KiB zero_());
- gemm_tiles: peak_efficiency and setup_k fitted to every measured GEMM by the least sum of |log(priced
  / measured)|, each priced as costmodel/op_time.cpp's gemm_arithmetic_s prices one (tiles of cuBLAS's
  large shapes in waves over the SMs, the memory roofline, plus the launch), on a grid of 0.001 and 8
  main-loop steps;
- host: an op's dispatch (the mean of one autograd records and one of its backward) and a
  collective's (the mean of a one-rank NCCL all-reduce, all-gather and reduce-scatter).

Usage: python3 tools/measure/gpu_figures.py components.json [--peak-flops 989e12] > figures.json
"""
import argparse
import json
import math
import statistics

TILE_SHAPES = [(256, 128), (128, 256), (128, 128), (128, 64), (64, 128)]


def gemm_seconds(m, n, k, sms, peak, efficiency, setup_k, hbm, launch):
    sm_flops = peak / sms * efficiency
    arithmetic = min(math.ceil(math.ceil(m / tm) * math.ceil(n / tn) / sms) * 2.0 * tm * tn * (k + setup_k) / sm_flops
                     for tm, tn in TILE_SHAPES)
    memory = 2.0 * (m * k + k * n + m * n) / hbm
    return launch + max(arithmetic, memory)


def fit_gemm(rows, sms, peak, hbm, launch):
    def cost(efficiency, setup_k):
        return sum(abs(math.log(gemm_seconds(r["m"], r["n"], r["k"], sms, peak, efficiency, setup_k, hbm, launch)
                                / r["seconds"])) for r in rows)

    _, e0, s0 = min((cost(e / 1000, s), e / 1000, s) for e in range(600, 1001, 5) for s in range(0, 513, 16))
    _, efficiency, setup_k = min((cost(e / 1000, s), e / 1000, s) for e in range(round(e0 * 1000) - 10, round(e0 * 1000) + 11)
                                 for s in range(max(0, s0 - 24), s0 + 25, 8))
    errors = [abs(gemm_seconds(r["m"], r["n"], r["k"], sms, peak, efficiency, setup_k, hbm, launch) / r["seconds"] - 1)
              for r in rows]
    return {"peak_efficiency": efficiency, "setup_k": setup_k, "shapes": len(rows),
            "mean_abs_error": round(statistics.fmean(errors), 4), "median_abs_error": round(statistics.median(errors), 4)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("components", help="gpu_components.py's output")
    parser.add_argument("--peak-flops", type=float, default=989e12, help="the datasheet's dense bf16 FLOP/s")
    args = parser.parse_args()
    with open(args.components) as f:
        run = json.load(f)
    figures = {"device": run["device"], "streaming_multiprocessors": run["streaming_multiprocessors"]}
    rows = run["attention"]
    plain = {r["seq"]: r for r in rows if not r["causal"] and r.get("dropout", 0) == 0}
    causal = {r["seq"]: r for r in rows if r["causal"] and r.get("dropout", 0) == 0}
    dropped = {r["seq"]: r for r in rows if r["causal"] and r.get("dropout", 0) > 0}
    figures["attention_efficiency_by_seq"] = [[s, round(r["forward_backward_tflops"] * 1e12 / args.peak_flops, 4)]
                                              for s, r in sorted(plain.items())]
    figures["causal_attention_efficiency_by_seq"] = [
        [s, round(r["forward_backward_tflops"] * 1e12 / args.peak_flops, 4)] for s, r in sorted(causal.items())]
    figures["attention_forward_efficiency_by_seq"] = [[s, round(r["forward_tflops"] * 1e12 / args.peak_flops, 4)]
                                                      for s, r in sorted(plain.items())]
    figures["causal_attention_forward_efficiency_by_seq"] = [
        [s, round(r["forward_tflops"] * 1e12 / args.peak_flops, 4)] for s, r in sorted(causal.items())]
    figures["attention_dropout_time_factor_by_seq"] = [
        [s, round(r["forward_backward_seconds"] / causal[s]["forward_backward_seconds"], 4)]
        for s, r in sorted(dropped.items())]
    copies = {r["bytes"]: r["bytes_per_second"] for r in run["copy"]}
    figures["hbm_bytes_per_second"] = float(f"{copies[1 << 30]:.3g}")
    figures["copy_bytes_per_second_by_bytes"] = [[b, float(f"{v:.3g}")] for b, v in sorted(copies.items())]
    smallest = min((r for r in run["optimizer"] if r["kernel"] == "zeros"), key=lambda r: r["parameters"])
    figures["kernel_launch_seconds"] = float(f"{smallest['seconds']:.2g}")
    figures["gemm_tiles"] = fit_gemm(run["gemm"], run["streaming_multiprocessors"], args.peak_flops,
                                     figures["hbm_bytes_per_second"], figures["kernel_launch_seconds"])
    host = run["host"]
    figures["kernel_dispatch_seconds"] = float(
        f"{statistics.fmean([host['autograd_forward_op'], host['autograd_backward_op']]):.3g}")
    figures["communication_dispatch_seconds"] = float(
        f"{statistics.fmean([host['nccl_all_reduce'], host['nccl_all_gather'], host['nccl_reduce_scatter']]):.3g}")
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
