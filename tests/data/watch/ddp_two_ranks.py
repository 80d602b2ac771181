#!/usr/bin/python3
r"""Data-parallel training on CPU: 2 ranks, torch.distributed with the gloo backend, each rank using
the probe (see train_probe.py for where it is looked up), so the events carry RANK 0 and 1.

Two ways to start it:
  ddp_two_ranks.py [STEPS]                       starts its 2 ranks itself (torch.multiprocessing
                                                 spawn; RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR,
                                                 MASTER_PORT set in each before the probe's first event)
  /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node 2 --redirects 1 --tee 1 \
      ddp_two_ranks.py [STEPS]                   (torchrun sets those variables). With Debian's torch
                                                 1.13 on Python 3.11 keep "--redirects 1 --tee 1":
                                                 their default "0" makes torchrun fail before it
                                                 starts a rank ('NoneType' object has no attribute
                                                 'get': Std.from_str finds no IntFlag member 0 on
                                                 3.11). The ranks' stdout then comes prefixed
                                                 "[default0]:", "[default1]:".
STEPS: argv or env STEPS, default 10. Each rank prints "rank R done N"; rank 0 also "done N".
"""
import os
import socket
import sys

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
import pilotbench_probe  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

VOCAB, DIM, SEQ, BATCH = 64, 32, 16, 4


def train(steps):
    rank = int(os.environ["RANK"])
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    torch.manual_seed(0)                                   # the same initial weights on every rank
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, 2 * DIM), torch.nn.GELU(),
                            torch.nn.Linear(2 * DIM, VOCAB)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(100 + rank)    # each rank its own shard of the data
    for _ in range(steps):
        first = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
        seq = (first + torch.arange(SEQ + 1)) % VOCAB
        with pilotbench_probe.step(tokens=seq[:, :-1].numel()) as s:
            loss = loss_fn(model(seq[:, :-1]).reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
            loss.backward()                                   # gradients all-reduced over gloo here
            opt.step()
            opt.zero_grad(set_to_none=True)
            s.loss = loss.item()
            s.lr = opt.param_groups[0]["lr"]
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d done %d" % (rank, steps), flush=True)
    if rank == 0:
        print("done %d" % steps, flush=True)


def spawned(index, world, port, steps):
    os.environ.update({"RANK": str(index), "LOCAL_RANK": str(index), "WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    train(steps)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("STEPS", "10"))
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:       # started by torchrun
        train(steps)
        return
    import torch.multiprocessing as mp
    mp.spawn(spawned, args=(2, free_port(), steps), nprocs=2, join=True)


if __name__ == "__main__":
    main()
