#include "history/HistoryDatabase.h"

#include "history/HistoryJson.h"
#include "history/HistorySchema.h"
#include "util/Errors.h"

#include <QDir>
#include <QFileInfo>
#include <QJsonObject>
#include <QSysInfo>
#include <QUrl>
#include <QSqlError>
#include <spdlog/spdlog.h>

#include <atomic>

#include <cerrno>
#include <csignal>
#include <sys/types.h>

namespace pb::history {
namespace {

QString uniqueConnectionName()
{
    static std::atomic<uint64_t> counter {0};
    return QStringLiteral("pb_history_%1").arg(++counter);
}

[[noreturn]] void throwSql(const QSqlQuery &query, const QString &path, const QString &sql)
{
    // SQLITE_BUSY (5) and SQLITE_LOCKED (6); extended codes keep the primary code in the low byte.
    bool ok = false;
    const int code = query.lastError().nativeErrorCode().toInt(&ok) & 0xff;
    if (ok && (code == 5 || code == 6))
        throw DatabaseBusyError(ExitCode::Failure, describeSqlError(query, path).toStdString() + " (while running: " + sql.left(80).toStdString() + ")");
    throw PilotBenchError(ExitCode::Failure, describeSqlError(query, path).toStdString() + " (while running: " + sql.left(80).toStdString() + ")");
}

std::string quoted(const QString &path) { return "'" + path.toStdString() + "'"; }

// Read-only look before anything is written: a corrupt, newer or foreign file must stay byte for byte
// as it was (opening read-write would already switch it to WAL).
void inspectExisting(const QString &path, bool immutable = false)
{
    Connection probe(path, true, immutable);
    QSqlQuery check(probe.db());
    check.setForwardOnly(true);
    QStringList problems;
    if (!check.exec(QStringLiteral("PRAGMA quick_check"))) {
        // Only SQLITE_CORRUPT (11) and SQLITE_NOTADB (26) say the file is damaged. A read-only
        // folder, a full disk or a permission says nothing about the data: calling that corrupt would
        // invite the user to throw good history away.
        bool ok = false;
        const int code = check.lastError().nativeErrorCode().toInt(&ok) & 0xff;
        if (!ok || (code != 11 && code != 26))
            throw PilotBenchError(ExitCode::Failure, "history database " + quoted(path) + " cannot be read here (" + check.lastError().databaseText().toStdString()
                                                         + "): check the folder's permissions and free space; the file was not changed and is not known to be damaged");
        problems << check.lastError().databaseText();
    } else {
        while (check.next()) {
            const QString line = check.value(0).toString();
            if (line != QLatin1String("ok"))
                problems << line;
            if (problems.size() >= 3)
                break;
        }
    }
    check.finish();
    if (!problems.isEmpty())
        throw InvalidInputError(path.toStdString(),
            "the history database is corrupt or not an SQLite file (" + problems.join(QStringLiteral("; ")).toStdString()
            + "); it was left untouched: move it aside and start a new one with --db, or restore a backup");
    const int version = probe.scalar(QStringLiteral("PRAGMA user_version")).toInt();
    if (version > kSchemaVersion)
        throw InvalidInputError(path.toStdString(),
            "the history database has schema version " + std::to_string(version) + ", written by a newer PilotBench; this build reads versions up to "
            + std::to_string(kSchemaVersion) + ". It was not changed; open it with a newer PilotBench or choose another --db");
    const int appId = probe.scalar(QStringLiteral("PRAGMA application_id")).toInt();
    const int tables = probe.scalar(QStringLiteral("SELECT count(*) FROM sqlite_schema")).toInt();
    if (appId != kApplicationId && (appId != 0 || tables > 0))
        throw InvalidInputError(path.toStdString(), "this SQLite file is not a PilotBench history database (application_id "
            + std::to_string(appId) + "); it was left untouched");
}

QString backupPath(const QString &path, int version)
{
    const QString base = path + QStringLiteral(".v%1-backup").arg(version);
    QString candidate = base;
    for (int i = 1; QFileInfo::exists(candidate); ++i)
        candidate = base + QStringLiteral(".%1").arg(i);
    return candidate;
}

void migrate(const Connection &c, bool fresh)
{
    int version = c.scalar(QStringLiteral("PRAGMA user_version")).toInt();
    if (version == kSchemaVersion)
        return;
    QString backup;
    if (!fresh && version > 0) {
        // A copy of the user's data before the schema changes; VACUUM INTO gives a consistent file even
        // with a WAL beside it. Kept after success too: the user deletes it when satisfied.
        backup = backupPath(c.path(), version);
        c.exec(QStringLiteral("VACUUM INTO ?"), {backup});
        spdlog::info("history: backed up {} (schema v{}) to {} before migrating", c.path().toStdString(), version, backup.toStdString());
    }
    c.exec(QStringLiteral("BEGIN IMMEDIATE"));
    try {
        version = c.scalar(QStringLiteral("PRAGMA user_version")).toInt(); // another instance may have migrated meanwhile
        if (version < kSchemaVersion) {
            migrateSchema(c, version);
            c.exec(QStringLiteral("PRAGMA application_id = %1").arg(kApplicationId));
            c.exec(QStringLiteral("PRAGMA user_version = %1").arg(kSchemaVersion));
        }
        c.exec(QStringLiteral("COMMIT"));
    } catch (const PilotBenchError &e) {
        QSqlQuery(c.db()).exec(QStringLiteral("ROLLBACK"));
        throw PilotBenchError(ExitCode::Failure, "migrating " + quoted(c.path()) + " from schema v" + std::to_string(version) + " to v"
            + std::to_string(kSchemaVersion) + " failed, the file is unchanged: " + e.what()
            + (backup.isEmpty() ? std::string() : "; a backup is at " + quoted(backup)));
    }
    if (version > 0)
        spdlog::info("history: migrated {} from schema v{} to v{}", c.path().toStdString(), version, kSchemaVersion);
}

} // namespace

Connection::Connection(const QString &path, bool readOnly, bool immutable)
    : m_name(uniqueConnectionName()), m_path(path), m_readOnly(readOnly || immutable)
{
    QSqlDatabase db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), m_name);
    if (!db.isValid())
        throw PilotBenchError(ExitCode::Failure, "the Qt SQLite driver (QSQLITE) is not available: install the Qt 6 SQL plugins");
    if (immutable) {
        QUrl uri = QUrl::fromLocalFile(QFileInfo(path).absoluteFilePath());
        uri.setQuery(QStringLiteral("immutable=1"));
        db.setDatabaseName(uri.toString(QUrl::FullyEncoded));
        db.setConnectOptions(QStringLiteral("QSQLITE_OPEN_READONLY;QSQLITE_OPEN_URI"));
    } else {
        db.setDatabaseName(path);
        db.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=%1%2").arg(kBusyTimeoutMs).arg(readOnly ? QStringLiteral(";QSQLITE_OPEN_READONLY") : QString()));
    }
    if (!db.open()) {
        const std::string reason = db.lastError().text().toStdString();
        db = QSqlDatabase(); // the destructor will not run: release the name here
        QSqlDatabase::removeDatabase(m_name);
        throw PilotBenchError(ExitCode::Failure, "cannot open history database " + quoted(path) + ": " + reason);
    }
}

Connection::~Connection()
{
    {
        QSqlDatabase db = QSqlDatabase::database(m_name, false);
        db.close();
    }
    QSqlDatabase::removeDatabase(m_name);
}

QSqlDatabase Connection::db() const { return QSqlDatabase::database(m_name, false); }

QSqlQuery Connection::exec(const QString &sql, std::initializer_list<QVariant> values) const
{
    QSqlQuery query(db());
    query.setForwardOnly(true);
    bool ok;
    if (values.size() == 0) {
        ok = query.exec(sql);
    } else {
        ok = query.prepare(sql);
        for (const QVariant &v : values)
            query.addBindValue(v);
        ok = ok && query.exec();
    }
    if (!ok)
        throwSql(query, m_path, sql);
    return query;
}

QSqlQuery Connection::prepare(const QString &sql) const
{
    QSqlQuery query(db());
    query.setForwardOnly(true);
    if (!query.prepare(sql))
        throwSql(query, m_path, sql);
    return query;
}

void Connection::execPrepared(QSqlQuery &query) const
{
    if (!query.exec())
        throwSql(query, m_path, query.lastQuery());
}

QVariant Connection::scalar(const QString &sql, std::initializer_list<QVariant> values) const
{
    QSqlQuery query = exec(sql, values);
    return query.next() ? query.value(0) : QVariant();
}

bool isDiskFull(const QSqlQuery &query)
{
    // SQLITE_FULL (13); extended codes keep the primary code in the low byte.
    bool ok = false;
    const int code = query.lastError().nativeErrorCode().toInt(&ok);
    return ok && (code & 0xff) == 13;
}

QString describeSqlError(const QSqlQuery &query, const QString &path)
{
    if (isDiskFull(query))
        return QStringLiteral("history database '%1' is full (no space left on the disk, or its size limit reached)").arg(path);
    return QStringLiteral("history database '%1': %2").arg(path, query.lastError().text());
}

namespace {

// SQLite reads ":memory:" and, where URIs are enabled, "file:..." (mode=memory, vfs=...) as something
// other than the file named; a history there records nowhere once the process ends.
void requireFileName(const QString &path)
{
    if (path.trimmed().isEmpty())
        throw InvalidInputError("--db", "the history database path is empty; name a file");
    if (path == QLatin1String(":memory:") || path.startsWith(QLatin1String("file:"), Qt::CaseInsensitive))
        throw InvalidInputError("--db", "'" + path.toStdString() + "' is not a file: the history must be a database file that outlives the run"
                                        " (an in-memory or URI database records nowhere); name a file path (write ./" + path.toStdString()
                                        + " for a file of that name)");
}

} // namespace

std::unique_ptr<Connection> openHistoryForReading(const QString &path)
{
    requireFileName(path);
    const QFileInfo info(path);
    if (!info.exists() || info.size() == 0 || !info.isFile())
        return openHistory(path);
    // access(2) answers for this user, read-only mounts included.
    const bool writable = info.isWritable() && QFileInfo(info.absolutePath()).isWritable();
    if (writable)
        return openHistory(path);
    // A history in WAL mode (PilotBench's own) needs its -shm index, which SQLite cannot create in a
    // folder this user cannot write. With no -wal content beside it the file holds every commit, so
    // it is read as immutable (no locks, no -shm); a -wal with content cannot be read consistently.
    const bool wal = [&] {
        QFile f(path);
        return f.open(QIODevice::ReadOnly) && f.read(20).size() == 20 && f.seek(18) && f.read(1) == QByteArray(1, '\x02');
    }();
    const QFileInfo shm(path + QStringLiteral("-shm"));
    const QFileInfo walFile(path + QStringLiteral("-wal"));
    const bool immutable = wal && !(shm.exists() && shm.isReadable()) && !QFileInfo(info.absolutePath()).isWritable();
    if (immutable && walFile.exists() && walFile.size() > 0)
        throw PilotBenchError(ExitCode::Failure, "history database '" + path.toStdString() + "' cannot be read here: it has uncommitted pages in its -wal file and"
            " its folder cannot be written for the -shm index SQLite needs; open it once where it can be written (that folds the -wal in), or copy the"
            " folder somewhere writable. It was not changed");
    inspectExisting(path, immutable);
    auto c = std::make_unique<Connection>(path, true, immutable);
    const int version = c->scalar(QStringLiteral("PRAGMA user_version")).toInt();
    if (version < kSchemaVersion)
        throw InvalidInputError(path.toStdString(), "the history database has schema version " + std::to_string(version) + " and cannot be written here"
            " (no write permission on the file or its folder), so it cannot be migrated to version " + std::to_string(kSchemaVersion)
            + " for reading; open it once where it can be written, or copy it somewhere writable. It was not changed");
    spdlog::info("history: {} opened read-only{} (it cannot be written here)", path.toStdString(), immutable ? " and immutable" : "");
    return c;
}

std::unique_ptr<Connection> openHistory(const QString &path)
{
    requireFileName(path);
    const QFileInfo info(path);
    const bool fresh = !info.exists() || info.size() == 0;
    if (info.exists() && !info.isFile())
        throw InvalidInputError(path.toStdString(), "is not a file");
    if (!fresh)
        inspectExisting(path);
    else if (!QDir().mkpath(info.absolutePath()))
        throw PilotBenchError(ExitCode::Failure, "cannot create the folder of history database " + quoted(path));
    auto c = std::make_unique<Connection>(path, false);
    if (fresh)
        c->exec(QStringLiteral("PRAGMA page_size = 16384")); // fewer overflow pages per sample chunk
    const QString mode = c->scalar(QStringLiteral("PRAGMA journal_mode = WAL")).toString();
    if (mode.compare(QLatin1String("wal"), Qt::CaseInsensitive) != 0)
        spdlog::warn("history: {} stays in journal mode '{}' (WAL unavailable here)", path.toStdString(), mode.toStdString());
    c->exec(QStringLiteral("PRAGMA synchronous = NORMAL"));
    c->exec(QStringLiteral("PRAGMA foreign_keys = ON"));
    migrate(*c, fresh);
    try {
        markInterruptedRuns(*c);
    } catch (const std::exception &e) {
        // A read-only or full history still opens for reading; the runs are marked next time.
        spdlog::warn("history: could not mark interrupted runs in {}: {}", path.toStdString(), e.what());
    }
    return c;
}

QString thisHost() { return QSysInfo::machineHostName(); }

LateFinish finishRunLate(const QString &path, int64_t runId, const QString &verdict, const QJsonObject &summaryJson)
{
    LateFinish result;
    try {
        // No openHistory: its housekeeping would mark this very run interrupted if the pid were reused.
        Connection c(path, false);
        result.storedSamples = c.scalar(QStringLiteral("SELECT COALESCE(SUM(sample_count), 0) FROM sample_chunks WHERE run_id = ?"), {qlonglong(runId)}).toLongLong();
        QJsonObject summary = summaryJson;
        summary.insert(QStringLiteral("recorded_steps"), double(result.storedSamples));
        c.exec(QStringLiteral("UPDATE runs SET status = 'done', verdict = ?, finished_at = ?, summary_json = ? WHERE id = ? AND status = 'running'"),
               {verdict, isoUtc(QDateTime::currentDateTimeUtc()), compactJson(summary), qlonglong(runId)});
    } catch (const std::exception &e) {
        result.error = e.what();
    }
    return result;
}

namespace {
bool processAlive(qint64 pid)
{
    if (pid <= 0)
        return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}
} // namespace

int markInterruptedRuns(const Connection &c)
{
    QSqlQuery q = c.exec(QStringLiteral("SELECT id, pid, host, summary_json, origin_host FROM runs WHERE status = 'running'"));
    struct Gone { qlonglong id; QString message; QJsonObject summary; };
    std::vector<Gone> gone;
    const QString host = thisHost();
    while (q.next()) {
        const QVariant pid = q.value(1);
        const QString runHost = q.value(2).toString();
        QString message;
        if (!q.value(4).toString().isEmpty())
            message = QStringLiteral("interrupted: imported from %1 while it was still running there").arg(q.value(4).toString());
        else if (pid.isNull() || runHost.isEmpty())
            message = QStringLiteral("interrupted: recorded before runs kept their process, and never finished");
        else if (runHost == host && !processAlive(pid.toLongLong()))
            message = QStringLiteral("interrupted: process %1 on %2 ended without recording a result").arg(pid.toLongLong()).arg(runHost);
        else
            continue;
        gone.push_back({q.value(0).toLongLong(), message, parseJsonObject(q.value(3).toString())});
    }
    q.finish();
    for (Gone &g : gone) {
        g.summary.insert(QStringLiteral("verdict"), QStringLiteral("interrupted"));
        g.summary.insert(QStringLiteral("message"), g.message);
        c.exec(QStringLiteral("UPDATE runs SET status = 'interrupted', verdict = 'interrupted', finished_at = ?, summary_json = ? WHERE id = ? AND status = 'running'"),
               {isoUtc(QDateTime::currentDateTimeUtc()), compactJson(g.summary), g.id});
        spdlog::info("history: run {} marked interrupted ({})", g.id, g.message.toStdString());
    }
    return static_cast<int>(gone.size());
}

} // namespace pb::history
