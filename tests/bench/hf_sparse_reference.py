#!/usr/bin/env python3
"""The Transformers peer of a PilotBench run of a sparse family (issue 29: gpt_oss, deepseek_v3,
llama4; issue 30: qwen3_next): the family's own Transformers 5.17 model built from the published
config.json at the run's depth, with the run's expert count, top-k and (for a model with linear
attention) its layer pattern where they differ from the published ones. Prints one JSON line.

    python3 tests/bench/hf_sparse_reference.py --config run.json --hf-config tests/data/hf/X/config.json \
        [--weights STEP_FOLDER --tokens same.bin] [--steps N --warmup W] [--seq-lens 2048,8192,32768]

The precision is the run's train.precision. With --seq-lens (no --weights) the one model and
optimizer are timed at each listed sequence length in turn (ascending, as given), one JSON line each
with its seq_len; an error at one length (out of memory, say) is that line's "error" and the next
length still runs. For a model with Gated DeltaNet layers (qwen3_next) the line names which
implementation Transformers ran (linear_attention_path: the fla / causal-conv1d fast path or its torch
fallback), and "impl" ends with it.

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
import argparse, gc, glob, importlib.util, json, os, re, statistics, struct, sys, tempfile

import numpy as np
import torch

from hf_reference import check_layer_types, gemma4_layer_types, selected_layer_types, timed_steps


def reduced_config(path, layers, model=None):
    """The published config.json at the run's depth; with the run config's model block, its expert
    count, top-k and linear-attention layer pattern too (apply_run_shape)."""
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
    if model:
        apply_run_shape(raw, model)
    return raw


# Where each family's config.json holds its routed-expert count.
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


def apply_run_shape(raw, model):
    """What a reduced run changes besides the depth, written only where it differs from the published
    config (so gpt_oss, deepseek_v3 and llama4 at their published expert counts are built as before):
    - the routed experts (model.moe.experts) and top-k (model.moe.experts_per_token);
    - for a model with linear attention (model.linear_attention), layer_types spelled out from our
      full_layers (every N: layer i is full where (i + 1) % N == 0, as Qwen3NextConfig builds it
      from full_attention_interval; plus any listed layers), so Transformers cannot build another
      pattern at the reduced depth; full_attention_interval is then dropped (layer_types rules);
    - mlp_only_layers (qwen3_next's dense layers) from model.moe.dense_layers, within the depth."""
    layers = raw["num_hidden_layers"]
    moe = model.get("moe") or {}
    experts, top_k = moe.get("experts"), moe.get("experts_per_token")
    for key in EXPERT_KEYS:
        if experts and key in raw and raw[key] != experts:
            raw[key] = experts
    if top_k and "num_experts_per_tok" in raw and raw["num_experts_per_tok"] != top_k:
        raw["num_experts_per_tok"] = top_k
    linear = model.get("linear_attention")
    if linear:
        raw["layer_types"] = selected_layer_types(linear.get("full_layers"), layers, "linear_attention")
        raw.pop("full_attention_interval", None)
    if raw.get("model_type") == "gemma4_text":
        # Gemma 4: our global layers (E2B's 4 sliding : 1 full is not Gemma4TextConfig's default 5 : 1)
        # and our shared key/value layers at the reduced depth.
        raw["layer_types"] = gemma4_layer_types(model, layers)
        raw["num_kv_shared_layers"] = int(model.get("kv_shared_layers") or 0)
    if isinstance(raw.get("mlp_only_layers"), list):
        raw["mlp_only_layers"] = [i for i in moe.get("dense_layers", raw["mlp_only_layers"]) if i < layers]


def linear_attention_path(model):
    """Which Gated DeltaNet implementation Transformers' model holds, or None without one: each
    linear_attn module keeps the chunked rule it will call (fla's chunk_gated_delta_rule, or
    torch_chunk_gated_delta_rule when fla is missing) and causal_conv1d_fn (None: nn.Conv1d + SiLU)."""
    for module in model.modules():
        rule = getattr(module, "chunk_gated_delta_rule", None)
        if rule is None:
            continue
        name = "%s.%s" % (getattr(rule, "__module__", None) or "?", getattr(rule, "__name__", type(rule).__name__))
        conv = getattr(module, "causal_conv1d_fn", None)
        torch_rule = "torch_chunk_gated_delta_rule" in name
        norm = getattr(module, "norm", None)
        return {"path": "torch fallback" if torch_rule and conv is None else ("fla + causal-conv1d" if not torch_rule and conv is not None else "mixed"),
                "chunk_gated_delta_rule": name, "causal_conv1d": "causal_conv1d_fn" if conv is not None else "torch conv1d",
                "norm": type(norm).__name__ if norm is not None else None,
                "installed": {m: importlib.util.find_spec(m) is not None for m in ("fla", "causal_conv1d")}}
    return None


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


def build(raw, dtype, weights=None, attn="eager"):
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
        check_layer_types(model.config, raw)
        # A LoRA checkpoint's adapters are unexpected here by design (PEFT takes them after): left
        # out, so what the report still lists is a real mismatch.
        info = {k: [n for n in v if not (isinstance(n, str) and ADAPTER.match(n))] for k, v in info.items()}
        return model, {k: v[:8] for k, v in info.items() if v}
    cfg = AutoConfig.for_model(**raw)
    check_layer_types(cfg, raw)
    # Eager by default: sinks / chunked masks / latent attention are the families' eager forms; --attn
    # sdpa for a family that has it (qwen3_next's gated attention), set before the model is built as
    # hf_reference.py does (and again on the built model's config below, as before).
    cfg._attn_implementation = attn
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
    ap.add_argument("--seq-lens", help="time these sequence lengths (comma-separated) instead of the run's, one line each")
    args = ap.parse_args()
    if args.seq_lens and args.weights:
        ap.error("--seq-lens times random tokens; the loss at --weights is at the run's seq_len")
    cfg = json.load(open(args.config))
    m, t = cfg["model"], cfg["train"]
    torch.manual_seed(cfg.get("seed", 0))
    raw = reduced_config(args.hf_config, m["layers"], m)
    precision = t["precision"]
    lora_at_weights = bool(args.weights) and t["mode"] == "lora"
    # Our LoRA run holds its frozen base in bf16 under bf16-mixed (the checkpoint stores it so; the
    # adapters stay fp32): the base loaded in bf16 too (from_pretrained keeps the rotary tables fp32,
    # as ours), autocast over both. Full fine-tuning keeps fp32 masters.
    dtype = torch.bfloat16 if precision == "bf16" or (lora_at_weights and precision == "bf16-mixed") else torch.float32
    model, info = build(raw, dtype, args.weights, args.attn)
    if not args.weights and args.attn != "eager":
        model.config._attn_implementation = args.attn
    linear = linear_attention_path(model)  # before PEFT wraps it
    matched = None
    if lora_at_weights:
        model, matched = with_adapters(model, args.weights, t["lora"])
    model = model.cuda().train()
    out = {"impl": "transformers %s %s" % (raw["model_type"], args.attn), "class": type(model).__name__, "precision": precision,
           "mode": t["mode"], "params": sum(p.numel() for p in model.parameters())}
    if matched is not None:
        out.update(adapters_matched=matched, base_dtype=str(dtype).replace("torch.", ""),
                   lora={k: t["lora"][k] for k in ("rank", "alpha", "dropout", "targets")})
    if linear:
        out["impl"] += ", gated delta rule: " + linear["path"]
        out["linear_attention_path"] = linear
        out["layer_types"] = raw.get("layer_types")
    experts_impl = getattr(getattr(model, "config", None), "_experts_implementation", None)
    if experts_impl is not None:
        out["experts_implementation"] = str(experts_impl)
    if info:
        out["loading"] = info
    b, s = t["micro_batch"], t["seq_len"]

    def batch(s):
        if args.tokens:
            seq = torch.from_numpy(np.fromfile(args.tokens, dtype=np.uint16)[: s + 1].astype(np.int64)).cuda()
            return seq[:-1].expand(b, s).contiguous(), seq[1:].expand(b, s).contiguous()
        ids = torch.randint(0, m["vocab_size"], (b, s + 1), device="cuda")
        return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    ids, labels = batch(s)
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
            out["params"] = sum(p.numel() for p in model.parameters())  # with PEFT's adapters, as the summary compares
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                                weight_decay=t["weight_decay"], fused=True)

        def step():
            ce, aux = loss_of(model)
            return ce + aux_w * aux if aux is not None else ce

        def timed(s):
            times, loss = timed_steps(model, opt, step, t["grad_clip"], args.steps, args.warmup)
            mean = statistics.mean(times)
            return {"torch": torch.__version__, "step_ms": mean, "p50_ms": statistics.median(times), "tokens_per_s": b * s / (mean / 1000),
                    "peak_allocated_bytes": torch.cuda.max_memory_allocated(), "loss": loss.item()}
        if not args.seq_lens:
            out.update(timed(s))
        else:
            # One model and optimizer for every length: the optimizer's states exist before each
            # length's first step, as from a fresh process's second step on; the peak counter starts
            # anew with each length's warm-up (timed_steps), and the cache is emptied between them.
            for s in (int(x) for x in args.seq_lens.split(",") if x.strip()):
                row, error = dict(out, seq_len=s), None
                try:
                    ids, labels = batch(s)
                    row.update(timed(s))
                except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
                    error = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:400])
                    row.update(error=error, peak_allocated_bytes=torch.cuda.max_memory_allocated())
                ids = labels = None
                opt.zero_grad(set_to_none=True)
                gc.collect()
                torch.cuda.empty_cache()
                print(json.dumps(row), flush=True)
            return
    print(json.dumps(out))


if __name__ == "__main__":
    main()
