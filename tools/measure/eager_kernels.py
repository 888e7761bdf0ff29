#!/usr/bin/env python3
"""Counts the kernels a piece of a framework's model code runs in eager PyTorch, and the bytes each reads
and writes, forward and backward: the figures of a framework file's `kernels` block (docs/inputs.md,
Frameworks), which prices one of paradyse's fused calls as the framework's own code runs it.

It runs the code once under a TorchDispatchMode that sees every ATen call autograd and the code issue,
on the CPU (no GPU needed: the ATen calls are the same on a GPU, only their kernels differ). A call
whose result is a view of its input (view, transpose, expand, detach, ...) or that only allocates
(empty) moves no bytes and is not counted; GEMMs (mm, addmm, bmm, ...) are listed apart, since
paradyse prices them as GEMMs. Bytes read are each tensor argument's bytes (a broadcast argument's own
storage, not its expanded size); bytes written are each result's.

Usage:
  python3 tools/measure/eager_kernels.py --path REPO_ROOT --module torchtitan.models.norms \
      --build "RMSNorm(4096)" --input "x=bf16[4,256,4096]" --per x [--params-dtype bf16]
      [--constant "freqs=c64[256,64]"]

  --build  an expression in the module's namespace (torch and F also defined) whose value is called
           with the inputs, in the order given
  --per    the input whose element count the per-element bytes are given for, or a number of elements
           (an intermediate's, such as the MLP's tokens x ffn_hidden)
Prints JSON: for "forward" and "backward", the kernels (ATen name, bytes read, written) and the
bytes per element of --per; "gemms" lists the GEMM calls apart.
"""
import argparse
import importlib
import json
import sys

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "c64": torch.complex64}
GEMMS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention_for_cpu",
         "_scaled_dot_product_flash_attention_for_cpu_backward", "_scaled_dot_product_flash_attention_backward"}
NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "_local_scalar_dense",
             "lift_fresh", "set_", "resize_"}


def tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors(item)


def storage_bytes(tensor):
    """The bytes a kernel reads of `tensor`: at most its own storage (an expanded view reads less)."""
    return min(tensor.numel() * tensor.element_size(), tensor.untyped_storage().nbytes())


class Counter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.kernels, self.gemms = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        inputs = list(tensors(args)) + list(tensors(kwargs))
        outputs = list(tensors(result))
        input_storages = {t.untyped_storage().data_ptr() for t in inputs}
        writes_new = [t for t in outputs if t.untyped_storage().data_ptr() not in input_storages]
        in_place = name.endswith("_") or "out" in kwargs
        if name in NO_KERNEL or (not writes_new and not in_place):
            return result  # a view or an allocation: no kernel
        read = sum(storage_bytes(t) for t in inputs)
        written = sum(storage_bytes(t) for t in (outputs if in_place else writes_new))
        row = {"call": str(func), "read_bytes": read, "written_bytes": written}
        (self.gemms if name in GEMMS else self.kernels).append(row)
        return result


def fail(message):
    """A bad argument: its message on standard error, exit status 2."""
    print(f"eager_kernels.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_input(text):
    try:
        name, spec = text.split("=", 1)
        dtype, shape = spec.rstrip("]").split("[")
        return name, DTYPES[dtype], [int(n) for n in shape.split(",")]
    except (ValueError, KeyError):
        fail(f"{text!r}: expected NAME=DTYPE[SHAPE], DTYPE one of {', '.join(DTYPES)}, e.g. x=bf16[2,128,512]")


def summary(counter, elements):
    total = sum(k["read_bytes"] + k["written_bytes"] for k in counter.kernels)
    return {"kernels": counter.kernels, "kernel_count": len(counter.kernels),
            "bytes_per_element": total / elements, "gemms": counter.gemms}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--path", default=".", help="the folder the module is imported from")
    parser.add_argument("--module", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--input", action="append", required=True, help="NAME=DTYPE[SHAPE], a tensor with a gradient")
    parser.add_argument("--constant", action="append", default=[],
                        help="NAME=DTYPE[SHAPE], an input without a gradient (passed after the --input ones)")
    parser.add_argument("--per", required=True, help="the input (or a count of elements) the bytes are divided by")
    parser.add_argument("--params-dtype", default="bf16", help="the dtype of the built module's parameters")
    args = parser.parse_args()

    sys.path.insert(0, args.path)
    module = importlib.import_module(args.module)
    namespace = dict(vars(module), torch=torch, F=F)
    built = eval(args.build, namespace)  # noqa: S307 - the user's own expression
    if isinstance(built, torch.nn.Module):
        built = built.to(DTYPES[args.params_dtype])
    torch.manual_seed(0)
    inputs = {}
    for text in args.input:
        name, dtype, shape = parse_input(text)
        inputs[name] = torch.randn(shape, dtype=dtype, requires_grad=True)
    for text in args.constant:
        name, dtype, shape = parse_input(text)
        inputs[name] = torch.randn(shape, dtype=dtype)
    if args.per in inputs:
        elements = inputs[args.per].numel()
    elif args.per.isdigit() and int(args.per) > 0:
        elements = int(args.per)
    else:
        fail(f"--per {args.per}: expected one of the inputs ({', '.join(inputs)}) or a positive count")

    forward = Counter()
    with forward:
        out = built(*inputs.values())
    outputs = [t for t in tensors(out) if t.requires_grad]
    grads = [torch.randn_like(t) for t in outputs]
    backward = Counter()
    with backward:
        torch.autograd.backward(outputs, grads)
    print(json.dumps({"torch": torch.__version__, "module": args.module, "build": args.build,
                      "inputs": args.input, "constants": args.constant, "per": args.per, "forward": summary(forward, elements),
                      "backward": summary(backward, elements)}, indent=1))


if __name__ == "__main__":
    main()
