#include "dist/CpuBinding.h"

#include "util/Errors.h"

#include <QRegularExpression>
#include <QString>
#include <QStringList>

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

std::map<int, std::string> gpuCpuAffinity(const std::string &topoMatrix)
{
    std::map<int, std::string> affinity;
    static const QRegularExpression escapes(QStringLiteral("\x1b\\[[0-9;]*m")); // nvidia-smi underlines its header
    const QStringList lines = QString::fromStdString(topoMatrix).remove(escapes).split(QLatin1Char('\n'));
    // The header names the columns; "CPU Affinity" is two words, so find its position by text.
    int header = -1;
    for (int i = 0; i < lines.size() && header < 0; ++i)
        if (lines[i].contains(QStringLiteral("CPU Affinity")))
            header = i;
    if (header < 0)
        return affinity;
    static const QRegularExpression spaces(QStringLiteral("\\s+"));
    QString head = lines[header];
    head.replace(QStringLiteral("CPU Affinity"), QStringLiteral("CPU_Affinity"));
    const QStringList columns = head.trimmed().split(spaces, Qt::SkipEmptyParts);
    const auto column = columns.indexOf(QStringLiteral("CPU_Affinity"));
    static const QRegularExpression gpuRow(QStringLiteral("^GPU(\\d+)$"));
    for (int i = header + 1; i < lines.size(); ++i) {
        const QStringList cells = lines[i].trimmed().split(spaces, Qt::SkipEmptyParts);
        if (cells.isEmpty())
            continue;
        const auto match = gpuRow.match(cells.front());
        // Rows start with their own name, so cell k+1 holds column k.
        if (!match.hasMatch() || column + 1 >= cells.size())
            continue;
        const QString cpus = cells[column + 1];
        if (cpus == QLatin1String("N/A"))
            continue;
        try {
            parseCpuList(cpus.toStdString(), "nvidia-smi topo -m");
            affinity[match.captured(1).toInt()] = cpus.toStdString();
        } catch (const InvalidInputError &) {
            // a layout this parser does not know: no binding rather than a wrong one
        }
    }
    return affinity;
}

} // namespace pb
