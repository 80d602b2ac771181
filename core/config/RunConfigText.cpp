// The file layout people read: keys in the documented order (schema_version first, then the run's
// identity, model, training, ...) rather than QJsonDocument's alphabetical order.
#include "config/RunConfigJson.h"
#include "config/RunConfigParse.h"

#include <QJsonArray>
#include <QJsonDocument>

#include <algorithm>

namespace pb {
namespace {

const QStringList &keyOrder()
{
    static const QStringList order = QStringLiteral(
        "schema_version name seed deterministic model train validation checkpoint data job "
        "preset family revision layers hidden_size attention_heads kv_heads head_dim intermediate_size vocab_size max_positions "
        "tie_embeddings attention_bias norm activation rope_theta rope_scaling type factor low_freq_factor high_freq_factor "
        "original_max_positions beta_fast beta_slow mscale mscale_all_dim truncate attention_factor short_factor long_factor "
        "sliding_window global_layers last_layer_global no_rope_layers every layers partial_rotary local_rope_theta rope_interleaved rope_fp32 "
        "norm_placement norm_unit_offset norm_scale_fp32 qk_norm attention_scale attention_softcap final_softcap query_temperature_beta query_temperature_length o_bias mlp_bias "
        "embedding_scale embedding_scale_rounded residual_scale logits_divisor fused_qkv fused_gate_up moe "
        "latent_attention q_lora_rank kv_lora_rank qk_nope_head_dim qk_rope_head_dim v_head_dim rope_interleave "
        "linear_attention full_layers key_heads value_heads key_head_dim value_head_dim conv_kernel layout "
        "norm_eps weights_path checkpoint_quantization "
        "mode lora rank alpha dropout targets trainable optimizer lr weight_decay beta1 beta2 eps momentum schedule kind "
        "warmup_steps total_steps min_lr_ratio precision seq_len micro_batch grad_accum recompute attention grad_clip loss_scale cuda_graph "
        "every_steps batches dir path token_dtype lengths min_length lengths_file longest_first learnable synthetic_samples "
        "validation_per_mille unit amount dataset_tokens deadline_hours").split(QLatin1Char(' '));
    return order;
}

void write(const QJsonValue &v, int depth, QByteArray &out)
{
    const QByteArray pad((depth + 1) * 2, ' ');
    const QByteArray closePad(depth * 2, ' ');
    if (v.isObject()) {
        const QJsonObject o = v.toObject();
        QStringList keys = o.keys();
        const auto rank = [](const QString &k) { const auto i = keyOrder().indexOf(k); return i < 0 ? keyOrder().size() : i; };
        std::stable_sort(keys.begin(), keys.end(), [&](const QString &a, const QString &b) { return rank(a) < rank(b); });
        out += "{\n";
        for (qsizetype i = 0; i < keys.size(); ++i) {
            out += pad;
            write(QJsonValue(keys[i]), depth + 1, out);
            out += ": ";
            write(o.value(keys[i]), depth + 1, out);
            out += i + 1 < keys.size() ? ",\n" : "\n";
        }
        out += closePad + "}";
    } else if (v.isArray()) {
        // Short lists of names read best on one line.
        const QJsonArray a = v.toArray();
        out += '[';
        for (qsizetype i = 0; i < a.size(); ++i) {
            if (i)
                out += ", ";
            write(a[i], depth + 1, out);
        }
        out += ']';
    } else {
        const QByteArray one = QJsonDocument(QJsonArray {v}).toJson(QJsonDocument::Compact);
        out += one.mid(1, one.size() - 2);
    }
}

} // namespace

QByteArray formatRunConfig(const RunConfig &config)
{
    QByteArray out;
    write(toJson(config), 0, out);
    out += '\n';
    return out;
}

} // namespace pb
