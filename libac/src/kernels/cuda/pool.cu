/*
 * cuda/pool.cu - the CUDA kernels for pool.c: max_pool2d, avg_pool2d and
 * adaptive_avg_pool2d, forward and backward, one thread per output (forward)
 * or input (backward, gathering: no atomics) element. As the CPU's: padding
 * never wins a max, counts as zeros in an average; the first maximum in
 * window order wins, and NaN wins over numbers.
 *
 * pool.c keeps max_pool2d's argmax in the node's context, host memory, so it
 * goes through the thread's device scratch: copied back after forward (which
 * waits for the device) and over again for backward. Keeping it in device
 * memory for a CUDA tensor would save both copies and the wait.
 */
#include "kernels/cuda/cuda_kernels.h"

__device__ static inline void window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t size, int64_t *lo,
                                     int64_t *hi)
{
    const int64_t start = o * stride - pad;
    *hi = start + kernel < size ? start + kernel : size;
    *lo = start > 0 ? start : 0;
}

/* PyTorch's adaptive window: [floor(o*size/out), ceil((o+1)*size/out)). */
__device__ static inline void adaptive(int64_t o, int64_t out, int64_t size, int64_t *lo, int64_t *hi)
{
    *lo = o * size / out;
    *hi = ((o + 1) * size + out - 1) / out;
}

__global__ void max_pool_kernel(PoolGeom g, const float *x, float *y, int32_t *argmax)
{
    const int64_t total = g.planes * g.oh * g.ow;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, plane = o / (g.ow * g.oh);
        const float *xp = x + plane * g.h * g.w;
        int64_t h0, h1, w0, w1, best_at;
        float best = -INFINITY;
        window(oh, g.sh, g.ph, g.kh, g.h, &h0, &h1);
        window(ow, g.sw, g.pw, g.kw, g.w, &w0, &w1);
        best_at = h0 * g.w + w0;
        for (int64_t i = h0; i < h1; i++)
            for (int64_t j = w0; j < w1; j++) {
                const float v = xp[i * g.w + j];
                if (v > best || (v != v && best == best)) {
                    best = v;
                    best_at = i * g.w + j;
                }
            }
        y[o] = best;
        if (argmax) argmax[o] = (int32_t)best_at;
    }
}

/* dx at input (plane, ih, iw): the gradients of the outputs whose maximum it was. */
__global__ void max_pool_backward_kernel(PoolGeom g, const float *gy, const int32_t *argmax, float *dx)
{
    const int64_t total = g.planes * g.h * g.w;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t iw = t % g.w, ih = (t / g.w) % g.h, plane = t / (g.w * g.h), at = ih * g.w + iw;
        const int64_t oh0 = (ih + g.ph - g.kh + g.sh) / g.sh, ow0 = (iw + g.pw - g.kw + g.sw) / g.sw;
        float sum = 0.0f;
        for (int64_t oh = oh0 > 0 ? oh0 : 0; oh <= (ih + g.ph) / g.sh && oh < g.oh; oh++)
            for (int64_t ow = ow0 > 0 ? ow0 : 0; ow <= (iw + g.pw) / g.sw && ow < g.ow; ow++) {
                const int64_t o = (plane * g.oh + oh) * g.ow + ow;
                if (argmax[o] == at) sum += gy[o];
            }
        dx[t] = sum;
    }
}

__global__ void avg_pool_kernel(PoolGeom g, const float *x, float *y)
{
    const int64_t total = g.planes * g.oh * g.ow;
    const int is_adaptive = g.kh == 0;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, plane = o / (g.ow * g.oh);
        const float *xp = x + plane * g.h * g.w;
        int64_t h0, h1, w0, w1;
        float sum = 0.0f;
        if (is_adaptive) {
            adaptive(oh, g.oh, g.h, &h0, &h1);
            adaptive(ow, g.ow, g.w, &w0, &w1);
        } else {
            window(oh, g.sh, g.ph, g.kh, g.h, &h0, &h1);
            window(ow, g.sw, g.pw, g.kw, g.w, &w0, &w1);
        }
        for (int64_t i = h0; i < h1; i++)
            for (int64_t j = w0; j < w1; j++) sum += xp[i * g.w + j];
        y[o] = sum * (is_adaptive ? 1.0f / (float)((h1 - h0) * (w1 - w0)) : 1.0f / (float)(g.kh * g.kw));
    }
}

/* dx at input (plane, ih, iw): its share of every output window holding it. */
__global__ void avg_pool_backward_kernel(PoolGeom g, const float *gy, float *dx)
{
    const int64_t total = g.planes * g.h * g.w;
    const int is_adaptive = g.kh == 0;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t iw = t % g.w, ih = (t / g.w) % g.h, plane = t / (g.w * g.h);
        float sum = 0.0f;
        for (int64_t oh = 0; oh < g.oh; oh++) {
            int64_t h0, h1;
            if (is_adaptive) adaptive(oh, g.oh, g.h, &h0, &h1);
            else window(oh, g.sh, g.ph, g.kh, g.h, &h0, &h1);
            if (ih < h0 || ih >= h1) continue;
            for (int64_t ow = 0; ow < g.ow; ow++) {
                int64_t w0, w1;
                if (is_adaptive) adaptive(ow, g.ow, g.w, &w0, &w1);
                else window(ow, g.sw, g.pw, g.kw, g.w, &w0, &w1);
                if (iw < w0 || iw >= w1) continue;
                sum += gy[(plane * g.oh + oh) * g.ow + ow] *
                       (is_adaptive ? 1.0f / (float)((h1 - h0) * (w1 - w0)) : 1.0f / (float)(g.kh * g.kw));
            }
        }
        dx[t] = sum;
    }
}

int cuda_max_pool2d(const PoolGeom *g, const float *x, float *y, int32_t *argmax)
{
    cudaStream_t s = current_stream();
    const int64_t total = g->planes * g->oh * g->ow;
    const size_t bytes = (size_t)total * sizeof(int32_t);
    int32_t *d = NULL;
    if (!s) return AC_ERR_DEVICE;
    if (total == 0) return AC_OK;
    if (argmax && !(d = (int32_t *)cuda_scratch(bytes))) return ac_last_error_code();
    max_pool_kernel<<<cuda_blocks(total), CUDA_THREADS, 0, s>>>(*g, x, y, d);
    if (d && cudaMemcpyAsync(argmax, d, bytes, cudaMemcpyDeviceToHost, s) == cudaSuccess)
        cudaStreamSynchronize(s);   /* argmax is host memory the caller reads after */
    return cuda_check_launch("max_pool2d");
}

int cuda_max_pool2d_backward(const PoolGeom *g, const float *gy, const int32_t *argmax, float *dx)
{
    cudaStream_t s = current_stream();
    const int64_t outputs = g->planes * g->oh * g->ow, inputs = g->planes * g->h * g->w;
    int32_t *d;
    if (!s) return AC_ERR_DEVICE;
    if (inputs == 0) return AC_OK;
    if (!(d = (int32_t *)cuda_scratch((size_t)outputs * sizeof(int32_t) + 1))) return ac_last_error_code();
    if (outputs > 0) cudaMemcpyAsync(d, argmax, (size_t)outputs * sizeof(int32_t), cudaMemcpyHostToDevice, s);
    max_pool_backward_kernel<<<cuda_blocks(inputs), CUDA_THREADS, 0, s>>>(*g, gy, d, dx);
    return cuda_check_launch("max_pool2d_backward");
}

int cuda_avg_pool2d(const PoolGeom *g, const float *x, float *y)
{
    cudaStream_t s = current_stream();
    const int64_t total = g->planes * g->oh * g->ow;
    if (!s) return AC_ERR_DEVICE;
    if (total == 0) return AC_OK;
    avg_pool_kernel<<<cuda_blocks(total), CUDA_THREADS, 0, s>>>(*g, x, y);
    return cuda_check_launch("avg_pool2d");
}

int cuda_avg_pool2d_backward(const PoolGeom *g, const float *gy, float *dx)
{
    cudaStream_t s = current_stream();
    const int64_t total = g->planes * g->h * g->w;
    if (!s) return AC_ERR_DEVICE;
    if (total == 0) return AC_OK;
    avg_pool_backward_kernel<<<cuda_blocks(total), CUDA_THREADS, 0, s>>>(*g, gy, dx);
    return cuda_check_launch("avg_pool2d_backward");
}
