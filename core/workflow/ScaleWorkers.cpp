#include "workflow/ScaleWorkers.h"

#include "dist/Rendezvous.h"
#include "workflow/ScaleRun.h"

#include <QCoreApplication>
#include <QDir>

#include <cstring>

namespace pb {

QString scaleWorkerResultPath(const ScaleWorkerPlan &plan, int rank)
{
    return QDir(plan.workDir).filePath(QStringLiteral("rank%1%2.json").arg(rank).arg(plan.suffix));
}

std::vector<WorkerSpec> scaleWorkerSpecs(const ScaleWorkerPlan &plan, const std::function<QStringList(int rank)> &perRank)
{
    QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
    environment.insert(QLatin1String(kScaleLauncherPidVariable), QString::number(QCoreApplication::applicationPid()));
    // NVLink multicast off unless the user says otherwise: on shared H200 hosts a program using it
    // can take the GPUs out of service (NCCL, PyTorch's symmetric memory and NVSHMEM each have a switch).
    if (plan.device == "cuda") {
        for (const char *variable : {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"})
            if (!environment.contains(QLatin1String(variable)))
                environment.insert(QLatin1String(variable), QLatin1String(std::strcmp(variable, "NCCL_NVLS_ENABLE") == 0 ? "0" : "1"));
        // One host: NCCL's bootstrap listens on loopback too (the GPUs talk over NVLink/PCIe, not sockets).
        if (!environment.contains(QStringLiteral("NCCL_SOCKET_IFNAME")))
            environment.insert(QStringLiteral("NCCL_SOCKET_IFNAME"), QStringLiteral("lo"));
    }
    if (plan.device == "cpu" && plan.threadsPerRank > 0)
        environment.insert(QStringLiteral("OMP_NUM_THREADS"), QString::number(plan.threadsPerRank));
    const int port = freeLocalPort(); // unused by the file rendezvous, but a worker needs one to form a group
    std::vector<WorkerSpec> specs;
    for (int rank = 0; rank < plan.worldSize; ++rank) {
        WorkerSpec spec;
        spec.program = plan.program;
        spec.arguments = {QStringLiteral("scale-worker"), QStringLiteral("--config"), plan.configPath, QStringLiteral("--device"), QString::fromStdString(plan.device),
                          QStringLiteral("--strategy"), QString::fromStdString(plan.strategy), QStringLiteral("--steps"), QString::number(plan.steps),
                          QStringLiteral("--warmup"), QString::number(plan.warmupSteps), QStringLiteral("--timeout"), QString::number(plan.timeoutSeconds),
                          QStringLiteral("--result"), scaleWorkerResultPath(plan, rank)};
        if (plan.threadsPerRank > 0)
            spec.arguments << QStringLiteral("--threads") << QString::number(plan.threadsPerRank);
        spec.arguments << plan.extraArguments;
        if (perRank)
            spec.arguments << perRank(rank);
        Rendezvous r;
        r.rank = rank;
        r.worldSize = plan.worldSize;
        r.localRank = rank;
        r.masterPort = port;
        r.storeFile = QDir(plan.workDir).filePath(QStringLiteral("rendezvous%1.store").arg(plan.suffix)).toStdString();
        spec.environment = environment;
        applyRendezvous(r, spec.environment);
        spec.logPath = QDir(plan.workDir).filePath(QStringLiteral("rank%1%2.log").arg(rank).arg(plan.suffix));
        specs.push_back(std::move(spec));
    }
    return specs;
}

} // namespace pb
