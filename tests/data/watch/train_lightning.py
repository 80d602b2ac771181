#!/usr/bin/python3
"""A real PyTorch Lightning job with pilotbench_probe.LightningCallback (the probe is looked up as in
train_probe.py). Needs lightning (or pytorch_lightning), which this CPU machine lacks: then it
prints "skipped: no lightning" and exits 0. Runs on a GPU when there is one.

A tiny language model, accumulate_grad_batches=2, validation every STEPS // 2 optimizer steps
(val_loss logged), ModelCheckpoint saving after each validation. Prints "done N".
Usage: train_lightning.py [STEPS]   (or env STEPS; default 12)
"""
import os
import sys
import tempfile

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
import pilotbench_probe  # noqa: E402

try:
    import lightning.pytorch as L
except ImportError:
    try:
        import pytorch_lightning as L
    except ImportError:
        print("skipped: no lightning")
        sys.exit(0)

import torch  # noqa: E402

VOCAB, DIM, SEQ, BATCH = 64, 32, 16, 8


class Tokens(torch.utils.data.Dataset):
    def __init__(self, count, seed):
        g = torch.Generator().manual_seed(seed)
        first = torch.randint(0, VOCAB, (count, 1), generator=g)
        self.seq = (first + torch.arange(SEQ + 1)) % VOCAB

    def __len__(self):
        return len(self.seq)

    def __getitem__(self, i):
        return {"input_ids": self.seq[i, :-1], "labels": self.seq[i, 1:]}


class TinyLM(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(),
                                       torch.nn.Linear(4 * DIM, VOCAB))

    def loss(self, batch):
        return torch.nn.functional.cross_entropy(self.net(batch["input_ids"]).reshape(-1, VOCAB), batch["labels"].reshape(-1))

    def training_step(self, batch, batch_idx):
        return self.loss(batch)

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch), prog_bar=False)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("STEPS", "12"))
    torch.manual_seed(0)
    every = max(1, steps // 2)
    folder = tempfile.mkdtemp(prefix="pilotbench-lightning-")
    checkpoints = L.callbacks.ModelCheckpoint(dirpath=folder, every_n_train_steps=every, save_top_k=-1)
    trainer = L.Trainer(max_steps=steps, accumulate_grad_batches=2, val_check_interval=2 * every,
                        check_val_every_n_epoch=None, limit_val_batches=3, num_sanity_val_steps=1,
                        callbacks=[pilotbench_probe.LightningCallback(), checkpoints], logger=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="auto", devices=1)
    train = torch.utils.data.DataLoader(Tokens(8 * BATCH * steps, 1), batch_size=BATCH)
    val = torch.utils.data.DataLoader(Tokens(4 * BATCH, 2), batch_size=BATCH)
    trainer.fit(TinyLM(), train, val)
    print("done %d" % trainer.global_step, flush=True)


if __name__ == "__main__":
    main()
