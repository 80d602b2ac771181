#!/usr/bin/env python3
"""The Transformers peer of a PilotBench run of a sparse family (issue 29: gpt_oss, deepseek_v3,
llama4): the family's own Transformers 5.17 model built from the published config.json at the run's
depth. Prints one JSON line.

    python3 tests/bench/hf_sparse_reference.py --config run.json --hf-config tests/data/hf/X/config.json \
        [--weights STEP_FOLDER --tokens same.bin] [--steps N --warmup W] [--precision fp32|bf16-mixed|bf16]

With --weights, the model is loaded by Transformers' own from_pretrained from a folder holding the
reduced config.json and our checkpoint's model files (Hugging Face names), so its own conversion of
the hub layout applies; it then reports the loss of those weights on the first seq_len+1 tokens of
--tokens (every row of the micro-batch alike), computed as our pilot does: fp32 cross-entropy of
every position against the next token, plus the load-balancing loss times the run's
aux_loss_weight where the family returns one. With --steps > 0 it times training steps (AdamW
fused, clipping as the run), bf16 autocast over fp32 masters under bf16-mixed, pure bf16 under bf16;
PEFT LoRA on the run's targets when train.mode is lora.
"""
import argparse, glob, json, os, statistics, tempfile

import numpy as np
import torch

from hf_reference import timed_steps


def reduced_config(path, layers):
    raw = json.load(open(path))
    if "text_config" in raw:  # llama4: the text model only
        text = dict(raw["text_config"])
        text.setdefault("tie_word_embeddings", raw.get("tie_word_embeddings", False))
        raw = text
        if raw.get("model_type") == "llama4":
            raw["model_type"] = "llama4_text"
    raw["num_hidden_layers"] = layers
    if "attn_temperature_tuning" in raw:  # the published Scout config says 4; Transformers 5.17 wants a bool
        raw["attn_temperature_tuning"] = bool(raw["attn_temperature_tuning"])
    for key in ("layer_types", "no_rope_layers", "moe_layers", "quantization_config", "auto_map"):
        raw.pop(key, None)  # rebuilt by the config class for the reduced depth; experts in bf16
    return raw


def build(raw, dtype, weights=None):
    from transformers import AutoConfig, AutoModelForCausalLM
    if weights:
        folder = tempfile.mkdtemp(prefix="hfsparse-")
        json.dump(raw, open(os.path.join(folder, "config.json"), "w"))
        files = sorted(glob.glob(os.path.join(weights, "model*.safetensors")))
        for f in files:
            os.symlink(os.path.abspath(f), os.path.join(folder, os.path.basename(f)))
        idx = os.path.join(weights, "model.safetensors.index.json")
        if os.path.exists(idx):
            os.symlink(os.path.abspath(idx), os.path.join(folder, "model.safetensors.index.json"))
        model, info = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager", output_loading_info=True)
        return model, {k: list(v)[:8] for k, v in info.items() if v}
    cfg = AutoConfig.for_model(**raw)
    cfg._attn_implementation = "eager"  # sinks / chunked masks / latent attention: the families' eager forms
    return AutoModelForCausalLM.from_config(cfg, dtype=dtype), {}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--hf-config", required=True)
    ap.add_argument("--weights")
    ap.add_argument("--tokens")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--attn", default="eager", help="attn_implementation for timing (eager or sdpa where the family has it)")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    m, t = cfg["model"], cfg["train"]
    torch.manual_seed(cfg.get("seed", 0))
    raw = reduced_config(args.hf_config, m["layers"])
    precision = t["precision"]
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    model, info = build(raw, dtype, args.weights)
    if not args.weights and args.attn != "eager":
        model.config._attn_implementation = args.attn
    model = model.cuda().train()
    out = {"impl": "transformers %s %s" % (raw["model_type"], args.attn), "class": type(model).__name__, "precision": precision,
           "params": sum(p.numel() for p in model.parameters())}
    if info:
        out["loading"] = info
    b, s = t["micro_batch"], t["seq_len"]
    if args.tokens:
        seq = torch.from_numpy(np.fromfile(args.tokens, dtype=np.uint16)[: s + 1].astype(np.int64)).cuda()
        ids, labels = seq[:-1].expand(b, s).contiguous(), seq[1:].expand(b, s).contiguous()
    else:
        ids = torch.randint(0, m["vocab_size"], (b, s + 1), device="cuda")
        ids, labels = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    aux_w = (m.get("moe") or {}).get("aux_loss_weight", 0.0)
    autocast = precision in ("bf16-mixed",)

    def loss_of(model):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            o = model(input_ids=ids, output_router_logits=aux_w > 0)
            ce = torch.nn.functional.cross_entropy(o.logits.float().reshape(-1, o.logits.size(-1)), labels.reshape(-1))
            aux = getattr(o, "aux_loss", None)
            return ce, (aux if aux is not None and aux_w > 0 else None)

    if args.weights:
        with torch.no_grad():
            ce, aux = loss_of(model)
        out["ce_at_weights"] = ce.item()
        out["aux_at_weights"] = aux.item() if aux is not None else 0.0
        out["loss_at_weights"] = ce.item() + aux_w * out["aux_at_weights"]
    if args.steps > 0:
        if t["mode"] == "lora":
            from peft import LoraConfig, get_peft_model
            lora = t["lora"]
            if precision == "bf16-mixed":
                model = model.to(torch.bfloat16)
            model = get_peft_model(model, LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"], target_modules=lora["targets"]))
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                                weight_decay=t["weight_decay"], fused=True)

        def step():
            ce, aux = loss_of(model)
            return ce + aux_w * aux if aux is not None else ce
        times, loss = timed_steps(model, opt, step, t["grad_clip"], args.steps, args.warmup)
        mean = statistics.mean(times)
        out.update({"torch": torch.__version__, "step_ms": mean, "p50_ms": statistics.median(times), "tokens_per_s": b * s / (mean / 1000),
                    "peak_allocated_bytes": torch.cuda.max_memory_allocated(), "loss": loss.item()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
