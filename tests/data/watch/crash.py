#!/usr/bin/python3
"""Trains 2 steps (with the probe when it can be imported; see train_probe.py for where it is looked
up), then raises ValueError: a traceback on stderr and exit status 1 (not an out-of-memory)."""
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


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    for i in range(1, 3):
        with (pilotbench_probe.step(tokens=None) if pilotbench_probe else open(os.devnull)) as s:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            if pilotbench_probe:
                s.loss = loss.item()
        print("step %d loss %.4f" % (i, loss.item()), flush=True)
    raise ValueError("crash.py: a bug in the training script after 2 steps")


if __name__ == "__main__":
    main()
