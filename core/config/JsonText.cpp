#include "config/JsonText.h"

#include "util/Errors.h"

#include <set>
#include <vector>

namespace pb {

void checkJsonText(const QByteArray &text, const std::string &where)
{
    // One frame per open object or array; objects remember their keys.
    struct Frame {
        bool object = false;
        bool expectKey = false;
        std::set<QByteArray> keys;
    };
    std::vector<Frame> frames;
    int line = 1;
    auto bad = [&](const std::string &what) { throw InvalidInputError(where, what + " at line " + std::to_string(line)); };
    const qsizetype n = text.size();
    for (qsizetype i = 0; i < n; ++i) {
        const char c = text[i];
        if (c == '\n') {
            ++line;
        } else if (c == '{' || c == '[') {
            Frame f;
            f.object = c == '{';
            f.expectKey = f.object;
            frames.push_back(std::move(f));
        } else if (c == '}' || c == ']') {
            if (frames.empty())
                return;
            frames.pop_back();
        } else if (c == ',') {
            if (!frames.empty() && frames.back().object)
                frames.back().expectKey = true;
        } else if (c == '"') {
            const qsizetype start = i + 1;
            for (++i; i < n && text[i] != '"'; ++i) {
                const auto u = static_cast<unsigned char>(text[i]);
                if (u < 0x20)
                    bad(u == 0 ? "a NUL byte inside a string" : "a raw control character inside a string (write it escaped)");
                if (text[i] == '\\')
                    ++i;
            }
            if (i >= n)
                return; // unterminated: the parser says so
            if (!frames.empty() && frames.back().object && frames.back().expectKey) {
                const QByteArray key = text.mid(start, i - start);
                if (!frames.back().keys.insert(key).second)
                    bad("the key \"" + key.toStdString() + "\" appears twice in one object");
                frames.back().expectKey = false;
            }
        } else if (c == '\0') {
            bad("a NUL byte");
        }
    }
}

} // namespace pb
