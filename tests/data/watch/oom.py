#!/usr/bin/python3
"""Trains a few steps (with the probe when it can be imported; see train_probe.py for where it is
looked up), then fails the next step with the exception PyTorch raises when the CUDA caching
allocator runs out of device memory: a traceback on stderr and exit status 1. On this CPU-only
machine the error is raised by hand, with the text of c10/cuda/CUDACachingAllocator.cpp.

Env: OOM_AFTER_STEPS  completed steps before the failing one (default 3)
     OOM_STYLE        torch1  (default) torch 1.13-2.1: torch.cuda.OutOfMemoryError,
                               "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB
                               total capacity; ... reserved in total by PyTorch) If reserved ..."
                      torch2  torch >= 2.5: torch.OutOfMemoryError, "CUDA out of memory. Tried to
                               allocate 2.00 GiB. GPU 0 has a total capacity of ... of which ... is
                               free. Process N has ... memory in use. Of the allocated memory ..."
                      hip     the ROCm build: torch.OutOfMemoryError, "HIP out of memory. ..."
                      runtime torch < 1.13: RuntimeError with the torch1 text
"""
import os
import sys

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
try:
    import pilotbench_probe
except ImportError:
    pilotbench_probe = None

import torch  # noqa: E402

VOCAB, DIM, SEQ, BATCH = 64, 32, 16, 8

TORCH1 = ("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.35 GiB total capacity; 74.61 GiB already "
          "allocated; 1.52 GiB free; 76.70 GiB reserved in total by PyTorch) If reserved memory is >> allocated "
          "memory try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management "
          "and PYTORCH_CUDA_ALLOC_CONF")
TORCH2 = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.52 GiB "
          "is free. Process %d has 77.66 GiB memory in use. Of the allocated memory 74.61 GiB is allocated by "
          "PyTorch, and 2.09 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large "
          "try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
          "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
HIP = ("HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 191.98 GiB of which 1.52 GiB is "
       "free. Of the allocated memory 186.61 GiB is allocated by PyTorch, and 2.09 GiB is reserved by PyTorch but "
       "unallocated. If reserved but unallocated memory is large try setting PYTORCH_HIP_ALLOC_CONF="
       "expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  "
       "(https://pytorch.org/docs/stable/notes/hip.html#environment-variables)")


def out_of_memory():
    style = os.environ.get("OOM_STYLE", "torch1")
    if style == "runtime":
        return RuntimeError(TORCH1)
    if style in ("torch2", "hip"):
        # torch >= 2.5 names the class torch.OutOfMemoryError (torch.cuda.OutOfMemoryError is an alias).
        cls = type("OutOfMemoryError", (torch.cuda.OutOfMemoryError,), {"__module__": "torch"})
        return cls(HIP if style == "hip" else TORCH2 % os.getpid())
    return torch.cuda.OutOfMemoryError(TORCH1)


def step_context(tokens):
    return pilotbench_probe.step(tokens=tokens) if pilotbench_probe else open(os.devnull)


def main():
    good_steps = int(os.environ.get("OOM_AFTER_STEPS", "3"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(1)
    for i in range(good_steps + 1):
        first = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
        seq = (first + torch.arange(SEQ + 1)) % VOCAB
        with step_context(seq[:, :-1].numel()) as s:
            loss = loss_fn(model(seq[:, :-1]).reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
            if i == good_steps:
                raise out_of_memory()        # in the forward pass of step good_steps + 1
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if pilotbench_probe:
                s.loss = loss.item()
        print("step %d loss %.4f" % (i + 1, loss.item()), flush=True)


if __name__ == "__main__":
    main()
