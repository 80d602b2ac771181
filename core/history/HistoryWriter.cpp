#include "history/HistoryWriter.h"

#include "history/HistoryDatabase.h"
#include "history/HistoryJson.h"
#include "history/SampleChunk.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QCoreApplication>
#include <QJsonDocument>
#include <QElapsedTimer>
#include <QUuid>
#include <spdlog/spdlog.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>

namespace pb {
namespace {

struct BeginItem { RunStart start; std::shared_ptr<std::promise<int64_t>> id; };
struct PhaseItem { int64_t runId; PhaseMark mark; };
struct ValidationItem { int64_t runId; ValidationResult result; };
struct CheckpointItem { int64_t runId; CheckpointWrite write; };
struct FinishItem { int64_t runId; PilotSummary summary; QJsonObject summaryJson; };
struct CalibrationItem { CalibrationRecord record; };
using Event = std::variant<BeginItem, PhaseItem, ValidationItem, CheckpointItem, FinishItem, CalibrationItem>;
using SampleItem = std::pair<int64_t, StepSample>;

// The writer thread's statements, prepared once on its connection.
struct Statements {
    explicit Statements(const history::Connection &c)
        : insertRun(c.prepare(QStringLiteral(
              "INSERT INTO runs (run_uuid, kind, status, verdict, started_at, name, model, device, card, config_json, config_hash,"
              " environment_json, tags, notes, plan_id, parent_run_id, pid, host) VALUES (?, ?, 'running', '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")))
        , insertChunk(c.prepare(QStringLiteral(
              "INSERT INTO sample_chunks (run_id, seq, first_step, last_step, sample_count, data) VALUES (?, ?, ?, ?, ?, ?)")))
        , insertPhase(c.prepare(QStringLiteral(
              "INSERT INTO phase_marks (run_id, phase, step, start_ms, duration_ms, peak_allocated_bytes, peak_device_used_bytes)"
              " VALUES (?, ?, ?, ?, ?, ?, ?)")))
        , insertValidation(c.prepare(QStringLiteral("INSERT INTO validations (run_id, step, loss, batches, duration_ms) VALUES (?, ?, ?, ?, ?)")))
        , insertCheckpoint(c.prepare(QStringLiteral("INSERT INTO checkpoints (run_id, step, path, bytes, write_ms) VALUES (?, ?, ?, ?, ?)")))
        , finish(c.prepare(QStringLiteral("UPDATE runs SET status = 'done', verdict = ?, finished_at = ?, summary_json = ? WHERE id = ?")))
    {
    }
    QSqlQuery insertRun, insertChunk, insertPhase, insertValidation, insertCheckpoint, finish;
};

void bind(QSqlQuery &q, std::initializer_list<QVariant> values)
{
    int i = 0;
    for (const QVariant &v : values)
        q.bindValue(i++, v);
}

QVariant optionalId(const std::optional<int64_t> &id) { return id ? QVariant(qlonglong(*id)) : QVariant(); }

} // namespace

struct HistoryWriter::Impl {
    QString path;
    Options options;

    std::mutex mutex;
    std::condition_variable wake;
    std::condition_variable done;
    std::vector<SampleItem> samples;
    std::vector<Event> events;
    bool stopping = false;
    bool urgent = false;
    uint64_t requestedTicket = 0;
    uint64_t completedTicket = 0;
    std::atomic<bool> failed {false};
    std::string lastError;
    ErrorCallback onError;
    std::thread thread;
    std::promise<void> opened; // a member: it must outlive set_value on the writer thread

    // Writer-thread state only.
    std::unique_ptr<history::Connection> connection;
    std::unique_ptr<Statements> statements;
    std::unordered_map<int64_t, int64_t> nextSeq;  // known runs -> next chunk seq
    std::unordered_set<int64_t> unknownRuns;

    void run();
    void writeBatch(std::vector<SampleItem> &batchSamples, std::vector<Event> &batchEvents);
    // One transaction for the whole batch; throws (history::DatabaseBusyError for a lock) and leaves
    // the rollback to the caller.
    void attemptBatch(std::vector<SampleItem> &batchSamples, std::vector<Event> &batchEvents, std::vector<std::pair<BeginItem *, int64_t>> &begun);
    bool knownRun(int64_t runId);
    void writeSamples(int64_t runId, const std::vector<StepSample> &runSamples);
    void compactIfFragmented(int64_t runId);
    void fail(const std::string &message, std::vector<Event> &batchEvents);
    bool enqueue(Event event, bool wakeNow);
};

void HistoryWriter::Impl::run()
{
    try {
        connection = history::openHistory(path);
        if (options.maxPageCount > 0)
            connection->exec(QStringLiteral("PRAGMA max_page_count = %1").arg(options.maxPageCount));
        statements = std::make_unique<Statements>(*connection);
        opened.set_value();
    } catch (...) {
        statements.reset();
        connection.reset();
        opened.set_exception(std::current_exception());
        return;
    }
    std::vector<SampleItem> batchSamples;
    std::vector<Event> batchEvents;
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
        wake.wait_for(lock, std::chrono::milliseconds(options.batchIntervalMs),
                      [&] { return stopping || urgent || samples.size() >= options.batchMaxItems; });
        batchSamples.swap(samples);
        batchEvents.swap(events);
        urgent = false;
        const uint64_t ticket = requestedTicket;
        const bool stop = stopping;
        lock.unlock();
        if (!batchSamples.empty() || !batchEvents.empty())
            writeBatch(batchSamples, batchEvents);
        batchSamples.clear(); // keeps the capacity for the next swap
        batchEvents.clear();
        lock.lock();
        completedTicket = ticket;
        done.notify_all();
        if (stop && samples.empty() && events.empty())
            break;
    }
    lock.unlock();
    statements.reset();
    connection.reset();
}

bool HistoryWriter::Impl::knownRun(int64_t runId)
{
    if (nextSeq.count(runId))
        return true;
    if (unknownRuns.count(runId))
        return false;
    QSqlQuery q = connection->exec(QStringLiteral("SELECT (SELECT COALESCE(MAX(seq) + 1, 0) FROM sample_chunks WHERE run_id = id) FROM runs WHERE id = ?"), {qlonglong(runId)});
    if (!q.next()) {
        spdlog::error("history: dropping records for run {}, which is not in {}", runId, path.toStdString());
        unknownRuns.insert(runId);
        return false;
    }
    nextSeq[runId] = q.value(0).toLongLong();
    return true;
}

void HistoryWriter::Impl::writeSamples(int64_t runId, const std::vector<StepSample> &runSamples)
{
    int64_t &seq = nextSeq[runId];
    for (size_t first = 0; first < runSamples.size(); first += history::kChunkSamples) {
        const size_t n = std::min(history::kChunkSamples, runSamples.size() - first);
        bind(statements->insertChunk, {qlonglong(runId), qlonglong(seq), qlonglong(runSamples[first].step),
                                       qlonglong(runSamples[first + n - 1].step), qlonglong(n), history::encodeChunk(&runSamples[first], n)});
        connection->execPrepared(statements->insertChunk);
        ++seq;
    }
}

// A slow pilot leaves one small chunk per batch; on finish they are packed into full ones so that
// later loads read few rows.
void HistoryWriter::Impl::compactIfFragmented(int64_t runId)
{
    QSqlQuery q = connection->exec(QStringLiteral("SELECT COUNT(*), COALESCE(SUM(sample_count), 0) FROM sample_chunks WHERE run_id = ?"), {qlonglong(runId)});
    q.next();
    const int64_t chunks = q.value(0).toLongLong();
    const int64_t count = q.value(1).toLongLong();
    const int64_t full = (count + int64_t(history::kChunkSamples) - 1) / int64_t(history::kChunkSamples);
    if (chunks <= 2 * full + 1)
        return;
    std::vector<StepSample> all;
    all.reserve(size_t(count));
    QSqlQuery blobs = connection->exec(QStringLiteral("SELECT data FROM sample_chunks WHERE run_id = ? ORDER BY seq"), {qlonglong(runId)});
    while (blobs.next())
        history::appendChunk(blobs.value(0).toByteArray(), all, QStringLiteral("%1, run %2").arg(path).arg(runId));
    blobs.finish();
    connection->exec(QStringLiteral("DELETE FROM sample_chunks WHERE run_id = ?"), {qlonglong(runId)});
    nextSeq[runId] = 0;
    writeSamples(runId, all);
}

void HistoryWriter::Impl::writeBatch(std::vector<SampleItem> &batchSamples, std::vector<Event> &batchEvents)
{
    if (failed) {
        fail(lastError, batchEvents);
        return;
    }
    QElapsedTimer waited;
    for (;;) {
        // What an attempt changes in the writer's own state, restored when it is rolled back.
        const auto seqBefore = nextSeq;
        const auto unknownBefore = unknownRuns;
        std::vector<std::pair<BeginItem *, int64_t>> begun;
        try {
            attemptBatch(batchSamples, batchEvents, begun);
        } catch (const history::DatabaseBusyError &e) {
            QSqlQuery(connection->db()).exec(QStringLiteral("ROLLBACK"));
            nextSeq = seqBefore;
            unknownRuns = unknownBefore;
            if (!waited.isValid()) {
                waited.start();
                spdlog::warn("history: {} is locked by another process; keeping {} sample(s) and {} record(s) in memory and retrying for up to {} s",
                             path.toStdString(), batchSamples.size(), batchEvents.size(), options.lockWaitMs / 1000.0);
            }
            if (waited.elapsed() >= options.lockWaitMs) {
                fail(std::string("recording stopped: the history stayed locked by another process for ") + std::to_string(waited.elapsed() / 1000)
                         + " s, past the " + std::to_string(options.lockWaitMs / 1000) + " s this run waits (" + e.what()
                         + "); everything committed before this batch is kept",
                     batchEvents);
                return;
            }
            continue; // the busy timeout of the failed attempt already paced this loop
        } catch (const std::exception &e) {
            QSqlQuery(connection->db()).exec(QStringLiteral("ROLLBACK"));
            nextSeq = seqBefore;
            unknownRuns = unknownBefore;
            fail(std::string("recording stopped: ") + e.what() + "; everything committed before this batch is kept", batchEvents);
            return;
        }
        if (waited.isValid())
            spdlog::info("history: {} is writable again after {:.1f} s; the held records are committed", path.toStdString(), waited.elapsed() / 1000.0);
        for (auto &[item, id] : begun)
            item->id->set_value(id);
        return;
    }
}

void HistoryWriter::Impl::attemptBatch(std::vector<SampleItem> &batchSamples, std::vector<Event> &batchEvents, std::vector<std::pair<BeginItem *, int64_t>> &begun)
{
    {
        connection->exec(QStringLiteral("BEGIN IMMEDIATE"));
        for (Event &e : batchEvents) {
            auto *b = std::get_if<BeginItem>(&e);
            if (!b)
                continue;
            const RunStart &s = b->start;
            const QDateTime started = s.startedAt.isValid() ? s.startedAt : QDateTime::currentDateTimeUtc();
            bind(statements->insertRun, {QUuid::createUuid().toString(QUuid::WithoutBraces), s.kind, history::isoUtc(started), history::sqlText(s.name),
                                         history::sqlText(s.model), history::sqlText(s.device), history::sqlText(s.card),
                                         history::compactJson(s.configJson), history::sqlText(QString::fromStdString(s.configHash)),
                                         history::compactJson(s.environmentJson),
                                         QString::fromUtf8(QJsonDocument(QJsonArray::fromStringList(s.tags)).toJson(QJsonDocument::Compact)),
                                         history::sqlText(s.notes), optionalId(s.planId), optionalId(s.parentRunId),
                                         qlonglong(QCoreApplication::applicationPid()), history::thisHost()});
            connection->execPrepared(statements->insertRun);
            const int64_t id = statements->insertRun.lastInsertId().toLongLong();
            nextSeq[id] = 0;
            begun.emplace_back(b, id);
        }
        // Group by run, keeping each run's order; a pilot normally has one run open at a time.
        std::map<int64_t, std::vector<StepSample>> byRun;
        for (const SampleItem &item : batchSamples)
            byRun[item.first].push_back(item.second);
        for (const auto &[runId, runSamples] : byRun)
            if (knownRun(runId))
                writeSamples(runId, runSamples);
        for (Event &e : batchEvents) {
            if (auto *p = std::get_if<PhaseItem>(&e); p && knownRun(p->runId)) {
                const PhaseMark &m = p->mark;
                bind(statements->insertPhase, {qlonglong(p->runId), QLatin1String(toString(m.phase)), qlonglong(m.step), m.startMs,
                                               m.durationMs, qlonglong(m.peakAllocatedBytes), qlonglong(m.peakDeviceUsedBytes)});
                connection->execPrepared(statements->insertPhase);
            } else if (auto *v = std::get_if<ValidationItem>(&e); v && knownRun(v->runId)) {
                const ValidationResult &r = v->result;
                bind(statements->insertValidation, {qlonglong(v->runId), qlonglong(r.step), r.loss, qlonglong(r.batches), r.durationMs});
                connection->execPrepared(statements->insertValidation);
            } else if (auto *c = std::get_if<CheckpointItem>(&e); c && knownRun(c->runId)) {
                const CheckpointWrite &w = c->write;
                bind(statements->insertCheckpoint, {qlonglong(c->runId), qlonglong(w.step), QString::fromStdString(w.path), qlonglong(w.bytes), w.writeMs});
                connection->execPrepared(statements->insertCheckpoint);
            }
        }
        for (Event &e : batchEvents) {
            auto *f = std::get_if<FinishItem>(&e);
            if (!f || !knownRun(f->runId))
                continue;
            const QJsonObject summary = f->summaryJson.isEmpty() ? history::toJson(f->summary) : f->summaryJson;
            bind(statements->finish, {QLatin1String(toString(f->summary.verdict)), history::isoUtc(QDateTime::currentDateTimeUtc()),
                                      history::compactJson(summary), qlonglong(f->runId)});
            connection->execPrepared(statements->finish);
            compactIfFragmented(f->runId);
        }
        for (Event &e : batchEvents) {
            auto *cal = std::get_if<CalibrationItem>(&e);
            if (cal && (!cal->record.runId || knownRun(*cal->record.runId)))
                history::insertCalibrationRecord(*connection, cal->record);
        }
        connection->exec(QStringLiteral("COMMIT"));
    }
}

void HistoryWriter::Impl::fail(const std::string &message, std::vector<Event> &batchEvents)
{
    ErrorCallback callback;
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failed) {
            lastError = message;
            callback = onError;
            failed = true;
            spdlog::error("history: {}", message);
        }
    }
    for (Event &e : batchEvents)
        if (auto *b = std::get_if<BeginItem>(&e))
            b->id->set_exception(std::make_exception_ptr(PilotBenchError(ExitCode::Failure, lastError)));
    if (callback)
        callback(message);
}

bool HistoryWriter::Impl::enqueue(Event event, bool wakeNow)
{
    if (failed)
        return false;
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back(std::move(event));
    if (wakeNow) {
        urgent = true;
        wake.notify_one();
    }
    return true;
}

int defaultHistoryLockWaitMs()
{
    constexpr int kDefaultS = 60;
    const QByteArray text = qgetenv("PILOTBENCH_HISTORY_LOCK_WAIT_S");
    if (text.isEmpty())
        return kDefaultS * 1000;
    bool ok = false;
    const int seconds = text.toInt(&ok);
    if (!ok || seconds < 0 || seconds > 86400) {
        spdlog::warn("PILOTBENCH_HISTORY_LOCK_WAIT_S='{}' is not a whole number of seconds from 0 to 86400; waiting {} s for a locked history", text.toStdString(), kDefaultS);
        return kDefaultS * 1000;
    }
    return seconds * 1000;
}

HistoryWriter::HistoryWriter(const QString &path) : HistoryWriter(path, Options()) {}

HistoryWriter::HistoryWriter(const QString &path, Options options) : d(std::make_unique<Impl>())
{
    d->path = path;
    d->options = options;
    std::future<void> result = d->opened.get_future();
    d->thread = std::thread([impl = d.get()] { impl->run(); });
    try {
        result.get();
    } catch (...) {
        d->thread.join();
        throw;
    }
}

HistoryWriter::~HistoryWriter()
{
    {
        std::lock_guard<std::mutex> lock(d->mutex);
        d->stopping = true;
        d->wake.notify_one();
    }
    if (d->thread.joinable())
        d->thread.join();
}

int64_t HistoryWriter::beginRun(const RunStart &start)
{
    if (!historyRunKinds().contains(start.kind))
        throw InvalidInputError("run.kind", "'" + start.kind.toStdString() + "' is not a run kind; use one of: "
                                + historyRunKinds().join(QStringLiteral(", ")).toStdString());
    auto id = std::make_shared<std::promise<int64_t>>();
    std::future<int64_t> result = id->get_future();
    if (!d->enqueue(BeginItem {start, id}, true))
        throw PilotBenchError(ExitCode::Failure, lastError());
    return result.get();
}

bool HistoryWriter::appendSample(int64_t runId, const StepSample &sample)
{
    if (d->failed)
        return false;
    std::lock_guard<std::mutex> lock(d->mutex);
    d->samples.emplace_back(runId, sample);
    if (d->samples.size() == d->options.batchMaxItems)
        d->wake.notify_one();
    return true;
}

bool HistoryWriter::appendPhase(int64_t runId, const PhaseMark &mark) { return d->enqueue(PhaseItem {runId, mark}, false); }
bool HistoryWriter::appendValidation(int64_t runId, const ValidationResult &result) { return d->enqueue(ValidationItem {runId, result}, false); }
bool HistoryWriter::appendCheckpoint(int64_t runId, const CheckpointWrite &write) { return d->enqueue(CheckpointItem {runId, write}, false); }

bool HistoryWriter::finishRun(int64_t runId, const PilotSummary &summary, const QJsonObject &summaryJson)
{
    if (d->enqueue(FinishItem {runId, summary, summaryJson}, true))
        return true;
    QJsonObject json = summaryJson.isEmpty() ? history::toJson(summary) : summaryJson;
    json.insert(QStringLiteral("verdict"), QLatin1String(toString(Verdict::Failed)));
    json.insert(QStringLiteral("message"), QString::fromStdString("not fully recorded (" + lastError() + "); the run itself ended "
                                                                  + toString(summary.verdict) + (summary.message.empty() ? "" : ": " + summary.message)));
    const history::LateFinish late = history::finishRunLate(d->path, runId, QLatin1String(toString(Verdict::Failed)), json);
    if (late.error.empty())
        spdlog::warn("history: run {} marked failed on a fresh connection, with {} step(s) recorded", runId, late.storedSamples);
    else
        spdlog::error("history: run {} could not be marked failed either ({}); it shows as interrupted once this process has ended", runId, late.error);
    return false;
}

bool HistoryWriter::appendCalibration(const CalibrationRecord &record) { return d->enqueue(CalibrationItem {record}, false); }

bool HistoryWriter::flush()
{
    std::unique_lock<std::mutex> lock(d->mutex);
    if (d->failed)
        return false;
    const uint64_t ticket = ++d->requestedTicket;
    d->urgent = true;
    d->wake.notify_one();
    d->done.wait(lock, [&] { return d->completedTicket >= ticket || d->failed; });
    return !d->failed;
}

bool HistoryWriter::failed() const { return d->failed; }

std::string HistoryWriter::lastError() const
{
    std::lock_guard<std::mutex> lock(d->mutex);
    return d->lastError;
}

void HistoryWriter::setErrorCallback(ErrorCallback callback)
{
    std::lock_guard<std::mutex> lock(d->mutex);
    d->onError = std::move(callback);
}

} // namespace pb
