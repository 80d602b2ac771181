// A checkpoint's manifest.json and state.json (restore, `checkpoint verify`, the export copy check).
// Every input goes to both readers; the corpus holds both kinds of file.
#include "FuzzSupport.h"

#include "checkpoint/CheckpointManifest.h"
#include "util/Errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QByteArray bytes = pb::fuzz::bytes(data, size);
    try {
        const pb::CheckpointManifest manifest = pb::parseCheckpointManifest(bytes, "manifest.json");
        // The manifest lists exactly the checkpoint's files, in order, each with a size and a digest.
        FUZZ_REQUIRE(manifest.files.size() == pb::checkpointFiles().size());
        for (size_t i = 0; i < manifest.files.size(); ++i)
            FUZZ_REQUIRE(manifest.files[i].file == pb::checkpointFiles()[i] && manifest.files[i].bytes >= 0 && manifest.files[i].sha256.size() == 64);
    } catch (const pb::PilotBenchError &) {
    }
    try {
        (void)pb::parseCheckpointState(bytes, "state.json");
    } catch (const pb::PilotBenchError &) {
    }
    return 0;
}
