#!/usr/bin/env python3
"""Parity fixtures for dense model families, made by Transformers itself, and the exact parameter
counts of published model sizes.

    python3 tests/bench/hf_family_fixtures.py --out DIR [--only qwen3,gemma2]
    python3 tests/bench/hf_family_fixtures.py --counts --out DIR

Fixture mode writes DIR/hf-parity/<model_type>/ for each family: a tiny random-weight model built
from a config dict (config.json and model.safetensors as save_pretrained writes them, float32), and
reference/reference.safetensors with input_ids, labels (= input_ids; the loss shifts them as Transformers
does), logits (float32 [2, 24, 128], from the model run in float64 on the CPU), loss (float64),
loss_fp32 (the float32 model's loss from model(input_ids, labels=input_ids)) and grad.<name> for every
parameter (float32 gradient of the float64 loss). meta.json says what each fixture exercises.

Counts mode builds the published text models on the meta device from their config.json and writes
DIR/counts.json {name: {model_type, total_params, config}} and DIR/configs/<short-name>/config.json.

Plain script: needs torch, transformers and safetensors, nothing else.
"""
import argparse, copy, json, math, os, shutil, sys, tempfile, traceback

import torch
import torch.nn.functional as F

VOCAB, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, MAX_POS = 128, 32, 4, 2, 8, 4, 64
BATCH, SEQ, SLIDING = 2, 24, 8
INIT_RANGE = 0.2  # larger than the families' 0.02 so that soft-capping, scaling and norms move the numbers
NOISE_STD = 0.1   # added to every norm weight and every bias after the model's own init
BUDGET_BYTES = 395 * 1024  # a fixture folder stays under 400 KiB: intermediate_size steps down to fit
INTERMEDIATE_STEPS = (64, 48, 32)
TOKEN_SEED = 1234


def common(**over):
    d = dict(vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
             num_key_value_heads=KV_HEADS, head_dim=HEAD_DIM, max_position_embeddings=MAX_POS,
             initializer_range=INIT_RANGE, pad_token_id=None, bos_token_id=1, eos_token_id=2)
    d.update(over)
    return d


def families():
    """model_type -> (config dict, traits it exercises). intermediate_size is filled in by fit()."""
    layer4_olmo3 = ["sliding_attention"] * 3 + ["full_attention"]
    gemma3_types = ["sliding_attention"] * 5 + ["full_attention"]
    return {
        "llama": (common(tie_word_embeddings=False, attention_bias=False,
                         rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                  ["control: plain Llama, untied, no bias, default RoPE theta 1e4"]),
        "qwen3": (common(tie_word_embeddings=False, attention_bias=True, use_sliding_window=False,
                         rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                          "original_max_position_embeddings": 16}),
                  ["per-head q_norm/k_norm (RMSNorm over head_dim) before RoPE", "attention_bias on q/k/v/o",
                   "YaRN RoPE factor 4, original_max_position_embeddings 16 (attention_scaling 0.1*ln4+1 on cos/sin)",
                   "untied embeddings"]),
        "gemma2": (common(head_dim=16, tie_word_embeddings=True, attention_bias=True, sliding_window=SLIDING,
                          layer_types=["sliding_attention", "full_attention"] * 2, query_pre_attn_scalar=24,
                          attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
                   ["head_dim 16 != hidden/heads 8", "RMSNorm (1+w)", "sandwich norms (4 per layer)",
                    "embedding * sqrt(hidden)", "gelu_pytorch_tanh MLP", "query_pre_attn_scalar 24 (scale 24^-0.5)",
                    "attn_logit_softcapping 50", "final_logit_softcapping 30",
                    "sliding window 8 on even layers (0, 2), full on odd", "attention_bias", "tied"]),
        "gemma3_text": (common(num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1, head_dim=12,
                               tie_word_embeddings=True, attention_bias=True, sliding_window=SLIDING,
                               layer_types=gemma3_types, query_pre_attn_scalar=20,
                               rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                                                   "rope_theta": 1000000.0},
                                                "sliding_attention": {"rope_type": "default",
                                                                      "rope_theta": 10000.0}}),
                        ["6 layers, 5 sliding (window 8) : 1 full", "local RoPE theta 1e4 on sliding layers",
                         "global RoPE theta 1e6 with linear factor 8 on the full layer",
                         "head_dim 12 != hidden/heads 16 (2 heads, 1 kv head)", "q_norm/k_norm with (1+w)",
                         "RMSNorm (1+w)", "sandwich norms", "embedding * sqrt(hidden)",
                         "query_pre_attn_scalar 20", "attention_bias", "tied"]),
        "olmo2": (common(tie_word_embeddings=False, attention_bias=True,
                         rope_parameters={"rope_type": "default", "rope_theta": 500000.0}),
                  ["post-norm blocks (norm after attention and after MLP, no input norm)",
                   "q_norm/k_norm over the whole projection (num_heads*head_dim / kv_heads*head_dim)",
                   "attention_bias", "untied"]),
        "olmo3": (common(tie_word_embeddings=False, attention_bias=True, sliding_window=SLIDING,
                         layer_types=layer4_olmo3,
                         rope_parameters={"full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0,
                                                             "original_max_position_embeddings": 16},
                                          "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}}),
                  ["OLMo2 block (post-norms, whole-projection q_norm/k_norm)",
                   "layer_types 3 sliding (window 8) : 1 full",
                   "RoPE per layer type: YaRN factor 4 / original 16 on the full layer only, plain theta 5e5 on "
                   "sliding layers", "attention_bias", "untied"]),
        "phi3": (common(tie_word_embeddings=False, sliding_window=SLIDING, original_max_position_embeddings=16,
                        partial_rotary_factor=0.5,
                        rope_parameters={"rope_type": "longrope", "rope_theta": 250000.0, "partial_rotary_factor": 0.5,
                                         "short_factor": [1.1, 1.3], "long_factor": [1.7, 4.2]}),
                 ["fused qkv_proj and gate_up_proj", "partial_rotary_factor 0.5 (rotary dim 4 of 8)",
                  "LongRoPE: seq 24 > original_max_position_embeddings 16 -> long_factor used, "
                  "attention_factor sqrt(1+ln(64/16)/ln16)", "sliding window 8 on every layer", "untied"]),
        "glm4": (common(tie_word_embeddings=False, attention_bias=True, partial_rotary_factor=0.5,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}),
                 ["partial_rotary_factor 0.5, interleaved (GPT-J style) rotary pairs",
                  "q/k/v bias (o_proj none)", "fused gate_up_proj", "post_self_attn_layernorm and post_mlp_layernorm",
                  "untied"]),
        "smollm3": (common(tie_word_embeddings=True, attention_bias=True, no_rope_layers=[1, 1, 1, 0],
                           rope_parameters={"rope_type": "default", "rope_theta": 5000000.0}),
                    ["NoPE on every 4th layer (no_rope_layers [1,1,1,0]: layer 3 has no RoPE)", "attention_bias",
                     "RoPE theta 5e6", "tied"]),
        "granite": (common(tie_word_embeddings=True, attention_bias=True, embedding_multiplier=12.0,
                           residual_multiplier=0.22, attention_multiplier=0.0625, logits_scaling=8.0,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000000.0}),
                    ["embedding_multiplier 12", "residual_multiplier 0.22", "attention_multiplier 0.0625 "
                     "(replaces head_dim^-0.5)", "logits divided by logits_scaling 8", "attention_bias", "tied"]),
        "ministral3": (common(tie_word_embeddings=False, sliding_window=None,
                              rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                                               "original_max_position_embeddings": 16, "beta_fast": 32.0,
                                               "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                                               "llama_4_scaling_beta": 0.1}),
                       ["YaRN factor 4, original 16, mscale = mscale_all_dim = 1 (attention factor 1)",
                        "llama_4_scaling_beta 0.1: q scaled by 1+0.1*ln(1+floor(pos/16)) (positions 16..23)",
                        "untied", "no attention bias (the family has none)"]),
    }


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def build(model_type, cfg_dict, dtype=torch.float32):
    from transformers import AutoConfig, AutoModelForCausalLM
    cfg = AutoConfig.for_model(model_type, **cfg_dict)
    try:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=dtype)
    except TypeError:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", torch_dtype=dtype)
    return model.to(dtype)


def fit(model_type, cfg_dict):
    """The largest intermediate_size in INTERMEDIATE_STEPS whose fixture fits BUDGET_BYTES."""
    tried = []
    for inter in INTERMEDIATE_STEPS:
        d = dict(cfg_dict, intermediate_size=inter)
        with torch.device("meta"):
            from transformers import AutoConfig, AutoModelForCausalLM
            m = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **d))
        n = n_params(m)
        est = 8 * n + 4 * BATCH * SEQ * VOCAB + 20 * 1024  # weights + grads + logits + headers/json/blocks
        tried.append({"intermediate_size": inter, "params": n, "estimated_bytes": est})
        if est <= BUDGET_BYTES:
            return d, tried
    return d, tried


def add_noise(model, gen):
    touched = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_norm = "norm" in name.lower() and name.endswith(".weight")
            is_bias = name.endswith(".bias")
            if is_norm or is_bias:
                p.add_(torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype) * NOISE_STD)
                touched.append(name)
    return touched


def layer_info(model):
    cfg = model.config
    out = []
    layers = getattr(getattr(model, "model", model), "layers", [])
    for i, layer in enumerate(layers):
        attn = getattr(layer, "self_attn", None)
        info = {"index": i}
        lt = getattr(cfg, "layer_types", None)
        if lt:
            info["layer_type"] = lt[i]
        for key in ("sliding_window", "is_sliding", "use_rope", "attention_type", "scaling", "rotary_ndims"):
            if attn is not None and hasattr(attn, key):
                v = getattr(attn, key)
                info[key] = v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
        out.append(info)
    return out


def rotary_info(model):
    """Every rotary module's inverse frequencies (after a forward, so dynamic types have updated) and
    attention scaling."""
    out = {}
    for mname, mod in model.named_modules():
        if "rotary" not in mname.lower():
            continue
        entry = {"class": type(mod).__name__}
        for bname, buf in mod.named_buffers(recurse=False):
            if "inv_freq" in bname:
                entry[bname] = [float(x) for x in buf.double().flatten().tolist()]
        for attr in ("attention_scaling", "rope_type"):
            if hasattr(mod, attr):
                v = getattr(mod, attr)
                if isinstance(v, dict):
                    v = {k: (float(x) if isinstance(x, (int, float)) else str(x)) for k, x in v.items()}
                elif isinstance(v, (int, float)):
                    v = float(v)
                else:
                    v = str(v)
                entry[attr] = v
        for aname in dir(mod):  # per-layer-type scalings (gemma3: sliding_attention_attention_scaling ...)
            if aname.endswith("attention_scaling") and aname != "attention_scaling":
                v = getattr(mod, aname, None)
                if isinstance(v, (int, float)):
                    entry[aname] = float(v)
        out[mname] = entry
    return out


def dir_kib(path):
    total = 0
    for f in os.listdir(path):
        st = os.stat(os.path.join(path, f))
        total += getattr(st, "st_blocks", 0) * 512 or st.st_size
    return total / 1024


def make_fixture(model_type, cfg_dict, traits, out_root):
    import transformers
    from safetensors.torch import save_file, load_file
    from transformers import AutoModelForCausalLM

    cfg_dict, tried = fit(model_type, cfg_dict)
    torch.manual_seed(0)
    model = build(model_type, cfg_dict, torch.float32).eval()
    noised = add_noise(model, torch.Generator().manual_seed(1))

    folder = os.path.join(out_root, "hf-parity", model_type)
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        shutil.copy(os.path.join(tmp, "config.json"), folder)
        shutil.copy(os.path.join(tmp, "model.safetensors"), folder)
        # Round trip: the saved config and weights rebuild the same model.
        try:
            back = AutoModelForCausalLM.from_pretrained(tmp, attn_implementation="eager", dtype=torch.float32).eval()
        except TypeError:
            back = AutoModelForCausalLM.from_pretrained(tmp, attn_implementation="eager", torch_dtype=torch.float32).eval()
    saved = load_file(os.path.join(folder, "model.safetensors"))

    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(TOKEN_SEED), dtype=torch.int64)

    with torch.no_grad():
        out32 = model(input_ids=ids, labels=ids, use_cache=False)
        loss_fp32 = out32.loss.detach().float()
        back_logits = back(input_ids=ids, use_cache=False).logits
        roundtrip = (back_logits.float() - out32.logits.float()).abs().max().item()
        # Raw lm_head output before any soft-capping or logits scaling, to show they matter.
        h = model.model(input_ids=ids, use_cache=False).last_hidden_state
        raw = model.lm_head(h)

    # Does the sliding window change anything? The same weights with the window widened past the sequence.
    sliding_effect = None
    if getattr(model.config, "sliding_window", None):
        cfg_wide = copy.deepcopy(model.config)
        cfg_wide.sliding_window = MAX_POS
        try:
            wide = AutoModelForCausalLM.from_config(cfg_wide, attn_implementation="eager", dtype=torch.float32)
        except TypeError:
            wide = AutoModelForCausalLM.from_config(cfg_wide, attn_implementation="eager", torch_dtype=torch.float32)
        wide.load_state_dict(model.state_dict())
        with torch.no_grad():
            sliding_effect = (wide.eval()(input_ids=ids, use_cache=False).logits - out32.logits).abs().max().item()

    model64 = copy.deepcopy(model).double().eval()
    out64 = model64(input_ids=ids, labels=ids, use_cache=False)
    logits64 = out64.logits
    # The float64 loss with Transformers' shift (its loss function casts logits to float32, so recompute in float64).
    loss64 = F.cross_entropy(logits64.double()[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    loss64.backward()
    grads, missing = {}, []
    for name, p in model64.named_parameters():
        if p.grad is None:
            missing.append(name)
            grads["grad." + name] = torch.zeros(p.shape, dtype=torch.float32)
        else:
            grads["grad." + name] = p.grad.detach().float().contiguous()

    ref = {"input_ids": ids.contiguous(), "labels": ids.clone().contiguous(),
           "logits": logits64.detach().float().contiguous(),
           "loss": loss64.detach().double().reshape(()).contiguous(),
           "loss_fp32": loss_fp32.reshape(()).contiguous()}
    ref.update(grads)
    # In its own folder, so the model folder holds only the checkpoint the engine loads.
    os.makedirs(os.path.join(folder, "reference"), exist_ok=True)
    save_file(ref, os.path.join(folder, "reference", "reference.safetensors"))

    cfg = model.config
    meta = {
        "model_type": model_type,
        "class": type(model).__name__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "total_params": n_params(model),
        "saved_tensors": {k: list(v.shape) for k, v in saved.items()},
        "saved_dtypes": sorted({str(v.dtype) for v in saved.values()}),
        "tie_word_embeddings": bool(getattr(cfg, "tie_word_embeddings", False)),
        "intermediate_size": cfg.intermediate_size,
        "intermediate_size_fit": tried,
        "layer_types": list(getattr(cfg, "layer_types", None) or ["full_attention"] * cfg.num_hidden_layers),
        "layers": layer_info(model64),
        "rope_parameters": cfg.rope_parameters,
        "rotary": rotary_info(model64),
        "traits": traits,
        "batch": BATCH, "seq": SEQ, "token_seed": TOKEN_SEED,
        "init": f"model's own init (torch.manual_seed(0)), initializer_range {INIT_RANGE}; then N(0, {NOISE_STD}) "
                f"added to every norm weight and bias (generator seed 1)",
        "noised_parameters": noised,
        "loss": loss64.item(),
        "loss_fp32": loss_fp32.item(),
        "loss_hf_float64_model": out64.loss.item(),
        "loss_hf_float64_model_dtype": str(out64.loss.dtype),
        "logits_dtype_float64_model": str(logits64.dtype),
        "lm_head_raw_absmax": raw.abs().max().item(),
        "logits_absmax": logits64.abs().max().item(),
        "max_abs_logits_fp32_vs_fp64": (out32.logits.double() - logits64.double()).abs().max().item(),
        "roundtrip_max_abs_logits_diff": roundtrip,
        "sliding_window": getattr(cfg, "sliding_window", None),
        "sliding_window_effect_max_abs_logits": sliding_effect,
        "params_without_grad": missing,
        "precision_note": "float64 CPU run, but Transformers computes RMSNorm, the rotary tables and the eager "
                          "softmax in float32 inside a float64 model, so the reference is float32-accurate there",
        "labels_note": "labels = input_ids; the loss is the mean cross-entropy of logits[:, :-1] against "
                       "input_ids[:, 1:] (Transformers' shift), recomputed in float64",
    }
    if model_type == "phi3":
        meta["longrope_factors_used"] = "long" if SEQ > cfg.rope_parameters["original_max_position_embeddings"] else "short"
    json.dump(meta, open(os.path.join(folder, "meta.json"), "w"), indent=1, default=str)
    meta_size = dir_kib(folder)
    print(json.dumps({"family": model_type, "ok": True, "params": meta["total_params"],
                      "intermediate": cfg.intermediate_size, "loss": meta["loss"], "loss_fp32": meta["loss_fp32"],
                      "hf64": meta["loss_hf_float64_model"], "roundtrip": roundtrip,
                      "raw_absmax": meta["lm_head_raw_absmax"], "sliding_effect": sliding_effect, "kib": round(meta_size, 1),
                      "layer_types": meta["layer_types"], "no_grad": missing}), flush=True)


# Published configs (text part), as their config.json on the Hub gives them.
PUBLISHED = {
    "qwen3-8b": ("Qwen/Qwen3-8B", "qwen3", {
        "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 12288, "max_position_embeddings": 40960,
        "max_window_layers": 36, "num_attention_heads": 32, "num_hidden_layers": 36, "num_key_value_heads": 8,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False,
        "vocab_size": 151936}),
    "gemma-3-12b": ("google/gemma-3-12b-it", "gemma3_text", {
        "attention_bias": False, "attention_dropout": 0.0, "attn_logit_softcapping": None,
        "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 3840, "initializer_range": 0.02, "intermediate_size": 15360, "max_position_embeddings": 131072,
        "num_attention_heads": 16, "num_hidden_layers": 48, "num_key_value_heads": 8, "query_pre_attn_scalar": 256,
        "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
        "rope_theta": 1000000.0, "sliding_window": 1024, "sliding_window_pattern": 6, "torch_dtype": "bfloat16",
        "use_cache": True, "vocab_size": 262208, "tie_word_embeddings": True}),
    "olmo-2-7b": ("allenai/OLMo-2-1124-7B", "olmo2", {
        "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
        "intermediate_size": 11008, "max_position_embeddings": 4096, "num_attention_heads": 32,
        "num_hidden_layers": 32, "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06,
        "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": 100352}),
    "phi-4": ("microsoft/phi-4", "phi3", {
        "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": 100257, "embd_pdrop": 0.0, "eos_token_id": 100257, "hidden_act": "silu", "hidden_size": 5120,
        "initializer_range": 0.02, "intermediate_size": 17920, "max_position_embeddings": 16384,
        "num_attention_heads": 40, "num_hidden_layers": 40, "num_key_value_heads": 10,
        "original_max_position_embeddings": 16384, "pad_token_id": 100257, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 250000, "sliding_window": None, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 100352}),
    "smollm3-3b": ("HuggingFaceTB/SmolLM3-3B", "smollm3", {
        "architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "bos_token_id": None, "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048,
        "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 65536,
        "max_window_layers": 28, "mlp_bias": False, "no_rope_layer_interval": 4,
        "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(36)], "num_attention_heads": 16,
        "num_hidden_layers": 36, "num_key_value_heads": 4, "pad_token_id": 128004, "pretraining_tp": 2,
        "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 5000000.0, "sliding_window": None,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": False, "use_sliding_window": False,
        "vocab_size": 128256}),
    "glm-4-9b": ("THUDM/GLM-4-9B-0414", "glm4", {
        "architectures": ["Glm4ForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
        "eos_token_id": [151329, 151336, 151338], "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 13696, "max_position_embeddings": 32768,
        "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 2, "pad_token_id": 151329,
        "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 151552}),
    "granite-3.3-8b": ("ibm-granite/granite-3.3-8b-instruct", "granite", {
        "architectures": ["GraniteForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attention_multiplier": 0.0078125, "bos_token_id": 0, "embedding_multiplier": 12.0, "eos_token_id": 0,
        "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 12800,
        "logits_scaling": 16.0, "max_position_embeddings": 131072, "mlp_bias": False, "num_attention_heads": 32,
        "num_hidden_layers": 40, "num_key_value_heads": 8, "pad_token_id": 0, "residual_multiplier": 0.22,
        "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000000.0, "tie_word_embeddings": True,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 49159}),
    "ministral-3-8b": ("mistralai/Ministral-3-8B", "ministral3", {
        "architectures": ["Ministral3ForCausalLM"], "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
        "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 262144,
        "num_attention_heads": 32, "num_hidden_layers": 34, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
        "rope_parameters": {"type": "yarn", "rope_type": "yarn", "rope_theta": 1000000.0, "factor": 16.0,
                            "original_max_position_embeddings": 16384, "max_position_embeddings": 262144,
                            "beta_fast": 32.0, "beta_slow": 1.0, "mscale_all_dim": 1.0, "mscale": 1.0,
                            "llama_4_scaling_beta": 0.1},
        "sliding_window": None, "tie_word_embeddings": False, "use_cache": True, "vocab_size": 131072}),
    "gemma-2-9b": ("google/gemma-2-9b", "gemma2", {
        "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": 50.0, "bos_token_id": 2, "eos_token_id": 1, "final_logit_softcapping": 30.0,
        "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
        "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 8192,
        "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8, "pad_token_id": 0,
        "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
        "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True, "vocab_size": 256000}),
}

SOURCES = {
    "qwen3-8b": "the Hub config.json of Qwen/Qwen3-8B (from memory of the published file; dims agree with the Qwen3 report)",
    "gemma-3-12b": "text_config of google/gemma-3-12b-it config.json (as quoted in public test code)",
    "olmo-2-7b": "allenai/OLMo-2-1124-7B config.json",
    "phi-4": "microsoft/phi-4 config.json (as quoted in a public page)",
    "smollm3-3b": "HuggingFaceTB/SmolLM3-3B config.json (dims as quoted in public test code)",
    "glm-4-9b": "THUDM/GLM-4-9B-0414 config.json (dims as quoted in public test code)",
    "granite-3.3-8b": "ibm-granite/granite-3.3-8b-instruct config.json (as dumped in a public repository)",
    "ministral-3-8b": "text_config of mistralai/Ministral-3-8B-*-2512: Transformers' Ministral3Config defaults, "
                      "documented against mistralai/Ministral-3-8B-Base-2512",
    "gemma-2-9b": "google/gemma-2-9b config.json",
}


def counts(out_root):
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    result = {}
    for short, (name, model_type, d) in PUBLISHED.items():
        if model_type not in CONFIG_MAPPING:
            result[name] = {"model_type": model_type, "error": f"model_type {model_type} not in Transformers "
                                                              f"{transformers.__version__}"}
            print(json.dumps({"count": short, "error": result[name]["error"]}), flush=True)
            continue
        try:
            cfg = AutoConfig.for_model(model_type, **copy.deepcopy(d))
            folder = os.path.join(out_root, "configs", short)
            os.makedirs(folder, exist_ok=True)
            cfg.save_pretrained(folder)
            with torch.device("meta"):
                model = AutoModelForCausalLM.from_config(cfg)
            total = n_params(model)
            emb = model.get_input_embeddings().weight.numel()
            tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
            result[name] = {"model_type": model_type, "short_name": short, "class": type(model).__name__,
                            "total_params": total, "embedding_params": emb, "tied": bool(tied),
                            "source": SOURCES[short], "config": d}
            print(json.dumps({"count": short, "total_params": total, "tied": bool(tied)}), flush=True)
        except Exception as e:
            traceback.print_exc()
            result[name] = {"model_type": model_type, "error": repr(e)}
            print(json.dumps({"count": short, "error": repr(e)}), flush=True)
    result["_meta"] = {"transformers": transformers.__version__, "torch": torch.__version__,
                       "how": "sum(p.numel() for p in model.parameters()) of AutoModelForCausalLM.from_config on the "
                              "meta device (tied weights counted once)"}
    json.dump(result, open(os.path.join(out_root, "counts.json"), "w"), indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--counts", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated model types")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    if args.counts:
        counts(args.out)
        return
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    only = [s for s in args.only.split(",") if s]
    failed = []
    for model_type, (cfg_dict, traits) in families().items():
        if only and model_type not in only:
            continue
        if model_type not in CONFIG_MAPPING:
            print(json.dumps({"family": model_type, "ok": False, "error": "not in this Transformers"}), flush=True)
            failed.append(model_type)
            continue
        try:
            make_fixture(model_type, cfg_dict, traits, args.out)
        except Exception as e:
            traceback.print_exc()
            print(json.dumps({"family": model_type, "ok": False, "error": repr(e)}), flush=True)
            failed.append(model_type)
    print(json.dumps({"failed": failed}), flush=True)


if __name__ == "__main__":
    main()
