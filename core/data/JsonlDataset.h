#pragma once
// JSONL: one JSON object per line with an `input_ids` array of token ids or a `text` string. Text
// goes through a byte-level fallback tokenizer (UTF-8 byte + kByteTokenOffset, so ids 0 and 1 stay
// free for padding and end-of-text). Samples longer than seqLen + 1 tokens are truncated, as
// training would truncate them. The file is mapped; open indexes line offsets and lengths (every
// line is validated then, so a bad line is reported before a pilot starts), read() re-parses.
#include "data/MappedFile.h"
#include "data/TokenDataset.h"

#include <mutex>

namespace pb::data {

class JsonlDataset final : public TokenDataset {
public:
    static constexpr int32_t kByteTokenOffset = 2;
    static constexpr int64_t kByteVocabNeeded = 256 + kByteTokenOffset;

    JsonlDataset(const std::string &path, int64_t vocabSize, int64_t seqLen);
    Q_DISABLE_COPY_MOVE(JsonlDataset)

    int64_t size() const override { return static_cast<int64_t>(m_lines.size()); }
    int64_t length(int64_t index) const override;
    void read(int64_t index, std::vector<int32_t> &out) const override;
    std::string revision() const override;
    std::string description() const override;

private:
    struct Line {
        int64_t offsetBytes;
        int32_t sizeBytes;
        int32_t lineNumber;      // 1-based, for messages
        int32_t tokens;          // as served (after truncation)
    };
    // Parses one line into tokens (all of them; the caller truncates); true when it came from
    // `text`. Throws naming the file and the line.
    bool parseLine(const Line &line, std::vector<int32_t> &tokens) const;

    MappedFile m_file;
    int64_t m_vocabSize;
    int64_t m_seqLen;
    std::vector<Line> m_lines;
    int64_t m_truncated = 0;
    int64_t m_textLines = 0;
    mutable std::once_flag m_revisionOnce;
    mutable std::string m_revision;
};

} // namespace pb::data
