#pragma once
// One SQLite connection to a history file: unique name, used only on the thread that made it (Qt's
// rule), opened through the checks every user of the file needs (integrity, version, migration).
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QString>
#include <QVariant>

#include "util/Errors.h"

#include <initializer_list>
#include <memory>
#include <string>

class QJsonObject;

namespace pb::history {

constexpr int kBusyTimeoutMs = 5000;

// A statement refused because another connection holds the lock (SQLITE_BUSY, SQLITE_LOCKED) past
// the busy timeout: the one failure that waiting longer can cure.
class DatabaseBusyError final : public PilotBenchError {
public:
    using PilotBenchError::PilotBenchError;
};

class Connection final {
public:
    // `immutable`: read-only through SQLite's immutable=1 URI, no locks and no -shm (see
    // openHistoryForReading for the one case that needs it).
    Connection(const QString &path, bool readOnly, bool immutable = false);
    ~Connection();
    Q_DISABLE_COPY_MOVE(Connection)

    QSqlDatabase db() const;
    const QString &path() const { return m_path; }
    bool readOnly() const { return m_readOnly; }

    // Runs `sql` with positional bindings; throws PilotBenchError naming the file and `sql` on failure.
    QSqlQuery exec(const QString &sql, std::initializer_list<QVariant> values = {}) const;
    QSqlQuery prepare(const QString &sql) const;
    void execPrepared(QSqlQuery &query) const;
    QVariant scalar(const QString &sql, std::initializer_list<QVariant> values = {}) const;

private:
    QString m_name;
    QString m_path;
    bool m_readOnly = false;
};

// Opens `path` for reading and writing, creating it (and its folder) when missing. Refuses a file
// that fails PRAGMA quick_check, one from a newer PilotBench (user_version above ours) and a foreign
// SQLite file, leaving each untouched (InvalidInputError naming the path). Migrates an older one
// forward in one transaction after a VACUUM INTO backup next to it. Sets WAL, busy_timeout,
// synchronous=NORMAL and foreign keys.
// Refuses (InvalidInputError naming --db) an empty name, ":memory:" and "file:" URIs: a history
// that is not a file records nowhere.
std::unique_ptr<Connection> openHistory(const QString &path);
// For commands that only read: where the file (or its folder, for the journal) cannot be written,
// opens it read-only with the same checks and no housekeeping (no WAL switch, no migration, runs
// left running are shown as they are); elsewhere as openHistory. A read-only file of an older
// schema is refused, naming the path, since reading it needs the migration written first.
std::unique_ptr<Connection> openHistoryForReading(const QString &path);
// The host name runs are recorded under (QSysInfo::machineHostName).
QString thisHost();
// Runs still marked running whose recording process is gone (same host, PID no longer alive; or
// written before runs recorded their process) become status and verdict "interrupted", with the
// reason in their summary. Runs of other hosts are left alone. Returns how many were marked.
int markInterruptedRuns(const Connection &connection);

// After a writer failed (a lock held past its wait, a full disk): one more attempt on a fresh
// connection, waiting out the busy timeout, to end run `runId` (if still running) with `verdict` and
// `summaryJson`, so the history agrees with what the command printed. `storedSamples` is what the
// history kept of the run's steps (-1 when it could not be read); `error` is empty when written.
struct LateFinish {
    int64_t storedSamples = -1;
    std::string error;
};
LateFinish finishRunLate(const QString &path, int64_t runId, const QString &verdict, const QJsonObject &summaryJson);

// "database is full" and friends: a message a user can act on for a failed statement.
QString describeSqlError(const QSqlQuery &query, const QString &path);
bool isDiskFull(const QSqlQuery &query);

} // namespace pb::history
