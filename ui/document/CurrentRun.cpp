#include "document/CurrentRun.h"

namespace pb::ui {

void CurrentRun::select(qint64 runId)
{
    if (runId <= 0 || runId == m_id)
        return;
    m_id = runId;
    Q_EMIT changed(m_id);
}

void CurrentRun::liveStarted(qint64 runId) { select(runId); }

void CurrentRun::liveFinished(qint64 runId)
{
    // Announced even when it is already current: its record went from running to its verdict.
    if (runId <= 0)
        return;
    m_id = runId;
    Q_EMIT changed(m_id);
}

} // namespace pb::ui
