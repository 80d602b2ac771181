#pragma once
// What a running pilot reports as it goes, our own engine's or a watched command's: the recorder,
// the CLI's printer and the GUI's sample buffer each implement it.
#include "result/PilotTypes.h"

namespace pb {

class PilotObserver {
public:
    virtual ~PilotObserver() = default;
    virtual void phaseStarted(Phase /*phase*/, int64_t /*step*/) {}
    virtual void phaseFinished(const PhaseMark & /*mark*/) {}
    virtual void stepFinished(const StepSample & /*sample*/) {}
    virtual void validationFinished(const ValidationResult & /*result*/) {}
    virtual void checkpointWritten(const CheckpointWrite & /*write*/) {}
};

} // namespace pb
