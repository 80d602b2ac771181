#!/usr/bin/env python3
# Writes the one-defect variants of each surface's base file (config/base.json, hf-import/base.json,
# catalog/base.json, history/export-base.json) and the few byte-level files. Run it after a schema
# change has made a base file invalid: fix the base, then `python3 make_corpus.py`. A case written by
# hand needs nothing here, only its file and its line in the surface's manifest.
import copy, json, os

OUT = os.path.dirname(os.path.abspath(__file__))


def load(surface, name):
    with open(os.path.join(OUT, surface, name)) as f:
        return json.load(f)


def dump(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def setp(obj, path, value):
    parts = path.split(".")
    for p in parts[:-1]:
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    last = parts[-1]
    if isinstance(obj, list):
        obj[int(last)] = value
    elif value is DELETE:
        del obj[last]
    else:
        obj[last] = value


DELETE = object()


def write(surface, name, content):
    d = os.path.join(OUT, surface)
    os.makedirs(d, exist_ok=True)
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(os.path.join(d, name), mode) as f:
        f.write(content)


def variants(surface, base, cases):
    for name, path, value in cases:
        o = copy.deepcopy(base)
        setp(o, path, value)
        write(surface, name, dump(o))


# ---------------------------------------------------------------- config
cfg = load("config", "base.json")
base_text = dump(cfg)
write("config", "base.json", base_text)
variants("config", cfg, [
    # wrong types, one field each
    ("hidden-size-string.json", "model.hidden_size", "64"),
    ("layers-fraction.json", "model.layers", 2.5),
    ("attention-heads-bool.json", "model.attention_heads", True),
    ("family-number.json", "model.family", 7),
    ("tie-embeddings-string.json", "model.tie_embeddings", "yes"),
    ("rope-theta-string.json", "model.rope_theta", "big"),
    ("micro-batch-array.json", "train.micro_batch", [4]),
    ("lr-object.json", "train.lr", {}),
    ("mode-number.json", "train.mode", 1),
    ("precision-unknown.json", "train.precision", "fp7"),
    ("optimizer-unknown.json", "train.optimizer", "sgdx"),
    ("lora-targets-string.json", "train.lora.targets", "q_proj"),
    ("lora-targets-numbers.json", "train.lora.targets", [1, 2]),
    ("recompute-string.json", "train.recompute", "maybe"),
    ("schedule-kind-unknown.json", "train.schedule.kind", "zigzag"),
    ("data-kind-unknown.json", "data.kind", "files"),
    ("job-amount-string.json", "job.amount", "lots"),
    ("job-unit-unknown.json", "job.unit", "parsecs"),
    ("deadline-string.json", "job.deadline_hours", "tomorrow"),
    ("seed-string.json", "seed", "x"),
    ("deterministic-string.json", "deterministic", "no"),
    ("schema-version-string.json", "schema_version", "1"),
    ("name-number.json", "name", 5),
    ("model-array.json", "model", []),
    ("train-null.json", "train", None),
    # negative, zero, huge numbers
    ("hidden-size-zero.json", "model.hidden_size", 0),
    ("layers-negative.json", "model.layers", -2),
    ("vocab-size-zero.json", "model.vocab_size", 0),
    ("seq-len-negative.json", "train.seq_len", -1),
    ("micro-batch-zero.json", "train.micro_batch", 0),
    ("grad-accum-zero.json", "train.grad_accum", 0),
    ("lr-negative.json", "train.lr", -0.1),
    ("lr-zero.json", "train.lr", 0),
    ("norm-eps-negative.json", "model.norm_eps", -1),
    ("grad-clip-negative.json", "train.grad_clip", -1),
    ("layers-huge.json", "model.layers", 1000000000),
    ("hidden-size-beyond-exact.json", "model.hidden_size", 9007199254740993),
    ("micro-batch-1e308.json", "train.micro_batch", 1e308),
    ("max-positions-2-pow-31.json", "model.max_positions", 2147483648),
    ("job-amount-zero.json", "job.amount", 0),
    ("synthetic-samples-negative.json", "data.synthetic_samples", -1),
    ("validation-per-mille-5000.json", "data.validation_per_mille", 5000),
    ("checkpoint-every-negative.json", "checkpoint.every_steps", -1),
    ("seed-negative.json", "seed", -1),
    ("schema-version-zero.json", "schema_version", 0),
    ("schema-version-99.json", "schema_version", 99),
    # NaN / Infinity as strings
    ("lr-nan-string.json", "train.lr", "NaN"),
    ("lr-infinity-string.json", "train.lr", "Infinity"),
    ("rope-theta-minus-infinity-string.json", "model.rope_theta", "-Infinity"),
    # unknown keys
    ("unknown-top-level-key.json", "extra", 1),
    ("unknown-nested-key.json", "train.lora.rnak", 8),
    # rules between fields
    ("heads-not-dividing-hidden.json", "model.attention_heads", 5),
    ("kv-heads-not-dividing-heads.json", "model.kv_heads", 3),
    ("seq-len-beyond-max-positions.json", "train.seq_len", 4096),
])
# Text-level defects of the same base.
write("config", "malformed.json", base_text.replace('"seed": 1234,', '"seed": 1234,,'))
write("config", "truncated.json", base_text[: len(base_text) // 2])
write("config", "empty.json", "")
write("config", "whitespace-only.json", " \n\t\n  \n")
write("config", "top-level-array.json", "[" + base_text.rstrip() + "]\n")
write("config", "top-level-string.json", '"preset:tiny"\n')
write("config", "top-level-null.json", "null\n")
write("config", "nan-literal.json", base_text.replace('"lr": 0.003', '"lr": NaN'))
write("config", "infinity-literal.json", base_text.replace('"lr": 0.003', '"lr": Infinity'))
write("config", "number-1e999.json", base_text.replace('"lr": 0.003', '"lr": 1e999'))
write("config", "leading-zero-number.json", base_text.replace('"seed": 1234', '"seed": 01234'))
write("config", "duplicate-key.json", base_text.replace('"seed": 1234,', '"seed": 1234,\n  "seed": 99,'))
write("config", "duplicate-key-nested.json", base_text.replace('"layers": 2,', '"layers": 2,\n    "layers": 3,'))
write("config", "trailing-garbage.json", base_text + "xyz\n")
write("config", "two-objects.json", base_text + base_text)
write("config", "comment.json", "// a run config\n" + base_text)
write("config", "invalid-utf8.json", base_text.encode().replace(b'"name": "tiny"', b'"name": "ti\xff\xfeny"'))
write("config", "nul-byte.json", base_text.encode().replace(b'"name": "tiny"', b'"name": "ti\x00ny"'))
write("config", "utf16.json", base_text.encode("utf-16"))
write("config", "binary-garbage.bin", bytes((i * 7919 + 13) % 256 for i in range(4096)))
deep = copy.deepcopy(cfg)
deep["name"] = "NESTED"
deep_text = dump(deep).replace('"NESTED"', "[" * 20000 + "]" * 20000)
write("config", "deeply-nested-arrays.json", deep_text)
mid = dump(deep).replace('"NESTED"', "[" * 500 + "]" * 500)
write("config", "nested-arrays-500.json", mid)

# ---------------------------------------------------------------- hf-import
hf = load("hf-import", "base.json")
hf_text = dump(hf)
write("hf-import", "base.json", hf_text)
variants("hf-import", hf, [
    ("model-type-missing.json", "model_type", DELETE),
    ("model-type-gpt2.json", "model_type", "gpt2"),
    ("model-type-number.json", "model_type", 3),
    ("hidden-size-missing.json", "hidden_size", DELETE),
    ("layers-missing.json", "num_hidden_layers", DELETE),
    ("heads-missing.json", "num_attention_heads", DELETE),
    ("intermediate-size-missing.json", "intermediate_size", DELETE),
    ("vocab-size-missing.json", "vocab_size", DELETE),
    ("max-positions-missing.json", "max_position_embeddings", DELETE),
    ("rope-scaling-string.json", "rope_scaling", "linear"),
    ("rope-scaling-array.json", "rope_scaling", ["linear", 2.0]),
    ("rope-scaling-number.json", "rope_scaling", 2.0),
    ("rope-scaling-bool.json", "rope_scaling", True),
    ("hidden-size-negative.json", "hidden_size", -64),
    ("layers-zero.json", "num_hidden_layers", 0),
    ("vocab-size-negative.json", "vocab_size", -256),
    ("intermediate-size-negative.json", "intermediate_size", -1),
    ("max-positions-zero.json", "max_position_embeddings", 0),
    ("heads-fraction.json", "num_attention_heads", 4.5),
    ("hidden-size-string.json", "hidden_size", "64"),
    ("hidden-size-1e300.json", "hidden_size", 1e300),
    ("layers-huge.json", "num_hidden_layers", 1000000000000),
    ("vocab-size-2-pow-40.json", "vocab_size", 1099511627776),
    ("heads-not-dividing-hidden.json", "num_attention_heads", 5),
    ("kv-heads-not-dividing-heads.json", "num_key_value_heads", 3),
    ("kv-heads-above-heads.json", "num_key_value_heads", 8),
    ("head-dim-negative.json", "head_dim", -16),
    ("rope-theta-string.json", "rope_theta", "10000"),
    ("rope-theta-negative.json", "rope_theta", -10000.0),
    ("rope-theta-nan-string.json", "rope_theta", "NaN"),
    ("rms-norm-eps-zero.json", "rms_norm_eps", 0),
    ("rms-norm-eps-negative.json", "rms_norm_eps", -1e-5),
    ("hidden-act-relu.json", "hidden_act", "relu"),
    ("hidden-act-number.json", "hidden_act", 1),
    ("tie-embeddings-string.json", "tie_word_embeddings", "yes"),
    ("attention-bias-string.json", "attention_bias", "yes"),
    ("mlp-bias-number.json", "mlp_bias", 1),
])
write("hf-import", "malformed.json", hf_text.replace('"hidden_size": 64,', '"hidden_size": 64'))
write("hf-import", "truncated.json", hf_text[: len(hf_text) // 2])
write("hf-import", "empty.json", "")
write("hf-import", "top-level-array.json", "[" + hf_text.rstrip() + "]\n")
write("hf-import", "invalid-utf8.json", hf_text.encode().replace(b'"llama"', b'"lla\xc3\x28ma"'))
write("hf-import", "duplicate-key.json", hf_text.replace('"hidden_size": 64,', '"hidden_size": 64,\n  "hidden_size": 4096,'))
write("hf-import", "nan-literal.json", hf_text.replace('"rope_theta": 10000.0', '"rope_theta": NaN'))
os.makedirs(os.path.join(OUT, "hf-import", "folder-without-config"), exist_ok=True)
write("hf-import", "folder-without-config/README.md", "A model folder with no config.json: import-hf must say so.\n")

# ---------------------------------------------------------------- catalog
cat = load("catalog", "base.json")
cat_text = dump(cat)
write("catalog", "base.json", cat_text)
variants("catalog", cat, [
    ("price-negative.json", "cards.0.prices.on_demand.gpus_1", -2.95),
    ("price-zero.json", "cards.0.prices.on_demand.gpus_8", 0),
    ("price-string.json", "cards.0.prices.on_demand.gpus_1", "2.95"),
    ("price-nan-string.json", "cards.0.prices.on_demand.gpus_1", "NaN"),
    ("price-infinity-string.json", "cards.1.prices.on_demand.gpus_1", "Infinity"),
    ("price-missing-count.json", "cards.0.prices.on_demand.gpus_8", DELETE),
    ("price-unknown-count.json", "cards.0.prices.on_demand.gpus_3", 2.9),
    ("term-price-missing.json", "cards.1.prices.terms.1w", DELETE),
    ("term-price-negative.json", "cards.0.prices.terms.1w.gpus_1", -1),
    ("prices-array.json", "cards.0.prices", []),
    ("memory-gb-negative.json", "cards.0.memory_gb", -80),
    ("memory-bytes-in-bits.json", "cards.0.memory_bytes", 684166479872),
    ("bandwidth-string.json", "cards.0.memory_bandwidth_tbps", "3.35"),
    ("bf16-tflops-zero.json", "cards.0.bf16_dense_tflops", 0),
    ("fp8-tflops-string.json", "cards.0.fp8_dense_tflops", "none"),
    ("power-negative.json", "cards.1.power_w", -750),
    ("interconnect-gbps-negative.json", "cards.0.interconnect_gbytes_per_s", -900),
    ("card-id-spaces.json", "cards.0.id", "H100 SXM"),
    ("card-id-duplicate.json", "cards.1.id", "h100-sxm-80gb"),
    ("card-name-empty.json", "cards.0.name", ""),
    ("card-unknown-field.json", "cards.0.colour", "green"),
    ("card-not-object.json", "cards.1", "mi300x"),
    ("cards-not-array.json", "cards", {}),
    ("cards-empty.json", "cards", []),
    ("stack-unknown.json", "cards.0.software.stack", "metal"),
    ("compute-capability-word.json", "cards.0.software.compute_capability", "nine"),
    ("min-driver-word.json", "cards.0.software.min_driver", "latest"),
    ("name-pattern-invalid-regex.json", "cards.0.match.name_patterns", ["(H100"]),
    ("catalog-version-99.json", "catalog_version", 99),
    ("catalog-version-missing.json", "catalog_version", DELETE),
    ("modelled-on-not-a-date.json", "modelled_on", "last tuesday"),
    ("currency-lower-case.json", "currency", "usd"),
    ("gpu-counts-unordered.json", "gpu_counts", [8, 1]),
    ("gpu-counts-zero.json", "gpu_counts", [0, 8]),
    ("gpu-counts-5000.json", "gpu_counts", [1, 5000]),
    ("term-hours-negative.json", "terms.0.hours", -168),
    ("term-id-on-demand.json", "terms.0.id", "on_demand"),
    ("hours-per-month-zero.json", "options.hours_per_month", 0),
    ("egress-negative.json", "options.egress_per_tb", -60),
    ("unknown-top-level-key.json", "discount", 0.5),
])
write("catalog", "malformed.json", cat_text.replace('"currency": "USD",', '"currency": "USD"'))
write("catalog", "truncated.json", cat_text[: len(cat_text) // 2])
write("catalog", "empty.json", "")
write("catalog", "top-level-array.json", "[" + cat_text.rstrip() + "]\n")
write("catalog", "invalid-utf8.json", cat_text.encode().replace(b'"NVIDIA H100 SXM 80GB"', b'"NVIDIA H100 \xed\xa0\x80 80GB"'))
write("catalog", "duplicate-key.json", cat_text.replace('"gpus_1": 2.95,', '"gpus_1": 2.95,\n          "gpus_1": 3.1,', 1))
write("catalog", "price-nan-literal.json", cat_text.replace('"gpus_1": 2.95', '"gpus_1": NaN', 1))

# ---------------------------------------------------------------- history (import)
exp = load("history", "export-base.json")
run = exp["runs"][0]
hist_text = dump(exp)
write("history", "export-base.json", hist_text)
two = copy.deepcopy(exp)
second = copy.deepcopy(run)
second["uuid"] = "6b3a1f0e-0000-4000-8000-00000000b0b1"
second["id"] = 8
second["kind"] = "bogus"
two["runs"].append(second)
write("history", "second-run-broken.json", dump(two))
variants("history", exp, [
    ("format-wrong.json", "format", "pilotbench-csv"),
    ("format-missing.json", "format", DELETE),
    ("format-version-99.json", "format_version", 99),
    ("format-version-string.json", "format_version", "1"),
    ("runs-not-array.json", "runs", {"0": {}}),
    ("run-not-object.json", "runs.0", 1),
    ("uuid-missing.json", "runs.0.uuid", DELETE),
    ("uuid-number.json", "runs.0.uuid", 42),
    ("kind-unknown.json", "runs.0.kind", "bogus"),
    ("status-unknown.json", "runs.0.status", "exploded"),
    ("started-at-not-a-date.json", "runs.0.started_at", "yesterday"),
    ("id-missing.json", "runs.0.id", DELETE),
    ("config-seq-len-negative.json", "runs.0.config.train.seq_len", -5),
    ("config-unknown-key.json", "runs.0.config.model.hiden_size", 64),
    ("config-heads-not-dividing-hidden.json", "runs.0.config.model.attention_heads", 5),
    ("config-string.json", "runs.0.config", "preset:tiny"),
    ("samples-lengths-differ.json", "runs.0.samples.loss", [5.5]),
    ("samples-loss-string.json", "runs.0.samples.loss", ["NaN", 5.5]),
    ("samples-step-negative.json", "runs.0.samples.step", [-1, 2]),
    ("samples-not-object.json", "runs.0.samples", [1, 2]),
    ("phase-unknown.json", "runs.0.phases.0.phase", "dance"),
    ("checkpoint-bytes-negative.json", "runs.0.checkpoints.0.bytes", -1),
    ("tag-number.json", "runs.0.tags", [1]),
    ("parent-run-id-string.json", "runs.0.parent_run_id", "x"),
    ("summary-number.json", "runs.0.summary", 5),
    ("environment-array.json", "runs.0.environment", []),
])
write("history", "malformed.json", hist_text.replace('"host": "corpus-host",', '"host": "corpus-host"'))
write("history", "truncated.json", hist_text[: len(hist_text) // 2])
write("history", "empty.json", "")
write("history", "top-level-array.json", "[" + hist_text.rstrip() + "]\n")
write("history", "invalid-utf8.json", hist_text.encode().replace(b'"corpus-host"', b'"corpus\xc0\xafhost"'))
write("history", "duplicate-key.json", hist_text.replace('"host": "corpus-host",', '"host": "corpus-host",\n  "host": "other-host",'))
write("history", "not-an-export.csv", "run_id,step,phase\n1,1,train\n")
# An HF config.json for the output-path cases of `config import-hf`.
write("history", "hf-config.json", hf_text)

# ---------------------------------------------------------------- checkpoint (replacement files)
write("checkpoint", "garbage.bin", bytes((i * 104729 + 7) % 256 for i in range(2048)))
write("checkpoint", "state-array.json", '[{"step": 2}]\n')
write("checkpoint", "state-not-json.txt", "step=2\nconfig_hash=unknown\n")
# ---------------------------------------------------------------- cli-args
write("cli-args", "regular-file.txt", "A regular file where a folder is expected.\n")
# A catalog for the output-path cases of `report --catalog`.
write("history", "catalog.json", cat_text)
