/*
 * cuda/tensor.cu - the CUDA kernels for ops/tensor.c (copies and fills) and for
 * autograd.c (adding into a leaf's grad).
 */
#include "kernels/cuda/cuda_kernels.h"

int cuda_copy(void *dst, const void *src, size_t bytes)
{
    cudaStream_t s = current_stream();
    if (!s) return AC_ERR_DEVICE;
    if (dst == src || bytes == 0) return AC_OK;
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s) == cudaSuccess
               ? AC_OK : cuda_check_launch("copy");
}

template <typename T>
__global__ void fill_kernel(T *out, T value, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = value;
}

template <typename T>
static int fill_as(AcTensor *t, T value)
{
    cudaStream_t s = current_stream();
    if (!s) return AC_ERR_DEVICE;
    fill_kernel<T><<<cuda_blocks(t->size), CUDA_THREADS, 0, s>>>((T *)(void *)t->data, value, t->size);
    return cuda_check_launch("fill_");
}

int cuda_fill(AcTensor *t, double value)
{
    union { float f; int64_t i; uint8_t b; } v;
    elem_set(&v, t->dtype, 0, value);   /* value as t's dtype stores it, as the CPU's fill */
    if (t->size == 0) return AC_OK;
    if (t->dtype == AC_FLOAT32) return fill_as<float>(t, v.f);
    if (t->dtype == AC_INT64) return fill_as<int64_t>(t, v.i);
    return fill_as<uint8_t>(t, v.b);
}

__global__ void add_into_kernel(float *dst, const float *src, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] += src[i];
}

int cuda_add_into(float *dst, const float *src, int64_t n)
{
    cudaStream_t s = current_stream();
    if (!s) return AC_ERR_DEVICE;
    if (n == 0) return AC_OK;
    add_into_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, s>>>(dst, src, n);
    return cuda_check_launch("backward");
}
