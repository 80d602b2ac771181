#pragma once
// One SQLite connection to a history file: unique name, used only on the thread that made it (Qt's
// rule), opened through the checks every user of the file needs (integrity, version, migration).
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QString>
#include <QVariant>

#include <initializer_list>
#include <memory>

namespace pb::history {

constexpr int kBusyTimeoutMs = 5000;

class Connection final {
public:
    Connection(const QString &path, bool readOnly);
    ~Connection();
    Q_DISABLE_COPY_MOVE(Connection)

    QSqlDatabase db() const;
    const QString &path() const { return m_path; }

    // Runs `sql` with positional bindings; throws PilotBenchError naming the file and `sql` on failure.
    QSqlQuery exec(const QString &sql, std::initializer_list<QVariant> values = {}) const;
    QSqlQuery prepare(const QString &sql) const;
    void execPrepared(QSqlQuery &query) const;
    QVariant scalar(const QString &sql, std::initializer_list<QVariant> values = {}) const;

private:
    QString m_name;
    QString m_path;
};

// Opens `path` for reading and writing, creating it (and its folder) when missing. Refuses a file
// that fails PRAGMA quick_check, one from a newer PilotBench (user_version above ours) and a foreign
// SQLite file, leaving each untouched (InvalidInputError naming the path). Migrates an older one
// forward in one transaction after a VACUUM INTO backup next to it. Sets WAL, busy_timeout,
// synchronous=NORMAL and foreign keys.
std::unique_ptr<Connection> openHistory(const QString &path);
// The host name runs are recorded under (QSysInfo::machineHostName).
QString thisHost();
// Runs still marked running whose recording process is gone (same host, PID no longer alive; or
// written before runs recorded their process) become status and verdict "interrupted", with the
// reason in their summary. Runs of other hosts are left alone. Returns how many were marked.
int markInterruptedRuns(const Connection &connection);

// "database is full" and friends: a message a user can act on for a failed statement.
QString describeSqlError(const QSqlQuery &query, const QString &path);
bool isDiskFull(const QSqlQuery &query);

} // namespace pb::history
