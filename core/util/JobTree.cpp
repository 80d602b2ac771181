#include "util/JobTree.h"

#include "util/ProcessTable.h"

#include <QElapsedTimer>
#include <QRandomGenerator>
#include <QThread>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

namespace pb {
namespace {

// The guardian runs between fork and _exit in a copy of a threaded process: from here to
// guard(), async-signal-safe system calls only (no malloc, no locks, no stdio).

struct Dirent64 { // the kernel's linux_dirent64, which glibc does not declare
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[1];
};

bool holdsEntry(const char *buffer, size_t used, const char *entry, size_t entryLength)
{
    for (size_t at = 0; at < used;) {
        size_t end = at;
        while (end < used && buffer[end])
            ++end;
        if (end - at == entryLength) {
            size_t i = 0;
            while (i < entryLength && buffer[at + i] == entry[i])
                ++i;
            if (i == entryLength)
                return true;
        }
        at = end + 1;
    }
    return false;
}

// Sends `signal` (0: none, a count only) to every process whose environment holds `entry`;
// returns how many there were.
int signalCarriers(const char *entry, size_t entryLength, int signal)
{
    static char text[1 << 17]; // an entry past the first 128 KiB of an environment is missed
    char dents[8192];
    char path[48];
    const int self = static_cast<int>(::getpid());
    const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    int found = 0;
    for (;;) {
        const long n = ::syscall(SYS_getdents64, dir, dents, sizeof dents);
        if (n <= 0)
            break;
        for (long off = 0; off < n;) {
            const auto *d = reinterpret_cast<const Dirent64 *>(dents + off);
            off += d->reclen;
            long pid = 0;
            const char *c = d->name;
            for (; *c >= '0' && *c <= '9'; ++c)
                pid = pid * 10 + (*c - '0');
            if (*c || pid <= 0 || pid == self)
                continue;
            // "/proc/" + pid + "/environ"
            char digits[24];
            int k = 0;
            for (long p = pid; p > 0; p /= 10)
                digits[k++] = static_cast<char>('0' + p % 10);
            int at = 0;
            for (const char *s = "/proc/"; *s; ++s)
                path[at++] = *s;
            while (k > 0)
                path[at++] = digits[--k];
            for (const char *s = "/environ"; *s; ++s)
                path[at++] = *s;
            path[at] = 0;
            const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0)
                continue;
            size_t used = 0;
            ssize_t r;
            while (used < sizeof text && (r = ::read(fd, text + used, sizeof text - used)) > 0)
                used += static_cast<size_t>(r);
            ::close(fd);
            if (holdsEntry(text, used, entry, entryLength)) {
                ++found;
                if (signal)
                    ::kill(static_cast<pid_t>(pid), signal);
            }
        }
    }
    ::close(dir);
    return found;
}

int signalGroups(const long *groups, int count, int signal)
{
    int alive = 0;
    for (int i = 0; i < count; ++i)
        if (::kill(static_cast<pid_t>(-groups[i]), signal) == 0)
            ++alive;
    return alive;
}

[[noreturn]] void guard(int socket, const char *entry, int graceMs)
{
    ::setsid(); // out of our terminal's process group: a Ctrl-C that ends us must not end it
    // Our parent's handlers would only set its flags here: a SIGTERM sent to the guardian ends it.
    struct sigaction byDefault {};
    byDefault.sa_handler = SIG_DFL;
    for (const int signal : {SIGINT, SIGTERM, SIGHUP})
        ::sigaction(signal, &byDefault, nullptr);
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(null, 2);
    }
    // Nothing of ours stays open in it (a pipe held open would keep its reader waiting).
    for (int fd = 3; fd < 65536; ++fd)
        if (fd != socket)
            ::close(fd);
    long groups[256];
    int count = 0;
    long number = 0;
    bool done = false;
    char buffer[256];
    for (;;) {
        const ssize_t n = ::read(socket, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; ++i) {
            const char c = buffer[i];
            if (c >= '0' && c <= '9')
                number = number * 10 + (c - '0');
            else if (c == '\n' && number > 0 && count < 256)
                groups[count++] = number, number = 0;
            else if (c == 'D')
                done = true;
        }
    }
    if (done)
        ::_exit(0);
    size_t entryLength = 0;
    while (entry[entryLength])
        ++entryLength;
    signalGroups(groups, count, SIGTERM);
    signalCarriers(entry, entryLength, SIGTERM);
    const timespec tick {0, 100 * 1000 * 1000};
    for (int waited = 0; waited < graceMs; waited += 100) {
        if (signalGroups(groups, count, 0) == 0 && signalCarriers(entry, entryLength, 0) == 0)
            ::_exit(0);
        ::nanosleep(&tick, nullptr);
    }
    signalGroups(groups, count, SIGKILL);
    signalCarriers(entry, entryLength, SIGKILL);
    ::_exit(0);
}

} // namespace

// Trees alive in this process: it is a subreaper only while one is (a GUI outlives many).
std::atomic<int> g_liveTrees {0};

JobTree::JobTree(int graceMs)
{
    m_entry = std::string(kVariable) + "=" + std::to_string(::getpid()) + "-" + QString::number(QRandomGenerator::system()->generate64(), 16).toStdString();
    ++g_liveTrees;
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        spdlog::warn("job tree: cannot become a child subreaper ({}): a daemonised process is found by its environment only", std::strerror(errno));
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        spdlog::warn("job tree: no guardian ({}): a job outlives a killed parent", std::strerror(errno));
        return;
    }
    char entry[128] = {};
    std::strncpy(entry, m_entry.c_str(), sizeof entry - 1);
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(pair[0]);
        guard(pair[1], entry, graceMs);
    }
    ::close(pair[1]);
    if (pid < 0) {
        spdlog::warn("job tree: no guardian ({}): a job outlives a killed parent", std::strerror(errno));
        ::close(pair[0]);
        return;
    }
    m_guardian = pid;
    m_guardianSocket = pair[0];
}

JobTree::~JobTree()
{
    // Never ended with its processes running (an exception between add() and stop()).
    if (!m_started.empty() && alive() > 0)
        stop(0);
    if (--g_liveTrees == 0)
        ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    if (m_guardianSocket >= 0) {
        ::send(m_guardianSocket, "D", 1, MSG_NOSIGNAL);
        ::close(m_guardianSocket);
    }
    if (m_guardian > 0)
        while (::waitpid(static_cast<pid_t>(m_guardian), nullptr, 0) < 0 && errno == EINTR) {
        }
}

void JobTree::prepareChild(int deathSignal)
{
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, deathSignal);
}

void JobTree::add(int64_t pid)
{
    if (pid <= 0)
        return;
    m_started.emplace_back(pid, processStartTime(pid));
    if (m_guardianSocket >= 0) {
        const std::string line = std::to_string(pid) + "\n";
        ::send(m_guardianSocket, line.data(), line.size(), MSG_NOSIGNAL);
    }
    scan();
}

void JobTree::scan()
{
    const ProcessSnapshot processes; // one pass over /proc for the whole scan
    auto note = [this, &processes](int64_t root) {
        for (int64_t p : processes.tree(root))
            if (!m_seen.count(p))
                if (const uint64_t t = processStartTime(p))
                    m_seen[p] = t;
    };
    // A PID seen before that now names another process is forgotten (gone, or reused).
    for (auto it = m_seen.begin(); it != m_seen.end();)
        it = processStartTime(it->first) == it->second ? std::next(it) : m_seen.erase(it);
    for (const auto &[root, start] : m_started)
        if (processStartTime(root) == start) // still it (or its zombie), not a reused PID
            note(root);
    for (int64_t child : processes.childrenOf(::getpid())) {
        if (child == m_guardian || std::any_of(m_started.begin(), m_started.end(), [child](const auto &r) { return r.first == child; }))
            continue; // its QProcess reaps it
        if (!m_seen.count(child) && !environmentHas(child, m_entry))
            continue; // a child of ours that is not the job's (another QProcess of the GUI's)
        // Re-parented to us: reap it once it has exited, else it stays a zombie for our lifetime.
        if (::waitpid(static_cast<pid_t>(child), nullptr, WNOHANG) == child) {
            m_seen.erase(child);
            continue;
        }
        note(child);
    }
}

int JobTree::alive()
{
    scan();
    int running = 0;
    for (const auto &[pid, start] : m_seen)
        running += processRunning(pid, start) ? 1 : 0;
    return running;
}

int JobTree::signalAll(int signal)
{
    scan();
    for (const auto &[root, start] : m_started)
        if (processStartTime(root) == start) // the group of a root long gone may be another's
            ::kill(static_cast<pid_t>(-root), signal);
    int running = 0;
    for (auto it = m_seen.begin(); it != m_seen.end();) {
        if (!processRunning(it->first, it->second)) {
            it = m_seen.erase(it); // gone, or its PID now names another process
            continue;
        }
        ::kill(static_cast<pid_t>(it->first), signal);
        ++running;
        ++it;
    }
    return running;
}

int JobTree::stop(int graceMs, const std::function<bool()> &hurry)
{
    if (signalAll(SIGTERM) == 0)
        return 0;
    QElapsedTimer grace;
    grace.start();
    while (alive() > 0 && grace.elapsed() < graceMs && !(hurry && hurry()))
        QThread::msleep(40);
    int killed = 0;
    // A process forked between two scans is caught by the next pass.
    for (int pass = 0; pass < 50 && alive() > 0; ++pass) {
        killed = std::max(killed, signalAll(SIGKILL));
        QThread::msleep(20);
    }
    scan(); // reaps what the KILL left as zombies
    return killed;
}

} // namespace pb
