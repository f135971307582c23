/*
 * cuda/optim.cu - the CUDA kernels for optim/: SGD and Adam steps over every
 * parameter in one launch, with torch.optim's math in the CPU kernels' order
 * (kernels/cpu/optim.c).
 *
 * The parameters are cut into chunks of CHUNK elements, listed on the host
 * (pointers and ranges) and copied to the thread's device scratch; block b of
 * the launch updates chunk b.
 */
#include "kernels/cuda/cuda_kernels.h"

#include <float.h>
#include <math.h>

#define CHUNK 4096

typedef struct {
    float *param, *state0, *state1;   /* SGD: momentum (or NULL); Adam: exp_avg, exp_avg_sq */
    const float *grad;
    int64_t begin, end;
} Chunk;

/* The chunks of count tensors on the device, or NULL (error set). *n gets their number. */
static const Chunk *chunks_on_device(int count, float *const *params, const float *const *grads,
                                     float *const *state0, float *const *state1, const int64_t *sizes,
                                     int64_t *n, cudaStream_t s)
{
    int64_t total = 0, c = 0;
    Chunk *host;
    void *dev;
    for (int i = 0; i < count; i++) total += (sizes[i] + CHUNK - 1) / CHUNK;
    *n = total;
    if (total == 0) return NULL;
    host = (Chunk *)scratch_alloc((size_t)total * sizeof *host);
    if (!host) return NULL;
    for (int i = 0; i < count; i++)
        for (int64_t b = 0; b < sizes[i]; b += CHUNK, c++) {
            host[c].param = params[i];
            host[c].grad = grads[i];
            host[c].state0 = state0 ? state0[i] : NULL;
            host[c].state1 = state1 ? state1[i] : NULL;
            host[c].begin = b;
            host[c].end = b + CHUNK < sizes[i] ? b + CHUNK : sizes[i];
        }
    dev = cuda_scratch((size_t)total * sizeof *host);
    /* from pageable memory the copy is staged before it returns: host may go */
    if (dev && cudaMemcpyAsync(dev, host, (size_t)total * sizeof *host, cudaMemcpyHostToDevice, s) != cudaSuccess) {
        cuda_check_launch("optimizer step");
        dev = NULL;
    }
    scratch_free(host, (size_t)total * sizeof *host);
    return (const Chunk *)dev;
}

__global__ void sgd_kernel(const Chunk *chunks, SgdArgs a)
{
    const Chunk ch = chunks[blockIdx.x];
    const float scale = 1.0f - a.dampening;
    for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
        float d = ch.grad[i];
        if (a.weight_decay != 0.0f) d += a.weight_decay * ch.param[i];
        if (ch.state0) {
            /* PyTorch starts the buffer as a plain copy of the first gradient, undamped. */
            const float b = a.first_step ? d : a.momentum * ch.state0[i] + scale * d;
            ch.state0[i] = b;
            d = a.nesterov ? d + a.momentum * b : b;
        }
        ch.param[i] -= a.lr * d;
    }
}

int cuda_sgd_step(const SgdArgs *args, int count, float *const *params, const float *const *grads,
                  float *const *momentum, const int64_t *sizes)
{
    cudaStream_t s = current_stream();
    const Chunk *chunks;
    int64_t n;
    if (!s) return AC_ERR_DEVICE;
    chunks = chunks_on_device(count, params, grads, args->momentum != 0.0f ? momentum : NULL, NULL, sizes, &n, s);
    if (n == 0) return AC_OK;
    if (!chunks) return ac_last_error_code();
    sgd_kernel<<<(unsigned)n, CUDA_THREADS, 0, s>>>(chunks, *args);
    return cuda_check_launch("sgd_step");
}

typedef struct {
    float avg_weight, beta2, sq_weight, neg_step_size, bc2_sqrt, eps, weight_decay, decay_factor;
    int decoupled;
} AdamConsts;

/* PyTorch's lerp: exp_avg.lerp_(grad, 1 - beta1), whose formula depends on the weight. */
__device__ static inline float torch_lerp(float start, float end, float weight)
{
    return weight < 0.5f ? start + weight * (end - start) : end - (end - start) * (1.0f - weight);
}

__global__ void adam_kernel(const Chunk *chunks, AdamConsts a)
{
    const Chunk ch = chunks[blockIdx.x];
    for (int64_t i = ch.begin + threadIdx.x; i < ch.end; i += blockDim.x) {
        float p = ch.param[i], g = ch.grad[i], mi, vi;
        if (a.weight_decay != 0.0f) {
            if (a.decoupled) p *= a.decay_factor;
            else g += a.weight_decay * p;
        }
        mi = torch_lerp(ch.state0[i], g, a.avg_weight);
        vi = ch.state1[i] * a.beta2 + a.sq_weight * g * g;
        if (fabsf(mi) < FLT_MIN) mi = 0.0f;   /* as the CPU kernel: no subnormal moments */
        if (vi < FLT_MIN) vi = 0.0f;
        ch.state0[i] = mi;
        ch.state1[i] = vi;
        ch.param[i] = p + a.neg_step_size * mi / (sqrtf(vi) / a.bc2_sqrt + a.eps);
    }
}

int cuda_adam_step(const AdamArgs *args, int count, float *const *params, const float *const *grads,
                   float *const *exp_avg, float *const *exp_avg_sq, const int64_t *sizes)
{
    cudaStream_t s = current_stream();
    const Chunk *chunks;
    AdamConsts a;
    int64_t n;
    if (!s) return AC_ERR_DEVICE;
    chunks = chunks_on_device(count, params, grads, exp_avg, exp_avg_sq, sizes, &n, s);
    if (n == 0) return AC_OK;
    if (!chunks) return ac_last_error_code();
    a.avg_weight = (float)(1.0 - (double)args->beta1);
    a.beta2 = args->beta2;
    a.sq_weight = (float)(1.0 - (double)args->beta2);
    a.neg_step_size = (float)(-(double)args->lr / args->bias_correction1);
    a.bc2_sqrt = (float)sqrt(args->bias_correction2);
    a.eps = args->eps;
    a.weight_decay = args->weight_decay;
    a.decay_factor = (float)(1.0 - (double)args->lr * (double)args->weight_decay);
    a.decoupled = args->decoupled;
    adam_kernel<<<(unsigned)n, CUDA_THREADS, 0, s>>>(chunks, a);
    return cuda_check_launch("adam_step");
}
