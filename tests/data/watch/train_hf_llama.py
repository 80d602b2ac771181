#!/usr/bin/python3
"""A real Hugging Face Trainer job on a GPU for watch (not part of the CPU tests: it needs
transformers and CUDA, as on the H200 device machine): a Llama model with random weights trained
on random tokens, with pilotbench_probe.HFCallback (looked up as in train_probe.py).

  train_hf_llama.py [--config llama-3.2-1b|tiny] [--seq 2048] [--batch 1] [--accum 1] [--steps 30]
                    [--compile] [--no-probe] [--eval-save-every 0] [--output DIR]

--config llama-3.2-1b is Llama-3.2-1B's shape (hidden 2048, 16 layers, 32 heads, 8 KV heads, MLP
8192, vocabulary 128256, tied embeddings, RoPE theta 500000); tiny is a 2-layer model for quick
checks. bf16, AdamW (torch), logging every step, include_num_input_tokens_seen=True, no reports.
--compile sets torch_compile=True. --no-probe leaves the callback out (to measure what watching
costs). The last line printed is one JSON object: the Trainer's own train metrics plus
"script_step_ms" (the median wall time between optimizer steps after the first 5, measured by
the script's own callback with torch.cuda.synchronize(); the median leaves out the steps that
carry an evaluation or a save) and "tokens_per_s" from it.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True      # importing the probe leaves no __pycache__ in the source tree
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PILOTBENCH_PROBE_MODULE_DIR") or os.path.join(_HERE, "..", "..", "..", "resources", "python"))
import pilotbench_probe  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments  # noqa: E402


def config(name):
    if name == "tiny":
        return LlamaConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, vocab_size=32000, max_position_embeddings=4096)
    return LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
                       num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
                       tie_word_embeddings=True, rms_norm_eps=1e-5, hidden_act="silu")


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, count, seq, vocab):
        self.data = torch.randint(0, vocab, (count, seq), generator=torch.Generator().manual_seed(0))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return {"input_ids": self.data[i], "labels": self.data[i]}


class StepClock(TrainerCallback):
    """The script's own step timing (synchronised), independent of the probe."""

    def __init__(self):
        self.ends = []

    def on_step_end(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self.ends.append(time.perf_counter())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="llama-3.2-1b")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--no-probe", action="store_true")
    p.add_argument("--eval-save-every", type=int, default=0)
    p.add_argument("--output", default=None)
    a = p.parse_args()
    torch.manual_seed(0)
    cfg = config(a.config)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    samples = a.steps * a.batch * a.accum + 8
    every = a.eval_save_every
    out = a.output or tempfile.mkdtemp(prefix="pilotbench-hf-llama-")
    kwargs = dict(output_dir=out, per_device_train_batch_size=a.batch, per_device_eval_batch_size=a.batch,
                  gradient_accumulation_steps=a.accum, max_steps=a.steps, learning_rate=1e-4, bf16=True,
                  logging_steps=1, report_to=[], include_num_input_tokens_seen=True, torch_compile=a.compile,
                  save_strategy="steps" if every else "no", save_steps=every or 500, dataloader_num_workers=0,
                  optim="adamw_torch")
    strategy = "steps" if every else "no"
    try:
        args = TrainingArguments(eval_strategy=strategy, eval_steps=every or None, **kwargs)
    except TypeError:                                    # transformers < 4.41
        args = TrainingArguments(evaluation_strategy=strategy, eval_steps=every or None, **kwargs)
    clock = StepClock()
    callbacks = [clock] + ([] if a.no_probe else [pilotbench_probe.HFCallback()])
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens(samples, a.seq, cfg.vocab_size),
                      eval_dataset=RandomTokens(4 * a.batch, a.seq, cfg.vocab_size) if every else None,
                      callbacks=callbacks)
    result = trainer.train()
    gaps = sorted(b - c for c, b in zip(clock.ends[4:], clock.ends[5:]))
    step_ms = 1000.0 * gaps[len(gaps) // 2] if gaps else None      # the median: steps with an evaluation
    metrics = dict(result.metrics)
    metrics.update(config=a.config, seq=a.seq, batch=a.batch, accum=a.accum, steps=a.steps, compile=a.compile,
                   probe=not a.no_probe, transformers=transformers.__version__, torch=torch.__version__,
                   script_step_ms=step_ms,
                   tokens_per_s=(a.seq * a.batch * a.accum / (step_ms / 1000.0)) if step_ms else None)
    print(json.dumps(metrics), flush=True)


if __name__ == "__main__":
    main()
