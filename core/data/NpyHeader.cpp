#include "data/NpyHeader.h"

#include "util/Errors.h"

#include <cctype>
#include <cstring>
#include <limits>
#include <optional>

namespace pb::data {

int tokenTypeBytes(TokenType type)
{
    switch (type) {
    case TokenType::UInt16: return 2;
    case TokenType::UInt32: return 4;
    case TokenType::Int32: return 4;
    case TokenType::Int64: return 8;
    }
    return 0;
}

const char *tokenTypeName(TokenType type)
{
    switch (type) {
    case TokenType::UInt16: return "uint16";
    case TokenType::UInt32: return "uint32";
    case TokenType::Int32: return "int32";
    case TokenType::Int64: return "int64";
    }
    return "?";
}

namespace {

// A recursive-descent reader for the one dict literal NumPy writes. Anything it does not
// understand is reported with the header text, so the user sees what the file holds.
class DictReader final {
public:
    DictReader(std::string text, std::string path) : m_text(std::move(text)), m_path(std::move(path)) {}

    NpyArrayInfo read(NpyArrayInfo info)
    {
        bool haveDescr = false, haveOrder = false, haveShape = false;
        bool fortran = false;
        expect('{');
        for (;;) {
            skipSpace();
            if (peek() == '}')
                break;
            const std::string key = quoted();
            expect(':');
            skipSpace();
            if (key == "descr") {
                if (peek() != '\'' && peek() != '"')
                    fail("descr is not a simple dtype (structured arrays are not token arrays)");
                info.descr = quoted();
                haveDescr = true;
            } else if (key == "fortran_order") {
                fortran = boolean();
                haveOrder = true;
            } else if (key == "shape") {
                info.shape = tuple();
                haveShape = true;
            } else {
                fail("unexpected key '" + key + "'");
            }
            skipSpace();
            if (peek() == ',') {
                ++m_pos;
                continue;
            }
            skipSpace();
            if (peek() != '}')
                fail("expected ',' or '}'");
        }
        if (!haveDescr || !haveOrder || !haveShape)
            fail("the header lacks descr, fortran_order or shape");
        if (info.shape.empty())
            throw InvalidInputError(m_path, "the .npy array is 0-dimensional (a scalar); expected a 1-D token stream or a 2-D array of rows");
        if (info.shape.size() > 2)
            throw InvalidInputError(m_path, "the .npy array has " + std::to_string(info.shape.size()) + " dimensions; expected 1-D or 2-D");
        if (fortran && info.shape.size() == 2)
            throw InvalidInputError(m_path, "the .npy array is in Fortran (column-major) order; save it in C order (numpy.ascontiguousarray)");
        return info;
    }

private:
    [[noreturn]] void fail(const std::string &what) const
    {
        throw InvalidInputError(m_path, "malformed .npy header (" + what + "): " + m_text);
    }
    char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }
    void skipSpace()
    {
        while (m_pos < m_text.size() && std::isspace(static_cast<unsigned char>(m_text[m_pos])))
            ++m_pos;
    }
    void expect(char c)
    {
        skipSpace();
        if (peek() != c)
            fail(std::string("expected '") + c + "'");
        ++m_pos;
    }
    std::string quoted()
    {
        skipSpace();
        const char q = peek();
        if (q != '\'' && q != '"')
            fail("expected a quoted string");
        const size_t end = m_text.find(q, m_pos + 1);
        if (end == std::string::npos)
            fail("unterminated string");
        std::string s = m_text.substr(m_pos + 1, end - m_pos - 1);
        m_pos = end + 1;
        return s;
    }
    bool boolean()
    {
        if (m_text.compare(m_pos, 4, "True") == 0) {
            m_pos += 4;
            return true;
        }
        if (m_text.compare(m_pos, 5, "False") == 0) {
            m_pos += 5;
            return false;
        }
        fail("fortran_order is neither True nor False");
    }
    std::vector<int64_t> tuple()
    {
        std::vector<int64_t> dims;
        expect('(');
        for (;;) {
            skipSpace();
            if (peek() == ')') {
                ++m_pos;
                return dims;
            }
            if (!std::isdigit(static_cast<unsigned char>(peek())))
                fail("shape holds something other than non-negative integers");
            int64_t v = 0;
            while (std::isdigit(static_cast<unsigned char>(peek()))) {
                const int digit = peek() - '0';
                if (v > (std::numeric_limits<int64_t>::max() - digit) / 10)
                    fail("a shape dimension overflows 64 bits");
                v = v * 10 + digit;
                ++m_pos;
            }
            if (peek() == 'L') // Python 2 long literal, written by very old NumPy
                ++m_pos;
            dims.push_back(v);
            skipSpace();
            if (peek() == ',')
                ++m_pos;
            else if (peek() != ')')
                fail("expected ',' or ')' in shape");
        }
    }

    std::string m_text;
    std::string m_path;
    size_t m_pos = 0;
};

std::optional<TokenType> typeOf(const std::string &descr)
{
    if (descr == "<u2") return TokenType::UInt16;
    if (descr == "<u4") return TokenType::UInt32;
    if (descr == "<i4") return TokenType::Int32;
    if (descr == "<i8") return TokenType::Int64;
    return std::nullopt;
}

uint32_t readLe(const unsigned char *p, int bytes)
{
    uint32_t v = 0;
    for (int i = bytes - 1; i >= 0; --i)
        v = (v << 8) | p[i];
    return v;
}

} // namespace

NpyArrayInfo parseNpyHeader(const unsigned char *bytes, int64_t sizeBytes, const std::string &path)
{
    static const unsigned char kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (sizeBytes < 10 || std::memcmp(bytes, kMagic, sizeof kMagic) != 0)
        throw InvalidInputError(path, "not a .npy file (the file does not start with the \\x93NUMPY magic)");
    NpyArrayInfo info;
    info.versionMajor = bytes[6];
    if (info.versionMajor < 1 || info.versionMajor > 3)
        throw InvalidInputError(path, "unsupported .npy format version " + std::to_string(info.versionMajor) + "." + std::to_string(bytes[7]) + " (1.0, 2.0 and 3.0 are read)");
    const int lengthBytes = info.versionMajor == 1 ? 2 : 4;
    const int64_t prefix = 8 + lengthBytes;
    if (sizeBytes < prefix)
        throw InvalidInputError(path, "truncated .npy header");
    const int64_t headerBytes = readLe(bytes + 8, lengthBytes);
    if (prefix + headerBytes > sizeBytes)
        throw InvalidInputError(path, "truncated .npy header: it declares " + std::to_string(headerBytes) + " bytes but the file has "
                                          + std::to_string(sizeBytes - prefix) + " after the prefix");
    info.dataOffsetBytes = prefix + headerBytes;
    std::string text(reinterpret_cast<const char *>(bytes + prefix), static_cast<size_t>(headerBytes));
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0'))
        text.pop_back();
    info = DictReader(text, path).read(info);

    const auto type = typeOf(info.descr);
    if (!type)
        throw InvalidInputError(path, "unsupported .npy dtype '" + info.descr + "' (token arrays must be '<u2', '<u4', '<i4' or '<i8': little-endian integers)");
    info.type = *type;

    const int64_t itemBytes = tokenTypeBytes(info.type);
    int64_t count = 1;
    for (int64_t d : info.shape) {
        if (d != 0 && count > std::numeric_limits<int64_t>::max() / itemBytes / d)
            throw InvalidInputError(path, "the .npy shape is too large to address");
        count *= d;
    }
    info.elementCount = count;
    if (count == 0)
        throw InvalidInputError(path, "the .npy array is empty (shape has a zero dimension)");
    const int64_t dataBytes = count * itemBytes;
    const int64_t available = sizeBytes - info.dataOffsetBytes;
    if (available < dataBytes)
        throw InvalidInputError(path, "truncated .npy data: the header declares " + std::to_string(count) + " elements (" + std::to_string(dataBytes)
                                          + " bytes) but only " + std::to_string(available) + " bytes follow the header");
    if (available > dataBytes)
        throw InvalidInputError(path, "the .npy file has " + std::to_string(available - dataBytes) + " bytes after the array its header declares");
    return info;
}

} // namespace pb::data
