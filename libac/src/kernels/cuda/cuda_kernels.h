/*
 * cuda_kernels.h - the functions of the CUDA kernel table (table.cu), declared
 * by the .cu file that defines them, and what those files share: the launch
 * shape and the stream.
 *
 * A kernel runs on the stream of the calling thread's current device, which
 * making the op's output made current (device_alloc). Entries return AC_OK or
 * the launch's error (AC_ERR_DEVICE, naming the op).
 */
#ifndef AC_CUDA_KERNELS_H
#define AC_CUDA_KERNELS_H

extern "C" {
#include "kernels/kernels.h"
#include "kernels/cuda/runtime.h"
}

#include <cuda_runtime.h>

#define CUDA_THREADS 256

/* Blocks of CUDA_THREADS for n elements (grid-stride loops cover the rest). */
static inline unsigned cuda_blocks(int64_t n)
{
    int64_t b = (n + CUDA_THREADS - 1) / CUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

static inline cudaStream_t current_stream(void) { return (cudaStream_t)cuda_current_stream(); }

/* tensor.cu */
int cuda_copy(void *dst, const void *src, size_t bytes);
int cuda_fill(AcTensor *t, double value);
int cuda_add_into(float *dst, const float *src, int64_t n);

#endif /* AC_CUDA_KERNELS_H */
