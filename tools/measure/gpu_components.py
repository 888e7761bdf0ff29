#!/usr/bin/env python3
"""Component measurements of one NVIDIA GPU and its host, for a cluster preset's figures.

Each figure a preset needs is timed on its own, never a whole training step:
  - bf16 GEMMs by shape (M, N, K) as cuBLAS runs them through PyTorch: square sizes and the shapes a
    Transformer layer launches (its linears, their tensor-parallel shards, their weight gradients);
  - FlashAttention-2 (PyTorch's flash SDPA backend) forward and forward+backward, head dim 128, with
    and without the causal mask, and causal with dropout 0.1 on the probabilities (the kernel draws
    its random numbers inside), 16K tokens per batch as Dao-AILab's benchmark runs it, and causal on
    one sequence of 4 to 64 heads beside it (how the kernel's tiles fill the SMs);
  - a GEMM under sustained load (gemm_sustained): the same large GEMM back to back for a minute, its
    throughput, the SM clock, power and temperature window by window, beside its burst time as the
    gemm part measures it (batches of about 2 ms), so that a preset can tell which one training sees;
  - HBM copy bandwidth;
  - memory-bound kernels (layer norm, GELU, dropout, add) over sizes, and the optimizer's (fused Adam
    on an fp32 master with the copy to its bf16 weight, the gradient norm's sum of squares, the
    clipping scale, the bf16 gradient added into the fp32 main gradient, its zeroing);
  - the host's cost to issue one op: eager PyTorch in place, out of place, a small linear, an op
    recorded by autograd, an op of autograd's backward, and a one-rank NCCL collective; and by call:
    each layer call (linear, layer norm, GELU, dropout, add, attention) in a chain of tiny calls,
    forward and its backward node, also as a framework issues them (through nn.Module calls,
    attention between its layout's views), a whole layer as gpu_training_step.py issues it, and the
    optimizer's calls; and the calls a framework's layer issues besides its kernels (host_ops: views,
    transposes, detaches, one by one and in Megatron-LM's mix, and a call into a torch.compile'd region,
    forward and backward), which --device cpu measures on a host without a GPU.

Device times are taken with CUDA events while the GPU runs a queue of calls the host issued during a
sleep kernel, so that the host's issue rate does not bound them. Host times are wall-clock times of a
loop of calls, divided by the calls. Output: one JSON document (--out, or standard output).

Usage: python3 tools/measure/gpu_components.py --out components.json
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F


def sleep_cycles(seconds):
    # The SM clock is about 2 GHz under load on Hopper; a longer sleep only costs time.
    return int(seconds * 2.0e9)


def device_seconds(fn, target_s=2e-3, trials=5):
    """Median device time of one call of fn, over `trials` batches that each last about target_s."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    once_s = max(start.elapsed_time(end) / 1e3, 1e-6)
    reps = max(1, min(500, int(target_s / once_s)))
    samples, sleep_s = [], 2e-3
    while len(samples) < trials:
        torch.cuda.synchronize()
        # The GPU sleeps while the host issues the batch, so the batch runs back to back; a batch
        # whose issue outlasted the sleep is timed again behind a longer one.
        torch.cuda._sleep(sleep_cycles(sleep_s))
        start.record()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        issue_s = time.perf_counter() - t0
        end.record()
        end.synchronize()
        if issue_s > 0.8 * sleep_s:
            sleep_s = 2 * issue_s + 1e-3
            continue
        samples.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(samples)


def synchronize():
    """Waits for the GPU, where there is one (the host parts also run on a machine without)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def host_seconds(fn, calls=2000, trials=5):
    """Median host time to issue one call of fn (wall clock of a loop, the GPU not waited for)."""
    for _ in range(50):
        fn()
    synchronize()
    samples = []
    for _ in range(trials):
        synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
        synchronize()
    return statistics.median(samples)


def gemm_shapes():
    shapes = set()
    for n in (256, 512, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384):
        shapes.add(("nt", n, n, n))
    for h in (2048, 4096, 12288):
        for t in (512, 1024, 2048, 4096, 8192, 16384):
            for out, inp in ((3 * h, h), (h, h), (4 * h, h), (h, 4 * h)):
                shapes.add(("nt", t, out, inp))  # forward: tokens x weight^T
            for out, inp in ((3 * h, h), (4 * h, h)):
                shapes.add(("tn", out, inp, t))  # weight gradient: d_y^T x, K = tokens
    for t in (512, 2048, 8192, 16384):  # tensor-parallel shards of h = 12288 over 8 GPUs
        h = 12288
        for out, inp in ((3 * h // 8, h), (h, h // 8), (4 * h // 8, h), (h, 4 * h // 8)):
            shapes.add(("nt", t, out, inp))
    return sorted(shapes, key=lambda s: (s[1] * s[2] * s[3], s))


def measure_gemms(dev):
    rows = []
    for layout, m, n, k in gemm_shapes():
        if layout == "nt":  # F.linear: x [M, K] times W [N, K] transposed
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
            fn = lambda: F.linear(a, b)
        else:  # d_y [K, M] transposed times x [K, N]
            a = torch.randn(k, m, device=dev, dtype=torch.bfloat16)
            b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
            fn = lambda: torch.matmul(a.t(), b)
        seconds = device_seconds(fn)
        rows.append({"layout": layout, "m": m, "n": n, "k": k, "seconds": seconds,
                     "tflops": 2.0 * m * n * k / seconds / 1e12})
        del a, b
    return rows


def gpu_state():
    """The GPU's SM clock (MHz), power (W) and temperature (C) now, from nvidia-smi; {} without it."""
    try:
        line = subprocess.run(["nvidia-smi", "--id=0", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
        clock, power, temperature = (float(v) for v in line.split(","))
        return {"sm_clock_mhz": clock, "power_w": power, "temperature_c": temperature}
    except (OSError, ValueError, subprocess.SubprocessError):
        return {}


def measure_gemm_sustained(dev, size=8192, seconds=60.0, window_s=5.0):
    """One bf16 GEMM [size]^3 back to back for `seconds`: TFLOP/s and the GPU's state per window."""
    a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    fn = lambda: F.linear(a, b)
    flops = 2.0 * size ** 3
    burst_s = device_seconds(fn)
    reps = max(1, int(0.05 / burst_s))  # chunks of about 50 ms, timed by events
    windows, start_all = [], time.perf_counter()
    while time.perf_counter() - start_all < seconds:
        calls, device_s, window_start = 0, 0.0, time.perf_counter()
        while time.perf_counter() - window_start < window_s:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(reps):
                fn()
            end.record()
            end.synchronize()
            calls += reps
            device_s += start.elapsed_time(end) / 1e3
        row = {"t_s": round(time.perf_counter() - start_all, 1), "tflops": flops * calls / device_s / 1e12}
        row.update(gpu_state())
        windows.append(row)
    del a, b
    steady = statistics.median(w["tflops"] for w in windows[len(windows) // 2:])
    return {"m": size, "n": size, "k": size, "burst_tflops": flops / burst_s / 1e12, "windows": windows,
            "steady_tflops": steady, "steady_over_burst": steady / (flops / burst_s / 1e12)}


def attention_row(dev, batch, heads, seq, causal, dropout, head_dim=128):
    """FlashAttention-2's forward and forward+backward device times on [batch, heads, seq, head_dim]."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = (torch.randn(batch, heads, seq, head_dim, device=dev, dtype=torch.bfloat16,
                           requires_grad=True) for _ in range(3))
    d_out = torch.randn(batch, heads, seq, head_dim, device=dev, dtype=torch.bfloat16)

    def forward():
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)

    def forward_backward():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)
        torch.autograd.grad(out, (q, k, v), d_out)

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        with torch.no_grad():
            fwd_s = device_seconds(forward)
        fwd_bwd_s = device_seconds(forward_backward)
    # FLOPs as the FlashAttention benchmark counts them: forward 4 s^2 a d per sequence,
    # backward 2.5x the forward, half of both under a causal mask.
    fwd_flops = 4.0 * seq * seq * heads * head_dim * batch / (2 if causal else 1)
    return {"seq": seq, "batch": batch, "heads": heads, "head_dim": head_dim,
            "causal": causal, "dropout": dropout, "forward_seconds": fwd_s,
            "forward_backward_seconds": fwd_bwd_s,
            "forward_tflops": fwd_flops / fwd_s / 1e12,
            "forward_backward_tflops": 3.5 * fwd_flops / fwd_bwd_s / 1e12}


def measure_attention(dev):
    rows = []
    heads, tokens = 16, 16384
    for seq in (512, 1024, 2048, 4096, 8192, 16384):
        for causal, dropout in ((False, 0.0), (True, 0.0), (True, 0.1)):
            rows.append(attention_row(dev, tokens // seq, heads, seq, causal, dropout))
    return rows


def measure_attention_occupancy(dev):
    """Attention on one sequence, by heads and length, beside the benchmark's 16K tokens a batch: a
    kernel with few tiles (FlashAttention-2 runs one per 128 rows of a head) leaves SMs idle."""
    rows = []
    for seq in (512, 1024, 2048, 4096, 8192, 16384):
        for causal in (True, False):
            rows.append(attention_row(dev, 16384 // seq, 16, seq, causal, 0.0))
            for heads in (4, 8, 16, 32, 64):
                rows.append(attention_row(dev, 1, heads, seq, causal, 0.0))
    return rows


def measure_copy(dev):
    rows = []
    for size in (1 << 20, 1 << 24, 1 << 28, 1 << 30, 1 << 32):
        x = torch.empty(size, device=dev, dtype=torch.uint8)
        y = torch.empty_like(x)
        seconds = device_seconds(lambda: y.copy_(x))
        rows.append({"bytes": size, "seconds": seconds, "bytes_per_second": 2.0 * size / seconds})
        del x, y
    return rows


def measure_memory_bound(dev):
    rows = []
    for tokens, hidden in ((128, 1024), (512, 2048), (2048, 2048), (2048, 4096), (8192, 4096),
                           (8192, 12288), (16384, 12288)):
        x = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
        y = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16)
        w = torch.ones(hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
        b = torch.zeros(hidden, device=dev, dtype=torch.bfloat16, requires_grad=True)
        d = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16)
        ln = F.layer_norm(x, (hidden,), w, b)
        ge = F.gelu(x, approximate="tanh")
        dr = F.dropout(x, 0.1, training=True)
        cases = {
            "norm_forward": lambda: F.layer_norm(x.detach(), (hidden,), w.detach(), b.detach()),
            "norm_backward": lambda: torch.autograd.grad(ln, (x, w, b), d, retain_graph=True),
            "gelu": lambda: F.gelu(x.detach(), approximate="tanh"),
            "gelu_backward": lambda: torch.autograd.grad(ge, x, d, retain_graph=True),
            "dropout": lambda: F.dropout(x.detach(), 0.1, training=True),
            "dropout_backward": lambda: torch.autograd.grad(dr, x, d, retain_graph=True),
            "add": lambda: torch.add(x.detach(), y),
        }
        for name, fn in cases.items():
            rows.append({"kernel": name, "tokens": tokens, "hidden": hidden,
                         "element_bytes": 2, "seconds": device_seconds(fn)})
        del x, y, w, b, d, ln, ge, dr
    return rows


def measure_optimizer(dev):
    """The optimizer's calls on one tensor of n parameters, as mixed-precision Megatron makes them."""
    rows = []
    for n in (1 << 12, 1 << 16, 1 << 20, 1 << 24, 1 << 26, 1 << 28):
        master = torch.zeros(n, device=dev, dtype=torch.float32, requires_grad=True)
        master.grad = torch.randn(n, device=dev, dtype=torch.float32)
        weight = torch.zeros(n, device=dev, dtype=torch.bfloat16)
        grad = torch.randn(n, device=dev, dtype=torch.bfloat16)
        adam = torch.optim.Adam([master], lr=1e-4, fused=True)

        def adam_step():  # Adam on the fp32 master, then the copy to the bf16 weight
            adam.step()
            weight.copy_(master.detach())

        with torch.no_grad():
            cases = {
                "adam_step": adam_step,
                "sum_of_squares": lambda: torch._foreach_norm([master.grad]),
                "scale_": lambda: torch._foreach_mul_([master.grad], 0.999),
                "add_": lambda: master.grad.add_(grad),  # a bf16 gradient into the fp32 main gradient
                "zeros": lambda: master.grad.zero_(),
            }
            for name, fn in cases.items():
                rows.append({"kernel": name, "parameters": n, "seconds": device_seconds(fn)})
        del master, weight, grad, adam
    return rows


def chain_host_seconds(dev, make_op, n=200, trials=7):
    """Host time per call of a chain of n calls autograd records, and per node of its backward.

    The tensors are tiny, so the GPU runs each kernel faster than the host issues it: what is timed is
    eager PyTorch's issue path, forward (Python, dispatch, autograd recording, launch) and backward
    (the autograd engine's node, its kernels' launches, the accumulation into each leaf's grad)."""
    forward, backward = [], []
    for _ in range(trials):
        x, ops = make_op(n)
        synchronize()
        t0 = time.perf_counter()
        y = x
        for op in ops:
            y = op(y)
        t1 = time.perf_counter()
        loss = y.float().sum()
        synchronize()
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        synchronize()
        forward.append((t1 - t0) / n)
        backward.append((t3 - t2) / n)
    return statistics.median(forward[2:]), statistics.median(backward[2:])


def autograd_op_seconds(dev):
    """The host's cost of an op autograd records, and of an op of autograd's backward: a chain of 2,000
    multiplications."""
    def multiplications(n):
        return torch.ones(1, device=dev, dtype=torch.bfloat16, requires_grad=True), [lambda y: y * 1.0001] * n

    return chain_host_seconds(dev, multiplications, n=2000)


def measure_host_by_call(dev):
    """The host's cost of each backend call as eager PyTorch issues it in a training step."""
    hidden, tokens = 64, 8

    def leaf(*shape):
        return torch.randn(*shape, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def linear(n):
        weights = [(leaf(hidden, hidden), leaf(hidden)) for _ in range(n)]
        return leaf(tokens, hidden), [lambda y, w=w, b=b: F.linear(y, w, b) for w, b in weights]

    def layer_norm(n):
        weights = [(leaf(hidden), leaf(hidden)) for _ in range(n)]
        return leaf(tokens, hidden), [lambda y, w=w, b=b: F.layer_norm(y, (hidden,), w, b) for w, b in weights]

    def elementwise(fn):
        return lambda n: (leaf(tokens, hidden), [fn] * n)

    def attention(n):  # the layout a layer hands it: [b, heads, s, d]
        op = lambda y: F.scaled_dot_product_attention(y, y, y, dropout_p=0.1, is_causal=True)
        return leaf(1, 4, tokens, hidden), [op] * n

    # As a framework issues them: through nn.Module calls, attention between the views that take a
    # layer's [b, s, h] activations to [b, heads, s, d] and back (a copy, as .reshape makes one).
    def modules(make_module):
        def make(n):
            chain = [make_module().to(device=dev, dtype=torch.bfloat16) for _ in range(n)]
            return leaf(tokens, hidden), chain
        return make

    def attention_with_layout(n):
        heads = 4

        def op(y):
            b, s, h = y.shape
            q = y.view(b, s, heads, h // heads).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, q, q, dropout_p=0.1, is_causal=True)
            return o.transpose(1, 2).reshape(b, s, h)
        return leaf(1, tokens, heads * hidden), [op] * n

    # A whole layer as the validation step issues it (gpu_training_step.py's Block, tiny): what one
    # layer's calls cost the host together, beside the sum of their chains' costs.
    def layer(n):
        from gpu_training_step import Block
        chain = [Block(hidden, 4, 4 * hidden, 0.1, 0.1).to(device=dev, dtype=torch.bfloat16) for _ in range(n)]
        return leaf(1, tokens, hidden), chain

    from torch.nn.attention import SDPBackend, sdpa_kernel

    chains = {"linear": linear, "norm": layer_norm, "gelu": elementwise(lambda y: F.gelu(y, approximate="tanh")),
              "dropout": elementwise(lambda y: F.dropout(y, 0.1)), "add": elementwise(lambda y: y + y),
              "attention": attention,
              "linear_module": modules(lambda: torch.nn.Linear(hidden, hidden)),
              "norm_module": modules(lambda: torch.nn.LayerNorm(hidden)),
              "module_call": modules(torch.nn.Identity),
              "attention_with_layout": attention_with_layout, "layer": layer}
    rows = {}
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for name, make in chains.items():
            forward_s, backward_s = chain_host_seconds(dev, make)
            rows[name] = {"forward_seconds": forward_s, "backward_node_seconds": backward_s}

    # The optimizer's calls, outside autograd: per call, over lists as a step passes them.
    with torch.no_grad():
        grads = [torch.randn(hidden * hidden, device=dev) for _ in range(12)]
        rows["sum_of_squares"] = {"call_seconds": host_seconds(lambda: torch._foreach_norm(grads), calls=500)}
        rows["scale_"] = {"call_seconds": host_seconds(lambda: torch._foreach_mul_(grads, 0.999), calls=500)}
        rows["add_"] = {"call_seconds": host_seconds(lambda: grads[0].add_(grads[1]), calls=500)}
        rows["zeros"] = {"call_seconds": host_seconds(
            lambda: torch.zeros(hidden, device=dev, dtype=torch.float32), calls=500)}
        small = torch.randn(tokens, hidden, device=dev, dtype=torch.bfloat16)
        rows["cast"] = {"call_seconds": host_seconds(lambda: small.float(), calls=500)}
    masters = [torch.zeros(hidden, device=dev, requires_grad=True) for _ in range(100)]
    for m in masters:
        m.grad = torch.randn_like(m)
    adam = torch.optim.Adam(masters, lr=1e-4, fused=True)
    rows["adam_step"] = {"call_seconds": host_seconds(adam.step, calls=200) / len(masters),
                         "tensors_per_step": len(masters)}
    return rows


def measure_host(dev):
    rows = {}
    one = torch.zeros(1, device=dev, dtype=torch.bfloat16)
    other = torch.zeros(1, device=dev, dtype=torch.bfloat16)
    rows["in_place_add"] = host_seconds(lambda: one.add_(1.0))
    rows["out_of_place_add"] = host_seconds(lambda: torch.add(one, other))
    a = torch.randn(16, 64, device=dev, dtype=torch.bfloat16)
    w = torch.randn(64, 64, device=dev, dtype=torch.bfloat16)
    rows["small_linear"] = host_seconds(lambda: F.linear(a, w))

    rows["autograd_forward_op"], rows["autograd_backward_op"] = autograd_op_seconds(dev)

    # A collective's issue cost: NCCL on one rank, through c10d, as a training step calls it.
    try:
        import torch.distributed as dist

        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
        t = torch.zeros(1024, device=dev, dtype=torch.bfloat16)
        out = torch.zeros(1024, device=dev, dtype=torch.bfloat16)
        rows["nccl_all_reduce"] = host_seconds(lambda: dist.all_reduce(t), calls=500)
        rows["nccl_all_gather"] = host_seconds(lambda: dist.all_gather_into_tensor(out, t), calls=500)
        rows["nccl_reduce_scatter"] = host_seconds(lambda: dist.reduce_scatter_tensor(out, t), calls=500)
        rows["nccl_all_reduce_device_seconds"] = device_seconds(lambda: dist.all_reduce(t))
        dist.destroy_process_group()
    except Exception as error:  # one GPU may lack what c10d needs; the rest still stands
        rows["nccl_error"] = repr(error)
    return rows


# The metadata-only ATen calls (no kernel) that one Megatron-LM transformer layer issues, forward and
# backward, as counted from its code (docs/inputs.md, Frameworks): their mix weighs the mean cost of one.
MEGATRON_HOST_OP_MIX = {"view": 50, "t": 4, "_unsafe_view": 8, "transpose": 12, "permute": 2,
                        "split_with_sizes": 1, "slice": 1, "empty": 6, "detach": 24}


def measure_host_ops(dev):
    """The host's cost of the calls a framework's layer issues besides its kernels: metadata-only
    ATen ops (views, transposes, detaches, ...) one by one and in Megatron-LM's mix, and a call into a
    torch.compile'd region (Megatron's fused bias-dropout-add) forward and its backward node."""
    x = torch.randn(64, 2, 256, device=dev, dtype=torch.bfloat16)
    w = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
    aten = torch.ops.aten
    calls = {"view": lambda: x.view(128, 256), "t": lambda: w.t(),
             "_unsafe_view": lambda: aten._unsafe_view(x, [128, 256]),
             "transpose": lambda: x.transpose(0, 1), "permute": lambda: x.permute(1, 0, 2),
             "split_with_sizes": lambda: torch.split(x, [64, 96, 96], dim=2),
             "slice": lambda: x[1:], "empty": lambda: torch.empty((1,), device=dev),
             "detach": lambda: x.detach()}
    rows = {name: host_seconds(fn) for name, fn in calls.items()}
    total = sum(MEGATRON_HOST_OP_MIX.values())
    rows["megatron_mix_mean"] = sum(rows[name] * n for name, n in MEGATRON_HOST_OP_MIX.items()) / total

    # A kernel's issue beside them, on the same host.
    rows["autograd_forward_op"], rows["autograd_backward_op"] = autograd_op_seconds(dev)

    def bias_dropout_add(y, bias, residual, prob: float):
        return residual + F.dropout(y + bias, p=prob, training=True)

    # Tiny tensors, so that the region's kernels take less time than its call (on a CPU they run inline).
    compiled = torch.compile(bias_dropout_add)
    bias = torch.randn(8, device=dev, dtype=torch.bfloat16, requires_grad=True)
    residual = torch.randn(1, 1, 8, device=dev, dtype=torch.bfloat16)

    def regions(n):
        return torch.randn(1, 1, 8, device=dev, dtype=torch.bfloat16, requires_grad=True), \
            [lambda y: compiled(y, bias, residual, 0.1)] * n

    x, calls = regions(1)
    calls[0](x).float().sum().backward()  # compiles forward and backward once
    rows["compiled_region_forward"], rows["compiled_region_backward"] = chain_host_seconds(dev, regions, n=200)
    return rows


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="JSON file to write (default: standard output)")
    parser.add_argument("--only", help="comma-separated parts: host,gemm,gemm_sustained,attention,"
                                       "attention_occupancy,copy,memory_bound,optimizer,host_by_call,host_ops")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu: only host_ops, the host's own costs, on a machine without a GPU")
    args = parser.parse_args()
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_components.py: no CUDA device is visible; these are GPU measurements (--device cpu "
                 "measures host_ops alone)")
    if dev == "cpu" and (args.only or "host_ops") != "host_ops":
        sys.exit("gpu_components.py: --device cpu measures host_ops alone (--only host_ops)")
    if dev == "cpu":
        args.only = "host_ops"
        result = {"device": "cpu", "host": cpu_model(), "cpu_count": os.cpu_count()}
    else:
        props = torch.cuda.get_device_properties(0)
        result = {"device": props.name, "streaming_multiprocessors": props.multi_processor_count,
                  "memory_bytes": props.total_memory}
    result.update({"torch": torch.__version__, "cuda": torch.version.cuda, "date": time.strftime("%Y-%m-%d")})
    parts = {"host": measure_host, "gemm": measure_gemms, "gemm_sustained": measure_gemm_sustained,
             "attention": measure_attention,
             "attention_occupancy": measure_attention_occupancy,
             "copy": measure_copy, "memory_bound": measure_memory_bound, "optimizer": measure_optimizer,
             "host_by_call": measure_host_by_call, "host_ops": measure_host_ops}
    wanted = args.only.split(",") if args.only else list(parts)
    for name in wanted:
        t0 = time.time()
        try:
            result[name] = parts[name](dev)
        except Exception as error:
            result[name + "_error"] = repr(error)
        print(f"{name}: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
        if dev == "cuda":
            torch.cuda.empty_cache()
        text = json.dumps(result, indent=1)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
    if not args.out:
        print(text)


if __name__ == "__main__":
    main()
