// Plain POSIX reads of /proc: the tree is read at the sampling rate, and a QFile per /proc entry
// would cost more than the reading.
#include "util/ProcessTable.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

namespace pb {
namespace {

// The whole of a small /proc file, or an empty string when it is gone or unreadable.
std::string readSmallFile(const char *path)
{
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return {};
    std::string text;
    char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n <= 0)
            break;
        text.append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
    return text;
}

// The parent PID from /proc/PID/stat; -1 when the process is gone. The command name in
// parentheses may itself hold spaces and ')', so the fields are counted from the last ')'.
int64_t parentOf(long long pid)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%lld/stat", pid);
    const std::string stat = readSmallFile(path);
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 4 >= stat.size())
        return -1;
    // ") S 1234 ..." : state, then the parent.
    return std::strtoll(stat.c_str() + close + 4, nullptr, 10);
}

bool isPid(const char *name)
{
    if (!*name)
        return false;
    for (const char *c = name; *c; ++c)
        if (*c < '0' || *c > '9')
            return false;
    return true;
}

} // namespace

ProcessSnapshot::ProcessSnapshot()
{
    // One pass over every process's parent; the kernel's per-thread "children" lists would read
    // fewer files on a busy host but miss nothing only when every thread of every process in the
    // tree is read, which for a training job (dozens of threads each) is more, not less.
    if (DIR *proc = ::opendir("/proc")) {
        while (const dirent *entry = ::readdir(proc)) {
            if (!isPid(entry->d_name))
                continue;
            const long long pid = std::strtoll(entry->d_name, nullptr, 10);
            const int64_t parent = parentOf(pid);
            if (parent > 0)
                m_children.emplace(parent, pid);
        }
        ::closedir(proc);
    }
}

std::vector<int64_t> ProcessSnapshot::childrenOf(int64_t parent) const
{
    std::vector<int64_t> children;
    const auto range = m_children.equal_range(parent);
    for (auto it = range.first; it != range.second; ++it)
        children.push_back(it->second);
    return children;
}

std::vector<int64_t> ProcessSnapshot::tree(int64_t root) const
{
    std::vector<int64_t> tree {root};
    std::unordered_set<int64_t> seen {root};
    for (size_t next = 0; next < tree.size(); ++next)
        for (int64_t child : childrenOf(tree[next]))
            if (seen.insert(child).second)
                tree.push_back(child);
    return tree;
}

std::vector<int64_t> processTree(int64_t root)
{
    if (root <= 0 || (::kill(static_cast<pid_t>(root), 0) != 0 && errno == ESRCH))
        return {};
    return ProcessSnapshot().tree(root);
}

// Field 22 of a /proc/PID/stat text, counted from the state (field 3) after the name, which may
// itself hold spaces and ')'.
static uint64_t startTimeIn(const std::string &stat)
{
    const size_t close = stat.rfind(')');
    if (close == std::string::npos)
        return 0;
    const char *field = stat.c_str() + close + 1;
    for (int i = 3; i <= 22; ++i) {
        while (*field == ' ')
            ++field;
        if (!*field)
            return 0;
        if (i == 22)
            return std::strtoull(field, nullptr, 10);
        while (*field && *field != ' ')
            ++field;
    }
    return 0;
}

static std::string statOf(int64_t pid)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%lld/stat", static_cast<long long>(pid));
    return readSmallFile(path);
}

uint64_t processStartTime(int64_t pid) { return startTimeIn(statOf(pid)); }

bool processRunning(int64_t pid, uint64_t startTime)
{
    const std::string stat = statOf(pid);
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z' || stat[close + 2] == 'X')
        return false;
    return startTimeIn(stat) == startTime;
}

bool environmentHas(int64_t pid, const std::string &entry)
{
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%lld/environ", static_cast<long long>(pid));
    const std::string text = readSmallFile(path);
    for (size_t at = 0; at < text.size();) {
        const size_t end = text.find('\0', at);
        const size_t length = (end == std::string::npos ? text.size() : end) - at;
        if (length == entry.size() && text.compare(at, length, entry) == 0)
            return true;
        if (end == std::string::npos)
            break;
        at = end + 1;
    }
    return false;
}

int64_t treeRssBytes(const std::vector<int64_t> &pids)
{
    // statm's second field is the same resident count status prints as VmRSS, without the
    // formatting of the forty other lines.
    static const int64_t pageBytes = ::sysconf(_SC_PAGESIZE);
    int64_t bytes = 0;
    bool any = false;
    for (int64_t pid : pids) {
        char path[64];
        std::snprintf(path, sizeof path, "/proc/%lld/statm", static_cast<long long>(pid));
        const std::string statm = readSmallFile(path);
        if (statm.empty())
            continue;
        char *end = nullptr;
        std::strtoll(statm.c_str(), &end, 10);
        const long long resident = std::strtoll(end, nullptr, 10);
        any = true;
        bytes += resident * pageBytes;
    }
    return any ? bytes : -1;
}

} // namespace pb
