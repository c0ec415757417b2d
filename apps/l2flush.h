// The bench's read-only L2 flush (l2flush.cu): `buf` (zeroed, `bytes` a multiple of 16) read through L2 on `s`;
// `sink`: 4 bytes of device memory the kernel never writes for a zeroed buffer.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

void l2_read_flush(const void* buf, size_t bytes, unsigned* sink, cudaStream_t s);
// a one-thread kernel that keeps the GPU busy for about `ns` nanoseconds (the unflushed bench runs' host cover)
void gpu_spin(unsigned long long ns, cudaStream_t s);
