/*
 * cuda/conv.cu - the CUDA kernels for conv.c: 2-D convolution on NCHW data and
 * its backward, any kernel size, stride, padding, dilation and groups.
 *
 * Direct and deterministic (no atomics): forward, one thread per output
 * element summing its taps; dx, one thread per input element gathering the
 * outputs whose windows hold it; dW and db, one block per weight (or bias)
 * element reducing over images and output pixels in shared memory, always in
 * the same order. Plain, not fast: an implicit-GEMM path on cuda_gemm's tiles
 * is the next step for the CNN's speed.
 */
#include "kernels/cuda/cuda_kernels.h"

__global__ void conv_forward_kernel(ConvShape s, const float *x, const float *w, const float *bias, float *out)
{
    const int64_t cg = s.c / s.groups, fg = s.f / s.groups, total = s.n * s.f * s.oh * s.ow;
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < total; o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ow = o % s.ow, oh = (o / s.ow) % s.oh, f = (o / (s.ow * s.oh)) % s.f, n = o / (s.ow * s.oh * s.f);
        const int64_t c0 = (f / fg) * cg;
        float sum = bias ? bias[f] : 0.0f;
        for (int64_t c = 0; c < cg; c++) {
            const float *xp = x + ((n * s.c + c0 + c) * s.h) * s.w, *wp = w + ((f * cg + c) * s.kh) * s.kw;
            for (int64_t i = 0; i < s.kh; i++) {
                const int64_t ih = oh * s.sh - s.ph + i * s.dh;
                if (ih < 0 || ih >= s.h) continue;
                for (int64_t j = 0; j < s.kw; j++) {
                    const int64_t iw = ow * s.sw - s.pw + j * s.dw;
                    if (iw >= 0 && iw < s.w) sum = fmaf(xp[ih * s.w + iw], wp[i * s.kw + j], sum);
                }
            }
        }
        out[o] = sum;
    }
}

__global__ void conv_dx_kernel(ConvShape s, const float *w, const float *gy, float *dx)
{
    const int64_t cg = s.c / s.groups, fg = s.f / s.groups, total = s.n * s.c * s.h * s.w;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total; t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t iw = t % s.w, ih = (t / s.w) % s.h, c = (t / (s.w * s.h)) % s.c, n = t / (s.w * s.h * s.c);
        const int64_t group = c / cg, cc = c % cg;
        float sum = 0.0f;
        for (int64_t f = group * fg; f < (group + 1) * fg; f++) {
            const float *gp = gy + (n * s.f + f) * s.oh * s.ow, *wp = w + ((f * cg + cc) * s.kh) * s.kw;
            for (int64_t i = 0; i < s.kh; i++) {
                const int64_t ohs = ih + s.ph - i * s.dh;   /* oh * sh when tap i of output row oh reads ih */
                if (ohs < 0 || ohs % s.sh || ohs / s.sh >= s.oh) continue;
                for (int64_t j = 0; j < s.kw; j++) {
                    const int64_t ows = iw + s.pw - j * s.dw;
                    if (ows < 0 || ows % s.sw || ows / s.sw >= s.ow) continue;
                    sum = fmaf(gp[(ohs / s.sh) * s.ow + ows / s.sw], wp[i * s.kw + j], sum);
                }
            }
        }
        dx[t] = sum;
    }
}

/* Block b: weight element b (dw) or bias element b - weights (db), summed over
   images and output pixels by the block's threads, then a tree in shared memory. */
__global__ void conv_dw_db_kernel(ConvShape s, const float *x, const float *gy, float *dw, float *db, int64_t weights)
{
    __shared__ float part[CUDA_THREADS];
    const int64_t cg = s.c / s.groups, fg = s.f / s.groups, pixels = s.oh * s.ow, work = s.n * pixels;
    const int64_t e = blockIdx.x;
    float sum = 0.0f;
    if (e < weights) {
        const int64_t j = e % s.kw, i = (e / s.kw) % s.kh, cc = (e / (s.kw * s.kh)) % cg, f = e / (s.kw * s.kh * cg);
        const int64_t c = (f / fg) * cg + cc;
        for (int64_t q = threadIdx.x; q < work; q += blockDim.x) {
            const int64_t n = q / pixels, p = q % pixels, oh = p / s.ow, ow = p % s.ow;
            const int64_t ih = oh * s.sh - s.ph + i * s.dh, iw = ow * s.sw - s.pw + j * s.dw;
            if (ih >= 0 && ih < s.h && iw >= 0 && iw < s.w)
                sum = fmaf(gy[(n * s.f + f) * pixels + p], x[((n * s.c + c) * s.h + ih) * s.w + iw], sum);
        }
    } else {
        const int64_t f = e - weights;
        for (int64_t q = threadIdx.x; q < work; q += blockDim.x) sum += gy[((q / pixels) * s.f + f) * pixels + q % pixels];
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int half = CUDA_THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (e < weights) dw[e] = part[0];
        else db[e - weights] = part[0];
    }
}

int cuda_conv2d(const ConvShape *s, const float *x, const float *w, const float *bias, float *out)
{
    cudaStream_t st = current_stream();
    const int64_t total = s->n * s->f * s->oh * s->ow;
    if (!st) return AC_ERR_DEVICE;
    if (total == 0) return AC_OK;
    conv_forward_kernel<<<cuda_blocks(total), CUDA_THREADS, 0, st>>>(*s, x, w, bias, out);
    return cuda_check_launch("conv2d");
}

int cuda_conv2d_backward(const ConvShape *s, const float *x, const float *w, const float *gy, float *dx, float *dw,
                         float *db)
{
    cudaStream_t st = current_stream();
    const int64_t in_total = s->n * s->c * s->h * s->w, weights = s->f * (s->c / s->groups) * s->kh * s->kw;
    const int64_t blocks = (dw ? weights : 0) + (db ? s->f : 0);
    if (!st) return AC_ERR_DEVICE;
    if (dx && in_total > 0) conv_dx_kernel<<<cuda_blocks(in_total), CUDA_THREADS, 0, st>>>(*s, w, gy, dx);
    if (dw && !db && weights > 0)
        conv_dw_db_kernel<<<(unsigned)weights, CUDA_THREADS, 0, st>>>(*s, x, gy, dw, NULL, weights);
    else if (db && !dw && s->f > 0)   /* blocks all take the bias branch */
        conv_dw_db_kernel<<<(unsigned)s->f, CUDA_THREADS, 0, st>>>(*s, x, gy, NULL, db, 0);
    else if (blocks > 0)
        conv_dw_db_kernel<<<(unsigned)blocks, CUDA_THREADS, 0, st>>>(*s, x, gy, dw, db, weights);
    return cuda_check_launch("conv2d_backward");
}
