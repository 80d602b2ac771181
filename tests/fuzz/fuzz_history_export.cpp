// A history export (`history import`): the runs as read, before any database. The samples of a run
// read must survive the column-packed chunks they are stored in.
#include "FuzzSupport.h"

#include "history/HistoryExport.h"
#include "history/SampleChunk.h"
#include "util/Errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    std::vector<pb::ExportedRun> runs;
    try {
        runs = pb::parseRunsExport(pb::fuzz::bytes(data, size), QStringLiteral("export.json"));
    } catch (const pb::PilotBenchError &) {
        return 0;
    }
    for (const pb::ExportedRun &run : runs) {
        FUZZ_REQUIRE(!run.run.uuid.isEmpty() && run.run.startedAt.isValid());
        if (run.samples.empty())
            continue;
        const QByteArray chunk = pb::history::encodeChunk(run.samples.data(), run.samples.size());
        std::vector<pb::StepSample> back;
        pb::history::appendChunk(chunk, back, QStringLiteral("chunk"));
        FUZZ_REQUIRE(back.size() == run.samples.size());
        FUZZ_REQUIRE(pb::history::encodeChunk(back.data(), back.size()) == chunk);
    }
    return 0;
}
