#pragma once
// Where a worker finds its peers: the torchrun-style environment (MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE, LOCAL_RANK), set by `scale` for its own workers and by torchrun, srun wrappers or
// mpirun scripts across machines. No torch in this header.
#include <QProcessEnvironment>

#include <string>

namespace pb {

struct Rendezvous {
    std::string masterAddr = "127.0.0.1";
    int masterPort = 0;      // 0 with worldSize 1: no process group at all (the single-process baseline)
    int rank = 0;
    int worldSize = 1;
    int localRank = 0;       // the GPU index on this host (cuda:LOCAL_RANK)
    // PB_RENDEZVOUS_FILE: `scale` on one host meets its workers through a file in its private work
    // folder instead of a TCPStore, which listens unauthenticated on every interface. Empty: TCPStore
    // at MASTER_ADDR:MASTER_PORT (torchrun and multi-host launchers).
    std::string storeFile;
};

// Reads the five variables (and PB_RENDEZVOUS_FILE when set); LOCAL_RANK defaults to RANK when absent (one host). Throws
// InvalidInputError naming the variable for a missing or malformed value, or a rank outside
// 0..WORLD_SIZE-1.
Rendezvous rendezvousFromEnvironment(const QProcessEnvironment &environment = QProcessEnvironment::systemEnvironment());
void applyRendezvous(const Rendezvous &rendezvous, QProcessEnvironment &environment);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
int freeLocalPort();

} // namespace pb
