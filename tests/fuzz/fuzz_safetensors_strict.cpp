// The strict header check a checkpoint's own .safetensors files are read with (verify, restore):
// whatever it accepts is the format to the letter — the tensors tile the data exactly in order,
// each with the bytes its dtype and shape need, under unique names, with string-only metadata —
// and is read the same way by the lenient check that Hugging Face weights go through.
#include "FuzzSupport.h"

#include "model/Safetensors.h"
#include "util/Errors.h"

#include <QJsonArray>

#include <set>
#include <tuple>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QByteArray file = pb::fuzz::bytes(data, size);
    const int64_t fileSize = static_cast<int64_t>(size);
    pb::SafetensorsHeader header;
    QByteArray json;
    int64_t dataBytes = 0;
    try {
        const int64_t headerLength = pb::safetensorsHeaderLength(file.left(8), fileSize, "optimizer.safetensors");
        dataBytes = fileSize - 8 - headerLength;
        json = file.mid(8, headerLength);
        header = pb::parseSafetensorsHeaderStrict(json, dataBytes, "optimizer.safetensors");
    } catch (const pb::PilotBenchError &) {
        return 0;
    }
    int64_t next = 0;
    std::set<std::string> names;
    for (const pb::SafetensorEntry &e : header.entries) {
        FUZZ_REQUIRE(e.begin == next && e.end >= e.begin);
        FUZZ_REQUIRE(e.name != "__metadata__" && names.insert(e.name).second);
        // In 128 bits, stopping once past the data (a zero dimension makes it 0 whatever follows).
        __int128 bytes = pb::SafetensorsFolder::dtypeSize(e.dtype);
        FUZZ_REQUIRE(bytes > 0);
        bool zero = false;
        for (int64_t d : e.shape) {
            FUZZ_REQUIRE(d >= 0);
            zero = zero || d == 0;
        }
        for (size_t i = 0; !zero && i < e.shape.size() && bytes <= dataBytes; ++i)
            bytes *= e.shape[i];
        FUZZ_REQUIRE((zero ? 0 : bytes) == e.end - e.begin);
        next = e.end;
    }
    FUZZ_REQUIRE(next == dataBytes);
    // Only spaces pad the header, and the JSON says exactly what was parsed: one key per tensor,
    // metadata of strings only.
    qsizetype end = json.size();
    while (end > 0 && json[end - 1] == ' ')
        --end;
    FUZZ_REQUIRE(end > 0 && json[0] == '{' && json[end - 1] == '}');
    const auto doc = pb::fuzz::jsonObject(json);
    FUZZ_REQUIRE(doc.has_value());
    const QJsonValue meta = doc->value(QStringLiteral("__metadata__"));
    FUZZ_REQUIRE(meta.isUndefined() != header.hasMetadata);
    if (header.hasMetadata) {
        FUZZ_REQUIRE(meta.isObject() && static_cast<size_t>(meta.toObject().size()) == header.metadata.size());
        for (const auto &v : meta.toObject())
            FUZZ_REQUIRE(v.isString());
    }
    FUZZ_REQUIRE(static_cast<size_t>(doc->size()) == header.entries.size() + (header.hasMetadata ? 1 : 0));
    // What strict accepts, the lenient reader (Hugging Face weights) takes to be the same tensors.
    std::vector<pb::SafetensorEntry> lenient;
    try {
        lenient = pb::parseSafetensorsHeader(json, dataBytes, "optimizer.safetensors");
    } catch (const pb::PilotBenchError &) {
        FUZZ_REQUIRE(!"the lenient reader refused a header the strict one accepted");
    }
    auto key = [](const pb::SafetensorEntry &e) { return std::tie(e.name, e.dtype, e.shape, e.begin, e.end); };
    std::set<std::tuple<std::string, std::string, std::vector<int64_t>, int64_t, int64_t>> a, b;
    for (const auto &e : header.entries)
        a.insert(key(e));
    for (const auto &e : lenient)
        b.insert(key(e));
    FUZZ_REQUIRE(a == b);
    return 0;
}
