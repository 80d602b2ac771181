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

With --weights and train.mode lora, our checkpoint's model files hold the frozen base and the trained
adapters side by side (<module>.lora_A.weight [r, in], <module>.lora_B.weight [out, r]); the base is
loaded by from_pretrained as above (the adapters are unexpected keys to it), wrapped by PEFT
(get_peft_model, LoraConfig with the run's rank, alpha and targets; alpha/r scaling as ours, no
rslora, dropout 0), and our adapters copied into PEFT's parameters
(base_model.model.<module>.lora_A.default.weight); an adapter of either side without a counterpart
ends the script non-zero, naming it. The line then also holds adapters_matched and the loss with the
adapters disabled (our step 1 loss: lora_B starts at zero).
"""
import argparse, glob, json, os, re, statistics, struct, sys, tempfile

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


# Our adapter tensors, as core/config/ParameterTable.cpp names them: the adapted module's name, then
# lora_A.weight or lora_B.weight.
ADAPTER = re.compile(r"^(.+)\.(lora_[AB])\.weight$")


def checkpoint_names(folder):
    """{tensor name: file} over the step folder's model files, read from each safetensors header
    (8-byte little-endian length, then JSON) so no tensor is loaded to list them."""
    names = {}
    for path in sorted(glob.glob(os.path.join(folder, "model*.safetensors"))):
        with open(path, "rb") as f:
            header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
        names.update((k, path) for k in header if k != "__metadata__")
    return names


def peft_name(ours):
    """model.layers.0.self_attn.q_proj.lora_A.weight -> base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight:
    PeftModel.base_model is the LoraModel, whose .model is the Transformers model (whose own names
    ours are); the LoRA layer keeps one nn.Linear per adapter in lora_A/lora_B, "default" here."""
    m = ADAPTER.match(ours)
    return "base_model.model.%s.%s.default.weight" % m.groups() if m else None


def match_adapters(ours, theirs):
    """ours: our adapter names; theirs: PEFT's lora_A/lora_B parameter names. {ours: theirs}, or exit
    non-zero naming every adapter of either side without a counterpart (a target PEFT matched on a
    module we do not adapt, or the reverse, would make the losses differ for a reason that is not
    numerics)."""
    pairs = {o: peft_name(o) for o in ours}
    missing = sorted(o for o, p in pairs.items() if p not in theirs)
    extra = sorted(set(theirs) - set(pairs.values()))
    if missing or extra:
        lines = ["ours without a PEFT counterpart: %s (looked for %s)" % (o, pairs[o]) for o in missing]
        lines += ["PEFT's without a counterpart of ours: %s" % t for t in extra]
        lines.append("%d of our %d adapter tensors and %d of PEFT's %d unmatched" % (len(missing), len(pairs), len(extra), len(theirs)))
        sys.exit("hf_sparse_reference.py: adapters differ\n  " + "\n  ".join(lines))  # last line last: the bench shows the tail
    return pairs


def with_adapters(model, weights, lora):
    """PEFT's LoRA over the loaded base, holding our trained adapters; (model, adapters matched)."""
    from peft import LoraConfig, get_peft_model
    from safetensors import safe_open
    targets = lora["targets"]
    # Dropout 0: one deterministic forward. Our step 2 applies the run's train.lora.dropout (0 in the
    # presets; the line reports it, since a non-zero one makes our loss a draw).
    model = get_peft_model(model, LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=0.0,
                                             target_modules="all-linear" if "all-linear" in targets else targets))
    theirs = {n: p for n, p in model.named_parameters() if ".lora_A." in n or ".lora_B." in n}
    names = checkpoint_names(weights)
    pairs = match_adapters([n for n in names if ADAPTER.match(n)], theirs)
    by_file = {}
    for ours in pairs:
        by_file.setdefault(names[ours], []).append(ours)
    with torch.no_grad():
        for path, group in by_file.items():
            with safe_open(path, framework="pt") as f:
                for ours in group:
                    t, p = f.get_tensor(ours), theirs[pairs[ours]]
                    if t.shape != p.shape:
                        sys.exit("hf_sparse_reference.py: %s is %s, PEFT's %s is %s" % (ours, list(t.shape), pairs[ours], list(p.shape)))
                    # Our tensor itself, dtype included (fp32 under fp32 and bf16-mixed): PEFT
                    # casts the input to lora_A's dtype, so no rounding of ours comes in here.
                    p.data = t.to(p.device)
    return model, len(pairs)


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
        # A LoRA checkpoint's adapters are unexpected here by design (PEFT takes them after): left
        # out, so what the report still lists is a real mismatch.
        info = {k: [n for n in v if not (isinstance(n, str) and ADAPTER.match(n))] for k, v in info.items()}
        return model, {k: v[:8] for k, v in info.items() if v}
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
    lora_at_weights = bool(args.weights) and t["mode"] == "lora"
    # Our LoRA run holds its frozen base in bf16 under bf16-mixed (the checkpoint stores it so; the
    # adapters stay fp32): the base loaded in bf16 too (from_pretrained keeps the rotary tables fp32,
    # as ours), autocast over both. Full fine-tuning keeps fp32 masters.
    dtype = torch.bfloat16 if precision == "bf16" or (lora_at_weights and precision == "bf16-mixed") else torch.float32
    model, info = build(raw, dtype, args.weights)
    if not args.weights and args.attn != "eager":
        model.config._attn_implementation = args.attn
    matched = None
    if lora_at_weights:
        model, matched = with_adapters(model, args.weights, t["lora"])
    model = model.cuda().train()
    out = {"impl": "transformers %s %s" % (raw["model_type"], args.attn), "class": type(model).__name__, "precision": precision,
           "mode": t["mode"], "params": sum(p.numel() for p in model.parameters())}
    if matched is not None:
        out.update(adapters_matched=matched, base_dtype=str(dtype).replace("torch.", ""),
                   lora={k: t["lora"][k] for k in ("rank", "alpha", "dropout", "targets")})
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
        if matched is not None:
            # The base alone, beside our step 1 loss (lora_B starts at zero): how far the adapters
            # moved the loss, so an agreement of loss_at_weights is seen to be more than the base's.
            with torch.no_grad(), model.disable_adapter():
                ce, aux = loss_of(model)
            out["loss_without_adapters"] = ce.item() + aux_w * (aux.item() if aux is not None else 0.0)
    if args.steps > 0:
        if t["mode"] == "lora" and matched is None:
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
