#pragma once
// Where a watched job's probe events come from, so that nothing the job does can block or flood
// watch. The channel is a pipe whose write end the job inherits (PILOTBENCH_PROBE_FD names it,
// PILOTBENCH_PROBE_FD_INODE identifies it, so a process where that number is another file does not
// write there). The file PILOTBENCH_PROBE names is kept for the processes the descriptor does not
// reach (torchrun's workers and other children started with close_fds): it is opened O_NONBLOCK |
// O_NOFOLLOW and read only when it is a regular file; a link, FIFO, device or folder there is
// refused with a message. Both are read without blocking, a bounded amount per call, in lines of
// at most kMaxProbeLineBytes.
#include "watch/ProbeEvents.h"

#include <QProcessEnvironment>
#include <QString>

#include <algorithm>
#include <cstdint>
#include <string>

namespace pb::watch {

inline constexpr const char *kProbeFdVariable = "PILOTBENCH_PROBE_FD";
inline constexpr const char *kProbeFdInodeVariable = "PILOTBENCH_PROBE_FD_INODE";

class ProbeChannel {
public:
    // Makes the pipe (close-on-exec on both ends until the job's side is handed over). Without a
    // pipe (pipe2 failed) the file is the only channel, which `notice` then says.
    explicit ProbeChannel(QString filePath);
    ~ProbeChannel();
    ProbeChannel(const ProbeChannel &) = delete;
    ProbeChannel &operator=(const ProbeChannel &) = delete;

    // PILOTBENCH_PROBE, and PILOTBENCH_PROBE_FD / _INODE when there is a pipe.
    void addTo(QProcessEnvironment &env) const;
    // The descriptor the job inherits; -1 without a pipe. Between fork and exec, in the child,
    // clear its FD_CLOEXEC (fcntl is async-signal-safe): keepOpenInChild does that.
    int jobFd() const { return m_writeFd; }
    static void keepOpenInChild(int fd);
    // After the job started: our copy of its end closes, so the pipe ends when the job's tree does.
    void closeJobEnd();

    // Reads what is there without waiting, at most `budget` bytes from each source, and hands each
    // complete line to `sink` and each over-long line's refusal to `tooLong`.
    template <typename Sink, typename TooLong>
    void read(qint64 budget, Sink &&sink, TooLong &&tooLong)
    {
        readSome(m_pipeFd, m_pipeLines, m_pipeEnded, budget, sink, tooLong);
        openFile();
        readSome(m_fileFd, m_fileLines, m_fileEnded, budget, sink, tooLong);
    }
    // The job's tree is gone: the rest of both sources (up to `budget` bytes each), then their
    // unfinished last lines.
    template <typename Sink, typename TooLong>
    void finish(qint64 budget, Sink &&sink, TooLong &&tooLong)
    {
        m_leftUnread = false;
        read(budget, sink, tooLong);
        m_pipeLines.flush(sink);
        m_fileLines.flush(sink);
    }

    // Why the file was refused ("" when it was not): a link, a FIFO, a device, a folder.
    const std::string &fileRefused() const { return m_fileRefused; }
    // True when a source still had bytes after finish's budget (the rest was not read).
    bool leftUnread() const { return m_leftUnread; }

private:
    void openFile();
    // One non-blocking read of at most `max` bytes into `buffer`: > 0 bytes, 0 at the end, -1 when
    // nothing is there now.
    static qint64 readNow(int fd, char *buffer, qint64 max);

    template <typename Sink, typename TooLong>
    void readSome(int fd, ProbeLineSplitter &lines, bool &ended, qint64 budget, Sink &sink, TooLong &tooLong)
    {
        if (fd < 0 || ended)
            return;
        char buffer[65536];
        while (budget > 0) {
            const qint64 n = readNow(fd, buffer, std::min<qint64>(budget, sizeof buffer));
            if (n <= 0) {
                // A pipe at its end is over; a regular file at its end may still grow.
                ended = n == 0 && fd == m_pipeFd;
                return;
            }
            budget -= n;
            lines.feed(buffer, n, sink, tooLong);
        }
        m_leftUnread = true;
    }

    QString m_filePath;
    int m_pipeFd = -1, m_writeFd = -1, m_fileFd = -1;
    bool m_pipeEnded = false, m_fileEnded = false, m_leftUnread = false;
    unsigned long long m_pipeInode = 0;
    ProbeLineSplitter m_pipeLines, m_fileLines;
    std::string m_fileRefused;
};

} // namespace pb::watch
