/*
 * cuda/dropout.cu - the CUDA kernels for dropout.c. The mask is drawn on the
 * host from the CPU's streams (cpu_dropout_uniforms, so a seed gives the same
 * mask on both devices), copied to the device, and applied
 * there. keep is host memory (the node's context); without a graph the mask is
 * drawn into the host scratch instead.
 */
#include "kernels/cuda/cuda_kernels.h"

#include <stdlib.h>

__global__ void apply_mask(const float *x, float *out, const uint8_t *keep, int64_t n, int64_t block,
                           float scale)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = keep[i / block] ? x[i] * scale : 0.0f;
}

/* The mask on the device: keep's blocks bytes copied to the thread's scratch. */
static const uint8_t *mask_on_device(const uint8_t *keep, int64_t blocks, cudaStream_t s)
{
    uint8_t *d = (uint8_t *)cuda_scratch((size_t)blocks);
    if (!d) return NULL;
    if (cudaMemcpyAsync(d, keep, (size_t)blocks, cudaMemcpyHostToDevice, s) != cudaSuccess) {
        cuda_check_launch("dropout");
        return NULL;
    }
    return d;
}

int cuda_dropout(const float *x, float *out, uint8_t *keep, int64_t blocks, int64_t block, float p,
                 float scale)
{
    cudaStream_t s = current_stream();
    uint8_t *mask = keep;
    const uint8_t *d;
    int rc = AC_OK;
    if (!s) return AC_ERR_DEVICE;
    if (blocks * block == 0) return AC_OK;
    float *u = (float *)scratch_alloc((size_t)blocks * sizeof(float));
    if (!u) return AC_ERR_MEMORY;
    if (!mask && !(mask = (uint8_t *)scratch_alloc((size_t)blocks))) {
        scratch_free(u, (size_t)blocks * sizeof(float));
        return AC_ERR_MEMORY;
    }
    cpu_dropout_uniforms(u, blocks);   /* the draws cpu_dropout compares with p */
    for (int64_t b = 0; b < blocks; b++) mask[b] = (uint8_t)(u[b] >= p);
    d = mask_on_device(mask, blocks, s);   /* staged: the host mask may be freed after */
    if (!d) rc = AC_ERR_DEVICE;
    else apply_mask<<<cuda_blocks(blocks * block), CUDA_THREADS, 0, s>>>(x, out, d, blocks * block, block, scale);
    if (!keep) scratch_free(mask, (size_t)blocks);
    scratch_free(u, (size_t)blocks * sizeof(float));
    return rc ? rc : cuda_check_launch("dropout");
}

int cuda_dropout_backward(const float *g, float *gin, const uint8_t *keep, int64_t blocks, int64_t block,
                          float scale)
{
    cudaStream_t s = current_stream();
    const uint8_t *d;
    if (!s) return AC_ERR_DEVICE;
    if (blocks * block == 0) return AC_OK;
    if (!(d = mask_on_device(keep, blocks, s))) return AC_ERR_DEVICE;
    apply_mask<<<cuda_blocks(blocks * block), CUDA_THREADS, 0, s>>>(g, gin, d, blocks * block, block, scale);
    return cuda_check_launch("dropout_backward");
}
