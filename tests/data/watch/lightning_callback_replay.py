#!/usr/bin/python3
"""pilotbench_probe.LightningCallback driven the way a Lightning Trainer (2.x) drives callbacks, with
real (tiny) training on CPU; lightning is not installed here. The probe is looked up as in
train_probe.py.

Hook order replayed (lightning.pytorch.callbacks.Callback's hooks, automatic optimisation):
setup(trainer, module, "fit"); on_train_start; per batch on_train_batch_start(trainer, module, batch,
batch_idx), the training step and backward, at the last batch of an accumulation window
on_before_optimizer_step(trainer, module, optimizer), optimizer.step() (global_step += 1), then
on_train_batch_end(trainer, module, outputs, batch, batch_idx) with outputs["loss"] divided by
accumulate_grad_batches; validation: on_validation_epoch_start, on_validation_batch_end per batch,
on_validation_epoch_end, callback_metrics["val_loss"] set, on_validation_end; a checkpoint through
trainer.save_checkpoint(path) (what ModelCheckpoint calls; the callback wraps it in setup).

Usage: lightning_callback_replay.py [STEPS]   (or env STEPS; default 6; accumulate_grad_batches 2,
       validation and a checkpoint after STEPS // 2 steps). Prints "done N".
"""
import os
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
import pilotbench_probe  # noqa: E402

import torch  # noqa: E402

VOCAB, DIM, SEQ, BATCH, ACCUM = 64, 32, 16, 4, 2


class FakeTrainer(object):
    def __init__(self, optimizer):
        self.global_step = 0
        self.current_epoch = 0
        self.sanity_checking = False
        self.optimizers = [optimizer]
        self.callback_metrics = {}
        self.saved = []

    def save_checkpoint(self, filepath, weights_only=False, storage_options=None):
        torch.save({"global_step": self.global_step, "optimizer": self.optimizers[0].state_dict()}, filepath)
        self.saved.append(filepath)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("STEPS", "6"))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, VOCAB))
    opt = torch.optim.AdamW(module.parameters(), lr=3e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    trainer = FakeTrainer(opt)
    callback = pilotbench_probe.LightningCallback()
    folder = tempfile.mkdtemp(prefix="pilotbench-lightning-")

    def fetch():
        first = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
        seq = (first + torch.arange(SEQ + 1)) % VOCAB
        return seq[:, :-1], seq[:, 1:]

    callback.setup(trainer, module, "fit")
    callback.on_train_start(trainer, module)
    batch_idx = 0
    while trainer.global_step < steps:
        batch = fetch()
        callback.on_train_batch_start(trainer, module, batch, batch_idx)
        loss = loss_fn(module(batch[0]).reshape(-1, VOCAB), batch[1].reshape(-1)) / ACCUM
        loss.backward()
        if (batch_idx + 1) % ACCUM == 0:
            callback.on_before_optimizer_step(trainer, module, opt)
            opt.step()
            opt.zero_grad()
            trainer.global_step += 1
        callback.on_train_batch_end(trainer, module, {"loss": loss.detach()}, batch, batch_idx)
        batch_idx += 1
        if (batch_idx % ACCUM == 0) and trainer.global_step == max(1, steps // 2):
            callback.on_validation_epoch_start(trainer, module)
            losses = []
            with torch.no_grad():
                for i in range(3):
                    vx, vy = fetch()
                    losses.append(loss_fn(module(vx).reshape(-1, VOCAB), vy.reshape(-1)))
                    callback.on_validation_batch_end(trainer, module, losses[-1], (vx, vy), i, 0)
            callback.on_validation_epoch_end(trainer, module)
            trainer.callback_metrics["val_loss"] = torch.stack(losses).mean()
            callback.on_validation_end(trainer, module)
            trainer.save_checkpoint(os.path.join(folder, "step=%d.ckpt" % trainer.global_step))
    assert trainer.saved, "save_checkpoint was not called through"
    shutil.rmtree(folder, ignore_errors=True)
    print("done %d" % steps, flush=True)


if __name__ == "__main__":
    main()
