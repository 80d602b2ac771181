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

void CurrentRun::liveFinished(qint64 runId) { select(runId); }

} // namespace pb::ui
