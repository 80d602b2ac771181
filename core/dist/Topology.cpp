#include "dist/Topology.h"

#include "dist/DistributedPilot.h"
#include "engine/Environment.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QProcess>
#include <QStandardPaths>
#include <QThread>

namespace pb {

Topology captureTopology(const std::string &device)
{
    Topology t;
    const QString smi = QStandardPaths::findExecutable(QStringLiteral("nvidia-smi"));
    if (smi.isEmpty()) {
        t.gpuMatrixSource = "nvidia-smi not found on PATH";
    } else {
        QProcess process;
        process.start(smi, {QStringLiteral("topo"), QStringLiteral("-m")});
        if (process.waitForFinished(15000) && process.exitStatus() == QProcess::NormalExit && process.exitCode() == 0) {
            t.gpuMatrix = QString::fromUtf8(process.readAllStandardOutput()).toStdString();
            t.gpuMatrixSource = "nvidia-smi topo -m";
        } else {
            process.kill();
            process.waitForFinished(2000);
            t.gpuMatrixSource = "nvidia-smi topo -m failed: " + QString::fromUtf8(process.readAllStandardError()).trimmed().toStdString();
        }
    }
    const QDir nodes(QStringLiteral("/sys/devices/system/node"));
    for (const QString &name : nodes.entryList({QStringLiteral("node*")}, QDir::Dirs)) {
        QFile list(nodes.filePath(name + QStringLiteral("/cpulist")));
        if (list.open(QIODevice::ReadOnly))
            t.numaNodes.insert(name, QString::fromUtf8(list.readAll()).trimmed());
    }
    if (device.rfind("cuda", 0) == 0)
        t.gpus = gpuLocality(systemGpuLocalitySources());
    t.launcherCpuAffinity = cpuAffinityList();
    t.hostCpus = QThread::idealThreadCount();
    t.collective = collectiveFor(device);
    const Environment env = captureEnvironment(device.rfind("cuda", 0) == 0 ? "cuda:0" : "cpu");
    t.collectiveVersion = t.collective == "nccl" ? ncclLibraryVersion() : "bundled with LibTorch " + env.torchVersion;
    return t;
}

QJsonObject toJson(const Topology &t)
{
    QJsonArray gpus;
    for (const GpuLocality &g : t.gpus.gpus) {
        QJsonObject gpu {{QStringLiteral("ordinal"), g.ordinal},
                         {QStringLiteral("uuid"), QString::fromStdString(g.uuid)},
                         {QStringLiteral("pci_bus_id"), QString::fromStdString(g.pciBusId)},
                         {QStringLiteral("numa_node"), g.numaNode},
                         {QStringLiteral("local_cpus"), QString::fromStdString(g.localCpus)},
                         {QStringLiteral("bind_cpus"), QString::fromStdString(g.bindCpus)}};
        if (!g.note.empty())
            gpu.insert(QStringLiteral("note"), QString::fromStdString(g.note));
        gpus.append(gpu);
    }
    return QJsonObject {
        {QStringLiteral("gpus"), gpus},
        {QStringLiteral("gpus_source"), QString::fromStdString(t.gpus.source)},
        {QStringLiteral("gpus_note"), QString::fromStdString(t.gpus.note)},
        {QStringLiteral("gpu_matrix"), QString::fromStdString(t.gpuMatrix)},
        {QStringLiteral("gpu_matrix_source"), QString::fromStdString(t.gpuMatrixSource)},
        {QStringLiteral("numa_nodes"), t.numaNodes},
        {QStringLiteral("launcher_cpu_affinity"), QString::fromStdString(t.launcherCpuAffinity)},
        {QStringLiteral("host_cpus"), t.hostCpus},
        {QStringLiteral("collective"), QString::fromStdString(t.collective)},
        {QStringLiteral("collective_version"), QString::fromStdString(t.collectiveVersion)},
    };
}

} // namespace pb
