#pragma once
// The window's one subject: the run every view shows and acts on. History's selection makes a run
// current; a run started here is current from its start (a watched command from its end, when it
// gets its id) and stays so. The dashboard (unless a live run owns it), the History table and
// details, Export PDF, peak memory and the staged checklist follow it; no view keeps its own idea
// of "the last run".
#include <QObject>

namespace pb::ui {

class CurrentRun final : public QObject {
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(CurrentRun)
public:
    explicit CurrentRun(QObject *parent = nullptr) : QObject(parent) {}
    qint64 id() const { return m_id; }

public Q_SLOTS:
    // The user picked `runId` (History's selection).
    void select(qint64 runId);
    // A run began here (0: a watched command, whose id is known only when it ends).
    void liveStarted(qint64 runId);
    // The live run ended as `runId` (0: it was not recorded).
    void liveFinished(qint64 runId);

Q_SIGNALS:
    void changed(qint64 runId);

private:
    qint64 m_id = 0;
};

} // namespace pb::ui
