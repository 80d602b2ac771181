// A .safetensors file as the weight loader reads it: the header length, then the header. Every
// tensor accepted must lie inside the file with the bytes its dtype and shape need, because the
// loader copies exactly that many bytes from the mapping.
#include "FuzzSupport.h"

#include "model/Safetensors.h"
#include "util/Errors.h"

#include <algorithm>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QByteArray file = pb::fuzz::bytes(data, size);
    const int64_t fileSize = static_cast<int64_t>(size);
    std::vector<pb::SafetensorEntry> entries;
    int64_t dataBytes = 0;
    try {
        const int64_t headerLength = pb::safetensorsHeaderLength(file.left(8), fileSize, "model.safetensors");
        dataBytes = fileSize - 8 - headerLength;
        entries = pb::parseSafetensorsHeader(file.mid(8, headerLength), dataBytes, "model.safetensors");
    } catch (const pb::PilotBenchError &) {
        return 0;
    }
    for (const pb::SafetensorEntry &e : entries) {
        FUZZ_REQUIRE(e.begin >= 0 && e.begin <= e.end && e.end <= dataBytes);
        // In 128 bits; with a zero dimension the others may be anything, else each product stays
        // within the data.
        __int128 numel = 1;
        for (int64_t d : e.shape)
            FUZZ_REQUIRE(d >= 0);
        if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end())
            numel = 0;
        for (size_t i = 0; numel > 0 && i < e.shape.size(); ++i) {
            numel *= e.shape[i];
            FUZZ_REQUIRE(numel <= dataBytes);
        }
        FUZZ_REQUIRE(numel * pb::SafetensorsFolder::dtypeSize(e.dtype) == e.end - e.begin);
    }
    return 0;
}
