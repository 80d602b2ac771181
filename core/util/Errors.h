#pragma once
// Errors that cross module boundaries carry a message a user can act on and the exit code the CLI
// maps them to (architecture notes: 0 done/fits, 2 invalid input, 3 does not fit, 4 cancelled, 1 other).
#include <stdexcept>
#include <string>

namespace pb {

enum class ExitCode : int { Ok = 0, Failure = 1, InvalidInput = 2, DoesNotFit = 3, Cancelled = 4 };

class PilotBenchError : public std::runtime_error {
public:
    PilotBenchError(ExitCode code, const std::string &message) : std::runtime_error(message), m_code(code) {}
    ExitCode code() const { return m_code; }

private:
    ExitCode m_code;
};

// Bad input: a file, a field or an argument. `where` names the field path or the file.
class InvalidInputError : public PilotBenchError {
public:
    InvalidInputError(std::string where, const std::string &message)
        : PilotBenchError(ExitCode::InvalidInput, where.empty() ? message : where + ": " + message), m_where(std::move(where)), m_message(message) {}
    const std::string &where() const { return m_where; }
    // The rule without `where`, for re-throwing with more context. Not cut from what(): that stops
    // at a NUL, which a field path taken from a JSON key can hold.
    const std::string &message() const { return m_message; }

private:
    std::string m_where;
    std::string m_message;
};

} // namespace pb
