#pragma once
// The .npy header (NumPy format versions 1.0, 2.0 and 3.0): magic, version, header length and the
// Python-literal dict {'descr': ..., 'fortran_order': ..., 'shape': (...)}. Only what a token
// array can be is accepted: little-endian uint16, uint32, int32 or int64, 1-D or 2-D C-order.
#include <cstdint>
#include <string>
#include <vector>

namespace pb::data {

enum class TokenType { UInt16, UInt32, Int32, Int64 };

int tokenTypeBytes(TokenType type);
const char *tokenTypeName(TokenType type); // "uint16", "uint32", "int32", "int64"

struct NpyArrayInfo {
    int versionMajor = 0;
    TokenType type = TokenType::UInt16;
    std::string descr;                   // as written, e.g. "<u2"
    std::vector<int64_t> shape;          // 1 or 2 dimensions
    int64_t dataOffsetBytes = 0;         // where the array starts in the file
    int64_t elementCount = 0;
};

// Throws InvalidInputError(path, ...) stating what was found: not an .npy file, unknown version,
// truncated header, unsupported dtype, Fortran order, 0-D or 3-D+ shapes, an array larger than
// the file (truncated data) or bytes left after it.
NpyArrayInfo parseNpyHeader(const unsigned char *bytes, int64_t sizeBytes, const std::string &path);

} // namespace pb::data
