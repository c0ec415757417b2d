// CK(call): a standalone probe's CUDA error check (print the error and where, exit 1). Included by the probes in this
// folder, each still built alone with one nvcc command (the include resolves beside the .cu file).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);    \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
