#pragma once
// A small reader for Hugging Face safetensors folders (no torch here): the header of every
// *.safetensors file, checked against the file's size, and the tensors' bytes through a read-only
// memory map. The engine copies them into its parameters by name.
#include <QFile>
#include <QString>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pb {

struct SafetensorEntry {
    std::string name;
    std::string dtype;               // "F32", "BF16", "F16", ...
    std::vector<int64_t> shape;
    int64_t begin = 0, end = 0;      // byte range inside the file's data section
    QString file;
};

// One file's parts, split from SafetensorsFolder so they can be checked (and fuzzed) without files.
// The 8-byte little-endian header length at the start of a file of `fileSize` bytes, checked against
// the size; throws InvalidInputError naming `where`.
int64_t safetensorsHeaderLength(const QByteArray &first8, int64_t fileSize, const std::string &where);
// The tensors of one header (the JSON after the length; `dataBytes` follow it in the file), each
// checked to lie inside the data with the size its dtype and shape need. `file` is left empty.
// Throws InvalidInputError naming `where` and the tensor.
std::vector<SafetensorEntry> parseSafetensorsHeader(const QByteArray &headerJson, int64_t dataBytes, const std::string &where);

// A header read to the letter of the specification (huggingface/safetensors, "Format"), for the
// files we write ourselves (checkpoints): one JSON object starting with '{', padded with spaces
// only, no key twice; __metadata__ strings only; each tensor exactly dtype (F64 ... BOOL), shape
// and data_offsets, with the bytes they need; the tensors one after another from the first data
// byte to the last, no overlap, no hole, nothing after. Hugging Face weights go through the
// lenient parse above: files other writers made are read as they load elsewhere.
struct SafetensorsHeader {
    std::vector<SafetensorEntry> entries;        // in data order; `file` left empty
    std::map<std::string, std::string> metadata; // __metadata__
    bool hasMetadata = false;
};
// Throws InvalidInputError naming `where` and the tensor.
SafetensorsHeader parseSafetensorsHeaderStrict(const QByteArray &headerJson, int64_t dataBytes, const std::string &where);

class SafetensorsFolder {
public:
    // Reads every header; throws InvalidInputError naming the file for a malformed or truncated one
    // and the folder when it holds no .safetensors file.
    explicit SafetensorsFolder(const QString &path);
    const std::map<std::string, SafetensorEntry> &entries() const { return m_entries; }
    const SafetensorEntry *find(const std::string &name) const;
    // The entry's bytes, mapped read-only (valid while this object lives).
    const uchar *data(const SafetensorEntry &entry);
    static int64_t dtypeSize(const std::string &dtype); // 0 for unknown

private:
    QString m_path;
    std::map<std::string, SafetensorEntry> m_entries;
    std::map<QString, std::unique_ptr<QFile>> m_files;
    std::map<QString, std::pair<const uchar *, int64_t>> m_maps; // data section start, header bytes
};

} // namespace pb
