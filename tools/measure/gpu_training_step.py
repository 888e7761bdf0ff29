#!/usr/bin/env python3
"""Measured training steps of a GPT on one GPU, to validate paradyse's prediction for the same step.

The model is read from the same Hugging Face config.json that paradyse reads (GPT-2 keys: n_embd,
n_head, n_layer, vocab_size, resid_pdrop, attn_pdrop, tie_word_embeddings) and runs as a Megatron-LM
GPT step runs it in eager PyTorch, in bf16:
  - pre-LN blocks: LayerNorm, the QKV linear, FlashAttention-2 (PyTorch's flash SDPA backend, causal,
    attention dropout inside the kernel), the output linear, hidden dropout, the residual add; then
    LayerNorm, the MLP (tanh GELU), hidden dropout, the residual add; linears with biases;
  - the final LayerNorm, the output head on the (tied) embedding table, and Megatron's
    vocabulary-parallel cross entropy on one rank, unfused (cross_entropy_loss_fusion off): the
    logits cast to fp32, their maximum, subtracted, exponentiated and summed, the softmax divided out
    in place and kept for backward, which subtracts the target's one and scales in place;
  - mixed precision as Megatron runs it (megatron/core/distributed and optimizer, without gradient-
    accumulation fusion): gradients in bf16 added into fp32 main gradients held in one contiguous
    buffer, which one fill zeroes each step; the gradient norm read on the host (clip_grad_norm_fp32's
    .item(), a synchronising point) and the gradients scaled only when it exceeds 1.0 (the step
    records how many steps did); Adam on fp32 master weights (PyTorch's fused Adam), the copy of the
    masters back to bf16 parameters, the loss read on the host (a synchronising point).
One micro-batch of one sequence per step. Step time: the median of --steps steps after --warmup,
wall clock from the first op to the loss read. Peak: torch.cuda.max_memory_allocated over the steps.

Usage: python3 tools/measure/gpu_training_step.py --model tools/measure/models/gpt-h2048-8l.json \
           --seq 512,2048 --out steps.json
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class VocabParallelCrossEntropy(torch.autograd.Function):
    """megatron/core/tensor_parallel/cross_entropy.py's _VocabParallelCrossEntropy on one rank: the
    same passes over the fp32 logits, in place where Megatron's are (its all-reduces are no-ops)."""

    @staticmethod
    def forward(ctx, logits, target):  # logits [tokens, V] bf16, target [tokens]
        ctx.input_dtype = logits.dtype
        logits = logits.float()
        logits_max = torch.max(logits, dim=-1)[0]
        logits -= logits_max.unsqueeze(dim=-1)
        rows = torch.arange(0, logits.size(0), device=logits.device)
        predicted_logits = logits[rows, target].clone().contiguous()
        exp_logits = logits
        torch.exp(logits, out=exp_logits)
        sum_exp_logits = exp_logits.sum(dim=-1)
        loss = torch.log(sum_exp_logits) - predicted_logits
        exp_logits.div_(sum_exp_logits.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target)
        return loss

    @staticmethod
    def backward(ctx, grad_output):
        softmax, target = ctx.saved_tensors
        grad_input = softmax
        rows = torch.arange(0, grad_input.size(0), device=grad_input.device)
        grad_input[rows, target] -= 1.0
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input.to(ctx.input_dtype), None


class Block(nn.Module):
    def __init__(self, hidden, heads, ffn, attn_pdrop, resid_pdrop):
        super().__init__()
        self.heads, self.attn_pdrop, self.resid_pdrop = heads, attn_pdrop, resid_pdrop
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, ffn), nn.Linear(ffn, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_pdrop, is_causal=True)
        x = x + F.dropout(self.proj(o.transpose(1, 2).reshape(b, s, h)), self.resid_pdrop)
        y = self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))
        return x + F.dropout(y, self.resid_pdrop)


class Gpt(nn.Module):
    def __init__(self, config):
        super().__init__()
        hidden = config["n_embd"]
        ffn = config.get("n_inner") or 4 * hidden
        self.embd_pdrop = config.get("embd_pdrop", 0.1)
        self.wte = nn.Embedding(config["vocab_size"], hidden)
        self.blocks = nn.ModuleList(
            Block(hidden, config["n_head"], ffn, config.get("attn_pdrop", 0.1), config.get("resid_pdrop", 0.1))
            for _ in range(config["n_layer"]))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = None if config.get("tie_word_embeddings", True) else nn.Linear(
            hidden, config["vocab_size"], bias=False)

    def forward(self, tokens, targets):
        x = F.dropout(self.wte(tokens), self.embd_pdrop)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        logits = F.linear(x, self.wte.weight if self.head is None else self.head.weight)
        losses = VocabParallelCrossEntropy.apply(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return losses.mean()


def profile_step(step):
    """One more step under the profiler: every kernel's device time, by name, and the launches."""
    from torch.profiler import ProfilerActivity, profile

    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
    by_name, launches = {}, 0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = by_name.setdefault(event.name, [0, 0.0])
            entry[0] += 1
            entry[1] += event.time_range.elapsed_us() * 1e-6
        elif "LaunchKernel" in event.name or event.name.startswith("cudaMemsetAsync"):
            launches += 1
    rows = sorted(({"name": n, "count": c, "seconds": t} for n, (c, t) in by_name.items()),
                  key=lambda r: -r["seconds"])
    host = sorted(({"name": e.key, "count": e.count, "self_seconds": e.self_cpu_time_total * 1e-6}
                   for e in prof.key_averages()), key=lambda r: -r["self_seconds"])[:40]
    return {"launches": launches, "kernels": sum(r["count"] for r in rows),
            "device_seconds": sum(r["seconds"] for r in rows), "by_name": rows, "host_by_name": host}


def phase_seconds(forward, optimize, steps):
    """Each phase of a step on its own, the GPU drained between them: the host's time to issue the
    phase's ops, and its wall time to the end of its last kernel (medians over the steps)."""
    samples = {}
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for _ in range(steps):
            loss = None
            for name in ("forward", "backward", "optimizer"):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                if name == "forward":
                    loss = forward()
                elif name == "backward":
                    loss.backward()
                else:
                    optimize()
                t1 = time.perf_counter()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                samples.setdefault(name + "_issue_seconds", []).append(t1 - t0)
                samples.setdefault(name + "_wall_seconds", []).append(t2 - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def measure(config, seq, warmup, steps, profile=False):
    torch.manual_seed(0)
    model = Gpt(config).cuda().to(torch.bfloat16)
    params = [p for p in model.parameters()]
    masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    main_grads = torch.zeros(sum(m.numel() for m in masters), device="cuda")  # Megatron's grad buffer
    offset = 0
    for m in masters:
        m.grad = main_grads[offset:offset + m.numel()].view_as(m)
        offset += m.numel()
    grads = [m.grad for m in masters]
    optimizer = torch.optim.Adam(masters, lr=1e-4, fused=True)
    clipped = []
    tokens = torch.randint(0, config["vocab_size"], (1, seq), device="cuda")
    targets = torch.randint(0, config["vocab_size"], (1, seq), device="cuda")

    def forward():
        return model(tokens, targets)

    def optimize():
        with torch.no_grad():
            for p, m in zip(params, masters):
                m.grad.add_(p.grad)
                p.grad = None
            norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))).item()
            coefficient = 1.0 / (norm + 1e-6)
            clipped.append(coefficient < 1.0)
            if coefficient < 1.0:
                torch._foreach_mul_(grads, coefficient)
            optimizer.step()
            torch._foreach_copy_(params, masters)
            main_grads.zero_()

    def step():
        loss = forward()
        loss.backward()
        optimize()
        return loss.item()

    times = []
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for i in range(warmup + steps):
            if i == warmup:
                torch.cuda.reset_peak_memory_stats()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated()
    kernels = profile_step(step) if profile else None
    phases = phase_seconds(forward, optimize, steps) if profile else None
    del model, params, masters, optimizer, grads, main_grads
    torch.cuda.empty_cache()
    return {"seq": seq, "step_seconds": statistics.median(times[warmup:]), "clipped_steps": sum(clipped),
            "all_steps": len(clipped),
            "step_seconds_all": times[warmup:], "peak_allocated_bytes": peak, "profile": kernels,
            "phases": phases}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a GPT-2 style config.json")
    parser.add_argument("--seq", required=True, help="comma-separated sequence lengths in tokens")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--profile", action="store_true",
                        help="profile one more step (each kernel's device time and each op's host time, "
                             "by name), and time the phases of --steps more apart")
    parser.add_argument("--out", help="JSON file to write (default: standard output)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_training_step.py: no CUDA device is visible")
    with open(args.model) as f:
        config = json.load(f)
    result = {"model": args.model, "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "warmup": args.warmup, "steps": args.steps, "runs": []}
    for seq in (int(s) for s in args.seq.split(",")):
        t0 = time.time()
        try:
            result["runs"].append(measure(config, seq, args.warmup, args.steps, args.profile))
        except torch.cuda.OutOfMemoryError:
            result["runs"].append({"seq": seq, "error": "out of memory"})
            torch.cuda.empty_cache()
        print(f"{args.model} {seq}: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
