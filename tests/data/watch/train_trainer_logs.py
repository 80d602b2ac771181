#!/usr/bin/python3
"""Training that prints what a Hugging Face Trainer prints, without the probe (watch must find the
steps in the log lines).

Per optimizer step, as transformers' ProgressCallback does with logging_steps=1: the progress bar
(tqdm(total=max_steps), on stderr, '\\r' updates, e.g. " 12%|█▏        | 12/100 [00:03<00:22,
3.98it/s]") is advanced, then the Trainer's logs dict goes through tqdm.write to stdout as
str(dict): {'loss': 2.3456, 'grad_norm': 1.2345678806304932, 'learning_rate': 0.00285, 'epoch': 0.1}
(loss rounded to 4 places, grad_norm a float32 tensor's item(), the learning rate used by the step,
epoch rounded to 2 places: transformers 4.x's ProgressCallback.on_log). At the end the train
summary dict ({'train_runtime': ..., 'train_samples_per_second': ..., 'train_steps_per_second': ...,
'train_loss': ..., 'epoch': ...}) and the bar's final 100% line. The bar comes from
progress_format.py (tqdm's format, tqdm not being installed here).

HF_LOG_STYLE=v5 prints what newer transformers print (seen with 5.17 on the H200 machine: its
ProgressCallback writes every float as the string f"{v:.4g}", epoch not rounded first):
{'loss': '3.971', 'grad_norm': '0.606', 'learning_rate': '0.0025', 'epoch': '0.3'}

NO_BAR=1 is disable_tqdm=True: the PrinterCallback prints only the dicts (print(logs)), no bar.
LOGGING_STEPS=N logs every N steps, the loss the mean over them, as the Trainer does; PRINT_ARGS=1
first prints the TrainingArguments as their repr does, one field per line ("logging_steps=N,").

Usage: train_trainer_logs.py [STEPS]   (or env STEPS; default 20)
Env:   STEP_SLEEP_MS  sleep per step so that the bar updates (default 50)
       HF_LOG_STYLE   v4 (default) or v5
       NO_BAR, LOGGING_STEPS, PRINT_ARGS  as above
"""
import os
import sys
import time

import torch

sys.dont_write_bytecode = True      # importing progress_format leaves no __pycache__ here
from progress_format import ProgressBar  # noqa: E402

VOCAB, DIM, SEQ, BATCH, STEPS_PER_EPOCH = 64, 32, 16, 8, 10


def shown(logs, style):
    """The dict as ProgressCallback.on_log prints it (total_flos dropped)."""
    logs = dict(logs)
    logs.pop("total_flos", None)
    if style == "v5":
        return str({k: ("%.4g" % v if isinstance(v, float) else v) for k, v in logs.items()})
    if "epoch" in logs:
        logs["epoch"] = round(logs["epoch"], 2)
    return str(logs)


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("STEPS", "20"))
    sleep_s = float(os.environ.get("STEP_SLEEP_MS", "50")) / 1000.0
    style = os.environ.get("HF_LOG_STYLE", "v4")
    no_bar = os.environ.get("NO_BAR") == "1"
    logging_steps = int(os.environ.get("LOGGING_STEPS", "1"))
    if os.environ.get("PRINT_ARGS") == "1":
        print("TrainingArguments(\n_n_gpu=0,\nlearning_rate=0.003,\nlogging_first_step=False,\nlogging_steps=%d,\n"
              "logging_strategy=IntervalStrategy.STEPS,\nmax_steps=%d,\n)" % (logging_steps, steps))
    torch.manual_seed(0)
    torch.set_num_threads(1)
    generator = torch.Generator().manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Embedding(VOCAB, DIM), torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(),
                                torch.nn.Linear(4 * DIM, VOCAB))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: max(0.0, 1.0 - i / steps))
    loss_fn = torch.nn.CrossEntropyLoss()
    start = time.time()
    bar = None if no_bar else ProgressBar(total=steps)
    write = print if no_bar else bar.write
    total_loss = 0.0
    window = []
    for step in range(1, steps + 1):
        first = torch.randint(0, VOCAB, (BATCH, 1), generator=generator)
        seq = (first + torch.arange(SEQ + 1)) % VOCAB
        loss = loss_fn(model(seq[:, :-1]).reshape(-1, VOCAB), seq[:, 1:].reshape(-1))
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        learning_rate = sched.get_last_lr()[0]
        sched.step()
        opt.zero_grad(set_to_none=True)
        if sleep_s:
            time.sleep(sleep_s)
        loss_value = loss.item()
        total_loss += loss_value
        window.append(loss_value)
        if bar:
            bar.update(1)
        if step % logging_steps:
            continue
        logs = {"loss": round(sum(window) / len(window), 4), "grad_norm": grad_norm.item(), "learning_rate": learning_rate,
                "epoch": step / STEPS_PER_EPOCH}
        window = []
        write(shown(logs, style))
    runtime = time.time() - start
    summary = {"train_runtime": round(runtime, 4), "train_samples_per_second": round(steps * BATCH / runtime, 3),
               "train_steps_per_second": round(steps / runtime, 3), "total_flos": 1.0e9, "train_loss": total_loss / steps,
               "epoch": steps / STEPS_PER_EPOCH}
    write(shown(summary, style))
    if bar:
        bar.close()


if __name__ == "__main__":
    main()
