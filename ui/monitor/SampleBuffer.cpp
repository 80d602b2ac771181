#include "monitor/SampleBuffer.h"

#include <utility>

namespace pb::ui {

void SampleBuffer::appendSample(const StepSample &sample)
{
    std::lock_guard lock(m_mutex);
    m_pending.samples.push_back(sample);
}

void SampleBuffer::appendPhase(const PhaseMark &mark)
{
    std::lock_guard lock(m_mutex);
    m_pending.phases.push_back(mark);
}

void SampleBuffer::setPhase(Phase phase, int64_t step)
{
    std::lock_guard lock(m_mutex);
    m_pending.currentPhase = phase;
    m_pending.currentPhaseStep = step;
}

SampleDrain SampleBuffer::drain()
{
    SampleDrain out;
    std::lock_guard lock(m_mutex);
    out.currentPhase = m_pending.currentPhase;
    out.currentPhaseStep = m_pending.currentPhaseStep;
    std::swap(out.samples, m_pending.samples);
    std::swap(out.phases, m_pending.phases);
    return out;
}

void SampleBuffer::clear()
{
    std::lock_guard lock(m_mutex);
    m_pending = SampleDrain {};
}

} // namespace pb::ui
