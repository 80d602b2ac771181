#include "catalog/DeviceMatch.h"

#include "util/Units.h"

#include <QRegularExpression>
#include <QString>
#include <QStringList>

#include <cmath>

namespace pb {
namespace {

bool matches(const std::string &pattern, const std::string &text)
{
    const QRegularExpression re(QString::fromStdString(pattern), QRegularExpression::CaseInsensitiveOption);
    return re.match(QString::fromStdString(text)).hasMatch();
}

std::string sizeText(int64_t bytes) { return formatBytes(bytes, 1).toStdString(); }

// ROCm reports "gfx942:sramecc+:xnack-"; the features after ':' do not change the architecture.
std::string baseArch(const std::string &cc)
{
    const auto colon = cc.find(':');
    return colon == std::string::npos ? cc : cc.substr(0, colon);
}

DeviceMatch compare(const DetectedDevice &device, const CardSpec &card)
{
    DeviceMatch m;
    m.matched = true;
    m.cardId = card.id;
    for (const auto &variant : card.variantPatterns) {
        if (matches(variant.pattern, device.name))
            m.mismatches.push_back({MismatchKind::FormFactor, "'" + device.name + "' is " + variant.meaning + "; the catalog entry " + card.id + " is the " + card.formFactor + " part"});
    }
    if (device.memoryBytes <= 0) {
        m.unchecked.push_back("memory: not reported");
    } else if (static_cast<double>(device.memoryBytes) < static_cast<double>(card.memoryBytes) * (1.0 - kMemoryMatchTolerance)) {
        m.mismatches.push_back({MismatchKind::SmallerMemory, "the device has " + sizeText(device.memoryBytes) + ", the catalog entry " + card.id + " has " + sizeText(card.memoryBytes) + ": budgets against the entry would overstate the headroom"});
    }
    if (device.computeCapability.empty()) {
        m.unchecked.push_back("compute capability: not reported");
    } else if (baseArch(device.computeCapability) != card.computeCapability) {
        m.mismatches.push_back({MismatchKind::ComputeCapability, "compute capability " + device.computeCapability + " differs from the entry's " + card.computeCapability + ": a different chip than " + card.name});
    }
    const std::string stackName = card.stack == SoftwareStack::Rocm ? "ROCm" : "CUDA";
    if (device.backend != card.stack) {
        m.mismatches.push_back({MismatchKind::Backend, std::string("the build runs ") + (device.backend == SoftwareStack::Rocm ? "ROCm" : "CUDA") + " but " + card.id + " needs " + stackName});
    } else if (device.runtimeVersion.empty()) {
        if (card.stack == SoftwareStack::Rocm)
            m.mismatches.push_back({MismatchKind::UnvalidatedStack, "a ROCm build without a known stack version: the validated minimum for " + card.id + " is ROCm " + card.minRuntimeVersion});
        else
            m.unchecked.push_back("CUDA runtime version: not reported");
    } else {
        const auto order = compareVersions(device.runtimeVersion, card.minRuntimeVersion);
        if (!order)
            m.mismatches.push_back({MismatchKind::UnvalidatedStack, stackName + " runtime '" + device.runtimeVersion + "' is not a version number; the validated minimum is " + card.minRuntimeVersion});
        else if (*order < 0)
            m.mismatches.push_back({MismatchKind::UnvalidatedStack, stackName + " " + device.runtimeVersion + " is older than the validated minimum " + card.minRuntimeVersion + " for " + card.id});
    }
    if (device.driverVersion.empty()) {
        m.unchecked.push_back("driver: not reported");
    } else if (const auto order = compareVersions(device.driverVersion, card.minDriverVersion)) {
        if (*order < 0)
            m.mismatches.push_back({MismatchKind::OldDriver, "driver " + device.driverVersion + " is older than the validated minimum " + card.minDriverVersion});
    } else {
        m.unchecked.push_back("driver: '" + device.driverVersion + "' is not a kernel driver version");
    }
    m.message = m.mismatches.empty() ? "'" + device.name + "' matches " + card.id
                                     : "'" + device.name + "' is recognised as " + card.id + " with " + std::to_string(m.mismatches.size()) + " mismatch(es)";
    return m;
}

} // namespace

const char *toString(MismatchKind kind)
{
    switch (kind) {
    case MismatchKind::FormFactor: return "form-factor";
    case MismatchKind::SmallerMemory: return "smaller-memory";
    case MismatchKind::ComputeCapability: return "compute-capability";
    case MismatchKind::Backend: return "backend";
    case MismatchKind::UnvalidatedStack: return "unvalidated-stack";
    case MismatchKind::OldDriver: return "old-driver";
    }
    return "?";
}

bool DeviceMatch::has(MismatchKind kind) const
{
    for (const auto &m : mismatches) {
        if (m.kind == kind)
            return true;
    }
    return false;
}

std::optional<int> compareVersions(const std::string &a, const std::string &b)
{
    static const QRegularExpression re(QStringLiteral("^[0-9]+(\\.[0-9]+)*$"));
    const QString qa = QString::fromStdString(a).trimmed();
    const QString qb = QString::fromStdString(b).trimmed();
    if (!re.match(qa).hasMatch() || !re.match(qb).hasMatch())
        return std::nullopt;
    const QStringList pa = qa.split(QLatin1Char('.'));
    const QStringList pb = qb.split(QLatin1Char('.'));
    for (int i = 0; i < std::max(pa.size(), pb.size()); ++i) {
        const qulonglong x = i < pa.size() ? pa[i].toULongLong() : 0;
        const qulonglong y = i < pb.size() ? pb[i].toULongLong() : 0;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

DeviceMatch matchDevice(const DetectedDevice &device, const Catalog &catalog)
{
    DeviceMatch best;
    bool found = false;
    for (const auto &card : catalog.cards) {
        bool named = false;
        for (const auto &pattern : card.namePatterns)
            named = named || matches(pattern, device.name);
        if (!named)
            continue;
        DeviceMatch candidate = compare(device, card);
        if (!found || candidate.mismatches.size() < best.mismatches.size()) {
            best = std::move(candidate);
            found = true;
        }
    }
    if (found)
        return best;
    DeviceMatch none;
    std::string known;
    for (const auto &card : catalog.cards)
        known += (known.empty() ? "" : ", ") + card.name;
    none.message = "'" + (device.name.empty() ? std::string("(no name)") : device.name) + "' is not in the catalog (known: " + known + "); every figure for it is modelled, nothing is matched";
    return none;
}

} // namespace pb
