#include "data/JsonlDataset.h"

#include "data/DataSupport.h"
#include "util/Errors.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonParseError>

#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

namespace pb::data {

JsonlDataset::JsonlDataset(const std::string &path, int64_t vocabSize, int64_t seqLen) : m_file(path), m_vocabSize(vocabSize), m_seqLen(seqLen)
{
    const char *base = reinterpret_cast<const char *>(m_file.data());
    const int64_t size = m_file.sizeBytes();
    std::vector<int32_t> tokens;
    int64_t lineNumber = 0;
    for (int64_t begin = 0; begin < size;) {
        const void *nl = std::memchr(base + begin, '\n', static_cast<size_t>(size - begin));
        const int64_t end = nl ? static_cast<const char *>(nl) - base : size;
        ++lineNumber;
        int64_t first = begin, last = end;
        while (first < last && std::isspace(static_cast<unsigned char>(base[first])))
            ++first;
        while (last > first && std::isspace(static_cast<unsigned char>(base[last - 1])))
            --last;
        begin = end + 1;
        if (first == last)
            continue; // blank lines (and the final newline) are not samples
        if (last - first > std::numeric_limits<int32_t>::max() || lineNumber > std::numeric_limits<int32_t>::max())
            throw InvalidInputError(path, "line " + std::to_string(lineNumber) + ": line too long or too many lines");
        Line line {first, static_cast<int32_t>(last - first), static_cast<int32_t>(lineNumber), 0};
        tokens.clear();
        if (parseLine(line, tokens))
            ++m_textLines;
        if (tokens.size() < 2)
            throw InvalidInputError(path, "line " + std::to_string(lineNumber) + ": " + std::to_string(tokens.size())
                                              + " token(s); a sample needs at least 2 (one input and its target)");
        const int64_t limit = seqLen + 1;
        if (static_cast<int64_t>(tokens.size()) > limit)
            ++m_truncated;
        line.tokens = static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(tokens.size()), limit));
        m_lines.push_back(line);
    }
    if (m_lines.empty())
        throw InvalidInputError(path, "holds no samples (only blank lines)");
}

bool JsonlDataset::parseLine(const Line &line, std::vector<int32_t> &tokens) const
{
    const std::string &path = m_file.path();
    const std::string at = "line " + std::to_string(line.lineNumber) + ": ";
    const QByteArray bytes = QByteArray::fromRawData(reinterpret_cast<const char *>(m_file.data()) + line.offsetBytes, line.sizeBytes);
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(bytes, &error);
    if (error.error != QJsonParseError::NoError)
        throw InvalidInputError(path, at + "not valid JSON (" + error.errorString().toStdString() + " at column " + std::to_string(error.offset + 1) + ")");
    if (!doc.isObject())
        throw InvalidInputError(path, at + "expected a JSON object with `input_ids` or `text`");
    const QJsonObject object = doc.object();
    // input_ids wins when both are present: they are what the text was tokenized into.
    const QJsonValue ids = object.value(QLatin1String("input_ids"));
    if (!ids.isUndefined()) {
        if (!ids.isArray())
            throw InvalidInputError(path, at + "`input_ids` must be an array of integers");
        const QJsonArray array = ids.toArray();
        tokens.reserve(static_cast<size_t>(array.size()));
        for (qsizetype i = 0; i < array.size(); ++i) {
            const QJsonValue v = array.at(i);
            const double d = v.toDouble(std::nan(""));
            if (!v.isDouble() || std::floor(d) != d)
                throw InvalidInputError(path, at + "`input_ids`[" + std::to_string(i) + "] is not an integer");
            if (d < 0 || d >= static_cast<double>(m_vocabSize))
                throw InvalidInputError(path, at + "`input_ids`[" + std::to_string(i) + "] = " + std::to_string(static_cast<int64_t>(d))
                                                  + " is outside the vocabulary: ids must be in 0.." + std::to_string(m_vocabSize - 1)
                                                  + " (model.vocab_size " + std::to_string(m_vocabSize) + ")");
            tokens.push_back(static_cast<int32_t>(d));
        }
        return false;
    }
    const QJsonValue text = object.value(QLatin1String("text"));
    if (text.isUndefined())
        throw InvalidInputError(path, at + "needs an `input_ids` array or a `text` string");
    if (!text.isString())
        throw InvalidInputError(path, at + "`text` must be a string");
    if (m_vocabSize < kByteVocabNeeded)
        throw InvalidInputError(path, at + "`text` is tokenized byte by byte, which needs model.vocab_size >= " + std::to_string(kByteVocabNeeded)
                                          + " (got " + std::to_string(m_vocabSize) + "); give `input_ids` instead");
    const QByteArray utf8 = text.toString().toUtf8();
    tokens.reserve(static_cast<size_t>(utf8.size()));
    for (const char c : utf8)
        tokens.push_back(static_cast<int32_t>(static_cast<unsigned char>(c)) + kByteTokenOffset);
    return true;
}

int64_t JsonlDataset::length(int64_t index) const
{
    if (index < 0 || index >= size())
        throw PilotBenchError(ExitCode::Failure, "sample index " + std::to_string(index) + " outside 0.." + std::to_string(size() - 1));
    return m_lines[static_cast<size_t>(index)].tokens;
}

void JsonlDataset::read(int64_t index, std::vector<int32_t> &out) const
{
    const int64_t n = length(index);
    std::vector<int32_t> tokens;
    parseLine(m_lines[static_cast<size_t>(index)], tokens);
    out.insert(out.end(), tokens.begin(), tokens.begin() + n);
}

std::string JsonlDataset::revision() const
{
    std::call_once(m_revisionOnce, [this] { m_revision = m_file.sha256(); });
    return m_revision;
}

std::string JsonlDataset::description() const
{
    int64_t tokens = 0;
    for (const Line &line : m_lines)
        tokens += line.tokens;
    std::string s = baseName(m_file.path()) + ": " + groupThousands(size()) + " JSONL samples, " + groupThousands(tokens) + " tokens";
    if (m_textLines > 0)
        s += " (" + groupThousands(m_textLines) + " from `text`, byte-level)";
    if (m_truncated > 0)
        s += ", " + groupThousands(m_truncated) + " truncated to " + groupThousands(m_seqLen + 1) + " tokens";
    return s;
}

} // namespace pb::data
