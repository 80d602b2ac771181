#include "catalog/CatalogJson.h"

#include <QCryptographicHash>
#include <QJsonDocument>
#include "config/JsonText.h"

#include "util/Errors.h"

#include <QDate>
#include <QJsonArray>
#include <QJsonDocument>
#include <QRegularExpression>

#include <cmath>
#include <set>

namespace pb {
namespace {

// Reads one object; every error names the full field path. finish() refuses keys never read.
class Fields final {
public:
    Fields(QJsonObject object, std::string path) : m_object(std::move(object)), m_path(std::move(path)) {}

    std::string path(const QString &key) const { return m_path.empty() ? key.toStdString() : m_path + "." + key.toStdString(); }

    bool has(const QString &key) const { return m_object.contains(key); }
    QJsonValue take(const QString &key)
    {
        m_read.insert(key);
        if (!m_object.contains(key))
            throw InvalidInputError(path(key), "missing");
        return m_object.value(key);
    }
    std::string string(const QString &key, bool allowEmpty = false)
    {
        const QJsonValue v = take(key);
        if (!v.isString())
            typeError(key, "a string", v);
        if (!allowEmpty && v.toString().trimmed().isEmpty())
            throw InvalidInputError(path(key), "must not be empty");
        return v.toString().toStdString();
    }
    double positive(const QString &key)
    {
        const QJsonValue v = take(key);
        return positiveValue(path(key), v);
    }
    std::optional<double> positiveOrNull(const QString &key)
    {
        const QJsonValue v = take(key);
        if (v.isNull())
            return std::nullopt;
        return positiveValue(path(key), v);
    }
    double nonNegative(const QString &key)
    {
        const QJsonValue v = take(key);
        if (!v.isDouble())
            typeError(key, "a number", v);
        if (!std::isfinite(v.toDouble()) || v.toDouble() < 0)
            throw InvalidInputError(path(key), "must be zero or more");
        return v.toDouble();
    }
    int64_t positiveInteger(const QString &key)
    {
        const QJsonValue v = take(key);
        return positiveIntegerValue(path(key), v);
    }
    Fields object(const QString &key)
    {
        const QJsonValue v = take(key);
        if (!v.isObject())
            typeError(key, "an object", v);
        return Fields(v.toObject(), path(key));
    }
    QJsonArray array(const QString &key, bool allowEmpty = false)
    {
        const QJsonValue v = take(key);
        if (!v.isArray())
            typeError(key, "an array", v);
        if (!allowEmpty && v.toArray().isEmpty())
            throw InvalidInputError(path(key), "must not be empty");
        return v.toArray();
    }
    void finish() const
    {
        for (auto it = m_object.begin(); it != m_object.end(); ++it) {
            if (!m_read.count(it.key()))
                throw InvalidInputError(path(it.key()), "unknown field");
        }
    }

    static double positiveValue(const std::string &where, const QJsonValue &v)
    {
        if (!v.isDouble())
            throw InvalidInputError(where, "expected a number, got " + typeName(v));
        if (!std::isfinite(v.toDouble()) || v.toDouble() <= 0)
            throw InvalidInputError(where, "must be greater than zero");
        return v.toDouble();
    }
    static int64_t positiveIntegerValue(const std::string &where, const QJsonValue &v)
    {
        const double d = positiveValue(where, v);
        if (d != std::floor(d) || d > 9.0e15)
            throw InvalidInputError(where, "must be a whole number");
        return static_cast<int64_t>(d);
    }
    static std::string typeName(const QJsonValue &v)
    {
        switch (v.type()) {
        case QJsonValue::Null: return "null";
        case QJsonValue::Bool: return "a boolean";
        case QJsonValue::Double: return "a number";
        case QJsonValue::String: return "a string";
        case QJsonValue::Array: return "an array";
        case QJsonValue::Object: return "an object";
        case QJsonValue::Undefined: return "nothing";
        }
        return "?";
    }

private:
    [[noreturn]] void typeError(const QString &key, const char *expected, const QJsonValue &got) const
    {
        throw InvalidInputError(path(key), std::string("expected ") + expected + ", got " + typeName(got));
    }

    QJsonObject m_object;
    std::string m_path;
    std::set<QString> m_read;
};

QString gpusKey(int gpus) { return QStringLiteral("gpus_%1").arg(gpus); }

void checkVersion(const std::string &where, const std::string &version)
{
    static const QRegularExpression re(QStringLiteral("^[0-9]+(\\.[0-9]+)*$"));
    if (!re.match(QString::fromStdString(version)).hasMatch())
        throw InvalidInputError(where, "'" + version + "' is not a dotted version number such as 12.2");
}

void checkRegex(const std::string &where, const std::string &pattern)
{
    const QRegularExpression re(QString::fromStdString(pattern));
    if (!re.isValid())
        throw InvalidInputError(where, "'" + pattern + "' is not a valid regular expression: " + re.errorString().toStdString());
}

TermPrice readPriceTable(Fields table, const std::string &termId, const std::vector<int> &gpuCounts)
{
    TermPrice price;
    price.termId = termId;
    for (int gpus : gpuCounts)
        price.perGpuHourByGpus[gpus] = table.positive(gpusKey(gpus));
    table.finish();
    return price;
}

std::vector<std::string> readStrings(const QJsonArray &array, const std::string &where)
{
    std::vector<std::string> out;
    for (int i = 0; i < array.size(); ++i) {
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (!array[i].isString() || array[i].toString().isEmpty())
            throw InvalidInputError(at, "expected a non-empty string, got " + Fields::typeName(array[i]));
        out.push_back(array[i].toString().toStdString());
    }
    return out;
}

CardSpec readCard(Fields f, const Catalog &catalog)
{
    CardSpec card;
    card.id = f.string(QStringLiteral("id"));
    static const QRegularExpression idRe(QStringLiteral("^[a-z0-9]+(-[a-z0-9]+)*$"));
    if (!idRe.match(QString::fromStdString(card.id)).hasMatch())
        throw InvalidInputError(f.path(QStringLiteral("id")), "'" + card.id + "' must be lower-case letters and digits joined by dashes (e.g. h100-sxm-80gb)");
    card.name = f.string(QStringLiteral("name"));
    card.vendor = f.string(QStringLiteral("vendor"));
    card.formFactor = f.string(QStringLiteral("form_factor"));
    card.memoryGb = f.positive(QStringLiteral("memory_gb"));
    card.memoryBytes = f.positiveInteger(QStringLiteral("memory_bytes"));
    // memory_gb is the marketing figure, which is close to GiB (GDDR ECC keeps about 6 %: an L40S
    // shows 46068 MiB of 48 GiB); a factor 1000 or 1024 off means the bytes are in the wrong unit.
    const double ratio = static_cast<double>(card.memoryBytes) / (card.memoryGb * 1024.0 * 1024.0 * 1024.0);
    if (ratio < 0.9 || ratio > 1.1)
        throw InvalidInputError(f.path(QStringLiteral("memory_bytes")), "must be within 10 % of memory_gb GiB (" + std::to_string(card.memoryBytes) + " bytes is " + std::to_string(ratio) + " of it): is it in bytes?");
    card.memoryBytesBasis = f.string(QStringLiteral("memory_bytes_basis"));
    card.memoryBandwidthTbps = f.positive(QStringLiteral("memory_bandwidth_tbps"));
    card.bf16DenseTflops = f.positive(QStringLiteral("bf16_dense_tflops"));
    card.fp8DenseTflops = f.positiveOrNull(QStringLiteral("fp8_dense_tflops"));
    if (f.has(QStringLiteral("fp4_dense_tflops")))
        card.fp4DenseTflops = f.positiveOrNull(QStringLiteral("fp4_dense_tflops"));
    if (card.fp4DenseTflops && !card.fp8DenseTflops)
        throw InvalidInputError(f.path(QStringLiteral("fp4_dense_tflops")), "a card with FP4 tensor cores has FP8 ones too: fp8_dense_tflops is null");
    if (f.has(QStringLiteral("spec_source")))
        card.specSource = f.string(QStringLiteral("spec_source"));
    card.interconnect = f.string(QStringLiteral("interconnect"));
    card.interconnectGBps = f.positive(QStringLiteral("interconnect_gbytes_per_s"));
    card.powerW = f.positive(QStringLiteral("power_w"));

    Fields software = f.object(QStringLiteral("software"));
    const std::string stack = software.string(QStringLiteral("stack"));
    if (stack == "cuda")
        card.stack = SoftwareStack::Cuda;
    else if (stack == "rocm")
        card.stack = SoftwareStack::Rocm;
    else
        throw InvalidInputError(software.path(QStringLiteral("stack")), "'" + stack + "' must be cuda or rocm");
    card.minRuntimeVersion = software.string(QStringLiteral("min_runtime"));
    checkVersion(software.path(QStringLiteral("min_runtime")), card.minRuntimeVersion);
    card.minDriverVersion = software.string(QStringLiteral("min_driver"));
    checkVersion(software.path(QStringLiteral("min_driver")), card.minDriverVersion);
    card.computeCapability = software.string(QStringLiteral("compute_capability"));
    static const QRegularExpression ccRe(QStringLiteral("^([0-9]+\\.[0-9]+|gfx[0-9a-f]+)$"));
    if (!ccRe.match(QString::fromStdString(card.computeCapability)).hasMatch())
        throw InvalidInputError(software.path(QStringLiteral("compute_capability")), "'" + card.computeCapability + "' must be MAJOR.MINOR (CUDA) or gfxNNN (ROCm)");
    software.finish();

    Fields match = f.object(QStringLiteral("match"));
    const std::string namesPath = match.path(QStringLiteral("name_patterns"));
    card.namePatterns = readStrings(match.array(QStringLiteral("name_patterns")), namesPath);
    for (size_t i = 0; i < card.namePatterns.size(); ++i)
        checkRegex(namesPath + "[" + std::to_string(i) + "]", card.namePatterns[i]);
    const std::string variantsPath = match.path(QStringLiteral("variant_patterns"));
    const QJsonArray variants = match.array(QStringLiteral("variant_patterns"), true);
    for (int i = 0; i < variants.size(); ++i) {
        const std::string at = variantsPath + "[" + std::to_string(i) + "]";
        if (!variants[i].isObject())
            throw InvalidInputError(at, "expected an object, got " + Fields::typeName(variants[i]));
        Fields v(variants[i].toObject(), at);
        VariantPattern variant {v.string(QStringLiteral("pattern")), v.string(QStringLiteral("meaning"))};
        checkRegex(v.path(QStringLiteral("pattern")), variant.pattern);
        v.finish();
        card.variantPatterns.push_back(variant);
    }
    match.finish();

    if (f.has(QStringLiteral("price_source"))) {
        Fields source = f.object(QStringLiteral("price_source"));
        PriceSource ps;
        ps.text = source.string(QStringLiteral("text"));
        ps.asOf = source.string(QStringLiteral("as_of"));
        if (!QDate::fromString(QString::fromStdString(ps.asOf), Qt::ISODate).isValid())
            throw InvalidInputError(source.path(QStringLiteral("as_of")), "'" + ps.asOf + "' must be a date YYYY-MM-DD");
        if (source.has(QStringLiteral("url")))
            ps.url = source.string(QStringLiteral("url"));
        source.finish();
        card.priceSource = ps;
    }
    Fields prices = f.object(QStringLiteral("prices"));
    card.onDemand = readPriceTable(prices.object(QStringLiteral("on_demand")), "on_demand", catalog.gpuCounts);
    Fields terms = prices.object(QStringLiteral("terms"));
    for (const TermSpec &term : catalog.terms)
        card.terms.push_back(readPriceTable(terms.object(QString::fromStdString(term.id)), term.id, catalog.gpuCounts));
    terms.finish();
    prices.finish();
    f.finish();
    return card;
}

} // namespace

Catalog catalogFromJson(const QJsonObject &root, const std::string &source)
{
    Catalog catalog;
    catalog.source = source;
    Fields f(root, "");
    const int64_t version = f.positiveInteger(QStringLiteral("catalog_version"));
    if (version != Catalog::kCatalogVersion)
        throw InvalidInputError("catalog_version", "version " + std::to_string(version) + " is not supported (this build reads " + std::to_string(Catalog::kCatalogVersion) + ")");
    catalog.catalogVersion = static_cast<int>(version);
    catalog.modelledOn = f.string(QStringLiteral("modelled_on"));
    if (!QDate::fromString(QString::fromStdString(catalog.modelledOn), Qt::ISODate).isValid())
        throw InvalidInputError("modelled_on", "'" + catalog.modelledOn + "' must be a date YYYY-MM-DD");
    catalog.currency = f.string(QStringLiteral("currency"));
    static const QRegularExpression currencyRe(QStringLiteral("^[A-Z]{3}$"));
    if (!currencyRe.match(QString::fromStdString(catalog.currency)).hasMatch())
        throw InvalidInputError("currency", "'" + catalog.currency + "' must be a three-letter code such as USD");
    catalog.notice = f.string(QStringLiteral("notice"));
    catalog.priceBasis = f.string(QStringLiteral("price_basis"));

    const QJsonArray counts = f.array(QStringLiteral("gpu_counts"));
    for (int i = 0; i < counts.size(); ++i) {
        const std::string at = "gpu_counts[" + std::to_string(i) + "]";
        const int64_t n = Fields::positiveIntegerValue(at, counts[i]);
        if (n > 1024)
            throw InvalidInputError(at, "must be at most 1024");
        if (!catalog.gpuCounts.empty() && n <= catalog.gpuCounts.back())
            throw InvalidInputError(at, "card counts must be listed in increasing order without repeats");
        catalog.gpuCounts.push_back(static_cast<int>(n));
    }

    const QJsonArray terms = f.array(QStringLiteral("terms"));
    for (int i = 0; i < terms.size(); ++i) {
        const std::string at = "terms[" + std::to_string(i) + "]";
        if (!terms[i].isObject())
            throw InvalidInputError(at, "expected an object, got " + Fields::typeName(terms[i]));
        Fields t(terms[i].toObject(), at);
        TermSpec term {t.string(QStringLiteral("id")), t.string(QStringLiteral("label")), t.positive(QStringLiteral("hours"))};
        t.finish();
        if (term.id == "on_demand")
            throw InvalidInputError(at + ".id", "'on_demand' is reserved");
        if (!catalog.terms.empty() && term.hours <= catalog.terms.back().hours)
            throw InvalidInputError(at + ".hours", "terms must be listed shortest first, each longer than the one before");
        for (const auto &other : catalog.terms) {
            if (other.id == term.id)
                throw InvalidInputError(at + ".id", "'" + term.id + "' appears twice");
        }
        catalog.terms.push_back(term);
    }

    const QJsonArray cards = f.array(QStringLiteral("cards"));
    for (int i = 0; i < cards.size(); ++i) {
        const std::string at = "cards[" + std::to_string(i) + "]";
        if (!cards[i].isObject())
            throw InvalidInputError(at, "expected an object, got " + Fields::typeName(cards[i]));
        CardSpec card = readCard(Fields(cards[i].toObject(), at), catalog);
        if (catalog.find(card.id))
            throw InvalidInputError(at + ".id", "'" + card.id + "' appears twice");
        catalog.cards.push_back(std::move(card));
    }

    Fields options = f.object(QStringLiteral("options"));
    catalog.options.storagePerTbMonth = options.nonNegative(QStringLiteral("storage_per_tb_month"));
    catalog.options.egressPerTb = options.nonNegative(QStringLiteral("egress_per_tb"));
    catalog.options.supportPerMonth = options.nonNegative(QStringLiteral("support_per_month"));
    catalog.options.hoursPerMonth = options.positive(QStringLiteral("hours_per_month"));
    options.finish();
    f.finish();
    return catalog;
}

Catalog parseCatalog(const QByteArray &json, const std::string &source)
{
    QJsonParseError error {};
    const QJsonDocument doc = QJsonDocument::fromJson(json, &error);
    if (error.error == QJsonParseError::NoError)
        checkJsonText(json, source);
    if (error.error != QJsonParseError::NoError)
        throw InvalidInputError(source, "not valid JSON at offset " + std::to_string(error.offset) + ": " + error.errorString().toStdString());
    if (!doc.isObject())
        throw InvalidInputError(source, "the catalog must be a JSON object");
    try {
        return catalogFromJson(doc.object(), source);
    } catch (const InvalidInputError &e) {
        // Keep the field as where(); say which file it is in.
        throw InvalidInputError(e.where(), e.message() + " (catalog " + source + ")");
    }
}

namespace {

QJsonObject priceTableToJson(const TermPrice &price)
{
    QJsonObject table;
    for (const auto &[gpus, perHour] : price.perGpuHourByGpus)
        table.insert(gpusKey(gpus), perHour);
    return table;
}

QJsonObject cardToJson(const CardSpec &card)
{
    auto s = [](const std::string &v) { return QString::fromStdString(v); };
    QJsonArray names;
    for (const auto &p : card.namePatterns)
        names.append(s(p));
    QJsonArray variants;
    for (const auto &v : card.variantPatterns)
        variants.append(QJsonObject {{QStringLiteral("pattern"), s(v.pattern)}, {QStringLiteral("meaning"), s(v.meaning)}});
    QJsonObject terms;
    for (const auto &t : card.terms)
        terms.insert(s(t.termId), priceTableToJson(t));
    QJsonObject out {
        {QStringLiteral("id"), s(card.id)},
        {QStringLiteral("name"), s(card.name)},
        {QStringLiteral("vendor"), s(card.vendor)},
        {QStringLiteral("form_factor"), s(card.formFactor)},
        {QStringLiteral("memory_gb"), card.memoryGb},
        {QStringLiteral("memory_bytes"), static_cast<double>(card.memoryBytes)},
        {QStringLiteral("memory_bytes_basis"), s(card.memoryBytesBasis)},
        {QStringLiteral("memory_bandwidth_tbps"), card.memoryBandwidthTbps},
        {QStringLiteral("bf16_dense_tflops"), card.bf16DenseTflops},
        {QStringLiteral("fp8_dense_tflops"), card.fp8DenseTflops ? QJsonValue(*card.fp8DenseTflops) : QJsonValue(QJsonValue::Null)},
        {QStringLiteral("interconnect"), s(card.interconnect)},
        {QStringLiteral("interconnect_gbytes_per_s"), card.interconnectGBps},
        {QStringLiteral("power_w"), card.powerW},
        {QStringLiteral("software"), QJsonObject {{QStringLiteral("stack"), QString::fromLatin1(toString(card.stack))},
                                                  {QStringLiteral("min_runtime"), s(card.minRuntimeVersion)},
                                                  {QStringLiteral("min_driver"), s(card.minDriverVersion)},
                                                  {QStringLiteral("compute_capability"), s(card.computeCapability)}}},
        {QStringLiteral("match"), QJsonObject {{QStringLiteral("name_patterns"), names}, {QStringLiteral("variant_patterns"), variants}}},
        {QStringLiteral("prices"), QJsonObject {{QStringLiteral("on_demand"), priceTableToJson(card.onDemand)}, {QStringLiteral("terms"), terms}}},
    };
    // Written only when known, so a catalog from before these fields round-trips unchanged.
    if (card.fp4DenseTflops)
        out.insert(QStringLiteral("fp4_dense_tflops"), *card.fp4DenseTflops);
    if (!card.specSource.empty())
        out.insert(QStringLiteral("spec_source"), s(card.specSource));
    if (card.priceSource) {
        QJsonObject source {{QStringLiteral("text"), s(card.priceSource->text)}, {QStringLiteral("as_of"), s(card.priceSource->asOf)}};
        if (!card.priceSource->url.empty())
            source.insert(QStringLiteral("url"), s(card.priceSource->url));
        out.insert(QStringLiteral("price_source"), source);
    }
    return out;
}

} // namespace

QJsonObject catalogToJson(const Catalog &catalog)
{
    auto s = [](const std::string &v) { return QString::fromStdString(v); };
    QJsonArray counts;
    for (int n : catalog.gpuCounts)
        counts.append(n);
    QJsonArray terms;
    for (const auto &t : catalog.terms)
        terms.append(QJsonObject {{QStringLiteral("id"), s(t.id)}, {QStringLiteral("label"), s(t.label)}, {QStringLiteral("hours"), t.hours}});
    QJsonArray cards;
    for (const auto &c : catalog.cards)
        cards.append(cardToJson(c));
    return QJsonObject {
        {QStringLiteral("catalog_version"), catalog.catalogVersion},
        {QStringLiteral("modelled_on"), s(catalog.modelledOn)},
        {QStringLiteral("currency"), s(catalog.currency)},
        {QStringLiteral("notice"), s(catalog.notice)},
        {QStringLiteral("price_basis"), s(catalog.priceBasis)},
        {QStringLiteral("gpu_counts"), counts},
        {QStringLiteral("terms"), terms},
        {QStringLiteral("cards"), cards},
        {QStringLiteral("options"), QJsonObject {{QStringLiteral("storage_per_tb_month"), catalog.options.storagePerTbMonth},
                                                 {QStringLiteral("egress_per_tb"), catalog.options.egressPerTb},
                                                 {QStringLiteral("support_per_month"), catalog.options.supportPerMonth},
                                                 {QStringLiteral("hours_per_month"), catalog.options.hoursPerMonth}}},
    };
}

std::string catalogRevision(const Catalog &catalog)
{
    const QByteArray json = QJsonDocument(catalogToJson(catalog)).toJson(QJsonDocument::Compact);
    return QCryptographicHash::hash(json, QCryptographicHash::Sha256).toHex().left(16).toStdString();
}

} // namespace pb
