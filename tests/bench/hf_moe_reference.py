#!/usr/bin/env python3
"""The Transformers peer of a PilotBench mixture-of-experts run (issue 19): the same config (random
weights, or a PilotBench checkpoint's), bf16 autocast, fused AdamW, clipping at 1.0, the
load-balancing loss added (output_router_logits) with the run's aux_loss_weight. Prints one JSON
line: ms/step, tokens/s, peak allocated, and with --weights/--tokens the loss of those weights on
those tokens (the batch a PilotBench run with the same token file trains on at that step).

    python3 tests/bench/hf_moe_reference.py --config run.json [--weights STEP_FOLDER --tokens same.bin]
"""
import argparse, glob, json, statistics, time

import numpy as np
import torch

from hf_reference import timed_steps


def hf_model(m):
    common = dict(vocab_size=m["vocab_size"], hidden_size=m["hidden_size"], num_hidden_layers=m["layers"],
                  num_attention_heads=m["attention_heads"], num_key_value_heads=m["kv_heads"],
                  max_position_embeddings=m["max_positions"], rms_norm_eps=m["norm_eps"], rope_theta=m["rope_theta"],
                  tie_word_embeddings=m["tie_embeddings"], output_router_logits=True)
    e = m["moe"]
    fam = m["family"]
    if fam == "mixtral":
        from transformers import MixtralConfig as C, MixtralForCausalLM as M
        cfg = C(intermediate_size=e["expert_intermediate_size"], num_local_experts=e["experts"], num_experts_per_tok=e["experts_per_token"],
                router_aux_loss_coef=e["aux_loss_weight"], router_jitter_noise=float(e["router_jitter"]), head_dim=m["head_dim"] or None, **common)
    elif fam == "olmoe":
        from transformers import OlmoeConfig as C, OlmoeForCausalLM as M
        cfg = C(intermediate_size=e["expert_intermediate_size"], num_experts=e["experts"], num_experts_per_tok=e["experts_per_token"],
                norm_topk_prob=e["normalize_top_k"], router_aux_loss_coef=e["aux_loss_weight"], **common)
    elif fam == "qwen3_moe":
        from transformers import Qwen3MoeConfig as C, Qwen3MoeForCausalLM as M
        cfg = C(intermediate_size=m["intermediate_size"], moe_intermediate_size=e["expert_intermediate_size"], num_experts=e["experts"],
                num_experts_per_tok=e["experts_per_token"], norm_topk_prob=e["normalize_top_k"], decoder_sparse_step=e["sparse_step"],
                mlp_only_layers=e["dense_layers"], router_aux_loss_coef=e["aux_loss_weight"], head_dim=m["head_dim"], **common)
    elif fam == "qwen2_moe":
        from transformers import Qwen2MoeConfig as C, Qwen2MoeForCausalLM as M
        cfg = C(intermediate_size=m["intermediate_size"], moe_intermediate_size=e["expert_intermediate_size"], num_experts=e["experts"],
                num_experts_per_tok=e["experts_per_token"], norm_topk_prob=e["normalize_top_k"], decoder_sparse_step=e["sparse_step"],
                mlp_only_layers=e["dense_layers"], shared_expert_intermediate_size=e["shared_expert_intermediate_size"],
                router_aux_loss_coef=e["aux_loss_weight"], **common)
    else:
        raise SystemExit(f"family {fam} is not a mixture of experts")
    cfg._attn_implementation = "sdpa"
    return M(cfg)


def load_weights(model, folder):
    """Our checkpoint's model files: per-expert tensors as the Hub names them; where this
    Transformers keeps experts fused (one 3-D tensor per projection), they are stacked to fit."""
    from safetensors.torch import load_file
    state = {}
    for f in sorted(glob.glob(folder + "/model*.safetensors")):
        state.update(load_file(f))
    target = model.state_dict()
    out, used = {}, set()
    for name, t in target.items():
        if name in state:
            out[name] = state[name]
            used.add(name)
            continue
        # fused experts: <prefix>.experts.gate_up_proj / .down_proj (shape [E, ...])
        prefix, _, proj = name.rpartition(".experts.")
        if not proj:
            continue
        def per_expert(n):
            keys = sorted((k for k in state if k.startswith(prefix + ".experts.") and k.endswith("." + n + ".weight")),
                          key=lambda k: int(k[len(prefix) + 9:].split(".")[0]))
            used.update(keys)
            return [state[k] for k in keys]
        if proj.startswith("gate_up_proj"):
            w = torch.stack([torch.cat([g, u], 0) for g, u in zip(per_expert("gate_proj") or per_expert("w1"), per_expert("up_proj") or per_expert("w3"))])
        elif proj.startswith("down_proj"):
            w = torch.stack(per_expert("down_proj") or per_expert("w2"))
        else:
            continue
        if w.shape != t.shape:
            w = w.transpose(1, 2)
        out[name] = w
    missing = [k for k in target if k not in out]
    unused = [k for k in state if k not in used]
    model.load_state_dict(out, strict=False)
    return missing, unused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--weights", help="a PilotBench step folder whose model files to load")
    ap.add_argument("--tokens", help="uint16 token stream; its first seq_len+1 tokens are the batch (every row alike)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    cfg = json.load(open(args.config))
    m, t = cfg["model"], cfg["train"]
    torch.manual_seed(cfg.get("seed", 0))
    model = hf_model(m)
    for n, p in model.named_parameters():  # as PilotBench initialises: N(0, 0.02), norms 1
        with torch.no_grad():
            p.fill_(1.0) if p.dim() == 1 else p.normal_(0.0, 0.02)
    out = {"impl": "transformers eager", "class": type(model).__name__}
    if args.weights:
        missing, unused = load_weights(model, args.weights)
        out["weights"] = {"missing": missing, "unused": unused[:5], "unused_count": len(unused)}
    model = model.cuda().train()
    b, s = t["micro_batch"], t["seq_len"]
    if args.tokens:
        seq = np.fromfile(args.tokens, dtype=np.uint16)[: s + 1].astype(np.int64)
        seq = torch.from_numpy(seq).cuda()
        ids, labels = seq[:-1].expand(b, s).contiguous(), seq[1:].expand(b, s).contiguous()
    else:
        ids = torch.randint(0, m["vocab_size"], (b, s + 1), device="cuda")
        ids, labels = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    if args.weights:
        # Our loss: fp32 cross-entropy of every position against the next token, plus the weighted aux loss.
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            o = model(input_ids=ids, output_router_logits=True)
            ce = torch.nn.functional.cross_entropy(o.logits.float().reshape(-1, o.logits.size(-1)), labels.reshape(-1))
            aux = o.aux_loss if o.aux_loss is not None else torch.zeros(())
        out["loss_at_weights"] = (ce + m["moe"]["aux_loss_weight"] * aux.to(ce.device)).item()
        out["ce_at_weights"] = ce.item()
        out["aux_at_weights"] = aux.item()
    n_params = sum(p.numel() for p in model.parameters())
    if args.steps == 0:
        print(json.dumps(out))
        return
    opt = torch.optim.AdamW(model.parameters(), lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"], weight_decay=t["weight_decay"], fused=True)
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            o = model(input_ids=ids, output_router_logits=True)
            loss = torch.nn.functional.cross_entropy(o.logits.float().reshape(-1, o.logits.size(-1)), labels.reshape(-1))
            return loss + m["moe"]["aux_loss_weight"] * o.aux_loss if o.aux_loss is not None else loss
    times, loss = timed_steps(model, opt, step, t["grad_clip"], args.steps, args.warmup)
    mean = statistics.mean(times)
    out.update({"torch": torch.__version__, "params": n_params, "step_ms": mean, "p50_ms": statistics.median(times),
                "tokens_per_s": b * s / (mean / 1000), "peak_allocated_bytes": torch.cuda.max_memory_allocated(), "loss": loss.item()})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
