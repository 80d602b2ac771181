#!/usr/bin/python3
"""A tiny language model trained on CPU with the probe's plain API (pilotbench_probe.step).

Where the probe comes from (the rule for every script here): the folder in the environment
variable PILOTBENCH_PROBE_MODULE_DIR when it is set, else ../../../resources/python from this file
(the source tree); it goes first on sys.path, ahead of a PYTHONPATH that watch may have set.

Usage: train_probe.py [STEPS]   (or env STEPS; default 20)
Env:   STEP_SLEEP_MS  extra sleep inside each step (default 0), to make steps slower.
       DEVICE         torch device (default cpu; "cuda" adds the probe's peak-memory fields).
       CHECKPOINT_DIR keep the mid-run checkpoint there (default: a temporary folder, removed).
       RESUME_FROM    a checkpoint this script wrote: continue from its step with its model,
                      optimizer, schedule and data generator, numbering steps on from it.
       JITTER_ULPS    after each optimizer step move every parameter by -N, 0 or +N ulps, drawn
                      from an unseeded generator: a job whose kernels are not deterministic.
Writes per step a "step" event (tokens, loss, lr, forward/backward/optimizer/data-wait split), one
"validation" and one "checkpoint" (torch.save into a temporary folder) at step STEPS // 2 (at
least 1), one "log" event, and prints "done N" last. Deterministic: fixed seeds, one thread.
"""
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
import pilotbench_probe  # noqa: E402

import torch  # noqa: E402

VOCAB, DIM, SEQ, BATCH = 64, 32, 16, 8


class TinyLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(), torch.nn.Linear(4 * DIM, DIM))
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, x):
        h = self.embed(x)
        return self.head(h + self.mlp(h))


def batch(generator, device="cpu"):
    # Next-token prediction on sequences that count up modulo VOCAB from a random start: learnable.
    start = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
    seq = ((start + torch.arange(SEQ + 1)) % VOCAB).to(device)
    return seq[:, :-1], seq[:, 1:]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("STEPS", "20"))
    sleep_s = float(os.environ.get("STEP_SLEEP_MS", "0")) / 1000.0
    torch.manual_seed(0)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(1)
    device = os.environ.get("DEVICE", "cpu")
    model = TinyLM().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 - 0.5 * i / max(1, steps))
    loss_fn = torch.nn.CrossEntropyLoss()
    keep = bool(os.environ.get("CHECKPOINT_DIR"))
    checkpoint_dir = os.environ.get("CHECKPOINT_DIR") or tempfile.mkdtemp(prefix="pilotbench-watch-")
    half = max(1, steps // 2)
    jitter = int(os.environ.get("JITTER_ULPS", "0"))
    unseeded = torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    first = 1
    if os.environ.get("RESUME_FROM"):
        state = torch.load(os.environ["RESUME_FROM"])
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["schedule"])
        generator.set_state(state["generator"])
        first = state["step"] + 1
    for i in range(first, steps + 1):
        with pilotbench_probe.phase("data"):
            x, y = batch(generator, device)
        with pilotbench_probe.step(tokens=x.numel(), step=i) as s:
            with s.phase("forward"):
                loss = loss_fn(model(x).reshape(-1, VOCAB), y.reshape(-1))
            with s.phase("backward"):
                loss.backward()
            with s.phase("optimizer"):
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                if jitter:
                    with torch.no_grad():
                        for p in model.parameters():
                            noise = torch.randint(-1, 2, p.shape, generator=unseeded).to(p.dtype)
                            p.mul_(1 + noise * jitter * torch.finfo(p.dtype).eps)
            s.lr = sched.get_last_lr()[0]
            sched.step()
            s.loss = loss.detach()
            s.grad_norm = grad_norm
            if sleep_s:
                time.sleep(sleep_s)
        if i == half and first == 1:
            with pilotbench_probe.timed_validation() as v:
                with torch.no_grad():
                    vx, vy = batch(torch.Generator().manual_seed(99), device)
                    v.loss = loss_fn(model(vx).reshape(-1, VOCAB), vy.reshape(-1)).item()
                    v.batches = 1
            path = os.path.join(checkpoint_dir, "step-%d.pt" % i)
            with pilotbench_probe.timed_checkpoint(path=path):
                torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "schedule": sched.state_dict(),
                            "generator": generator.get_state(), "step": i}, path)
    pilotbench_probe.log(message="training finished", parameters=sum(p.numel() for p in model.parameters()))
    if not keep:
        for name in os.listdir(checkpoint_dir):
            os.remove(os.path.join(checkpoint_dir, name))
        os.rmdir(checkpoint_dir)
    print("done %d" % steps, flush=True)


if __name__ == "__main__":
    main()
