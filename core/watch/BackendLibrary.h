#pragma once
// A vendor library opened with dlopen for a device backend: no header or link-time dependency, so
// a host without that vendor's driver simply finds nothing. Symbols are looked up by name and
// cast to the signature the backend declares beside the vendor's documented ABI.
#include <QString>

#include <dlfcn.h>
#include <string>

namespace pb::watch {

class BackendLibrary final {
public:
    BackendLibrary() = default;
    ~BackendLibrary()
    {
        if (m_handle)
            ::dlclose(m_handle);
    }
    BackendLibrary(const BackendLibrary &) = delete;
    BackendLibrary &operator=(const BackendLibrary &) = delete;

    // False with `why` holding the loader's own message (it names the file and what was missing).
    bool open(const QString &name, std::string *why)
    {
        ::dlerror();
        // RTLD_LOCAL: a second vendor library with clashing internal symbols must not bind to this one.
        m_handle = ::dlopen(name.toLocal8Bit().constData(), RTLD_NOW | RTLD_LOCAL);
        if (!m_handle && why) {
            const char *error = ::dlerror();
            *why = error ? error : name.toStdString() + ": cannot be loaded";
        }
        return m_handle != nullptr;
    }

    // nullptr when the library lacks it (an older driver): the caller decides whether that matters.
    template <typename Function>
    Function symbol(const char *name) const
    {
        return m_handle ? reinterpret_cast<Function>(::dlsym(m_handle, name)) : nullptr;
    }

private:
    void *m_handle = nullptr;
};

} // namespace pb::watch
