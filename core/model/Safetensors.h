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
