/*
 * cuda/activation.cu - the CUDA kernels for activation.c: relu, sigmoid, tanh,
 * gelu forward and backward (one flat functor kernel), and softmax and
 * log_softmax over rows of n steps `inner` apart (one thread per row lane).
 */
#include "kernels/cuda/cuda_kernels.h"

template <class F>
__global__ void flat_kernel(const float *x, const float *y, float *out, int64_t n, F f)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = f(x[i], y ? y[i] : 0.0f);
}

template <class F>
static int flat_run(const float *x, const float *y, float *out, int64_t n, const char *op)
{
    cudaStream_t s = current_stream();
    if (!s) return AC_ERR_DEVICE;
    flat_kernel<F><<<cuda_blocks(n), CUDA_THREADS, 0, s>>>(x, y, out, n, F());
    return cuda_check_launch(op);
}

/* x is the input (forward) or grad_out (backward); y the saved tensor */
#define ACT_KERNEL(name, expr)                                                        \
    struct name##_f {                                                                 \
        __device__ float operator()(float x, float y) const                           \
        {                                                                             \
            (void)y;                                                                  \
            return expr;                                                              \
        }                                                                             \
    };

__device__ static inline float phi(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }

ACT_KERNEL(relu, x < 0.0f ? 0.0f : x)   /* NaN passes through */
ACT_KERNEL(sigmoid, x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)))
ACT_KERNEL(tanh, tanhf(x))
ACT_KERNEL(gelu, x * phi(x))
ACT_KERNEL(relu_backward, y > 0.0f ? x : 0.0f)
ACT_KERNEL(sigmoid_backward, x * y * (1.0f - y))
ACT_KERNEL(tanh_backward, x * (1.0f - y * y))
/* y is gelu's input: g (Phi(y) + y exp(-y^2 / 2) / sqrt(2 pi)) */
ACT_KERNEL(gelu_backward, x * (phi(y) + y * expf(-0.5f * y * y) * 0.39894228040143268f))

int cuda_relu(const float *x, float *out, int64_t n) { return flat_run<relu_f>(x, NULL, out, n, "relu"); }
int cuda_sigmoid(const float *x, float *out, int64_t n) { return flat_run<sigmoid_f>(x, NULL, out, n, "sigmoid"); }
int cuda_tanh(const float *x, float *out, int64_t n) { return flat_run<tanh_f>(x, NULL, out, n, "tanh"); }
int cuda_gelu(const float *x, float *out, int64_t n) { return flat_run<gelu_f>(x, NULL, out, n, "gelu"); }
int cuda_relu_backward(const float *g, const float *y, float *out, int64_t n)
{
    return flat_run<relu_backward_f>(g, y, out, n, "relu_backward");
}
int cuda_sigmoid_backward(const float *g, const float *y, float *out, int64_t n)
{
    return flat_run<sigmoid_backward_f>(g, y, out, n, "sigmoid_backward");
}
int cuda_tanh_backward(const float *g, const float *y, float *out, int64_t n)
{
    return flat_run<tanh_backward_f>(g, y, out, n, "tanh_backward");
}
int cuda_gelu_backward(const float *g, const float *x, float *out, int64_t n)
{
    return flat_run<gelu_backward_f>(g, x, out, n, "gelu_backward");
}

/* ---- softmax and log_softmax ------------------------------------------------ */

/* One thread per (row, lane): its n values sit `inner` apart. Forward: x is the
   input. Backward: x is the forward's output y, g grad_out; softmax gives
   y (g - sum(g y)), log_softmax g - exp(y) sum(g). */
__global__ void softmax_kernel(const float *x, const float *g, float *out, int64_t rows, int64_t n,
                               int64_t inner, int is_log, int backward)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < rows * inner;
         t += (int64_t)gridDim.x * blockDim.x) {
        const int64_t base = (t / inner) * n * inner + t % inner;
        const float *xr = x + base;
        float *orow = out + base;
        float a = 0.0f;
        int64_t k;
        if (backward) {
            const float *gr = g + base;
            for (k = 0; k < n; k++) a += is_log ? gr[k * inner] : gr[k * inner] * xr[k * inner];
            for (k = 0; k < n; k++)
                orow[k * inner] = is_log ? gr[k * inner] - expf(xr[k * inner]) * a
                                         : xr[k * inner] * (gr[k * inner] - a);
            continue;
        }
        float max = xr[0];
        for (k = 1; k < n; k++) max = fmaxf(max, xr[k * inner]);
        for (k = 0; k < n; k++) a += expf(xr[k * inner] - max);
        if (is_log) {
            const float log_sum = logf(a);
            for (k = 0; k < n; k++) orow[k * inner] = (xr[k * inner] - max) - log_sum;
        } else {
            const float scale = 1.0f / a;
            for (k = 0; k < n; k++) orow[k * inner] = expf(xr[k * inner] - max) * scale;
        }
    }
}

static int softmax_run(const float *x, const float *g, float *out, int64_t rows, int64_t n, int64_t inner,
                       int is_log, int backward, const char *op)
{
    cudaStream_t s = current_stream();
    if (!s) return AC_ERR_DEVICE;
    if (rows * inner * n == 0) return AC_OK;
    softmax_kernel<<<cuda_blocks(rows * inner), CUDA_THREADS, 0, s>>>(x, g, out, rows, n, inner, is_log,
                                                                       backward);
    return cuda_check_launch(op);
}

int cuda_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner)
{
    return softmax_run(x, NULL, out, rows, n, inner, 0, 0, "softmax");
}
int cuda_log_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner)
{
    return softmax_run(x, NULL, out, rows, n, inner, 1, 0, "log_softmax");
}
int cuda_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n, int64_t inner)
{
    return softmax_run(y, g, out, rows, n, inner, 0, 1, "softmax_backward");
}
int cuda_log_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                              int64_t inner)
{
    return softmax_run(y, g, out, rows, n, inner, 1, 1, "log_softmax_backward");
}
