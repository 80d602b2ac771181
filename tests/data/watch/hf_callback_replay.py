#!/usr/bin/python3
"""pilotbench_probe.HFCallback driven the way transformers' Trainer drives its callbacks, with real
(tiny) training on CPU; transformers is not installed here. The probe is looked up as in
train_probe.py.

The order of events is the Trainer's inner training loop (transformers' trainer.py,
_inner_training_loop, and trainer_callback.py's CallbackHandler): on_init_end; on_train_begin;
per epoch on_epoch_begin; per optimizer step the step's micro-batches are fetched first
(get_batch_samples), state.num_input_tokens_seen grows per micro-batch (gathered over ranks) before
on_step_begin is called for the first one; on_substep_end after each micro-batch but the last;
after the last: gradient clipping, on_pre_optimizer_step, optimizer.step(), on_optimizer_step, the
learning rate read, scheduler step, zero_grad, global_step += 1, state.epoch updated, on_step_end;
then _maybe_log_save_evaluate: on_log({'loss', 'grad_norm', 'learning_rate', 'epoch'}), evaluation
(on_prediction_step per batch, on_log of the eval metrics, on_evaluate(metrics)), checkpoint save
then on_save; on_epoch_end; at the end on_log of the train summary, then on_train_end. Every event
is called as getattr(callback, event)(args, state, control, model=..., processing_class=...,
optimizer=..., lr_scheduler=..., train_dataloader=..., eval_dataloader=..., **extra).

Usage: hf_callback_replay.py [STEPS]   (or env STEPS; default 8; gradient accumulation 2,
       evaluation and a checkpoint every STEPS // 2 steps)
Env:   HF_OLD=1  a transformers older than 4.41: no on_pre_optimizer_step / on_optimizer_step,
                 no num_input_tokens_seen (the callback then uses batch x micro-batches x seq_len,
                 seq_len from args.max_seq_length)
Prints "done N".
"""
import math
import os
import shutil
import sys
import tempfile
import time
from types import SimpleNamespace

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
import pilotbench_probe  # noqa: E402

import torch  # noqa: E402

VOCAB, DIM, SEQ, BATCH, ACCUM, STEPS_PER_EPOCH = 64, 32, 16, 4, 2, 4


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("STEPS", "8"))
    old = os.environ.get("HF_OLD") == "1"
    torch.manual_seed(0)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(),
                                torch.nn.Linear(4 * DIM, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: max(0.0, 1.0 - i / steps))
    loss_fn = torch.nn.CrossEntropyLoss()
    output_dir = tempfile.mkdtemp(prefix="pilotbench-hf-")
    every = max(1, steps // 2)
    args = SimpleNamespace(output_dir=output_dir, per_device_train_batch_size=BATCH, gradient_accumulation_steps=ACCUM,
                           world_size=1, logging_steps=1, eval_steps=every, save_steps=every,
                           include_num_input_tokens_seen=not old, max_grad_norm=1.0)
    if old:
        args.max_seq_length = SEQ
    state = SimpleNamespace(epoch=None, global_step=0, max_steps=steps, num_input_tokens_seen=0, train_batch_size=BATCH,
                            is_local_process_zero=True, is_world_process_zero=True, log_history=[])
    if old:
        del state.num_input_tokens_seen
    control = SimpleNamespace(should_log=False, should_evaluate=False, should_save=False,
                              should_training_stop=False, should_epoch_stop=False)
    callback = pilotbench_probe.HFCallback()           # what a user passes in Trainer(callbacks=[...])
    refs = dict(model=model, processing_class=None, optimizer=opt, lr_scheduler=sched, train_dataloader=None,
                eval_dataloader=None)

    def event(name, **extra):
        method = getattr(callback, name, None)
        if method is None:
            raise SystemExit("the callback has no %s" % name)
        result = method(args, state, control, **refs, **extra)
        assert result is None or result is control

    def fetch():
        first = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
        seq = (first + torch.arange(SEQ + 1)) % VOCAB
        return {"input_ids": seq[:, :-1], "labels": seq[:, 1:]}

    def log(logs):
        logs = dict(logs)
        if state.epoch is not None:
            logs["epoch"] = state.epoch
        state.log_history.append(dict(logs, step=state.global_step))
        event("on_log", logs=logs)

    event("on_init_end")
    start = time.time()
    event("on_train_begin")
    tr_loss, logged_at, total_loss = 0.0, 0, 0.0
    epochs = math.ceil(steps / STEPS_PER_EPOCH)
    for epoch in range(epochs):
        event("on_epoch_begin")
        for update in range(STEPS_PER_EPOCH):
            if state.global_step >= steps:
                break
            batches = [fetch() for _ in range(ACCUM)]                 # get_batch_samples
            for i, inputs in enumerate(batches):
                if not old:
                    state.num_input_tokens_seen += inputs["input_ids"].numel()
                if i == 0:
                    event("on_step_begin")
                loss = loss_fn(model(inputs["input_ids"]).reshape(-1, VOCAB), inputs["labels"].reshape(-1)) / ACCUM
                loss.backward()
                tr_loss += loss.item()
                if i == len(batches) - 1:
                    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    if not old:
                        event("on_pre_optimizer_step")
                    opt.step()
                    if not old:
                        event("on_optimizer_step")
                    learning_rate = sched.get_last_lr()[0]
                    sched.step()
                    model.zero_grad()
                    state.global_step += 1
                    state.epoch = epoch + (update + 1) / STEPS_PER_EPOCH
                    event("on_step_end")
                    # _maybe_log_save_evaluate
                    logs = {"loss": round(tr_loss / (state.global_step - logged_at), 4), "grad_norm": grad_norm.item(),
                            "learning_rate": learning_rate}
                    total_loss += tr_loss
                    tr_loss, logged_at = 0.0, state.global_step
                    log(logs)
                    if state.global_step % every == 0:
                        eval_start = time.time()
                        with torch.no_grad():
                            eval_losses = []
                            for _ in range(3):
                                batch = fetch()
                                eval_losses.append(loss_fn(model(batch["input_ids"]).reshape(-1, VOCAB),
                                                           batch["labels"].reshape(-1)).item())
                                event("on_prediction_step")
                        metrics = {"eval_loss": sum(eval_losses) / len(eval_losses),
                                   "eval_runtime": round(time.time() - eval_start, 4),
                                   "eval_samples_per_second": 1.0, "eval_steps_per_second": 1.0}
                        log(metrics)
                        event("on_evaluate", metrics=metrics)
                        folder = os.path.join(output_dir, "checkpoint-%d" % state.global_step)
                        os.makedirs(folder, exist_ok=True)
                        torch.save(model.state_dict(), os.path.join(folder, "pytorch_model.bin"))
                        torch.save(opt.state_dict(), os.path.join(folder, "optimizer.pt"))
                        event("on_save")
                else:
                    event("on_substep_end")
        event("on_epoch_end")
    runtime = time.time() - start
    log({"train_runtime": round(runtime, 4), "train_samples_per_second": round(steps * BATCH * ACCUM / runtime, 3),
         "train_steps_per_second": round(steps / runtime, 3), "total_flos": 0.0, "train_loss": total_loss / steps})
    event("on_train_end")
    shutil.rmtree(output_dir, ignore_errors=True)
    print("done %d" % steps, flush=True)


if __name__ == "__main__":
    main()
