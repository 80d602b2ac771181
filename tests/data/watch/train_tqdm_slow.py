#!/usr/bin/python3
"""Training whose steps take longer than a second, shown only by a tqdm progress bar in the
"s/it" form (no probe, no Trainer dicts): on stderr, '\\r' updates such as
"Epoch 1:  33%|███▎      | 1/3 [00:01<00:02,  1.21s/it, loss=4.17]" (a description, and a
postfix from set_postfix(loss=...)), then the final 100% line and a newline. The bar comes from
progress_format.py (tqdm's format; tqdm is not installed here).

Usage: train_tqdm_slow.py [STEPS]   (or env STEPS; default 3)
Env:   STEP_SLEEP_MS  time per step (default 1200)
"""
import os
import sys
import time

import torch

sys.dont_write_bytecode = True      # importing progress_format leaves no __pycache__ here
from progress_format import ProgressBar  # noqa: E402

VOCAB, DIM, SEQ, BATCH = 64, 32, 16, 8


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("STEPS", "3"))
    sleep_s = float(os.environ.get("STEP_SLEEP_MS", "1200")) / 1000.0
    torch.manual_seed(0)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, VOCAB))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss_fn = torch.nn.CrossEntropyLoss()
    bar = ProgressBar(total=steps, desc="Epoch 1")
    for _ in range(steps):
        first = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
        seq = (first + torch.arange(SEQ + 1)) % VOCAB
        loss = loss_fn(model(seq[:, :-1]).reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        time.sleep(sleep_s)
        bar.update(1)
        bar.set_postfix(loss=round(loss.item(), 2))
    bar.close()
    print("done %d" % steps, flush=True)


if __name__ == "__main__":
    main()
