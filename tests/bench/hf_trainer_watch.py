#!/usr/bin/env python3
"""A real Hugging Face Trainer fine-tune to watch: the shape of a PilotBench run config (random
weights), synthetic token data, bf16, fused AdamW, one optimizer step per logged step. With
--probe it adds pilotbench_probe.HFCallback() (which does nothing unless PILOTBENCH_PROBE is set).
The script measures itself too (a callback timing every step between CUDA synchronisations) and
prints one JSON line at the end: what the job itself says, to set beside what `watch` measured.

    python3 tests/bench/hf_trainer_watch.py --config l1b.json --steps 20 [--compile] [--probe]
"""
import argparse, json, statistics, time

import torch
from torch.utils.data import Dataset
from transformers import LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments

from hf_reference import llama_config  # beside this script: the same model from the same run config


class Tokens(Dataset):
    def __init__(self, n, seq, vocab, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)

    def __len__(self):
        return self.ids.shape[0]

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class SelfTiming(TrainerCallback):
    """The job's own figures: synchronised step times and the allocator's peak."""

    def __init__(self):
        self.times, self.t0 = [], None

    def on_step_begin(self, args, state, control, **kw):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        torch.cuda.synchronize()
        self.times.append((time.perf_counter() - self.t0) * 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="a PilotBench run config (JSON)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--out", default="/tmp/hf-trainer-out")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    m, t = cfg["model"], cfg["train"]
    hf = llama_config(m)
    torch.manual_seed(cfg.get("seed", 0))
    model = LlamaForCausalLM(hf)
    b, s = t["micro_batch"], t["seq_len"]
    data = Tokens(b * (args.steps + 1), s, m["vocab_size"], cfg.get("seed", 0))
    targs = TrainingArguments(output_dir=args.out, per_device_train_batch_size=b, max_steps=args.steps, learning_rate=t["lr"],
                              bf16=True, optim="adamw_torch_fused", logging_steps=1, save_strategy="no", report_to=[],
                              dataloader_num_workers=2, torch_compile=args.compile, max_grad_norm=t["grad_clip"],
                              disable_tqdm=False, include_num_input_tokens_seen=True)
    timing = SelfTiming()
    callbacks = [timing]
    if args.probe:
        import pilotbench_probe
        callbacks.append(pilotbench_probe.HFCallback())
    trainer = Trainer(model=model, args=targs, train_dataset=data, callbacks=callbacks)
    torch.cuda.reset_peak_memory_stats()
    out = trainer.train()
    measured = timing.times[args.warmup:]
    mean = statistics.mean(measured)
    free, total = torch.cuda.mem_get_info()
    print(json.dumps({"impl": "transformers Trainer" + (" + torch.compile" if args.compile else " eager"), "torch": torch.__version__,
                      "steps": len(timing.times), "step_ms": mean, "p50_ms": statistics.median(measured),
                      "tokens_per_s": b * s / (mean / 1000), "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                      "peak_reserved_bytes": torch.cuda.max_memory_reserved(), "device_used_bytes": total - free,
                      "train_runtime_s": out.metrics.get("train_runtime"), "probe": args.probe}), flush=True)


if __name__ == "__main__":
    main()
