#!/usr/bin/env python3
"""The peer PilotBench is compared with: Hugging Face Transformers + PyTorch, eager, the same
configuration as a PilotBench preset (random weights from the same shape), bf16 autocast, fused
AdamW, gradient clipping at 1.0; PEFT's LoRA where the run's train.mode is lora. Prints one JSON line with ms/step, tokens/s, MFU and peak memory.

LoRA loads the base model as PEFT's LoRA recipes do and as PilotBench stores frozen weights: in
bf16 under bf16-mixed (PEFT then keeps its adapters in fp32, autocast_adapter_dtype); with
--lora-base fp32 the base stays fp32, so every frozen weight is cast anew each step. PEFT casts
each adapter's input to the adapter's dtype (fp32) before lora_A, which autocast casts back to bf16;
--peft-no-input-cast turns that off (cast_input_dtype_enabled, as peft.helpers.disable_input_dtype_casting).

    python3 tests/bench/hf_reference.py --config build/llama-3.2-1b.json --steps 10 --warmup 3
"""
import argparse, json, statistics, time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def llama_config(m):
    """The Transformers config of a PilotBench run config's "model" block (random weights)."""
    return LlamaConfig(vocab_size=m["vocab_size"], hidden_size=m["hidden_size"], intermediate_size=m["intermediate_size"],
                       num_hidden_layers=m["layers"], num_attention_heads=m["attention_heads"],
                       num_key_value_heads=m["kv_heads"], head_dim=m.get("head_dim") or m["hidden_size"] // m["attention_heads"],
                       max_position_embeddings=m["max_positions"], rms_norm_eps=m["norm_eps"], rope_theta=m["rope_theta"],
                       tie_word_embeddings=m["tie_embeddings"], attention_bias=m["attention_bias"])


def timed_steps(model, opt, loss_of_step, grad_clip, steps, warmup, clip_only_above=False):
    """Warm-up then measured optimizer steps (backward, clipping, step), each synchronised; the
    peak-memory counter starts with the first. Returns the measured steps' ms and the last loss.
    clip_only_above: the gradients rescaled only where their norm exceeds the bound."""
    times = []
    torch.cuda.reset_peak_memory_stats()
    for i in range(warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = loss_of_step()
        loss.backward()
        if clip_only_above:
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            norm = torch.nn.utils.get_total_norm(grads).item()
            if norm > grad_clip:
                torch._foreach_mul_(grads, grad_clip / (norm + 1e-6))
            del grads  # else zero_grad's freed gradients stay alive through the next backward (out of memory on an H100, stop 69)
        else:
            torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000)
    return times, loss


def selected_layer_types(selection, layers, other, last=False):
    """layer_types at `layers` from one of our layer selections ({"every": N, "layers": [...]}, as
    LayerSelection::contains reads it): full_attention where selected (and on the last layer where
    `last`), `other` elsewhere."""
    every, listed = int((selection or {}).get("every") or 0), set((selection or {}).get("layers") or [])
    return ["full_attention" if (every > 0 and (i + 1) % every == 0) or i in listed or (last and i == layers - 1) else other
            for i in range(layers)]


def gemma4_layer_types(model, layers):
    """Gemma 4's layer_types from our run config's model block at `layers`: the global layers
    (E2B's 4 : 1 is not Gemma4TextConfig's default 5 : 1) and the last layer where
    model.last_layer_global says so (Gemma4TextConfig forces it full; so do we)."""
    return selected_layer_types(model.get("global_layers"), layers, "sliding_attention", bool(model.get("last_layer_global")))


def check_layer_types(hf, raw):
    """Refuses a reference whose config class changed the layer kinds we asked for (Gemma4TextConfig
    forces the last layer full with only a warning): the two models would not be the same."""
    asked = raw.get("layer_types")
    if asked is not None and list(getattr(hf, "layer_types", asked)) != list(asked):
        raise SystemExit("the reference's layer_types %s differ from ours %s" % (list(hf.layer_types), asked))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True, help="a PilotBench run config (JSON)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--lora-base", choices=["auto", "fp32"], default="auto")
    ap.add_argument("--peft-no-input-cast", action="store_true")
    ap.add_argument("--trace", help="after the timed steps, a torch.profiler Chrome trace of two more steps to this file")
    # Where Transformers' eager step does work ours does not (read from its code in stop 68; each
    # flag takes one away, to time what it costs): the KV cache it builds in training (use_cache
    # defaults to true), its rotary in fp32 (the tables take the fp32 embedding output's dtype, so
    # q * cos promotes under autocast), clip_grad_norm_'s rescale of every gradient even when the
    # norm is under the bound.
    ap.add_argument("--no-cache", action="store_true", help="config.use_cache = False")
    ap.add_argument("--rotary-in-compute-dtype", action="store_true", help="the rotary tables cast to bf16, as our eager path cast them until stop 69 (the fused path still does where its kernel cannot take a layer)")
    ap.add_argument("--clip-only-above", action="store_true", help="rescale the gradients only where their norm exceeds the bound (a host read), as our eager path did until stop 69")
    ap.add_argument("--hf-config", help="build the family's own model from this Hugging Face config.json (any model_type) "
                                        "with the run config's layer count, instead of a Llama of the run's shape")
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    m, t = cfg["model"], cfg["train"]
    torch.manual_seed(cfg.get("seed", 0))
    if args.hf_config:
        from transformers import AutoConfig, AutoModelForCausalLM
        raw = json.load(open(args.hf_config))
        raw = raw.get("text_config", raw) if raw.get("model_type") in ("gemma3", "mistral3", "gemma4") else raw
        raw["num_hidden_layers"] = m["layers"]
        raw.pop("layer_types", None)  # rebuilt by the config class for the reduced depth
        raw.pop("no_rope_layers", None)
        if raw.get("model_type") == "gemma4_text":
            # Our global layers (E2B's 4 : 1 is not the class default 5 : 1) and shared key/value
            # layers at the reduced depth.
            raw["layer_types"] = gemma4_layer_types(m, m["layers"])
            raw["num_kv_shared_layers"] = int(m.get("kv_shared_layers") or 0)
        hf = AutoConfig.for_model(**raw)
        check_layer_types(hf, raw)
        # fp32 master weights as ours (the config's torch_dtype would build bf16); Gemma 2's soft-capped
        # attention only exists in the eager form (SDPA drops the cap).
        hf._attn_implementation = "eager" if raw["model_type"] == "gemma2" else "sdpa"
        model = AutoModelForCausalLM.from_config(hf, dtype=torch.float32).cuda().train()
        try:
            hf.head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
        except Exception:  # Gemma 4: a per-layer attribute (global layers differ), not read here
            pass
    else:
        hf = llama_config(m)
        hf._attn_implementation = "sdpa"
        model = LlamaForCausalLM(hf).cuda().train()
    if args.no_cache:
        model.config.use_cache = False
    if args.rotary_in_compute_dtype:  # every rotary module of the family (Gemma 3 has a local one too)
        for rotary in [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]:
            rotary.forward = (lambda tables: lambda *a, **k: tuple(t.to(torch.bfloat16) for t in tables(*a, **k)))(rotary.forward)
    n_params = sum(p.numel() for p in model.parameters())
    if t["mode"] == "lora":  # the peer of train.mode lora: PEFT's adapters on the run's targets
        from peft import LoraConfig, get_peft_model
        lora = t["lora"]
        if args.lora_base == "auto" and t["precision"] == "bf16-mixed":
            model = model.to(torch.bfloat16)
        model = get_peft_model(model, LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                                                 target_modules=lora["targets"]))
        if args.peft_no_input_cast:
            for module in model.modules():
                if hasattr(module, "cast_input_dtype_enabled"):
                    module.cast_input_dtype_enabled = False
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                            weight_decay=t["weight_decay"], fused=True)
    fwd = torch.compile(model) if args.compile else model
    b, s = t["micro_batch"], t["seq_len"]
    ids = torch.randint(0, m["vocab_size"], (b, s), device="cuda")
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return fwd(input_ids=ids, labels=ids).loss
    times, loss = timed_steps(model, opt, step, t["grad_clip"], args.steps, args.warmup, args.clip_only_above)
    if args.trace:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]) as prof:
            timed_steps(model, opt, step, t["grad_clip"], 2, 0, args.clip_only_above)
        prof.export_chrome_trace(args.trace)
    mean = statistics.mean(times)
    tokens = b * s
    hd = m.get("head_dim") or m["hidden_size"] // m["attention_heads"]  # the run's (Gemma 4's global layers are wider: not counted)
    flops = (6 * n_params + 12 * m["layers"] * m["attention_heads"] * hd * s) * tokens
    free, total = torch.cuda.mem_get_info()
    dtypes = lambda trains: sorted({str(p.dtype).replace("torch.", "") for p in model.parameters() if p.requires_grad == trains})
    print(json.dumps({"impl": ("transformers " + hf.model_type if args.hf_config else "transformers+pytorch") + (" peft" if t["mode"] == "lora" else "") + (" compile" if args.compile else " eager")
                      + (" fp32-base" if t["mode"] == "lora" and args.lora_base == "fp32" else "")
                      + (" no-input-cast" if args.peft_no_input_cast else "") + (" no-cache" if args.no_cache else "")
                      + (" bf16-rotary" if args.rotary_in_compute_dtype else "") + (" clip-only-above" if args.clip_only_above else ""),
                      "trainable_dtypes": dtypes(True), "frozen_dtypes": dtypes(False),
                      "torch": torch.__version__, "params": n_params, "step_ms": mean,
                      "p50_ms": statistics.median(times), "tokens_per_s": tokens / (mean / 1000),
                      "mfu": flops / (mean / 1000) / (args.peak_tflops * 1e12),
                      "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                      "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
                      "device_used_bytes": total - free, "loss": loss.item()}))


if __name__ == "__main__":
    main()
