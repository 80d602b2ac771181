#include "dist/CpuBinding.h"

#include "util/Errors.h"

#include <QRegularExpression>
#include <QString>

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

namespace pb {

std::vector<int> parseCpuList(const std::string &text, const std::string &where)
{
    static const QRegularExpression item(QStringLiteral("^(\\d+)(?:-(\\d+))?$"));
    std::set<int> cpus;
    const QString list = QString::fromStdString(text).trimmed();
    for (const QString &part : list.split(QLatin1Char(','))) {
        const auto match = item.match(part.trimmed());
        const int first = match.hasMatch() ? match.captured(1).toInt() : -1;
        const int last = match.hasMatch() && match.hasCaptured(2) ? match.captured(2).toInt() : first;
        if (!match.hasMatch() || last < first || last >= CPU_SETSIZE)
            throw InvalidInputError(where, "'" + text + "' is not a CPU list (like 0-3,8)");
        for (int cpu = first; cpu <= last; ++cpu)
            cpus.insert(cpu);
    }
    return {cpus.begin(), cpus.end()};
}

std::string formatCpuList(std::vector<int> cpus)
{
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    std::string list;
    for (size_t i = 0; i < cpus.size();) {
        size_t j = i;
        while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
            ++j;
        list += (list.empty() ? "" : ",") + std::to_string(cpus[i]) + (j > i ? "-" + std::to_string(cpus[j]) : "");
        i = j + 1;
    }
    return list;
}

std::vector<int> allowedCpus()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
        if (CPU_ISSET(cpu, &set))
            cpus.push_back(cpu);
    return cpus;
}

void bindToCpus(const std::vector<int> &cpus)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus)
        CPU_SET(cpu, &set);
    if (cpus.empty() || sched_setaffinity(0, sizeof(set), &set) != 0)
        throw PilotBenchError(ExitCode::Failure, "cannot bind to CPUs '" + formatCpuList(cpus) + "': " + (cpus.empty() ? "empty list" : std::strerror(errno)));
}

std::vector<std::vector<int>> splitCpus(const std::vector<int> &cpus, int parts, int perPart)
{
    if (parts < 1 || perPart < 1 || static_cast<int64_t>(parts) * perPart > static_cast<int64_t>(cpus.size()))
        return {};
    std::vector<std::vector<int>> slices;
    for (int p = 0; p < parts; ++p)
        slices.emplace_back(cpus.begin() + static_cast<std::ptrdiff_t>(p) * perPart, cpus.begin() + static_cast<std::ptrdiff_t>(p + 1) * perPart);
    return slices;
}

} // namespace pb
