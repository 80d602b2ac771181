#include "watch/ProbeChannel.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace pb::watch {

ProbeChannel::ProbeChannel(QString filePath) : m_filePath(std::move(filePath))
{
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        spdlog::warn("watch: no pipe for the probe ({}): its events come from {} only", std::strerror(errno), m_filePath.toStdString());
        return;
    }
    m_pipeFd = fds[0];
    m_writeFd = fds[1];
    ::fcntl(m_pipeFd, F_SETFL, ::fcntl(m_pipeFd, F_GETFL) | O_NONBLOCK);
    struct stat st {};
    if (::fstat(m_writeFd, &st) == 0)
        m_pipeInode = static_cast<unsigned long long>(st.st_ino);
}

ProbeChannel::~ProbeChannel()
{
    for (int fd : {m_pipeFd, m_writeFd, m_fileFd})
        if (fd >= 0)
            ::close(fd);
}

void ProbeChannel::addTo(QProcessEnvironment &env) const
{
    env.insert(QLatin1String(kProbeVariable), m_filePath);
    if (m_writeFd >= 0) {
        env.insert(QLatin1String(kProbeFdVariable), QString::number(m_writeFd));
        env.insert(QLatin1String(kProbeFdInodeVariable), QString::number(m_pipeInode));
    } else {
        env.remove(QLatin1String(kProbeFdVariable));
        env.remove(QLatin1String(kProbeFdInodeVariable));
    }
}

void ProbeChannel::keepOpenInChild(int fd)
{
    if (fd >= 0)
        ::fcntl(fd, F_SETFD, 0);
}

void ProbeChannel::closeJobEnd()
{
    if (m_writeFd >= 0)
        ::close(m_writeFd);
    m_writeFd = -1;
}

qint64 ProbeChannel::readNow(int fd, char *buffer, qint64 max)
{
    for (;;) {
        const ssize_t n = ::read(fd, buffer, static_cast<size_t>(max));
        if (n >= 0)
            return n;
        if (errno != EINTR)
            return -1; // EAGAIN: nothing now; another error: nothing ever, tried again next time
    }
}

void ProbeChannel::openFile()
{
    if (m_fileFd >= 0 || !m_fileRefused.empty())
        return;
    const QByteArray path = m_filePath.toLocal8Bit();
    // O_NONBLOCK: opening a FIFO does not wait for a writer; O_NOFOLLOW: a link is not followed.
    const int fd = ::open(path.constData(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return; // not written yet (or never: every process used the pipe)
        m_fileRefused = errno == ELOOP ? std::string("is a symbolic link") : std::string("cannot be opened: ") + std::strerror(errno);
    } else {
        struct stat st {};
        if (::fstat(fd, &st) != 0)
            m_fileRefused = std::string("cannot be read: ") + std::strerror(errno);
        else if (S_ISFIFO(st.st_mode))
            m_fileRefused = "is a FIFO";
        else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
            m_fileRefused = "is a device";
        else if (S_ISDIR(st.st_mode))
            m_fileRefused = "is a folder";
        else if (!S_ISREG(st.st_mode))
            m_fileRefused = "is not a regular file";
        if (m_fileRefused.empty()) {
            m_fileFd = fd;
            return;
        }
        ::close(fd);
    }
    m_fileRefused = "the probe file " + m_filePath.toStdString() + " " + m_fileRefused + ": refused, its events are not read (the probe writes a regular file)";
}

} // namespace pb::watch
