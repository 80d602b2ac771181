// A checkpoint's manifest.json and state.json (restore, `checkpoint verify`, the export copy check).
// Every input goes to both readers; the corpus holds both kinds of file.
#include "FuzzSupport.h"

#include "checkpoint/CheckpointLayout.h"
#include "checkpoint/CheckpointManifest.h"
#include "util/Errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QByteArray bytes = pb::fuzz::bytes(data, size);
    try {
        const pb::CheckpointManifest manifest = pb::parseCheckpointManifest(bytes, "manifest.json");
        // Version 1 lists exactly its five files, in order; version 2 a complete set of its layout.
        // Each with a size and a digest.
        if (manifest.version == 1) {
            FUZZ_REQUIRE(manifest.files.size() == pb::checkpointFilesV1().size());
            for (size_t i = 0; i < manifest.files.size(); ++i)
                FUZZ_REQUIRE(manifest.files[i].file == pb::checkpointFilesV1()[i]);
        } else {
            std::vector<std::string> names;
            for (const auto &e : manifest.files)
                names.push_back(e.file);
            pb::checkCheckpointFileSet(names, manifest.worldSize, manifest.strategy, "again"); // must not throw: it passed once
        }
        for (const auto &e : manifest.files)
            FUZZ_REQUIRE(e.bytes >= 0 && e.sha256.size() == 64);
    } catch (const pb::PilotBenchError &) {
    }
    try {
        (void)pb::parseCheckpointState(bytes, "state.json");
    } catch (const pb::PilotBenchError &) {
    }
    return 0;
}
