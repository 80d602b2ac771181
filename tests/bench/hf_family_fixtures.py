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
DIR/counts.json {name: {model_type, total_params, active_params, config}} and DIR/configs/<short-name>/config.json.

The sparse families (gpt_oss, deepseek_v3, deepseek_v3_no_q_lora, glm4_moe, llama4_text, qwen3_next) write the same folders, with the
weights and every grad.<name> under the names and layouts of the families' published safetensors (see to_hub),
the loss including Transformers' load-balancing loss where the class adds one, and meta.json saying what was
checked (reload of the written folder, our conversion against save_pretrained's); their configs for counts are
the committed tests/data/hf/<short-name>/config.json files (PUBLISHED_FILES).

Plain script: needs torch, transformers and safetensors, nothing else.
"""
import argparse, copy, json, math, os, shutil, tempfile, traceback

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # --help and py_compile work without torch
    torch, F = None, None

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
        # Qwen3.5's dense text model (issue 30): Qwen3_5ForCausalLM, the separate in_proj_qkv / _z / _b / _a.
        "qwen3_5_text": (common(tie_word_embeddings=False, attention_bias=False, head_dim=16,
                                layer_types=["linear_attention", "full_attention"] * 2, linear_num_key_heads=2,
                                linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
                                linear_conv_kernel_dim=4, hidden_act="silu",
                                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                                 "partial_rotary_factor": 0.25, "mrope_interleaved": True,
                                                 "mrope_section": [1, 1, 0]}),
                         ["Gated DeltaNet (in_proj_qkv [q|k|v], in_proj_z, in_proj_b, in_proj_a) on layers 0 and 2, "
                          "gated attention on 1 and 3; 2 key / 4 value heads of 8, conv 4",
                          "partial_rotary_factor 0.25 (4 of 16 dims); interleaved mrope with text-only positions "
                          "(all three rows equal: plain rotary)",
                          "Qwen3_5RMSNorm (1 + weight, fp32), per-head q/k norm, dense SwiGLU MLP", "untied"]),
    }


# Gemma 4 (issue 28): the dense global-layer traits without per-layer embeddings or shared key/value
# layers (what PilotBench models; the 31B's form): global layers of head_dim 16 with one key/value head
# and values from k_proj, proportional rotary (4 of 8 frequency pairs), a layer scalar per layer set to
# values other than 1 after the init (make_fixture), final soft-cap 30.
GEMMA4 = {"gemma4_text": (common(num_attention_heads=4, num_key_value_heads=2, head_dim=8, global_head_dim=16,
                                 num_global_key_value_heads=1, attention_k_eq_v=True, hidden_size_per_layer_input=0,
                                 num_kv_shared_layers=0, enable_moe_block=False, tie_word_embeddings=True,
                                 sliding_window=SLIDING, final_logit_softcapping=30.0,
                                 layer_types=["sliding_attention", "full_attention"] * 2,
                                 rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                  "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                                                     "rope_theta": 1000000.0}}),
                          ["sliding layers: head_dim 8, 2 key/value heads, default rotary theta 1e4 over whole heads",
                           "global layers: head_dim 16, 1 key/value head, values = v_norm(k_proj(x)) (attention_k_eq_v)",
                           "proportional rotary on global layers: 4 of 8 frequency pairs turn, theta 1e6",
                           "weightless v_norm, per-head q_norm/k_norm, RMSNorm w (not 1+w) in fp32, 4 norms per layer",
                           "attention scaling 1.0", "embedding * sqrt(hidden) rounded", "layer_scalar buffers 0.6/0.8/1.0/1.2",
                           "final_logit_softcapping 30", "gelu_pytorch_tanh", "tied"]),
          # E2B/E4B's traits (issue 28): per-layer embeddings, the last two layers reading the keys and
          # values of layers 0 (sliding) and 1 (global), their MLPs twice as wide; no attention_k_eq_v.
          "gemma4_text_e": (common(num_attention_heads=4, num_key_value_heads=2, head_dim=8, global_head_dim=16,
                                   attention_k_eq_v=False, hidden_size_per_layer_input=8, vocab_size_per_layer_input=VOCAB,
                                   num_kv_shared_layers=2, use_double_wide_mlp=True, enable_moe_block=False,
                                   tie_word_embeddings=True, sliding_window=SLIDING, final_logit_softcapping=30.0,
                                   layer_types=["sliding_attention", "full_attention"] * 2,
                                   rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.5,
                                                                       "rope_theta": 1000000.0}}),
                            ["per-layer embeddings: hidden_size_per_layer_input 8 (table [128, 4 x 8], projection of the "
                             "scaled embedding, its norm, gate / projection / norm after each MLP)",
                             "num_kv_shared_layers 2: layer 2 reads layer 0's keys and values, layer 3 layer 1's "
                             "(no k_proj, v_proj, k_norm there)", "use_double_wide_mlp: layers 2 and 3 twice intermediate_size",
                             "global layers: head_dim 16, 2 key/value heads, own v_proj", "layer_scalar 0.6/0.8/1.0/1.2",
                             "final_logit_softcapping 30", "tied"])}
# A fixture's model type where its name is not one.
FIXTURE_MODEL_TYPE = {"gemma4_text_e": "gemma4_text"}


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def build(model_type, cfg_dict, dtype=None):
    from transformers import AutoConfig, AutoModelForCausalLM
    dtype = dtype or torch.float32
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


def make_fixture(model_type, cfg_dict, traits, out_root, fixture_name=None):
    import transformers
    from safetensors.torch import save_file, load_file
    from transformers import AutoModelForCausalLM

    cfg_dict, tried = fit(model_type, cfg_dict)
    torch.manual_seed(0)
    model = build(model_type, cfg_dict, torch.float32).eval()
    noised = add_noise(model, torch.Generator().manual_seed(1))
    if model_type == "gemma4_text":  # a persistent buffer, loaded from the checkpoint: not 1, so it is checked
        with torch.no_grad():
            for i, layer in enumerate(model.model.layers):
                layer.layer_scalar.fill_(0.6 + 0.2 * i)
        noised.append("model.layers.*.layer_scalar (buffer) = 0.6 + 0.2 * layer")

    folder = os.path.join(out_root, "hf-parity", fixture_name or model_type)
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
        "fixture": fixture_name or model_type,
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
    print(json.dumps({"family": fixture_name or model_type, "ok": True, "params": meta["total_params"],
                      "intermediate": cfg.intermediate_size, "loss": meta["loss"], "loss_fp32": meta["loss_fp32"],
                      "hf64": meta["loss_hf_float64_model"], "roundtrip": roundtrip,
                      "raw_absmax": meta["lm_head_raw_absmax"], "sliding_effect": sliding_effect, "kib": round(meta_size, 1),
                      "layer_types": meta["layer_types"], "no_grad": missing}), flush=True)


# ---------------------------------------------------------------------------------------------------------
# Sparse families (issue 29): gpt_oss, deepseek_v3 (with and without q_lora_rank), glm4_moe, llama4_text.
#
# Their fixtures hold the weights under the names and layouts of the families' published safetensors, which
# is not always Transformers' in-memory layout: Transformers 5 fuses DeepSeek-V3's (and GLM-4.5's, whose
# Glm4MoeMoE is DeepseekV3MoE) per-expert Linear weights
# into one [E, 2I, H] gate_up_proj and one [E, H, I] down_proj per layer (conversion_mapping.py, reverted on
# save), while gpt-oss and Llama 4 checkpoints already hold [E, H, 2I] / [E, I, H] stacks. to_hub() below
# writes the hub form from whatever this Transformers holds (checked by shape), the gradients go through the
# same function, and the result is verified twice: against what save_pretrained itself writes (weights, and
# gradients through a copy of the model whose parameters hold the gradients), and by loading the written
# folder into a fresh model with from_pretrained and comparing its logits with the original model's.

SPARSE_BUDGET_BYTES = 400 * 1024

HUB_PATTERNS = {
    "common": [r"model\.embed_tokens\.weight", r"model\.norm\.weight", r"lm_head\.weight",
               r"model\.layers\.\d+\.(input_layernorm|post_attention_layernorm)\.weight"],
    "gpt_oss": [r"model\.layers\.\d+\.self_attn\.(q|k|v|o)_proj\.(weight|bias)", r"model\.layers\.\d+\.self_attn\.sinks",
                r"model\.layers\.\d+\.mlp\.router\.(weight|bias)",
                r"model\.layers\.\d+\.mlp\.experts\.(gate_up_proj|gate_up_proj_bias|down_proj|down_proj_bias)"],
    "deepseek_v3": [r"model\.layers\.\d+\.self_attn\.(q_proj|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|o_proj)\.weight",
                    r"model\.layers\.\d+\.self_attn\.(q_a_layernorm|kv_a_layernorm)\.weight",
                    r"model\.layers\.\d+\.mlp\.(gate_proj|up_proj|down_proj)\.weight",
                    r"model\.layers\.\d+\.mlp\.gate\.weight", r"model\.layers\.\d+\.mlp\.gate\.e_score_correction_bias",
                    r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight",
                    r"model\.layers\.\d+\.mlp\.shared_experts\.(gate_proj|up_proj|down_proj)\.weight"],
    "glm4_moe": [r"model\.layers\.\d+\.self_attn\.(q|k|v)_proj\.(weight|bias)", r"model\.layers\.\d+\.self_attn\.o_proj\.weight",
                 r"model\.layers\.\d+\.self_attn\.(q_norm|k_norm)\.weight",
                 r"model\.layers\.\d+\.mlp\.(gate_proj|up_proj|down_proj)\.weight",
                 r"model\.layers\.\d+\.mlp\.gate\.weight", r"model\.layers\.\d+\.mlp\.gate\.e_score_correction_bias",
                 r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight",
                 r"model\.layers\.\d+\.mlp\.shared_experts\.(gate_proj|up_proj|down_proj)\.weight"],
    "qwen3_next": [r"model\.layers\.\d+\.linear_attn\.(in_proj_qkvz|in_proj_ba|out_proj|conv1d|norm)\.weight",
                   r"model\.layers\.\d+\.linear_attn\.(dt_bias|A_log)",
                   r"model\.layers\.\d+\.self_attn\.(q|k|v|o)_proj\.weight", r"model\.layers\.\d+\.self_attn\.(q_norm|k_norm)\.weight",
                   r"model\.layers\.\d+\.mlp\.(gate_proj|up_proj|down_proj)\.weight", r"model\.layers\.\d+\.mlp\.gate\.weight",
                   r"model\.layers\.\d+\.mlp\.experts\.\d+\.(gate_proj|up_proj|down_proj)\.weight",
                   r"model\.layers\.\d+\.mlp\.shared_expert\.(gate_proj|up_proj|down_proj)\.weight",
                   r"model\.layers\.\d+\.mlp\.shared_expert_gate\.weight"],
    "llama4_text": [r"model\.layers\.\d+\.self_attn\.(q|k|v|o)_proj\.weight",
                    r"model\.layers\.\d+\.feed_forward\.(gate_proj|up_proj|down_proj)\.weight",
                    r"model\.layers\.\d+\.feed_forward\.router\.weight",
                    r"model\.layers\.\d+\.feed_forward\.experts\.(gate_up_proj|down_proj)",
                    r"model\.layers\.\d+\.feed_forward\.shared_expert\.(gate_proj|up_proj|down_proj)\.weight"],
}


def sparse_families():
    """name -> spec: model_type, base config dict, the fit steps (largest first; each a dict of overrides),
    the traits exercised, extra noise/scaling, the family's load-balancing loss switch."""
    ds = common(num_key_value_heads=HEADS, head_dim=None, tie_word_embeddings=False, attention_bias=False,
                q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=6,
                rope_interleave=True,
                rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                 "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0,
                                 "mscale": 1.0, "mscale_all_dim": 1.0},
                n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=2, routed_scaling_factor=2.5,
                norm_topk_prob=True, n_shared_experts=1, first_k_dense_replace=1, hidden_act="silu")
    ds.pop("head_dim")
    ds_traits = ["multi-head latent attention: q_lora_rank 24 (q_a_proj, q_a_layernorm, q_b_proj), kv_lora_rank 16 "
                 "(kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj)",
                 "qk_nope_head_dim 8, qk_rope_head_dim 4, v_head_dim 6 (q/k head 12 != v head 6)",
                 "rope_interleave true (pairs (0,1),(2,3) de-interleaved before rotate_half)",
                 "YaRN factor 4, original 16, mscale = mscale_all_dim = 1: cos/sin unscaled, softmax scale "
                 "12^-0.5 * (0.1*ln4+1)^2",
                 "sigmoid router scores, e_score_correction_bias (a buffer, |N(0,0.2)|: non-negative so the fill "
                 "value of masked groups, 0 or -inf by version, cannot matter) added for the choice only",
                 "group-limited top-k: 8 experts in n_group 4, topk_group 2 (group score = sum of its top 2), top-2",
                 "norm_topk_prob true, routed_scaling_factor 2.5", "n_shared_experts 1 (shared_experts MLP)",
                 "first_k_dense_replace 1 (layer 0 dense MLP, layers 1..3 MoE)", "untied", "no attention bias"]
    ds_fit = [dict(moe_intermediate_size=m, intermediate_size=i) for m, i in ((8, 48), (8, 32), (6, 32), (4, 32), (4, 24))]
    ds_noq = dict(ds, q_lora_rank=None)
    # GLM-4.5's MoE is DeepSeek-V3's; its attention is grouped-query with partial rotary (GPT-NeoX's
    # rotate_half on the first int(head_dim * 0.5) dims, not GLM-4's interleaved pairs), q/k/v biases and
    # use_qk_norm's per-head RMSNorm before the rotary.
    glm = common(tie_word_embeddings=False, attention_bias=True, use_qk_norm=True, partial_rotary_factor=0.5,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5},
                 n_routed_experts=8, n_group=4, topk_group=2, num_experts_per_tok=2, routed_scaling_factor=2.5,
                 norm_topk_prob=True, n_shared_experts=1, first_k_dense_replace=1, hidden_act="silu")
    glm_traits = ["grouped-query attention: 4 heads, 2 key/value heads, head_dim 8",
                  "partial_rotary_factor 0.5: rotate_half (pairs (i, i+2)) on the first 4 dims of each head, "
                  "the last 4 unturned (GPT-NeoX's apply_rotary_pos_emb, not GLM-4's interleaved pairs)",
                  "use_qk_norm: per-head RMSNorm of q and k (weights noised) before the rotary",
                  "attention_bias on q/k/v (noised), none on o_proj",
                  "sigmoid router scores, e_score_correction_bias (a buffer, |N(0,0.2)|) added for the choice only",
                  "group-limited top-k: 8 experts in n_group 4, topk_group 2 (group score = sum of its top 2), top-2",
                  "norm_topk_prob true, routed_scaling_factor 2.5", "n_shared_experts 1 (shared_experts MLP)",
                  "first_k_dense_replace 1 (layer 0 dense MLP, layers 1..3 MoE)", "untied"]
    ds_noq_traits = ["q_lora_rank null (plain q_proj [heads*(nope+rope), hidden])"] + ds_traits[1:]
    # Qwen3-Next (issue 30): Gated DeltaNet on layers 0 and 2, gated full attention on 1 and 3; Qwen2-MoE's
    # block with a gated shared expert on layers 1..3, layer 0 dense (mlp_only_layers). SEQ (24) stays within
    # one chunk of 64 of the gated delta rule; chunk boundaries are CI's (tst_gated_delta_rule).
    qn = common(tie_word_embeddings=False, attention_bias=False, head_dim=16, partial_rotary_factor=0.25,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
                layer_types=["linear_attention", "full_attention"] * 2, linear_num_key_heads=2,
                linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_kernel_dim=4,
                num_experts=8, num_experts_per_tok=2, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[0],
                shared_expert_intermediate_size=16, router_aux_loss_coef=0.1, output_router_logits=True,
                hidden_act="silu")
    qn_traits = ["layer_types linear/full alternating: Gated DeltaNet (linear_attn) on layers 0 and 2, gated "
                 "attention (self_attn) on 1 and 3",
                 "Gated DeltaNet: 2 key heads / 4 value heads of 8 (q and k repeat_interleave'd), conv width 4 + SiLU, "
                 "in_proj_qkvz / in_proj_ba grouped per key head (fix_query_key_value_ordering), A_log and dt_bias "
                 "(noised), gated RMSNorm norm(o) * silu(z) (weight noised), torch_chunk_gated_delta_rule (chunk 64, "
                 "computed in float32 even in the float64 model) unless the fla fast path is installed (meta.json)",
                 "gated attention: q_proj [heads*head_dim*2] per head [query | gate], output * sigmoid(gate) before o_proj",
                 "partial_rotary_factor 0.25: rotate_half on the first 4 of 16 dims",
                 "Qwen3NextRMSNorm (1 + weight, fp32) for the layer norms, the final norm and per-head q/k norm",
                 "softmax top-2 of 8, norm_topk_prob true; shared expert (16) with sigmoid shared_expert_gate",
                 "mlp_only_layers [0]: layer 0 dense MLP", "output_router_logits true: loss includes 0.1 x the "
                 "load-balancing loss", "untied"]
    return {
        "gpt_oss": dict(
            model_type="gpt_oss",
            config=common(tie_word_embeddings=False, attention_bias=True, sliding_window=SLIDING,
                          layer_types=["sliding_attention", "full_attention"] * 2, num_local_experts=4,
                          num_experts_per_tok=2, router_aux_loss_coef=0.9, output_router_logits=True,
                          swiglu_limit=7.0, hidden_act="silu",
                          rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0,
                                           "original_max_position_embeddings": 16, "beta_fast": 32.0,
                                           "beta_slow": 1.0, "truncate": False}),
            fit=[dict(intermediate_size=i) for i in (20, 12, 8)],  # never 16: [E,H,2I] would be square
            gate_up_scale=4.0,
            traits=["sliding window 8 on layers 0 and 2 (layer_types sliding/full alternating), full on 1 and 3",
                    "learned per-head attention sinks (noised) in the softmax denominator",
                    "q/k/v/o biases", "router with bias: top-2 of 4 on raw logits, softmax over the chosen two",
                    "experts as [E,H,2I] gate_up_proj (gate/up interleaved: even columns gate, odd up) and [E,I,H] "
                    "down_proj, with biases (noised)",
                    "clamped SwiGLU: gate clamp(max=7), up clamp(-7,7), gate*sigmoid(1.702*gate)*(up+1); gate_up_proj "
                    "scaled after init so that the clamp binds (see clamp_fraction)",
                    "YaRN factor 4, original 16, beta_fast 32, beta_slow 1, truncate false",
                    "output_router_logits true: loss includes router_aux_loss_coef 0.9 x load-balancing loss",
                    "untied"]),
        "deepseek_v3": dict(model_type="deepseek_v3", config=ds, fit=ds_fit, correction_bias_std=0.2, traits=ds_traits),
        "deepseek_v3_no_q_lora": dict(model_type="deepseek_v3", config=ds_noq, fit=ds_fit, correction_bias_std=0.2,
                                      traits=ds_noq_traits),
        "glm4_moe": dict(model_type="glm4_moe", config=glm, fit=ds_fit, correction_bias_std=0.2, traits=glm_traits),
        "qwen3_next": dict(model_type="qwen3_next", config=qn, fit=ds_fit, traits=qn_traits),
        "llama4_text": dict(
            model_type="llama4_text",
            config=common(tie_word_embeddings=False, attention_bias=False, attention_chunk_size=8,
                          no_rope_layers=[1, 1, 1, 0], use_qk_norm=True, attn_temperature_tuning=True,
                          floor_scale=8, attn_scale=0.1, num_local_experts=4, num_experts_per_tok=1,
                          interleave_moe_layer_step=2, moe_layers=[1, 3], router_aux_loss_coef=0.001,
                          output_router_logits=True, hidden_act="silu",
                          rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                                           "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 16}),
            fit=[dict(intermediate_size=i, intermediate_size_mlp=m) for i, m in ((20, 48), (20, 32), (12, 48), (12, 32), (8, 32))],
            traits=["attention_chunk_size 8 on the RoPE layers (0,1,2): the 24-token sequence spans 3 chunks",
                    "no RoPE on layer 3 (no_rope_layers [1,1,1,0]), full causal attention there",
                    "use_qk_norm: weightless L2 norm (rms over head_dim, eps rms_norm_eps) of q and k after RoPE, on "
                    "RoPE layers only",
                    "attn_temperature_tuning on the NoPE layer: q *= 1 + 0.1*ln(1+floor((pos+1)/8)) (floor_scale 8)",
                    "MoE on layers 1 and 3 (interleave_moe_layer_step 2), dense MLP of intermediate_size_mlp on 0 and 2",
                    "router: top-1 of 4, sigmoid of the chosen logit (others 0) scales the expert INPUT; shared_expert "
                    "added", "experts [E,H,2I] gate_up_proj (first half gate, second half up) and [E,I,H] down_proj",
                    "rotary as complex pairs (interleaved), llama3 rope scaling factor 8, low 1, high 4, original 16",
                    "untied", "no attention bias"]),
    }


# The types whose published checkpoints hold one Linear per expert (experts.<e>.gate_proj/up_proj/down_proj).
PER_EXPERT_HUB = ("deepseek_v3", "glm4_moe", "qwen3_next")


def expert_shape(model_type, cfg):
    if model_type in PER_EXPERT_HUB:
        experts = getattr(cfg, "n_routed_experts", None) or cfg.num_experts  # Qwen3-Next: num_experts
        return experts, cfg.hidden_size, cfg.moe_intermediate_size
    return cfg.num_local_experts, cfg.hidden_size, cfg.intermediate_size


def to_hub(model_type, cfg, state):
    """Transformers' in-memory state (name -> tensor) as the family's published checkpoints hold it.
    Returns (hub dict, {in-memory name: [hub names]}, [notes on what was converted])."""
    E, H, I = expert_shape(model_type, cfg)
    out, name_map, notes = {}, {}, set()

    def shape(t):
        return tuple(t.shape)

    for name, t in state.items():
        if model_type in ("gpt_oss", "llama4_text") and name.endswith("experts.gate_up_proj"):
            if shape(t) == (E, H, 2 * I):
                v = t
            elif shape(t) == (E, 2 * I, H):
                v, _ = t.transpose(1, 2), notes.add(f"{model_type}: gate_up_proj held as [E,2I,H], written [E,H,2I]")
            else:
                raise ValueError(f"{name}: shape {shape(t)} is neither [E,H,2I] nor [E,2I,H] for E,H,I={E},{H},{I}")
            out[name], name_map[name] = v.contiguous(), [name]
        elif model_type in ("gpt_oss", "llama4_text") and name.endswith("experts.down_proj"):
            if shape(t) == (E, I, H):
                v = t
            elif shape(t) == (E, H, I):
                v, _ = t.transpose(1, 2), notes.add(f"{model_type}: down_proj held as [E,H,I], written [E,I,H]")
            else:
                raise ValueError(f"{name}: shape {shape(t)} is neither [E,I,H] nor [E,H,I] for E,H,I={E},{H},{I}")
            out[name], name_map[name] = v.contiguous(), [name]
        elif model_type in PER_EXPERT_HUB and name.endswith("mlp.experts.gate_up_proj"):
            # Concatenate(dim=1) of [gate_proj, up_proj] per expert in conversion_mapping: gate rows first.
            if shape(t) == (E, 2 * I, H):
                w = t
            elif shape(t) == (E, H, 2 * I):
                w = t.transpose(1, 2)
            else:
                raise ValueError(f"{name}: shape {shape(t)} is neither [E,2I,H] nor [E,H,2I] for E,H,I={E},{H},{I}")
            notes.add(f"{model_type}: fused experts.gate_up_proj split into experts.<e>.gate_proj.weight (rows :I) "
                      "and experts.<e>.up_proj.weight (rows I:)")
            prefix = name[: -len("gate_up_proj")]
            name_map[name] = []
            for e in range(E):
                for part, rows in (("gate_proj", slice(0, I)), ("up_proj", slice(I, 2 * I))):
                    key = f"{prefix}{e}.{part}.weight"
                    out[key] = w[e, rows].contiguous()
                    name_map[name].append(key)
        elif model_type in PER_EXPERT_HUB and name.endswith("mlp.experts.down_proj"):
            if shape(t) == (E, H, I):
                w = t
            elif shape(t) == (E, I, H):
                w = t.transpose(1, 2)
            else:
                raise ValueError(f"{name}: shape {shape(t)} is neither [E,H,I] nor [E,I,H] for E,H,I={E},{H},{I}")
            notes.add(f"{model_type}: fused experts.down_proj split into experts.<e>.down_proj.weight [H,I]")
            prefix = name[: -len("down_proj")]
            name_map[name] = []
            for e in range(E):
                key = f"{prefix}{e}.down_proj.weight"
                out[key] = w[e].contiguous()
                name_map[name].append(key)
        else:
            out[name], name_map[name] = t, [name]
    return out, name_map, sorted(notes)


def not_hub_names(model_type, names):
    import re
    pats = [re.compile(p + r"$") for p in HUB_PATTERNS["common"] + HUB_PATTERNS.get(model_type, [])]
    return sorted(n for n in names if not any(p.match(n) for p in pats))


def compare_dicts(a, b):
    """a (ours) against b (Transformers'): names only in one, shape differences, largest value difference."""
    only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    shape_diff, worst = [], 0.0
    for k in sorted(set(a) & set(b)):
        if tuple(a[k].shape) != tuple(b[k].shape):
            shape_diff.append([k, list(a[k].shape), list(b[k].shape)])
        else:
            worst = max(worst, (a[k].double() - b[k].double()).abs().max().item() if a[k].numel() else 0.0)
    return {"only_ours": only_a, "only_transformers": only_b, "shape_differences": shape_diff,
            "max_abs_value_difference": worst,
            "identical": not only_a and not only_b and not shape_diff and worst == 0.0}


def set_eager_experts(model):
    """Transformers 5 dispatches experts through config._experts_implementation (grouped_mm/batched_mm do not
    take float64 everywhere); the reference uses the eager per-expert loop."""
    seen = set()
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is None or id(cfg) in seen:
            continue
        seen.add(id(cfg))
        if hasattr(cfg, "_experts_implementation"):
            try:
                cfg._experts_implementation = "eager"
            except Exception as e:  # a property without setter in some version
                print(json.dumps({"warning": f"could not set _experts_implementation: {e!r}"}), flush=True)
    return getattr(model.config, "_experts_implementation", None)


def build_sparse(model_type, cfg_dict, dtype=None):
    from transformers import AutoConfig, AutoModelForCausalLM
    dtype = dtype or torch.float32
    cfg = AutoConfig.for_model(model_type, **copy.deepcopy(cfg_dict))
    model = None
    for kw in (dict(attn_implementation="eager", experts_implementation="eager", dtype=dtype),
               dict(attn_implementation="eager", dtype=dtype),
               dict(attn_implementation="eager", torch_dtype=dtype)):
        try:
            model = AutoModelForCausalLM.from_config(cfg, **kw)
            break
        except (TypeError, ValueError) as e:
            print(json.dumps({"note": f"from_config({sorted(kw)}) refused: {e!r}"}), flush=True)
    model = model.to(dtype)
    set_eager_experts(model)
    return model


def load_sparse(folder, dtype):
    from transformers import AutoModelForCausalLM
    last = None
    for kw in (dict(attn_implementation="eager", experts_implementation="eager", dtype=dtype),
               dict(attn_implementation="eager", dtype=dtype),
               dict(attn_implementation="eager", torch_dtype=dtype)):
        try:
            model, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True, **kw)
            set_eager_experts(model)
            return model.eval(), {k: sorted(map(str, v)) if isinstance(v, (set, list, tuple)) else str(v)
                                  for k, v in (info or {}).items()}
        except (TypeError, ValueError) as e:
            last = e
    raise last


def count_active(model, cfg):
    """Parameters one token uses: every parameter except the experts it is not routed to. A routed expert's
    share is its experts container's parameters / E (stacked tensors or per-expert modules alike); shared
    experts, routers and dense layers count whole."""
    E = (getattr(cfg, "num_local_experts", None) or getattr(cfg, "n_routed_experts", None)
         or getattr(cfg, "num_experts", None))
    k = getattr(cfg, "num_experts_per_tok", None)
    total = sum(p.numel() for p in model.parameters())
    if not E or not k:
        return total, []
    inactive, containers = 0, []
    for mname, mod in model.named_modules():
        last = mname.rsplit(".", 1)[-1]
        if last != "experts":
            continue
        n = sum(p.numel() for p in mod.parameters())
        if n % E:
            raise ValueError(f"{mname}: {n} parameters do not split over {E} experts")
        inactive += n // E * (E - k)
        containers.append([mname, n])
    return total - inactive, containers


def fit_sparse(model_type, base, steps):
    from transformers import AutoConfig, AutoModelForCausalLM
    tried = []
    d = base
    for over in steps:
        d = dict(base, **over)
        with torch.device("meta"):
            m = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **copy.deepcopy(d)))
        params = {n for n, _ in m.named_parameters()}
        state = m.state_dict()
        hub, _, _ = to_hub(model_type, m.config, state)
        grads, _, _ = to_hub(model_type, m.config, {n: t for n, t in state.items() if n in params})
        n_saved = sum(t.numel() for t in hub.values())
        n_grad = sum(t.numel() for t in grads.values())
        est = 4 * (n_saved + n_grad) + 4 * BATCH * SEQ * VOCAB + 160 * (len(hub) + len(grads)) + 24 * 1024
        tried.append({"overrides": over, "params": n_params(m), "hub_tensors": len(hub), "estimated_bytes": est})
        if est <= SPARSE_BUDGET_BYTES:
            return d, tried
    return d, tried


def sparse_noise(spec, model, gen):
    """Norm weights and '.bias' as the dense fixtures (add_noise); also every '_bias' (expert biases start at
    zero) and gpt-oss' sinks; gate_up_proj scaled where the family clamps; the correction-bias buffer."""
    touched = add_noise(model, gen)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if (name.endswith("_bias") or name.endswith(".sinks")) and name not in touched:
                p.add_(torch.randn(p.shape, generator=gen, dtype=torch.float64).to(p.dtype) * NOISE_STD)
                touched.append(name)
            if spec.get("gate_up_scale") and name.endswith("experts.gate_up_proj"):
                p.mul_(spec["gate_up_scale"])
                touched.append(f"{name} (x{spec['gate_up_scale']})")
        for name, b in model.named_buffers():
            if name.endswith("e_score_correction_bias") and spec.get("correction_bias_std"):
                # Non-negative: the experts outside the chosen groups are masked with 0.0 in some Transformers
                # versions and -inf in others; with every biased score positive both choose alike.
                b.copy_(torch.randn(b.shape, generator=gen, dtype=torch.float64).abs().to(b.dtype)
                        * spec["correction_bias_std"])
                touched.append(f"{name} (buffer, |N(0,{spec['correction_bias_std']})|)")
    return touched


def capture_routes(model, ids):
    """Per experts container, the integer [tokens, k] tensor it was called with (the chosen experts), where
    this Transformers passes one; and per gpt-oss experts module the fraction of gate/up pre-activations
    beyond the clamp over all experts and tokens."""
    routes, clamp, hooks = {}, {}, []
    for mname, mod in model.named_modules():
        if mname.rsplit(".", 1)[-1] != "experts":
            continue

        def pre(m, args, kwargs, mname=mname):
            try:
                observe(m, args, kwargs, mname)
            except Exception as e:  # a diagnostic only: never disturb the forward
                clamp[mname] = {"error": repr(e)}

        def observe(m, args, kwargs, mname):
            ints = [a for a in list(args) + list(kwargs.values()) if torch.is_tensor(a) and not a.is_floating_point()]
            if ints:
                routes[mname] = ints[0].detach().clone()
            x = args[0] if args else kwargs.get("hidden_states")
            if hasattr(m, "gate_up_proj_bias") and torch.is_tensor(x) and m.gate_up_proj.dim() == 3:
                x2 = x.reshape(-1, x.shape[-1])
                gu = torch.einsum("th,ehj->etj", x2, m.gate_up_proj) + m.gate_up_proj_bias[:, None, :]
                gate, up = gu[..., ::2], gu[..., 1::2]
                clamp[mname] = {"gate_above_7": (gate > 7).double().mean().item(),
                                "up_beyond_7": (up.abs() > 7).double().mean().item()}
        try:
            hooks.append(mod.register_forward_pre_hook(pre, with_kwargs=True))
        except TypeError:
            pass
    try:
        with torch.no_grad():
            out = model(input_ids=ids, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return out.logits, routes, clamp


def effect_of(model_type, cfg_dict, model, cfg_changes, state_changes, ids):
    """Largest logits change when the same weights run with a config (or state) changed: shows a trait bites."""
    other = build_sparse(model_type, dict(cfg_dict, **cfg_changes), torch.float32).eval()
    state = model.state_dict()
    state.update(state_changes)
    other.load_state_dict(state)
    with torch.no_grad():
        base = model(input_ids=ids, use_cache=False).logits
        changed = other(input_ids=ids, use_cache=False).logits
    return (changed - base).abs().max().item()


def router_values(cfg):
    keys = ("num_local_experts", "n_routed_experts", "num_experts_per_tok", "n_group", "topk_group",
            "routed_scaling_factor", "norm_topk_prob", "n_shared_experts", "first_k_dense_replace",
            "moe_intermediate_size", "intermediate_size", "intermediate_size_mlp", "moe_layers",
            "interleave_moe_layer_step", "router_aux_loss_coef", "output_router_logits", "router_jitter_noise",
            "swiglu_limit", "topk_method", "scoring_func", "sliding_window", "layer_types", "attention_chunk_size",
            "no_rope_layers", "use_qk_norm", "attn_temperature_tuning", "floor_scale", "attn_scale", "q_lora_rank",
            "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "qk_head_dim", "rope_interleave",
            "head_dim", "rope_parameters", "partial_rotary_factor", "attention_bias", "num_nextn_predict_layers",
            "_experts_implementation", "_attn_implementation")
    out = {}
    for k in keys:
        if hasattr(cfg, k):
            v = getattr(cfg, k)
            out[k] = v if isinstance(v, (int, float, str, bool, list, dict, type(None))) else str(v)
    return out


def make_sparse_fixture(name, spec, out_root):
    import transformers
    from safetensors.torch import save_file, load_file

    model_type = spec["model_type"]
    cfg_dict, tried = fit_sparse(model_type, spec["config"], spec["fit"])
    torch.manual_seed(0)
    model = build_sparse(model_type, cfg_dict, torch.float32).eval()
    noised = sparse_noise(spec, model, torch.Generator().manual_seed(1))
    cfg = model.config
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=torch.Generator().manual_seed(TOKEN_SEED), dtype=torch.int64)
    diag = {"family": name, "stage": "built", "class": type(model).__name__, "router": router_values(cfg)}
    print(json.dumps(diag, default=str), flush=True)

    # Does this Transformers add a load-balancing loss for this class? Only then is the switch left on.
    with torch.no_grad():
        probe = model(input_ids=ids, labels=ids, use_cache=False)
    aux_probe = getattr(probe, "aux_loss", None)
    aux_note = None
    if getattr(cfg, "output_router_logits", False) and aux_probe is None:
        aux_note = (f"output_router_logits was requested but {type(model).__name__} returned no aux_loss in Transformers "
                    f"{transformers.__version__}: written false, the loss is the cross-entropy alone")
        cfg.output_router_logits = False
        print(json.dumps({"family": name, "note": aux_note}), flush=True)

    param_names = [n for n, _ in model.named_parameters()]
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if getattr(cfg, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    buffers_saved = sorted(set(state) - set(param_names))
    print(json.dumps({"family": name, "stage": "state_dict (in memory)",
                      "tensors": {k: list(v.shape) for k, v in state.items()}, "persistent_buffers": buffers_saved}),
          flush=True)
    hub, name_map, conv_notes = to_hub(model_type, cfg, state)
    stray = not_hub_names(model_type, hub)
    print(json.dumps({"family": name, "stage": "hub form (ours)", "tensors": {k: list(v.shape) for k, v in hub.items()},
                      "conversion": conv_notes, "names_outside_hub_patterns": stray}), flush=True)

    folder = os.path.join(out_root, "hf-parity", name)
    os.makedirs(os.path.join(folder, "reference"), exist_ok=True)
    with torch.no_grad():
        logits32, routes, clamp = capture_routes(model, ids)

    checks = {}
    with tempfile.TemporaryDirectory() as tmp:
        tf_dir, ours_dir, tf_grad_dir = (os.path.join(tmp, s) for s in ("tf", "ours", "tfgrad"))
        try:
            model.save_pretrained(tf_dir)
        except Exception as e:  # our conversion still gets written and reload-checked
            traceback.print_exc()
            checks["save_pretrained_error"] = repr(e)
            shutil.rmtree(tf_dir, ignore_errors=True)
            model.config.save_pretrained(tf_dir)
        tf_files = sorted(f for f in os.listdir(tf_dir) if f.endswith(".safetensors"))
        tf_saved = {}
        for f in tf_files:
            tf_saved.update(load_file(os.path.join(tf_dir, f)))
        checks["transformers_save_pretrained_files"] = tf_files
        checks["weights_ours_vs_save_pretrained"] = compare_dicts(hub, tf_saved)
        print(json.dumps({"family": name, "stage": "save_pretrained wrote",
                          "tensors": {k: list(v.shape) for k, v in tf_saved.items()},
                          "ours_vs_transformers": checks["weights_ours_vs_save_pretrained"]}), flush=True)

        def verify(candidate, label):
            os.makedirs(ours_dir, exist_ok=True)
            shutil.copy(os.path.join(tf_dir, "config.json"), ours_dir)
            for f in os.listdir(ours_dir):
                if f.endswith(".safetensors") or f.endswith(".json") and f != "config.json":
                    os.remove(os.path.join(ours_dir, f))
            save_file({k: v.contiguous() for k, v in candidate.items()}, os.path.join(ours_dir, "model.safetensors"),
                      metadata={"format": "pt"})
            try:
                back, info = load_sparse(ours_dir, torch.float32)
                with torch.no_grad():
                    diff = (back(input_ids=ids, use_cache=False).logits - logits32).abs().max().item()
                res = {"max_abs_logits_diff": diff, "loading_info": info}
            except Exception as e:
                traceback.print_exc()
                res = {"error": repr(e)}
            missing = res.get("loading_info", {}).get("missing_keys", [])
            unexpected = res.get("loading_info", {}).get("unexpected_keys", [])
            mismatched = res.get("loading_info", {}).get("mismatched_keys", [])
            res["ok"] = ("error" not in res and res["max_abs_logits_diff"] <= 1e-6 and not missing and not unexpected
                         and not mismatched)
            print(json.dumps({"family": name, "stage": f"reload check ({label})", **res}), flush=True)
            return res

        checks["reload_ours"] = verify(hub, "ours")
        use_transformers = False
        if not checks["reload_ours"]["ok"]:
            checks["reload_transformers_file"] = verify(tf_saved, "save_pretrained's file")
            use_transformers = checks["reload_transformers_file"]["ok"]
        shutil.copy(os.path.join(tf_dir, "config.json"), folder)
        written = tf_saved if use_transformers else hub
        save_file({k: v.contiguous() for k, v in written.items()}, os.path.join(folder, "model.safetensors"),
                  metadata={"format": "pt"})

        # Sliding window / chunk / temperature / correction bias: each must change the logits, or the trait is untested.
        effects = {}
        try:
            if model_type == "gpt_oss":
                effects["sliding_window_widened_to_64"] = effect_of(model_type, cfg_dict, model, {"sliding_window": MAX_POS}, {}, ids)
                effects["sinks_set_to_-1e4"] = effect_of(
                    model_type, cfg_dict, model, {}, {k: torch.full_like(v, -1e4) for k, v in model.state_dict().items()
                                            if k.endswith(".sinks")}, ids)
            if model_type == "llama4_text":
                effects["attention_chunk_size_widened_to_64"] = effect_of(model_type, cfg_dict, model, {"attention_chunk_size": MAX_POS}, {}, ids)
                effects["attn_temperature_tuning_off"] = effect_of(model_type, cfg_dict, model, {"attn_temperature_tuning": False}, {}, ids)
            if model_type == "glm4_moe":
                full = {"partial_rotary_factor": 1.0,
                        "rope_parameters": dict(cfg_dict["rope_parameters"], partial_rotary_factor=1.0)}
                effects["partial_rotary_factor_1.0"] = effect_of(model_type, cfg_dict, model, full, {}, ids)
            if model_type in ("deepseek_v3", "glm4_moe"):  # the routers with a correction bias
                effects["e_score_correction_bias_zeroed"] = effect_of(
                    model_type, cfg_dict, model, {}, {k: torch.zeros_like(v) for k, v in model.state_dict().items()
                                            if k.endswith("e_score_correction_bias")}, ids)
        except Exception as e:
            traceback.print_exc()
            effects["error"] = repr(e)
        print(json.dumps({"family": name, "stage": "trait effects (max abs logits change)", **effects}), flush=True)

        # The float64 reference: logits, the loss Transformers trains on, and every parameter's gradient.
        ref_dtype, model64, out64, ref_error = None, None, None, None
        for impl in ("eager", "batched_mm"):
            try:
                model64 = copy.deepcopy(model).double().eval()
                if impl != "eager":
                    for m in model64.modules():
                        c = getattr(m, "config", None)
                        if c is not None and hasattr(c, "_experts_implementation"):
                            c._experts_implementation = impl
                out64 = model64(input_ids=ids, labels=ids, use_cache=False)
                ref_dtype = f"float64 (experts {impl})"
                break
            except Exception as e:
                traceback.print_exc()
                ref_error = repr(e)
        if out64 is None:
            model64 = copy.deepcopy(model).float().train(False)
            out64 = model64(input_ids=ids, labels=ids, use_cache=False)
            ref_dtype = f"float32 (float64 failed: {ref_error})"
        logits64 = out64.logits
        ce = F.cross_entropy(logits64.double()[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        aux = getattr(out64, "aux_loss", None)
        coef = float(getattr(cfg, "router_aux_loss_coef", 0.0) or 0.0)
        with_aux = aux is not None and bool(getattr(cfg, "output_router_logits", False))
        total = ce + coef * aux.double() if with_aux else ce
        total.backward()
        grads_mem, missing = {}, []
        for pname, p in model64.named_parameters():
            if p.grad is None:
                missing.append(pname)
                grads_mem[pname] = torch.zeros(p.shape, dtype=torch.float32)
            else:
                grads_mem[pname] = p.grad.detach().float().contiguous()
        grads_hub, _, _ = to_hub(model_type, cfg, grads_mem)

        # The same gradients through Transformers' own save conversion: a copy whose parameters hold them.
        try:
            gm = copy.deepcopy(model)
            with torch.no_grad():
                for pname, p in gm.named_parameters():
                    p.copy_(grads_mem[pname].to(p.dtype))
            gm.save_pretrained(tf_grad_dir)
            tf_grads = {}
            for f in os.listdir(tf_grad_dir):
                if f.endswith(".safetensors"):
                    tf_grads.update(load_file(os.path.join(tf_grad_dir, f)))
            tf_grads = {k: v for k, v in tf_grads.items() if not any(k.endswith(b) for b in buffers_saved)
                        and k not in buffers_saved}
            checks["grads_ours_vs_save_pretrained"] = compare_dicts(grads_hub, tf_grads)
        except Exception as e:
            traceback.print_exc()
            tf_grads = None
            checks["grads_ours_vs_save_pretrained"] = {"error": repr(e)}
        print(json.dumps({"family": name, "stage": "gradients ours vs save_pretrained",
                          **checks["grads_ours_vs_save_pretrained"]}), flush=True)
        if use_transformers and tf_grads is not None:
            grads_hub = tf_grads

    ref = {"input_ids": ids.contiguous(), "labels": ids.clone().contiguous(),
           "logits": logits64.detach().float().contiguous(),
           "loss": total.detach().double().reshape(()).clone(),
           "loss_ce": ce.detach().double().reshape(()).clone(),
           "loss_fp32": probe.loss.detach().float().reshape(()).contiguous()}
    if with_aux:
        ref["aux_loss"] = aux.detach().double().reshape(()).contiguous()
    ref.update({"grad." + k: v.contiguous() for k, v in grads_hub.items()})
    save_file(ref, os.path.join(folder, "reference", "reference.safetensors"))

    active, containers = count_active(model, cfg)
    experts_hit = {k: sorted(set(v.flatten().tolist())) for k, v in routes.items()}
    E = expert_shape(model_type, cfg)[0]
    idle = {k: sorted(set(range(E)) - set(v)) for k, v in experts_hit.items()}
    if with_aux:
        loss_note = (f"loss = mean cross-entropy of logits[:, :-1] against input_ids[:, 1:] in float64 + "
                     f"router_aux_loss_coef ({coef}) x aux_loss. aux_loss is Transformers' own load_balancing_loss_func "
                     f"(models/mixtral/modeling_mixtral.py; {type(model).__name__} inherits it), computed in the float64 "
                     f"model: the router logits of every MoE layer concatenated over tokens (rows = layers x tokens), "
                     f"p = softmax over all E experts, m = one-hot of top-k(p) [rows, k, E]; "
                     f"aux = E * sum_(k,e) mean_rows(m)[k,e] * mean_rows(p)[e]; no attention mask (all tokens count)")
    else:
        loss_note = ("loss = mean cross-entropy of logits[:, :-1] against input_ids[:, 1:] in float64; no "
                     "load-balancing loss: " + (aux_note or f"{type(model).__name__} has no output_router_logits loss"))
    meta = {
        "model_type": model_type, "fixture": name, "class": type(model).__name__,
        "transformers": transformers.__version__, "torch": torch.__version__,
        "total_params": n_params(model),
        "total_params_note": "sum(p.numel() for p in model.parameters()), buffers excluded (Transformers' count)",
        "active_params": active, "experts_containers": containers,
        "active_params_note": "total minus (E - k)/E of every experts container: what one token uses",
        "buffers_in_checkpoint": buffers_saved,
        "saved_tensors": {k: list(v.shape) for k, v in written.items()},
        "saved_dtypes": sorted({str(v.dtype) for v in written.values()}),
        "state_dict_in_memory": {k: list(v.shape) for k, v in state.items()},
        "state_dict_name_map": name_map, "conversion": conv_notes,
        "written_from": "save_pretrained's own file (our conversion failed the reload check)" if use_transformers
                        else "our explicit conversion (to_hub)",
        "names_outside_hub_patterns": stray,
        "checks": checks, "trait_effects_max_abs_logits": effects,
        "fit": tried, "config_used": cfg_dict, "router_and_attention": router_values(cfg),
        "layers": layer_info(model64), "rotary": rotary_info(model64),
        "traits": spec["traits"],
        "batch": BATCH, "seq": SEQ, "token_seed": TOKEN_SEED,
        "init": f"model's own init (torch.manual_seed(0)), initializer_range {INIT_RANGE}; then N(0, {NOISE_STD}) added "
                f"to every norm weight, '.bias', '_bias' and sinks (generator seed 1); see noised_parameters",
        "noised_parameters": noised,
        "loss": total.item(), "loss_includes": loss_note, "loss_ce": ce.item(),
        "aux_loss": aux.item() if with_aux else None, "router_aux_loss_coef": coef if with_aux else 0.0,
        "aux_loss_in_reference": with_aux, "aux_note": aux_note,
        "loss_fp32": probe.loss.item(), "loss_fp32_note": "the float32 model's own loss (Transformers' loss function, "
                                                           "aux included where the class adds it)",
        "loss_hf_float64_model": out64.loss.item(),
        "loss_hf_vs_ours_abs": abs(out64.loss.item() - total.item()),
        "reference_dtype": ref_dtype,
        "max_abs_logits_fp32_vs_fp64": (logits32.double() - logits64.double()).abs().max().item(),
        "logits_absmax": logits64.abs().max().item(),
        "experts_chosen_per_container": experts_hit, "experts_without_tokens": idle,
        "clamp_fraction": clamp,
        "params_without_grad": missing,
        "precision_note": "float64 CPU run; Transformers keeps RMSNorm, rotary tables, the DeepSeek router (float32 "
                          "linear), Llama 4's complex rotary and its L2 q/k norm (x.float()) in float32 inside the "
                          "float64 model, so the reference is float32-accurate there",
        "labels_note": "labels = input_ids; Transformers' shift",
    }
    if model_type == "llama4_text":
        meta["temperature_scales_by_position"] = [1 + cfg.attn_scale * math.log1p(math.floor((p + 1) / cfg.floor_scale))
                                                  for p in range(SEQ)]
    json.dump(meta, open(os.path.join(folder, "meta.json"), "w"), indent=1, default=str)
    ok = checks["reload_ours"]["ok"] or use_transformers
    print(json.dumps({"family": name, "ok": ok, "verified_reload": ok, "params": meta["total_params"],
                      "active": active, "loss": meta["loss"], "loss_ce": meta["loss_ce"], "aux": meta["aux_loss"],
                      "hf64": meta["loss_hf_float64_model"], "reference_dtype": ref_dtype,
                      "weights_match_save_pretrained": checks["weights_ours_vs_save_pretrained"].get("identical"),
                      "grads_match_save_pretrained": checks["grads_ours_vs_save_pretrained"].get("identical"),
                      "kib": round(dir_kib(folder) + dir_kib(os.path.join(folder, "reference")), 1),
                      "effects": effects, "idle_experts": idle, "clamp": clamp, "no_grad": missing}), flush=True)
    if not ok:
        raise RuntimeError(f"{name}: the written weights did not reload to the same logits (see 'reload check' lines)")


# Published configs of the sparse families, committed verbatim under tests/data/hf/<short-name>/config.json.
PUBLISHED_FILES = {
    "olmo-3-7b": ("allenai/Olmo-3-1025-7B",
                  "allenai/Olmo-3-1025-7B config.json as quoted in public test code (the same dims, layer_types, "
                  "window and yarn values in three unrelated repositories); the hub file itself was not read"),
    "gemma-4-e2b": ("google/gemma-4-E2B-it",
                    "text_config written from Transformers' convert_gemma4_weights.py _VARIANTS entry for E2B (hidden "
                    "1536, 35 layers [4 sliding : 1 full] x 7, 8 heads, 1 key/value head, head_dim 256 / global 512, "
                    "intermediate 6144, per-layer input 256, the last 20 layers sharing keys and values with double-wide "
                    "MLPs, window 512, soft-cap 30) and Gemma4TextConfig's defaults; the hub file itself was not read"),
    "gemma-4-e4b": ("google/gemma-4-E4B-it",
                    "text_config written from Transformers' convert_gemma4_weights.py _VARIANTS entry for E4B (hidden "
                    "2560, 42 layers [5 sliding : 1 full] x 7, 8 heads, 2 key/value heads, head_dim 256 / global 512, "
                    "intermediate 10240, per-layer input 256, the last 18 layers sharing keys and values, window 512, "
                    "soft-cap 30) and Gemma4TextConfig's defaults; the hub file itself was not read"),
    "gemma-4-31b": ("google/gemma-4-31B-it",
                    "text_config written from Transformers' convert_gemma4_weights.py _VARIANTS entry for the 31B "
                    "(hidden 5376, 60 layers [5 sliding : 1 full] x 10, 32 heads, 16 key/value heads, 4 global ones with "
                    "attention_k_eq_v, head_dim 256 / global 512, intermediate 21504, window 1024, soft-cap 30, no "
                    "per-layer embeddings, no shared key/value layers) and Gemma4TextConfig's defaults; the hub file "
                    "itself was not read"),
    "gpt-oss-20b": ("openai/gpt-oss-20b",
                    "openai/gpt-oss-20b config.json as vendored in public test code (circuit-tracer's gpt-oss test, "
                    "one key of its own, _name_or_path, dropped); the same keys as gpt-oss-120b's with 24 layers, "
                    "32 experts"),
    "gpt-oss-120b": ("openai/gpt-oss-120b",
                     "openai/gpt-oss-120b config.json as quoted in public test code that cites "
                     "huggingface.co/openai/gpt-oss-120b/raw/main/config.json (read 2026-10-02)"),
    "moonlight-16b-a3b": ("moonshotai/Moonlight-16B-A3B-Instruct",
                          "moonshotai/Moonlight-16B-A3B-Instruct config.json at revision "
                          "4e735b07a89f73647dfab71ab91b840f362ede5b, as quoted (key order and values kept) in public "
                          "test code; DeepSeek-V3 architecture, q_lora_rank null, no rope_scaling"),
    "deepseek-r1": ("deepseek-ai/DeepSeek-R1",
                    "deepseek-ai/DeepSeek-R1 config.json as vendored in public parameter-counting code; the "
                    "DeepSeek-V3 architecture and dimensions (671B + the MTP layer Transformers does not build)"),
    "glm-4.5-air": ("zai-org/GLM-4.5-Air",
                    "zai-org/GLM-4.5-Air config.json (key order as published), from memory of the published file; every "
                    "value agrees with Glm4MoeConfig of GLM-4.5-Air as printed (sorted keys) in a public ms-swift log. "
                    "num_nextn_predict_layers 1: the hub's model.layers.46.* MTP layer; decoder_layers_built says "
                    "whether this Transformers builds it"),
    "qwen3-next-80b-a3b": ("Qwen/Qwen3-Next-80B-A3B-Instruct",
                           "Qwen/Qwen3-Next-80B-A3B-Instruct config.json from memory of the published file (not fetched; "
                           "key order sorted as the hub file has it): 48 layers, full_attention_interval 4, 512 experts "
                           "top 10, linear heads 16/32 of 128; the counts say whether Transformers agrees with ours"),
    "qwen3.5-9b": ("Qwen/Qwen3.5-9B",
                   "text_config of Qwen/Qwen3.5-9B (Qwen3_5ForConditionalGeneration), model-defining keys only, not fetched: "
                   "Qwen3_5TextConfig's defaults (documented as the 9B's), 32 layers of 4096 with full attention every 4th, "
                   "linear heads 16/32 of 128, vocab 248320, untied (8.95B as GGUF metadata of the model gives it), "
                   "262144 positions, rope_theta 1e7 on 0.25 of head_dim 256; the vision_config is left out, not guessed"),
    "llama-4-scout-17b-16e": ("meta-llama/Llama-4-Scout-17B-16E",
                              "text_config of meta-llama/Llama-4-Scout-17B-16E as Transformers 4.51 prints Llama4Config "
                              "(public notes; moe_layers 0..47 written out, no_rope_layers as printed), with "
                              "max_position_embeddings 10485760 and rope_scaling llama3 factor 16 / low 1 / high 1 / "
                              "original 8192 as several public copies of the hub file give them (the print had 262144 "
                              "and factor 8 / high 4); neither changes a parameter count. vision_config as printed"),
}


def published_file(short):
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "data", "hf", short, "config.json")) as f:
        return json.load(f)


def count_one(model_type, d):
    """Transformers' counts of a text model's config dict on the meta device."""
    from transformers import AutoConfig, AutoModelForCausalLM
    d = copy.deepcopy(d)
    dropped = [k for k in ("quantization_config", "auto_map") if d.pop(k, None) is not None]
    d.pop("model_type", None)
    # Llama 4's published config says attn_temperature_tuning: 4 (an int, as Transformers 4.51 typed
    # it); Transformers 5's strict config wants a bool. The count does not depend on it.
    if type(d.get("attn_temperature_tuning")) is int:
        d["attn_temperature_tuning"] = bool(d["attn_temperature_tuning"])
    cfg = AutoConfig.for_model(model_type, **d)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    total = n_params(model)
    # Gemma 4's config holds head_dim per layer (per_layer_config) and refuses a model-wide read of
    # it unless told; count_active reads the config's sizes only to find experts.
    if hasattr(model.config, "allow_global_per_layer_attribute_access"):
        model.config.allow_global_per_layer_attribute_access = True
    active, containers = count_active(model, model.config)
    emb = model.get_input_embeddings().weight.numel()
    tied = model.get_output_embeddings().weight is model.get_input_embeddings().weight
    # Multi-token-prediction layers (num_nextn_predict_layers) are counted only where this Transformers builds
    # them: more decoder layers than num_hidden_layers says so.
    layers = getattr(getattr(model, "model", None), "layers", None)
    return model, {"class": type(model).__name__, "total_params": total, "active_params": active,
                   "num_hidden_layers": getattr(model.config, "num_hidden_layers", None),
                   "decoder_layers_built": len(layers) if layers is not None else None,
                   "experts_containers": len(containers),
                   "expert_params_per_container": sorted({n for _, n in containers}),
                   "embedding_params": emb, "tied": bool(tied), "dropped_for_counting": dropped}


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


def counts(out_root, only=()):
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    result = {}
    for short, (name, model_type, d) in PUBLISHED.items():
        if only and short not in only:
            continue
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
    for short, (name, source) in PUBLISHED_FILES.items():
        if only and short not in only:
            continue
        try:
            published = published_file(short)
            text = published.get("text_config", published)
            model_type = text.get("model_type") or published["model_type"]
            if model_type == "llama4":
                model_type = "llama4_text"
            if model_type not in CONFIG_MAPPING:
                raise ValueError(f"model_type {model_type} not in Transformers {transformers.__version__}")
            model, c = count_one(model_type, text)
            folder = os.path.join(out_root, "configs", short)
            os.makedirs(folder, exist_ok=True)
            model.config.save_pretrained(folder)
            result[name] = {"model_type": model_type, "short_name": short, **c,
                            "text_model_only": "text_config" in published, "source": source,
                            "router": router_values(model.config), "config": published}
            print(json.dumps({"count": short, "total_params": c["total_params"], "active_params": c["active_params"],
                              "class": c["class"], "tied": c["tied"], "experts_containers": c["experts_containers"],
                              "expert_params_per_container": c["expert_params_per_container"],
                              "dropped": c["dropped_for_counting"]}), flush=True)
        except Exception as e:
            traceback.print_exc()
            result[name] = {"model_type": published_file(short).get("model_type") if os.path.exists(
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "hf", short)) else None,
                            "short_name": short, "error": repr(e)}
            print(json.dumps({"count": short, "error": repr(e)}), flush=True)
    result["_meta"] = {"transformers": transformers.__version__, "torch": torch.__version__,
                       "how": "sum(p.numel() for p in model.parameters()) of AutoModelForCausalLM.from_config on the "
                              "meta device (tied weights counted once); active_params (mixtures of experts): total "
                              "minus (E - k)/E of every experts container, E experts of which k are routed per token; "
                              "quantization_config dropped before counting (the bf16 model's parameters)"}
    json.dump(result, open(os.path.join(out_root, "counts.json"), "w"), indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--counts", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated fixture names (model types, or deepseek_v3_no_q_lora); "
                                               "with --counts, short names (gpt-oss-20b, ...)")
    args = ap.parse_args()
    if torch is None:
        raise SystemExit("needs torch, transformers and safetensors")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    only = [s for s in args.only.split(",") if s]
    if args.counts:
        counts(args.out, only)
        return
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    import transformers
    print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__}), flush=True)
    failed = []
    for name, spec in sparse_families().items():
        if only and name not in only:
            continue
        if spec["model_type"] not in CONFIG_MAPPING:
            print(json.dumps({"family": name, "ok": False, "error": "not in this Transformers"}), flush=True)
            failed.append(name)
            continue
        try:
            make_sparse_fixture(name, spec, args.out)
        except Exception as e:
            traceback.print_exc()
            print(json.dumps({"family": name, "ok": False, "error": repr(e)}), flush=True)
            failed.append(name)
    for name, (cfg_dict, traits) in {**families(), **GEMMA4}.items():
        if only and name not in only:
            continue
        model_type = FIXTURE_MODEL_TYPE.get(name, name)
        if model_type not in CONFIG_MAPPING:
            print(json.dumps({"family": name, "ok": False, "error": "not in this Transformers"}), flush=True)
            failed.append(name)
            continue
        try:
            make_fixture(model_type, cfg_dict, traits, args.out, name)
        except Exception as e:
            traceback.print_exc()
            print(json.dumps({"family": name, "ok": False, "error": repr(e)}), flush=True)
            failed.append(name)
    print(json.dumps({"failed": failed}), flush=True)


if __name__ == "__main__":
    main()
