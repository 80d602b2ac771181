// The watched command's process tree and its resident memory, from /proc. Plain POSIX reads: this
// runs at the sampling rate, and a QFile per /proc entry would cost more than the reading.
#include "watch/DeviceSampler.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <unordered_set>

namespace pb::watch {
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

std::vector<int64_t> processTree(int64_t root)
{
    if (root <= 0 || (::kill(static_cast<pid_t>(root), 0) != 0 && errno == ESRCH))
        return {};
    // One pass over every process's parent; the kernel's per-thread "children" lists would read
    // fewer files on a busy host but miss nothing only when every thread of every process in the
    // tree is read, which for a training job (dozens of threads each) is more, not less.
    std::unordered_multimap<int64_t, int64_t> children;
    if (DIR *proc = ::opendir("/proc")) {
        while (const dirent *entry = ::readdir(proc)) {
            if (!isPid(entry->d_name))
                continue;
            const long long pid = std::strtoll(entry->d_name, nullptr, 10);
            const int64_t parent = parentOf(pid);
            if (parent > 0)
                children.emplace(parent, pid);
        }
        ::closedir(proc);
    }
    std::vector<int64_t> tree {root};
    std::unordered_set<int64_t> seen {root};
    for (size_t next = 0; next < tree.size(); ++next) {
        const auto range = children.equal_range(tree[next]);
        for (auto it = range.first; it != range.second; ++it)
            if (seen.insert(it->second).second)
                tree.push_back(it->second);
    }
    return tree;
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

} // namespace pb::watch
