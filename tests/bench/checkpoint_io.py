#!/usr/bin/env python3
"""Disk and peer figures beside a PilotBench checkpoint, measured in the same call (issue 17):

  disk      the disk's own sequential write of --disk-gb, fsync'd (os.write of 64 MiB blocks)
  load      safetensors.torch.load_file of every .safetensors file of the checkpoint to the GPU
  save      torch.save of those same GPU tensors + fsync (PyTorch's own checkpoint path)
  hf        the model file(s) loaded into Transformers' model of the same shape, strict

    python3 tests/bench/checkpoint_io.py --checkpoint /tmp/ckpt/restore-check/step-00000003 --scratch /tmp/io
Prints one JSON line. --drop-caches drops the page cache before the load (root only) so it reads
from the disk; otherwise the files come from memory, as they do for the restore right after a write.
"""
import argparse, glob, json, os, time

import torch
from safetensors.torch import load_file


def gb_per_s(nbytes, seconds):
    return nbytes / seconds / 1e9


def disk_write(path, nbytes):
    block = os.urandom(64 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    written = 0
    while written < nbytes:
        written += os.write(fd, block)
    os.fsync(fd)
    seconds = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return {"bytes": written, "seconds": seconds, "gb_per_s": gb_per_s(written, seconds)}


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def hf_model(run_config):
    m = run_config["model"]
    common = dict(vocab_size=m["vocab_size"], hidden_size=m["hidden_size"], intermediate_size=m["intermediate_size"],
                  num_hidden_layers=m["layers"], num_attention_heads=m["attention_heads"], num_key_value_heads=m["kv_heads"],
                  max_position_embeddings=m["max_positions"], rms_norm_eps=m["norm_eps"], rope_theta=m["rope_theta"],
                  tie_word_embeddings=m["tie_embeddings"])
    if m.get("family") == "qwen2":
        from transformers import Qwen2Config, Qwen2ForCausalLM
        return Qwen2ForCausalLM(Qwen2Config(**common))
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(head_dim=m.get("head_dim") or m["hidden_size"] // m["attention_heads"], attention_bias=m["attention_bias"], **common))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True, help="a PilotBench step folder (format version 2)")
    ap.add_argument("--scratch", required=True, help="a folder on the same disk for the peer writes")
    ap.add_argument("--disk-gb", type=float, default=6.4)
    ap.add_argument("--drop-caches", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.scratch, exist_ok=True)
    out = {"checkpoint": args.checkpoint}
    files = sorted(glob.glob(os.path.join(args.checkpoint, "*.safetensors")))
    nbytes = sum(os.path.getsize(f) for f in files)
    out["tensor_file_bytes"] = nbytes
    out["files"] = len(files)
    out["disk"] = disk_write(os.path.join(args.scratch, "disk.bin"), int(args.disk_gb * 1e9))

    out["load_cold"] = drop_caches() if args.drop_caches else False
    torch.cuda.synchronize()
    start = time.perf_counter()
    tensors = {}
    for f in files:
        for k, v in load_file(f, device="cuda").items():
            tensors[os.path.basename(f) + ":" + k] = v
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    out["load"] = {"seconds": seconds, "gb_per_s": gb_per_s(nbytes, seconds)}

    path = os.path.join(args.scratch, "torch_save.pt")
    start = time.perf_counter()
    torch.save(tensors, path)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    seconds = time.perf_counter() - start
    saved = os.path.getsize(path)
    os.unlink(path)
    out["torch_save"] = {"bytes": saved, "seconds": seconds, "gb_per_s": gb_per_s(saved, seconds)}
    del tensors

    # Any safetensors user: the model's weights straight into Transformers' model, every key matched.
    run_config = json.load(open(os.path.join(args.checkpoint, "config.json")))
    model = hf_model(run_config)
    state = {}
    for f in glob.glob(os.path.join(args.checkpoint, "model*.safetensors")):
        state.update(load_file(f))
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if not (run_config["model"]["tie_embeddings"] and k == "lm_head.weight")]
    out["hf"] = {"class": type(model).__name__, "tensors": len(state), "missing": missing, "unexpected": list(result.unexpected_keys),
                 "loaded": not missing and not result.unexpected_keys}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
