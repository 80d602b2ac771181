#pragma once
// The devices a test runs its rows on: the CPU, and a CUDA device where there is one.
#include <torch/torch.h>

#include <QStringList>

inline QStringList devices()
{
    QStringList d {QStringLiteral("cpu")};
    if (torch::cuda::is_available())
        d << QStringLiteral("cuda");
    return d;
}
