#include "dist/Rendezvous.h"

#include "util/Errors.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pb {
namespace {

int intVariable(const QProcessEnvironment &environment, const QString &name, int minimum, int maximum)
{
    if (!environment.contains(name))
        throw InvalidInputError(name.toStdString(), "is not set; a worker needs MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE (as torchrun sets them)");
    const QString text = environment.value(name).trimmed();
    bool ok = false;
    const int value = text.toInt(&ok);
    if (!ok || value < minimum || value > maximum)
        throw InvalidInputError(name.toStdString(), "'" + text.toStdString() + "' must be an integer in " + std::to_string(minimum) + ".." + std::to_string(maximum));
    return value;
}

} // namespace

Rendezvous rendezvousFromEnvironment(const QProcessEnvironment &environment)
{
    Rendezvous r;
    r.masterAddr = environment.value(QStringLiteral("MASTER_ADDR")).trimmed().toStdString();
    if (r.masterAddr.empty())
        throw InvalidInputError("MASTER_ADDR", "is not set or empty; it names the host of rank 0's TCPStore");
    r.masterPort = intVariable(environment, QStringLiteral("MASTER_PORT"), 1, 65535);
    r.worldSize = intVariable(environment, QStringLiteral("WORLD_SIZE"), 1, 1 << 20);
    r.rank = intVariable(environment, QStringLiteral("RANK"), 0, r.worldSize - 1);
    r.localRank = environment.contains(QStringLiteral("LOCAL_RANK")) ? intVariable(environment, QStringLiteral("LOCAL_RANK"), 0, r.worldSize - 1) : r.rank;
    r.storeFile = environment.value(QStringLiteral("PB_RENDEZVOUS_FILE")).toStdString();
    return r;
}

void applyRendezvous(const Rendezvous &rendezvous, QProcessEnvironment &environment)
{
    environment.insert(QStringLiteral("MASTER_ADDR"), QString::fromStdString(rendezvous.masterAddr));
    environment.insert(QStringLiteral("MASTER_PORT"), QString::number(rendezvous.masterPort));
    environment.insert(QStringLiteral("RANK"), QString::number(rendezvous.rank));
    environment.insert(QStringLiteral("WORLD_SIZE"), QString::number(rendezvous.worldSize));
    environment.insert(QStringLiteral("LOCAL_RANK"), QString::number(rendezvous.localRank));
    if (rendezvous.storeFile.empty())
        environment.remove(QStringLiteral("PB_RENDEZVOUS_FILE"));
    else
        environment.insert(QStringLiteral("PB_RENDEZVOUS_FILE"), QString::fromStdString(rendezvous.storeFile));
}

int freeLocalPort()
{
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        throw PilotBenchError(ExitCode::Failure, std::string("cannot open a socket to find a free port: ") + std::strerror(errno));
    sockaddr_in address {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = 0;
    socklen_t length = sizeof(address);
    if (::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length) != 0) {
        const std::string reason = std::strerror(errno);
        ::close(fd);
        throw PilotBenchError(ExitCode::Failure, "cannot bind 127.0.0.1 to find a free port: " + reason);
    }
    ::close(fd);
    return ntohs(address.sin_port);
}

} // namespace pb
