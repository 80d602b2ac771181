#include "result/MemoryAttribution.h"

#include "estimate/MemoryEstimate.h"
#include "util/Errors.h"

#include <QJsonArray>

namespace pb {
namespace {

constexpr std::array<const char *, kMemoryPartCount> kPartNames {"frozen_weights", "trainable_weights", "weight_casts", "gradients",
                                                                 "optimizer",      "activations",       "logits",       "other"};

QString str(const std::string &s) { return QString::fromStdString(s); }

const QJsonValue &need(const QJsonValue &value, const std::string &field, bool (QJsonValue::*is)() const, const char *type)
{
    if (!(value.*is)())
        throw InvalidInputError(field, std::string("expected ") + type);
    return value;
}

int64_t bytesField(const QJsonObject &o, const char *key, const std::string &where)
{
    const std::string field = where + "." + key;
    const double v = need(o.value(QLatin1String(key)), field, &QJsonValue::isDouble, "a number of bytes").toDouble();
    if (v < 0 || v != static_cast<double>(static_cast<int64_t>(v)))
        throw InvalidInputError(field, "expected a whole number of bytes of at least 0");
    return static_cast<int64_t>(v);
}

std::string textField(const QJsonObject &o, const char *key, const std::string &where)
{
    return need(o.value(QLatin1String(key)), where + "." + key, &QJsonValue::isString, "a string").toString().toStdString();
}

} // namespace

const char *toString(MemoryPart part) { return kPartNames[static_cast<size_t>(part)]; }

std::optional<MemoryPart> parseMemoryPart(const std::string &name)
{
    for (int i = 0; i < kMemoryPartCount; ++i)
        if (name == kPartNames[i])
            return static_cast<MemoryPart>(i);
    return std::nullopt;
}

QJsonObject toJson(const MemoryAttribution &a, int maxSites)
{
    QJsonObject parts;
    for (int i = 0; i < kMemoryPartCount; ++i)
        parts.insert(QLatin1String(kPartNames[i]), static_cast<double>(a.parts[i]));
    auto siteJson = [](const MemorySite &s) {
        QJsonObject o {{QStringLiteral("phase"), str(s.phase)}, {QStringLiteral("scope"), str(s.scope)}, {QStringLiteral("op"), str(s.op)},
                       {QStringLiteral("part"), QLatin1String(toString(s.part))}, {QStringLiteral("bytes"), static_cast<double>(s.bytes)},
                       {QStringLiteral("blocks"), static_cast<double>(s.blocks)}};
        if (s.layer >= 0)
            o.insert(QStringLiteral("layer"), static_cast<double>(s.layer));
        return o;
    };
    QJsonArray sites;
    const size_t keep = maxSites < 0 ? a.sites.size() : std::min(a.sites.size(), static_cast<size_t>(maxSites));
    for (size_t i = 0; i < keep; ++i)
        sites.append(siteJson(a.sites[i]));
    QJsonObject out {{QStringLiteral("step"), static_cast<double>(a.step)},
                        {QStringLiteral("device"), str(a.device)},
                        {QStringLiteral("peak_allocated_bytes"), static_cast<double>(a.peakAllocatedBytes)},
                        {QStringLiteral("peak_phase"), str(a.peakPhase)},
                        {QStringLiteral("peak_site"), str(a.peakSite)},
                        {QStringLiteral("parts"), parts},
                        {QStringLiteral("sites_total"), static_cast<double>(a.sites.size())},
                        {QStringLiteral("sites"), sites}};
    if (maxSites < 0 && !a.live.empty()) {
        QJsonArray live;
        for (const auto &t : a.live)
            live.append(siteJson(t));
        out.insert(QStringLiteral("live"), live);
    }
    return out;
}

MemoryAttribution memoryAttributionFromJson(const QJsonObject &json, const std::string &where)
{
    MemoryAttribution a;
    a.step = bytesField(json, "step", where);
    a.device = textField(json, "device", where);
    a.peakAllocatedBytes = bytesField(json, "peak_allocated_bytes", where);
    a.peakPhase = textField(json, "peak_phase", where);
    a.peakSite = textField(json, "peak_site", where);
    const auto parts = need(json.value(QStringLiteral("parts")), where + ".parts", &QJsonValue::isObject, "an object").toObject();
    for (int i = 0; i < kMemoryPartCount; ++i)
        a.parts[i] = bytesField(parts, kPartNames[i], where + ".parts");
    auto readSites = [&](const char *key, bool required, std::vector<MemorySite> &into) {
        const QJsonValue value = json.value(QLatin1String(key));
        if (!required && value.isUndefined())
            return;
        const auto sites = need(value, where + "." + key, &QJsonValue::isArray, "an array").toArray();
        for (int i = 0; i < sites.size(); ++i) {
            const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
            const auto o = need(sites[i], at, &QJsonValue::isObject, "an object").toObject();
            MemorySite s;
            s.phase = textField(o, "phase", at);
            s.scope = textField(o, "scope", at);
            s.op = textField(o, "op", at);
            const auto part = parseMemoryPart(textField(o, "part", at));
            if (!part)
                throw InvalidInputError(at + ".part", "not one of the memory parts (frozen_weights, trainable_weights, weight_casts, gradients, optimizer, activations, logits, other)");
            s.part = *part;
            s.bytes = bytesField(o, "bytes", at);
            s.blocks = bytesField(o, "blocks", at);
            if (o.contains(QStringLiteral("layer"))) {
                const double layer = need(o.value(QStringLiteral("layer")), at + ".layer", &QJsonValue::isDouble, "a layer index").toDouble();
                if (layer < 0 || layer != static_cast<double>(static_cast<int64_t>(layer)))
                    throw InvalidInputError(at + ".layer", "expected a layer index of at least 0");
                s.layer = static_cast<int64_t>(layer);
            }
            into.push_back(std::move(s));
        }
    };
    readSites("sites", true, a.sites);
    readSites("live", false, a.live);
    return a;
}

MemoryBreakdown measuredBreakdown(const MemoryAttribution &a)
{
    MemoryBreakdown b;
    b.frozenWeights = a.part(MemoryPart::FrozenWeights);
    b.trainableWeights = a.part(MemoryPart::TrainableWeights) + a.part(MemoryPart::WeightCasts);
    b.gradients = a.part(MemoryPart::Gradients);
    b.optimizer = a.part(MemoryPart::Optimizer);
    b.activations = a.part(MemoryPart::Activations);
    b.logits = a.part(MemoryPart::Logits);
    // What was live before the step and is no model or optimizer tensor: on CUDA, the BLAS
    // workspaces the caching allocator holds.
    b.blasWorkspaces = a.part(MemoryPart::Other);
    return b;
}

} // namespace pb
